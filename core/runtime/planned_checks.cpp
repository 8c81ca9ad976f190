// PlannedProgram's debugging paths: the launches that ran, a profiled run, one kernel run alone on
// given inputs (per-kernel accuracy), and checked mode kernel by kernel.
#include <cmath>
#include <set>
#include <sstream>

#include "core/runtime/checked.h"
#include "core/runtime/kernel_replay.h"
#include "core/runtime/planned_program.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {
namespace {

std::string value_text(double v) {
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "+Inf" : "-Inf";
}

bool indexes(const PlannedKernel& k) {
  for (const PlannedNode& n : k.nodes)
    if (n.kind == OpKind::Gather || n.kind == OpKind::IndexSelect) return true;
  return false;
}

// The node of `k` whose output is value `id`, or null.
const PlannedNode* producer(const PlannedKernel& k, int id) {
  for (const PlannedNode& n : k.nodes)
    for (int o : n.outputs)
      if (o == id) return &n;
  return nullptr;
}

}  // namespace

std::vector<PlannedLaunch> PlannedProgram::launches() const {
  std::vector<PlannedLaunch> out;
  for (const LaunchPlan& l : launches_) {
    const CompiledKernelInfo& info = programs_.info(l.program);
    static const std::vector<std::vector<int>> none;
    const std::vector<std::vector<int>>& lines =
        l.step >= 0 ? schedule_[size_t(l.kernel)].steps[size_t(l.step)].line_origins : none;
    out.push_back({l.kernel, info.name, info.language, info.source, lines, l.groups, info.workgroup_size,
                   info.is_template});
  }
  return out;
}

std::string PlannedProgram::lost_kernel_text(const DeviceLostError& lost) const {
  for (auto l = launches_.rbegin(); l != launches_.rend(); ++l) {
    if (l->kernel < 0 || programs_.info(l->program).name != lost.last_launch()) continue;
    const PlannedKernel& k = kernels_[size_t(l->kernel)];
    std::string ops;
    for (size_t i = 0; i < k.nodes.size() && i < 8; ++i)
      ops += "\n    " + std::string(op_name(k.nodes[i].kind)) + " at " + k.nodes[i].provenance.str();
    if (k.nodes.size() > 8) ops += "\n    (" + std::to_string(k.nodes.size() - 8) + " more)";
    return "compiled program on " + device_.name() + ": the device was lost while kernel " +
           std::to_string(l->kernel) + " '" + k.name + "' ran (the last launched), which computes:" + ops +
           "\n  " + lost.what();
  }
  return "compiled program on " + device_.name() + ": " + lost.what();
}

std::vector<DeviceTensor> PlannedProgram::run_profiled(const std::vector<DeviceTensor>& inputs,
                                                       std::vector<LaunchTiming>& timings) {
  timings.clear();
  if (stream_) {
    stream_->sync();
    stream_->timings();  // drop what earlier runs left
  }
  profiling_ = true;
  std::vector<DeviceTensor> results;
  try {
    results = run(inputs);
  } catch (...) {
    profiling_ = false;
    if (stream_) stream_->set_timing(false);
    throw;
  }
  profiling_ = false;
  stream_->set_timing(false);
  std::vector<KernelTiming> raw = stream_->timings();
  // In launch order: the input copies this run made (reduce_overhead), launches_, output copies.
  std::set<int> returned;
  size_t output_copies = 0;
  for (size_t i = 0; i < output_copies_.size(); ++i)
    if (output_copies_[i].program && returned.insert(output_values_[i]).second) ++output_copies;
  if (raw.size() < launches_.size() + output_copies) {
    if (!raw.empty())
      log::warn("planned program: " + std::to_string(raw.size()) + " launch timings for " +
                std::to_string(launches_.size() + output_copies) + " launches; kernel times not recorded");
    return results;
  }
  size_t first = raw.size() - output_copies - launches_.size();
  // Starts from the stream's clock, counted from the first launch's, where the backend records
  // them; else each launch starts where the one before ended (one queue runs them in order).
  bool clocked = true;
  for (size_t i = 0; i < launches_.size(); ++i)
    clocked = clocked && raw[first + i].start_us && *raw[first + i].start_us >= *raw[first].start_us;
  double start = 0;
  for (size_t i = 0; i < launches_.size(); ++i) {
    const KernelTiming& t = raw[first + i];
    if (clocked) start = *t.start_us - *raw[first].start_us;
    timings.push_back({int(i), launches_[i].kernel, start, t.microseconds});
    start += t.microseconds;
  }
  return results;
}

