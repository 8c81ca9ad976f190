// Segmented programs: plain segments compiled as programs, control-flow nodes run between them.
#include "core/runtime/segmented_program.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "core/runtime/compile_graph.h"
#include "core/runtime/while_loop.h"
#include "core/support/error.h"

namespace kiln {
namespace {

bool is_control_flow(const Node& n) { return op_def(n.kind).family == OpFamily::Control; }

bool has_symbolic_dim(const TensorType& t) {
  for (const SymInt& d : t.shape)
    if (!d.is_static()) return true;
  return false;
}

// One step of the program: a compiled segment or a loop, with the slots of the outer values it reads
// and writes.
struct Step {
  std::vector<size_t> reads, writes;
  std::unique_ptr<DeviceProgram> segment;
  std::unique_ptr<CompiledWhileLoop> loop;
};

// The nodes [begin, end) as a graph of their own: its inputs are the values they read from before
// (and every outer input with a symbolic dim, which binds the sizes their attributes may name),
// its outputs the values they define that later nodes or the graph's outputs read.
Graph segment_graph(const Graph& outer, const std::vector<Node*>& nodes, size_t begin, size_t end,
                    std::vector<const Value*>* reads, std::vector<const Value*>* writes) {
  Graph g;
  std::map<const Value*, Value*> inner;
  std::set<const Value*> defined;
  for (size_t i = begin; i < end; ++i)
    for (const Value* v : nodes[i]->outputs) defined.insert(v);
  auto read = [&](const Value* v) {
    auto it = inner.find(v);
    if (it != inner.end()) return it->second;
    Value* in = g.add_input(v->type, v->name);
    inner[v] = in;
    reads->push_back(v);
    return in;
  };
  for (const Value* v : outer.inputs())
    if (has_symbolic_dim(v->type)) read(v);
  for (size_t i = begin; i < end; ++i) {
    const Node& n = *nodes[i];
    std::vector<Value*> inputs;
    for (const Value* v : n.inputs) inputs.push_back(defined.count(v) ? inner.at(v) : read(v));
    g.add_copy(n, inputs, &inner);
  }
  std::set<const Value*> needed(outer.outputs().begin(), outer.outputs().end());
  for (size_t i = end; i < nodes.size(); ++i) needed.insert(nodes[i]->inputs.begin(), nodes[i]->inputs.end());
  for (size_t i = begin; i < end; ++i)
    for (const Value* v : nodes[i]->outputs)
      if (needed.count(v)) {
        g.add_output(inner.at(v));
        writes->push_back(v);
      }
  return g;
}

class SegmentedProgram : public DeviceProgram {
 public:
  SegmentedProgram(const Graph& graph, Device device, const ProgramOptions& options, const std::string& dump_dir)
      : num_inputs_(graph.inputs().size()) {
    // Every outer value gets a slot: the program must not keep pointers into a graph it outlives.
    std::unordered_map<const Value*, size_t> slot;
    for (const Value* v : graph.inputs()) slot.emplace(v, slot.size());
    for (const Node* n : graph.nodes())
      for (const Value* v : n->outputs) slot.emplace(v, slot.size());
    num_slots_ = slot.size();
    for (const Value* v : graph.outputs()) outputs_.push_back(slot.at(v));
    auto slots = [&](const std::vector<const Value*>& values) {
      std::vector<size_t> out;
      for (const Value* v : values) out.push_back(slot.at(v));
      return out;
    };
    ProgramOptions part = options;
    part.outputs_over_inputs.clear();
    part.lent_outputs.clear();
    part.parameter_inputs.clear();  // numbered by the whole graph's inputs, not a segment's
    part.reduce_overhead = false;
    const std::vector<Node*> nodes = graph.nodes();
    auto dump = [&](const std::string& name) {
      if (dump_dir.empty()) return std::string();
      const std::string dir = (std::filesystem::path(dump_dir) / (std::to_string(steps_.size()) + "-" + name)).string();
      std::filesystem::create_directories(dir);
      return dir;
    };
    for (size_t begin = 0; begin < nodes.size();) {
      Step step;
      if (is_control_flow(*nodes[begin])) {
        const Node& n = *nodes[begin];
        step.reads = slots({n.inputs.begin(), n.inputs.end()});
        step.writes = slots({n.outputs.begin(), n.outputs.end()});
        step.loop = std::make_unique<CompiledWhileLoop>(n.attrs, n.provenance, device, part, dump("while_loop"));
        ++begin;
      } else {
        size_t end = begin;
        while (end < nodes.size() && !is_control_flow(*nodes[end])) ++end;
        std::vector<const Value*> reads, writes;
        Graph g = segment_graph(graph, nodes, begin, end, &reads, &writes);
        begin = end;
        if (writes.empty()) continue;  // nothing after it reads what it computes
        step.reads = slots(reads);
        step.writes = slots(writes);
        step.segment = build_program(g, device, part, dump("segment"));
      }
      steps_.push_back(std::move(step));
    }
    for (const Step& s : steps_) {
      const ProgramStats& st = s.segment ? s.segment->stats() : ProgramStats{};
      stats_.kernels += s.segment ? st.kernels : s.loop->kernels_per_iteration();
      stats_.nodes += st.nodes;
      stats_.naive_bytes += st.naive_bytes;
      stats_.lower_bound_bytes = std::max(stats_.lower_bound_bytes, st.lower_bound_bytes);
      stats_.planned_bytes += st.planned_bytes;
    }
  }

  std::vector<DeviceTensor> run(const std::vector<DeviceTensor>& inputs) override {
    if (inputs.size() != num_inputs_)
      throw Error("compiled program: expected " + std::to_string(num_inputs_) + " inputs, got " +
                  std::to_string(inputs.size()));
    std::vector<DeviceTensor> env(num_slots_);
    std::copy(inputs.begin(), inputs.end(), env.begin());
    for (Step& s : steps_) {
      std::vector<DeviceTensor> args;
      for (size_t i : s.reads) args.push_back(env[i]);
      std::vector<DeviceTensor> outs = s.segment ? s.segment->run(args) : s.loop->run(args);
      for (size_t i = 0; i < s.writes.size(); ++i) env[s.writes[i]] = std::move(outs.at(i));
    }
    std::vector<DeviceTensor> results;
    for (size_t i : outputs_) results.push_back(env[i]);
    return results;
  }

  const ProgramStats& stats() const override { return stats_; }

  void release_intermediates() override {
    for (Step& s : steps_) s.segment ? s.segment->release_intermediates() : s.loop->release_intermediates();
  }

 private:
  size_t num_inputs_ = 0, num_slots_ = 0;
  std::vector<size_t> outputs_;
  std::vector<Step> steps_;
  ProgramStats stats_;
};

}  // namespace

bool has_control_flow(const Graph& graph) {
  for (const Node* n : graph.nodes())
    if (is_control_flow(*n)) return true;
  return false;
}

std::unique_ptr<DeviceProgram> make_segmented_program(const Graph& graph, Device device,
                                                      const ProgramOptions& options, const std::string& dump_dir) {
  return std::make_unique<SegmentedProgram>(graph, device, options, dump_dir);
}

}  // namespace kiln
