// Generated kernels in batched translation units, host ops, and the cpu stream.
#include "backends/cpu/cpu_programs.h"


#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "backends/ref/host_memory.h"
#include "backends/ref/parallel.h"
#include "backends/ref/ref_kernel.h"
#include "core/kernel/emit.h"
#include "core/support/artifacts.h"
#include "core/support/disk_cache.h"
#include "core/support/error.h"

namespace kiln::cpu {

GeneratedProgram::GeneratedProgram(KernelBatcher& batcher, std::string name, std::string source)
    : batcher_(batcher), name_(std::move(name)), source_(std::move(source)) {
  batcher_.add(this);
}

GeneratedProgram::~GeneratedProgram() {
  if (!fn_) batcher_.remove(this);
}

KernelFn GeneratedProgram::function() const {
  if (!fn_) batcher_.flush();
  return fn_;
}

void GeneratedProgram::set_function(std::shared_ptr<SharedLibrary> library, KernelFn fn) {
  library_ = std::move(library);
  fn_ = fn;
}

void KernelBatcher::add(GeneratedProgram* program) {
  std::lock_guard lock(mutex_);
  pending_.push_back(program);
}

void KernelBatcher::remove(GeneratedProgram* program) {
  std::lock_guard lock(mutex_);
  pending_.erase(std::remove(pending_.begin(), pending_.end(), program), pending_.end());
}

// What every translation unit starts with. On x86-64 with GCC, glibc's libmvec vector variants of
// the transcendentals are declared (the simd attribute), so loops calling exp, log, tanh, erf, sin
// or cos vectorize with them (AVX2/AVX-512 variants, within 4 ulp) instead of calling the scalar
// function per element. libmvec is part of glibc (libc6-dev): no package is added for it. The
// AVX-512 intrinsics of the vector blocks' prelude are included here, outside the kernels'
// namespaces.
constexpr const char* kUnitHeader = R"(#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KILN_SIMD __attribute__((simd("notinbranch")))
extern "C" {
float expf(float) noexcept KILN_SIMD; float logf(float) noexcept KILN_SIMD; float tanhf(float) noexcept KILN_SIMD;
float erff(float) noexcept KILN_SIMD; float sinf(float) noexcept KILN_SIMD; float cosf(float) noexcept KILN_SIMD;
double exp(double) noexcept KILN_SIMD; double log(double) noexcept KILN_SIMD; double tanh(double) noexcept KILN_SIMD;
double erf(double) noexcept KILN_SIMD; double sin(double) noexcept KILN_SIMD; double cos(double) noexcept KILN_SIMD;
}
#endif
)";

// Binds each pending kernel that a provided artifact holds (an exported package's shared objects)
// to its function there, and keeps the others pending. A package's code runs only on a CPU with
// every feature it was compiled for.
void KernelBatcher::bind_provided(const ArtifactSet& provided, ArtifactSet* record) {
  std::map<const Artifact*, std::shared_ptr<SharedLibrary>> loaded;
  std::vector<GeneratedProgram*> rest;
  for (GeneratedProgram* program : pending_) {
    std::optional<ArtifactSet::Found> found = provided.find(kArtifactKind, stable_hash_hex(program->source()));
    if (!found) {
      rest.push_back(program);
      continue;
    }
    std::shared_ptr<SharedLibrary>& library = loaded[found->artifact];
    if (!library) {
      const std::string missing = HostCompiler::missing_cpu_features(found->artifact->target);
      if (!missing.empty())
        throw Error("cpu: kernels " + program->name() + " were compiled for a CPU with " + missing +
                    ", which this one lacks; export the program on a machine like this one");
      library = HostCompiler::load(found->artifact->bytes, program->name());
      if (record) record->add(*found->artifact);
    }
    program->set_function(library,
                          reinterpret_cast<KernelFn>(library->symbol("kiln_entry_" + std::to_string(found->index))));
  }
  pending_ = std::move(rest);
  const HostCompiler& compiler = HostCompiler::instance();
  if (!pending_.empty() && !compiler.available())
    throw Error("cpu: kernel " + pending_.front()->name() + " (and " + std::to_string(pending_.size() - 1) +
                " more) is not among the compiled kernels this program was loaded with, and " + compiler.why_not() +
                "; export the program again with this build of kiln");
}

