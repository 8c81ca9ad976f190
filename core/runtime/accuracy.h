// Accuracy bisection: run a graph node by node on a device and on the cpu reference, each node fed
// the reference's inputs, and name the first node whose result is past tolerance.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/frontend/device.h"
#include "core/frontend/tensor.h"
#include "core/ir/graph.h"

namespace kiln {

struct NodeAccuracy {
  int node_id = 0;           // Node::id in the graph checked
  std::string op;            // "matmul"
  Provenance provenance;     // the node's source lines
  double max_abs_error = 0;  // over every output element
  double max_rel_error = 0;  // |got - want| / |want| over elements with want != 0
  bool within_tolerance = true;  // every element: |got - want| <= atol + rtol * |want|
  std::string worst;         // "output 0 element 7: got 1.5, want 1.25"; empty when exact
};

struct AccuracyReport {
  std::string device;               // "vulkan:0"
  double rtol = 0, atol = 0;
  std::vector<NodeAccuracy> nodes;  // graph order
  int first_bad = -1;               // index into nodes of the first node past tolerance, or -1

  bool ok() const { return first_bad < 0; }
  const NodeAccuracy* first_bad_node() const { return ok() ? nullptr : &nodes[size_t(first_bad)]; }
  std::string str() const;  // a table, one row per node, and a line naming the first bad node
};

// Called with each node and the device's outputs before they are compared; tests use it to plant
// a wrong result. Not for production use.
using AccuracyTap = std::function<void(const Node&, std::vector<Tensor>& device_outputs)>;

// `inputs` binds graph.inputs() as in interpret(), on any device. Errors (a node the device cannot
// run, wrong inputs) are kiln::Errors naming the node's op and source line.
AccuracyReport check_accuracy(const Graph& graph, const std::vector<Tensor>& inputs, Device device,
                              double rtol, double atol, const AccuracyTap& tap = {});

}  // namespace kiln
