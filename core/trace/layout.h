// The graph view's layout, computed here (not by the GUI widget) so it is tested and identical in
// every view: longest-path layers from the inputs, then a few barycenter sweeps to untangle each layer.
#pragma once

#include <map>
#include <vector>

#include "core/trace/bundle.h"

namespace kiln::trace {

struct LayoutNode {
  int node = 0;      // bundle node id
  int layer = 0;     // 0 = reads only graph inputs
  int position = 0;  // index within the layer
  float x = 0, y = 0;  // top-left, in layout units (see GraphLayout)
};

struct LayoutEdge {
  int from = 0, to = 0;  // indices into GraphLayout::nodes
};

struct GraphLayout {
  std::vector<LayoutNode> nodes;  // same order as Bundle::nodes
  std::vector<LayoutEdge> edges;
  std::map<int, int> index_of;    // bundle node id -> index in nodes
  int layers = 0;
  float width = 0, height = 0;
  static constexpr float kNodeWidth = 150, kNodeHeight = 36, kGapX = 30, kGapY = 40;
};

GraphLayout layout_graph(const Bundle& bundle);

}  // namespace kiln::trace
