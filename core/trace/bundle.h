// The trace bundle: everything one compiled executable recorded (IR per pass, kernels with per-line
// provenance, memory plan, guards, timings), as plain data the debugger and exports read. Written as
// DIR/bundle.json (schema: docs/bundle.md) plus DIR/sources/kernel_N.<ext>.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/ir/provenance.h"
#include "core/kernel/emit.h"
#include "core/passes/pass.h"

namespace kiln::trace {

inline constexpr int kBundleVersion = 2;

// The graph after one pass (or the pipeline's input, named "input").
struct BundlePass {
  std::string name;
  std::string ir;  // text IR (core/ir/text.h)
  double seconds = 0;
  std::map<std::string, int64_t> stats;

  bool operator==(const BundlePass&) const = default;
};

// A node of the final graph: what the graph view draws and what kernel origins point at.
struct BundleNode {
  int id = 0;
  std::string op;
  std::vector<int> inputs;   // value ids read
  std::vector<int> outputs;  // value ids written
  std::vector<std::string> input_types, output_types;  // "f32[2,s0]"
  std::vector<Origin> origins;
  // Why no kernel computes this node ("constant: uploaded once", "folded by fold-constants"); empty
  // when a kernel does.
  std::string no_kernel;

  bool operator==(const BundleNode&) const = default;
};

// A value with no producing node: a graph input (argument or captured parameter).
struct BundleInput {
  int value = 0;
  std::string name;
  std::string type;

  bool operator==(const BundleInput&) const = default;
};

// One launch's generated code.
struct KernelSource {
  std::string entry = "main";
  std::string dialect = "glsl";  // "glsl" | "cuda" | "cpp" | "host" (a cpu host op's description)
  std::string text;
  std::vector<std::vector<int>> line_origins;  // per 0-based line: graph node ids
  std::string spirv;  // disassembly, or PTX for cuda; empty when not recorded
  std::array<uint32_t, 3> groups{1, 1, 1};
  int workgroup_size = 256;
  std::string file;  // relative to the bundle dir ("sources/kernel_3.glsl"); set by write_bundle
  std::string program;  // the compiled program's name ("fused_mul_log", "matmul_tiled_64x64")
  bool is_template = false;  // the backend's hand-written kernel ran instead of the generated one
  std::optional<double> time_us;  // this launch's device time, when profiled

  bool operator==(const KernelSource&) const = default;
};

// One kernel of the executable: a fused group of nodes, run as one or more launches.
// A kernel's phase from its nodes' provenance (BundleKernel::phase).
std::string kernel_phase(const std::vector<Provenance>& origins);

struct BundleKernel {
  std::string name;
  std::vector<int> origins;  // graph node ids it computes
  std::vector<KernelSource> sources;  // one per launch
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t flops = 0;  // an estimate from the origin ops' shapes
  // What the kernel computes in a training step: "forward", "backward" (the gradient of a forward
  // op among its origins), "optimizer" (an optimizer's update), or several joined by "+" when
  // fusion merged them ("backward+optimizer").
  std::string phase;
  std::optional<double> start_us;  // device timestamps, when profiled
  std::optional<double> time_us;

  bool operator==(const BundleKernel&) const = default;
};

struct BundleBuffer {  // one planned intermediate
  int value = -1;      // graph value id, -1 for kernel scratch
  std::string name;    // "%7 f32[256,1024]"
  int64_t bytes = 0;
  int arena = 0;
  int64_t offset = 0;
  int first = 0, last = 0;  // kernel indices: writer and last reader
  bool in_place = false;

  bool operator==(const BundleBuffer&) const = default;
};

struct BundleMemory {
  std::vector<BundleBuffer> buffers;
  std::vector<int64_t> arena_bytes;
  int64_t naive_bytes = 0, lower_bound_bytes = 0, planned_bytes = 0;

  bool operator==(const BundleMemory&) const = default;
};

// A guard, recompile or graph break: the message and the user's line it points at.
struct BundleNote {
  std::string text;
  std::string file;
  int line = 0;

  bool operator==(const BundleNote&) const = default;
};

struct AccuracyRow {
  int kernel = 0;
  double max_abs = 0, max_rel = 0, tolerance = 0;
  bool passed = true;
  std::string name;   // the kernel's
  std::string worst;  // "%7 f32[4] element 3: got 1.5, want 1.25"
  int node = -1;      // the node whose output holds the worst element
  std::vector<std::string> lines;  // generated lines computing that node

  bool operator==(const AccuracyRow&) const = default;
};

struct Bundle {
  int version = kBundleVersion;
  // "program": the kernels a compiled program ran (fused, planned, timed); "per-node": every node
  // lowered on its own (make_bundle, and programs that run the interpreter).
  std::string kind = "per-node";
  std::string name;    // the compiled function
  std::string device;  // "vulkan (llvmpipe)", "cpu"
  std::vector<BundlePass> passes;
  std::vector<BundleInput> graph_inputs;
  std::vector<BundleNode> nodes;  // final graph, topological order
  std::vector<int> graph_outputs;  // value ids
  std::vector<BundleKernel> kernels;  // execution order
  BundleMemory memory;
  std::vector<BundleNote> guards, recompiles, graph_breaks;
  std::vector<AccuracyRow> accuracy;

  bool operator==(const Bundle&) const = default;
  const BundleNode* node(int id) const;
  // The kernel whose origins include node `id`, or -1.
  int kernel_of(int node_id) const;
};

// Writes DIR/bundle.json and DIR/sources/; creates DIR. Throws kiln::Error naming the path on I/O
// failure.
void write_bundle(const std::string& dir, const Bundle& bundle);
// Throws kiln::Error on a missing file, malformed JSON, or a version newer than this build reads.
Bundle read_bundle(const std::string& dir);

// Fills graph_inputs, nodes and graph_outputs from `graph`.
void record_graph(Bundle& bundle, const Graph& graph);
void record_passes(Bundle& bundle, const std::vector<PassRecord>& records);
// Appends each shape decision as "s0 > 10 was true" at the line that read the dim.
void record_guards(Bundle& bundle, const std::vector<ShapeGuard>& guards);
// A kernel from emitted code (line origins and launch size taken from it).
KernelSource make_source(const kernel::EmittedKernel& emitted, kernel::Dialect dialect,
                         std::array<uint32_t, 3> groups);
// FLOPs of one node from its shapes (symbol hints for symbolic dims): 2*M*N*K for matmul, one per
// output element for pointwise ops, one per input element for reductions.
int64_t estimate_flops(const Node& node);

struct MakeBundleOptions {
  std::string name = "graph";
  kernel::Dialect dialect = kernel::Dialect::Glsl;
};
// A bundle whose kernels come from lowering every node on its own (lower_op + emit): no fusion, no
// memory plan, no timings. Constant nodes get no kernel (no_kernel says so). For graphs not yet
// compiled: a traced model or a parsed .kir file.
Bundle make_bundle(const Graph& graph, const MakeBundleOptions& options = {});

}  // namespace kiln::trace