std::map<int, DeviceTensor> PlannedProgram::read_values(const std::vector<int>& value_numbers,
                                                        const std::function<Binding(int)>& where) const {
  std::map<int, DeviceTensor> out;
  for (int v : value_numbers) {
    const ProgramValue& info = values_[size_t(v)];
    if (info.graph_id < 0 || out.count(info.graph_id)) continue;
    std::vector<uint8_t> bytes(bytes_of(v));
    Binding b = where(v);
    if (!bytes.empty()) backend_.download(*b.buffer, bytes.data(), bytes.size(), b.offset);
    const TensorType type{info.type.dtype, make_shape(dims_of(info.type.shape))};
    out[info.graph_id] = DeviceTensor::upload(type, bytes.data(), Device::ref());
  }
  return out;
}

std::vector<int64_t> PlannedProgram::dims_of(const Shape& shape) const { return concrete_dims(shape, bindings_); }

std::map<int, DeviceTensor> PlannedProgram::run_kernel(size_t k, const std::map<int, DeviceTensor>& inputs) {
  if (k >= schedule_.size())
    throw Error("planned program: run_kernel(" + std::to_string(k) + "): the program has " +
                std::to_string(schedule_.size()) + " kernels");
  if (!prepared_) throw Error("planned program: run_kernel needs a run() first, which fixes the input shapes");
  if (!stream_) stream_ = backend_.create_stream();
  const ProgramKernel& ks = schedule_[k];
  std::map<int, Binding> where;
  std::vector<DeviceTensor> keep;  // device copies of the inputs, alive until the launches finish
  for (int v : ks.reads) {
    const ProgramValue& info = values_[size_t(v)];
    auto it = inputs.find(info.graph_id);
    if (it == inputs.end())
      throw Error("planned program: kernel " + std::to_string(k) + " '" + kernels_[k].name + "' reads " +
                  info.name + "; run_kernel was given no tensor for it");
    if (it->second.sizes() != dims_of(info.type.shape) || it->second.type.dtype != info.type.dtype)
      throw Error("planned program: run_kernel: " + info.name + " was given as " + it->second.type.str());
    keep.push_back(it->second.copy_to(device_));
    where[v] = {keep.back().buffer.get(), 0};
  }
  std::map<int, std::shared_ptr<Buffer>> written;
  for (int v : ks.writes) {
    written[v] = std::shared_ptr<Buffer>(backend_.alloc(std::max<size_t>(bytes_of(v), 4)));
    where[v] = {written[v].get(), 0};
  }
  backend_.synchronize();
  for (const LaunchPlan& l : launches_) {
    if (l.kernel != int(k)) continue;
    std::vector<Binding> b;
    for (int a : l.args) b.push_back(where.at(a));
    launch(l, b);
  }
  stream_->sync();
  std::map<int, DeviceTensor> out;
  for (int v : ks.writes) {
    const ProgramValue& info = values_[size_t(v)];
    if (info.graph_id < 0) continue;
    out[info.graph_id] = {{info.type.dtype, make_shape(dims_of(info.type.shape))}, device_, written[v]};
  }
  return out;
}

