// Accuracy bisection: run a graph node by node (or compiled kernel by kernel) on a device and on the
// reference (ref), each fed the reference's inputs, and name the first one past tolerance.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/device.h"
#include "core/ir/graph.h"
#include "core/runtime/device_tensor.h"
#include "core/runtime/planned_program.h"

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
using AccuracyTap = std::function<void(const Node&, std::vector<DeviceTensor>& device_outputs)>;

// One compiled kernel's outputs, computed on the device from the reference's inputs, against the
// reference (ref) of the nodes it fuses.
struct KernelAccuracy {
  int kernel = 0;              // index into PlannedProgram::kernels() and the bundle's kernels
  std::string name;            // "fused_mul_sub_log"
  std::vector<int> origins;    // node ids it computes
  double max_abs_error = 0, max_rel_error = 0;
  bool within_tolerance = true;
  double tolerance = 0;        // atol + rtol * |want| at the worst element
  std::string worst;           // "%7 f32[4] element 3: got 1.5, want 1.25"; empty when exact
  int worst_node = -1;         // the node whose output holds the worst element
  Provenance provenance;       // that node's source lines
  std::vector<std::string> source_lines;  // generated lines computing it: "launch 0 line 14: v3 = ..."
};

struct KernelAccuracyReport {
  std::string device;
  double rtol = 0, atol = 0;
  std::vector<KernelAccuracy> kernels;  // execution order
  int first_bad = -1;                   // index into kernels, or -1

  bool ok() const { return first_bad < 0; }
  const KernelAccuracy* first_bad_kernel() const { return ok() ? nullptr : &kernels[size_t(first_bad)]; }
  std::string str() const;  // one row per kernel; the first bad one with its node's line and code lines
};

// Called with each kernel's device outputs (graph value id -> tensor) before they are compared;
// tests use it to plant a wrong kernel. Not for production use.
using KernelAccuracyTap =
    std::function<void(size_t kernel, const PlannedKernel&, std::map<int, DeviceTensor>& device_outputs)>;

// Per compiled kernel: builds the planned program for `device` (Vulkan or CUDA: the devices that run
// fused kernels; others raise kiln::Error pointing at check_accuracy), computes every value on the cpu
// reference, then runs each kernel alone on the device with its inputs taken from the reference.
KernelAccuracyReport check_kernel_accuracy(const Graph& graph, const std::vector<DeviceTensor>& inputs,
                                           Device device, double rtol, double atol,
                                           const KernelAccuracyTap& tap = {});
// The same for a program already built from `graph` (as kiln::compile's debug bundle does).
KernelAccuracyReport check_kernel_accuracy(PlannedProgram& program, const Graph& graph,
                                           const std::vector<DeviceTensor>& inputs, double rtol, double atol,
                                           const KernelAccuracyTap& tap = {});

// `inputs` binds graph.inputs() as in interpret(), on any device. Errors (a node the device cannot
// run, wrong inputs) are kiln::Errors naming the node's op and source line.
AccuracyReport check_accuracy(const Graph& graph, const std::vector<DeviceTensor>& inputs, Device device,
                              double rtol, double atol, const AccuracyTap& tap = {});

}  // namespace kiln
