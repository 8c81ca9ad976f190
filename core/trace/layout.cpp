// Layered graph layout: longest-path layering, barycenter ordering, layers centred on one axis.
#include "core/trace/layout.h"

#include <algorithm>

namespace kiln::trace {

namespace {

// Orders each layer by the mean position of its neighbours in the layer before it.
void sweep(std::vector<std::vector<int>>& layers, const std::vector<std::vector<int>>& neighbours,
           std::vector<int>& position, bool downward) {
  int count = int(layers.size());
  for (int step = 1; step < count; ++step) {
    std::vector<int>& layer = layers[size_t(downward ? step : count - 1 - step)];
    std::vector<std::pair<double, int>> keyed;
    for (int n : layer) {
      double sum = 0;
      int seen = 0;
      for (int m : neighbours[size_t(n)]) sum += position[size_t(m)], ++seen;
      // Nodes without neighbours keep their place.
      keyed.push_back({seen ? sum / seen : double(position[size_t(n)]), n});
    }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < keyed.size(); ++i) {
      layer[i] = keyed[i].second;
      position[size_t(keyed[i].second)] = int(i);
    }
  }
}

}  // namespace

GraphLayout layout_graph(const Bundle& bundle) {
  GraphLayout out;
  size_t n = bundle.nodes.size();
  std::map<int, int> producer;  // value id -> node index
  for (size_t i = 0; i < n; ++i) {
    out.index_of[bundle.nodes[i].id] = int(i);
    for (int v : bundle.nodes[i].outputs) producer[v] = int(i);
  }
  std::vector<std::vector<int>> preds(n), succs(n);
  for (size_t i = 0; i < n; ++i)
    for (int v : bundle.nodes[i].inputs) {
      auto it = producer.find(v);
      if (it == producer.end() || it->second == int(i)) continue;
      preds[i].push_back(it->second);
      succs[size_t(it->second)].push_back(int(i));
      out.edges.push_back({it->second, int(i)});
    }
  // Nodes are in topological order, so one forward pass gives longest-path layers.
  out.nodes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    int layer = 0;
    for (int p : preds[i]) layer = std::max(layer, out.nodes[size_t(p)].layer + 1);
    out.nodes[i].node = bundle.nodes[i].id;
    out.nodes[i].layer = layer;
    out.layers = std::max(out.layers, layer + 1);
  }
  std::vector<std::vector<int>> layers(size_t(out.layers));
  std::vector<int> position(n);
  for (size_t i = 0; i < n; ++i) {
    auto& layer = layers[size_t(out.nodes[i].layer)];
    position[i] = int(layer.size());
    layer.push_back(int(i));
  }
  for (int round = 0; round < 2; ++round) {
    sweep(layers, preds, position, true);
    sweep(layers, succs, position, false);
  }
  size_t widest = 0;
  for (const auto& layer : layers) widest = std::max(widest, layer.size());
  const float step_x = GraphLayout::kNodeWidth + GraphLayout::kGapX;
  const float step_y = GraphLayout::kNodeHeight + GraphLayout::kGapY;
  out.width = float(widest) * step_x;
  out.height = float(out.layers) * step_y;
  for (const auto& layer : layers) {
    float left = (out.width - float(layer.size()) * step_x) / 2;
    for (size_t p = 0; p < layer.size(); ++p) {
      LayoutNode& ln = out.nodes[size_t(layer[p])];
      ln.position = int(p);
      ln.x = left + float(p) * step_x;
      ln.y = float(ln.layer) * step_y;
    }
  }
  return out;
}

}  // namespace kiln::trace