// Each kernel goes into a namespace of its own (its prelude and `kiln_kernel` are static), with an
// extern "C" trampoline the loader finds by index. The units split the kernels evenly, one per
// core, at least 8 kernels each: compile time is mostly per unit below that. Inside an
// ArtifactScope, kernels a provided artifact holds are not compiled, and each unit built is
// recorded (kind "cpu-so", target: the CPU features it may use, members: its kernels' sources).
void KernelBatcher::flush() {
  std::lock_guard lock(mutex_);
  ArtifactSet* record = recording_artifacts();
  if (const ArtifactSet* provided = provided_artifacts(); provided && !pending_.empty())
    bind_provided(*provided, record);
  if (pending_.empty()) return;
  const size_t per_unit = std::max<size_t>(8, (pending_.size() + size_t(reference::num_threads()) - 1) /
                                                  size_t(reference::num_threads()));
  std::vector<std::string> units, names;
  std::vector<std::vector<GeneratedProgram*>> members;
  for (size_t first = 0; first < pending_.size(); first += per_unit) {
    std::string text = kUnitHeader;
    members.emplace_back();
    for (size_t i = first; i < std::min(pending_.size(), first + per_unit); ++i) {
      const std::string n = std::to_string(i - first);
      text += "namespace kiln_k" + n + " {\n" + pending_[i]->source() + "\n}  // namespace kiln_k" + n + "\n";
      text += "extern \"C\" void kiln_entry_" + n + "(void* const* b, const int* p, long s, long e) { kiln_k" + n +
              "::" + kernel::cuda_entry_name() + "(b, p, s, e); }\n";
      members.back().push_back(pending_[i]);
    }
    units.push_back(std::move(text));
    names.push_back(members.back().front()->name() + (members.back().size() > 1 ? " (+" + std::to_string(members.back().size() - 1) + " more)" : ""));
  }
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::shared_ptr<SharedLibrary>> libraries =
      HostCompiler::instance().build(units, names, record ? &bytes : nullptr);
  for (size_t u = 0; u < units.size(); ++u) {
    for (size_t i = 0; i < members[u].size(); ++i)
      members[u][i]->set_function(
          libraries[u], reinterpret_cast<KernelFn>(libraries[u]->symbol("kiln_entry_" + std::to_string(i))));
    if (!record) continue;
    Artifact artifact{kArtifactKind, HostCompiler::cpu_features(), {}, std::move(bytes[u])};
    for (GeneratedProgram* program : members[u]) artifact.members.push_back(stable_hash_hex(program->source()));
    record->add(std::move(artifact));
  }
  pending_.clear();
}

std::string HostOp::text() const {
  auto list = [](const std::vector<int64_t>& v) {
    std::string out = "[";
    for (size_t j = 0; j < v.size(); ++j) out += (j ? "," : "") + std::to_string(v[j]);
    return out + "]";
  };
  auto types = [&list](const std::vector<DType>& t, const std::vector<std::vector<int64_t>>& d,
                       const std::vector<std::vector<int64_t>>& strides, const std::vector<int64_t>& offsets) {
    std::string out;
    for (size_t i = 0; i < t.size(); ++i) {
      out += std::string(i ? ", " : "") + std::string(dtype_name(t[i])) + list(d[i]);
      if (i < strides.size() && !strides[i].empty()) out += "/" + list(strides[i]);
      if (i < offsets.size() && offsets[i] != 0) out += "+" + std::to_string(offsets[i]);
    }
    return out;
  };
  std::string out = std::string(op_name(kind)) + (is_channels_last(attrs) ? " channels_last " : " ") +
                    types(input_types, input_dims, input_strides, input_offsets) + " -> " +
                    types(output_types, output_dims, {}, {});
  for (const HostEpilogueStep& step : epilogue)
    out += " + " + std::string(op_name(step.kind)) + (step.operand < 0 ? "" : " #" + std::to_string(step.operand));
  return out;
}