// Kernel by kernel: launch, wait, read its float outputs back and scan them. A kernel that wrote a
// non-finite value has its nodes run again on the reference (ref) under checked mode, with the same
// inputs: that names the op (and its line) inside the fused kernel that made it, with the eager
// rules (NaN always, Inf only when made there). Indexing kernels are replayed before they launch,
// since the device clamps a bad index silently.
void PlannedProgram::run_kernels_checked(
    const std::function<std::vector<Binding>(const std::vector<int>&)>& bind_args) {
  auto where = [&](int v) { return bind_args({v})[0]; };
  auto kernel_text = [&](size_t k) {
    return "compiled kernel " + std::to_string(k) + " '" + kernels_[k].name + "' on " + device_.name();
  };
  // Values a kernel reads that are not in its reads (constants inlined by the lowering).
  auto add_missing = [&](const PlannedKernel& info, std::map<int, DeviceTensor>& values) {
    std::set<int> made;
    for (const PlannedNode& n : info.nodes) made.insert(n.outputs.begin(), n.outputs.end());
    std::vector<int> numbers;
    for (const PlannedNode& n : info.nodes)
      for (int id : n.inputs)
        if (!values.count(id) && !made.count(id))
          for (size_t v = 0; v < values_.size(); ++v)
            if (values_[v].graph_id == id && values_[v].storage != ValueStorage::Arena) numbers.push_back(int(v));
    for (auto& [id, t] : read_values(numbers, where)) values[id] = std::move(t);
  };
  auto replay = [&](size_t k, std::map<int, DeviceTensor> values, const std::string& why) {
    add_missing(kernels_[k], values);
    try {
      replay_on_ref(kernels_[k].nodes, values, bindings_);
    } catch (const Error& e) {
      throw Error("checked mode: " + kernel_text(k) + why + "; its ops run again on the reference (ref):\n" +
                  e.what());
    }
  };
  size_t next = 0;
  for (size_t k = 0; k < schedule_.size(); ++k) {
    const ProgramKernel& ks = schedule_[k];
    std::map<int, DeviceTensor> inputs;
    bool have_inputs = false;
    // An in-place kernel overwrites an input: read them while they still hold what it read.
    if (indexes(kernels_[k]) || ks.in_place_output >= 0) {
      stream_->sync();
      inputs = read_values(ks.reads, where);
      have_inputs = true;
      if (indexes(kernels_[k])) replay(k, inputs, " indexes memory");
    }
    for (; next < launches_.size() && launches_[next].kernel == int(k); ++next)
      launch(launches_[next], bind_args(launches_[next].args));
    stream_->sync();
    std::vector<int> scanned;
    for (int v : ks.writes)
      if (values_[size_t(v)].graph_id >= 0 && is_floating(values_[size_t(v)].type.dtype)) scanned.push_back(v);
    for (auto& [id, t] : read_values(scanned, where)) {
      if (t.numel() == 0) continue;
      std::vector<double> got = t.to_host<double>();
      size_t at = 0;
      while (at < got.size() && std::isfinite(got[at])) ++at;
      if (at == got.size()) continue;
      std::ostringstream why;
      why << " wrote " << value_text(got[at]) << " at element " << at << " of %" << id << " "
          << t.type.str();
      if (!have_inputs) inputs = read_values(ks.reads, where);
      replay(k, inputs, why.str());
      // The reference agrees the value is legal (an Inf passed on from an input), unless the
      // device made a NaN the reference did not.
      if (!std::isnan(got[at])) continue;
      const PlannedNode* n = producer(kernels_[k], id);
      throw Error("checked mode: " + kernel_text(k) + why.str() +
                  ", but its ops on the reference (ref) give no NaN there (a code generation bug?); the "
                  "value is made by " +
                  (n ? "op '" + std::string(op_name(n->kind)) + "' at " + n->provenance.str() : "an unknown node") +
                  "\n  (turn checked mode off with KILN_CHECK=0 or kiln::set_checked_mode(false))");
    }
  }
}

}  // namespace kiln
