// while_loop at run time: the host loop over the cond and body subgraphs, interpreted or compiled.
#include "core/runtime/while_loop.h"

#include <filesystem>

#include "core/ir/op.h"
#include "core/runtime/compile_graph.h"
#include "core/runtime/interpreter.h"
#include "core/support/error.h"

namespace kiln {

std::vector<DeviceTensor> run_loop(const std::vector<DeviceTensor>& operands, size_t carried,
                                   const SubgraphRun& run_cond, const SubgraphRun& run_body,
                                   const Provenance& where) {
  std::vector<DeviceTensor> state = operands;
  for (;;) {
    const std::vector<DeviceTensor> pred = run_cond(state);
    uint8_t go = 0;
    if (pred.size() != 1 || pred[0].numel() != 1)
      throw Error(op_error(OpKind::WhileLoop, types_of(operands), where,
                           "internal error: the cond subgraph gave no one-element predicate"));
    pred[0].read_elements(&go, DType::U8);  // the host decides: one sync per iteration
    if (!go) break;
    std::vector<DeviceTensor> next = run_body(state);
    for (size_t i = 0; i < carried; ++i) state[i] = std::move(next.at(i));
  }
  state.resize(carried);
  return state;
}

std::vector<DeviceTensor> interpret_while_loop(const std::vector<DeviceTensor>& operands,
                                               const AttrMap& attrs, const Provenance& where) {
  const Graph& cond = attrs.get_graph("cond");
  const Graph& body = attrs.get_graph("body");
  return run_loop(
      operands, size_t(attrs.get_int("carried")),
      [&](const std::vector<DeviceTensor>& in) { return interpret(cond, in); },
      [&](const std::vector<DeviceTensor>& in) { return interpret(body, in); }, where);
}

namespace {

std::unique_ptr<DeviceProgram> compile_subgraph(const Graph& sub, Device device, const ProgramOptions& options,
                                                const std::string& dump_dir) {
  Graph graph = sub.clone();
  CompileGraphOptions sub_options;
  sub_options.program = options;
  sub_options.program.parameter_inputs.clear();  // numbered by the enclosing graph's inputs
  if (!dump_dir.empty()) {
    std::filesystem::create_directories(dump_dir);
    sub_options.pipeline.dump_dir = dump_dir;
  }
  return compile_graph(graph, device, sub_options).program;
}

std::string subdirectory(const std::string& dir, const std::string& name) {
  return dir.empty() ? std::string() : (std::filesystem::path(dir) / name).string();
}

}  // namespace

CompiledWhileLoop::CompiledWhileLoop(const AttrMap& attrs, const Provenance& where, Device device,
                                     const ProgramOptions& options, const std::string& dump_dir)
    : device_(device),
      carried_(size_t(attrs.get_int("carried"))),
      where_(where),
      cond_(compile_subgraph(attrs.get_graph("cond"), device, options, subdirectory(dump_dir, "cond"))),
      body_(compile_subgraph(attrs.get_graph("body"), device, options, subdirectory(dump_dir, "body"))) {}

std::vector<DeviceTensor> CompiledWhileLoop::run(const std::vector<DeviceTensor>& operands) {
  if (DeviceLoop::available(device_, *cond_, *body_)) {
    if (!device_loop_)
      device_loop_ = std::make_unique<DeviceLoop>(device_, static_cast<PlannedProgram&>(*cond_),
                                                  static_cast<PlannedProgram&>(*body_), carried_);
    return device_loop_->run(operands);
  }
  return run_loop(
      operands, carried_,
      [&](const std::vector<DeviceTensor>& in) {
        ++host_loop_waits_;
        return cond_->run(in);
      },
      [&](const std::vector<DeviceTensor>& in) { return body_->run(in); }, where_);
}

int64_t CompiledWhileLoop::host_waits() const {
  return host_loop_waits_ + (device_loop_ ? device_loop_->host_waits() : 0);
}

int64_t CompiledWhileLoop::kernels_per_iteration() const {
  return cond_->stats().kernels + body_->stats().kernels;
}

void CompiledWhileLoop::release_intermediates() {
  cond_->release_intermediates();
  body_->release_intermediates();
}

}  // namespace kiln