HostOpProgram::HostOpProgram(HostOp op) : op_(std::move(op)) {
  std::vector<BufferView> ins, outs;
  for (size_t i = 0; i < op_.input_types.size(); ++i)
    ins.push_back({const_cast<Buffer*>(op_.constants[i]), op_.input_types[i], op_.input_dims[i], false,
                   op_.input_strides[i], op_.input_offsets[i]});
  for (size_t i = 0; i < op_.output_types.size(); ++i) outs.push_back({nullptr, op_.output_types[i], op_.output_dims[i]});
  std::vector<EpilogueStep> epilogue;
  for (const HostEpilogueStep& step : op_.epilogue) epilogue.push_back({step.kind, &step.attrs, step.operand, step.operand_first});
  onednn_ = make_onednn_op(OpRun{op_.kind, op_.attrs, ins, outs}, epilogue);
  if (!onednn_ && !epilogue.empty())  // plan_fused_template made sure oneDNN takes it
    throw Error("cpu: oneDNN does not take the epilogue of host op " + op_.text());
}

void HostOpProgram::run(std::span<Buffer* const> buffers, std::span<const size_t> offsets) const {
  std::vector<HostOperand> operands(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto& buffer = static_cast<const reference::HostBuffer&>(*buffers[i]);
    operands[i].data = static_cast<char*>(buffer.data()) + (offsets.empty() ? 0 : offsets[i]);
    if (i < op_.input_offsets.size())  // a view read in place starts past the buffer's start
      operands[i].data =
          static_cast<char*>(operands[i].data) + op_.input_offsets[i] * int64_t(dtype_size(op_.input_types[i]));
    if (i < op_.stable.size() && op_.stable[i]) operands[i].serial = buffer.serial();
  }
  if (onednn_) {
    onednn_->run(operands);
    return;
  }
  reference::KernelContext ctx{op_.kind, op_.attrs, {}, {}};
  size_t slot = 0;
  for (size_t i = 0; i < op_.input_types.size(); ++i)
    ctx.inputs.push_back({op_.input_types[i], op_.input_dims[i], operands.at(slot++).data});
  for (size_t i = 0; i < op_.output_types.size(); ++i)
    ctx.outputs.push_back({op_.output_types[i], op_.output_dims[i], operands.at(slot++).data});
  reference::kernels().get(op_.kind)(ctx);
}

void CpuStream::begin_recording() {
  recording_ = true;
  recorded_.clear();
}

void CpuStream::launch(const Launch& launch) {
  if (launch.indirect)
    throw Error("cpu: launches with group counts from a buffer are not supported (DeviceCaps::indirect_launch)");
  if (recording_) recorded_.push_back(launch);
  else run(launch);
}

void CpuStream::replay() {
  for (const Launch& l : recorded_) run(l);
}

std::vector<KernelTiming> CpuStream::timings() { return std::exchange(timings_, {}); }

void CpuStream::run(const Launch& launch) {
  const auto start = timing_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  std::string name;
  if (auto* generated = dynamic_cast<const GeneratedProgram*>(launch.program)) {
    std::vector<void*>& pointers = pointers_;  // reused: no allocation per launch
    pointers.clear();
    for (size_t i = 0; i < launch.buffers.size(); ++i)
      pointers.push_back(static_cast<char*>(reference::host_data(*launch.buffers[i])) +
                         (launch.offsets.empty() ? 0 : launch.offsets[i]));
    KernelFn fn = generated->function();
    const int* params = reinterpret_cast<const int*>(launch.push_constants.data());
    const int64_t n = int64_t(launch.groups[0]) * launch.groups[1] * launch.groups[2];
    // On OpenMP's team, the one oneDNN runs on (reference::parallel_for), so the two never compete.
    reference::parallel_for(n, reference::kParallelGrain,
                            [&](int64_t b, int64_t e) { fn(pointers.data(), params, long(b), long(e)); });
    if (timing_) name = generated->name();
  } else if (auto* host = dynamic_cast<const HostOpProgram*>(launch.program)) {
    host->run(launch.buffers, launch.offsets);
    if (timing_) name = "host_" + std::string(op_name(host->op().kind));
  } else {
    throw Error("cpu: a launch needs a program compiled by the cpu backend");
  }
  if (timing_) {
    using us = std::chrono::duration<double, std::micro>;
    timings_.push_back({name, us(std::chrono::steady_clock::now() - start).count(), us(start.time_since_epoch()).count()});
  }
}

}  // namespace kiln::cpu
