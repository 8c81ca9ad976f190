// The cpu backend: the host CPU, with compiled programs as generated C++.
//  - Eager ops run precompiled kernels (the reference kernels, vectorized transcendentals and
//    layer norm, and oneDNN for matmul, conv and pooling), so no eager op ever waits on a compiler.
//  - Compiled programs print their kernel IR as C++ (Dialect::Cpp), which the host compiler builds
//    into shared objects (host_compiler.h), a few translation units per program, cached on disk.
//  - Matmul, gemm, linear, conv, pooling and the gradients of conv and max pooling run as host
//    ops, eagerly and inside compiled programs:
//    oneDNN primitives made once per shape (onednn_ops.h), or the reference kernel where oneDNN
//    does not take the op (other dtypes, 1-d convolutions, gemm's alpha): a blocked, threaded kernel
//    still beats a generic kernel that walks each window with divisions.
// Without a compiler at run time, compiled programs run on the reference interpreter, and the
// device's name says why.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "backends/backend.h"
#include "backends/cpu/cpu_programs.h"
#include "backends/cpu/host_compiler.h"
#include "backends/cpu/norms.h"
#include "backends/cpu/onednn_ops.h"
#include "backends/cpu/vector_math.h"
#include "backends/ref/host_memory.h"
#include "backends/ref/parallel.h"
#include "backends/ref/ref_kernel.h"
#include "core/support/artifacts.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {
namespace cpu {
namespace {

bool runs_as_host_op(OpKind kind) {
  switch (kind) {
    case OpKind::MatMul: case OpKind::Gemm: case OpKind::Linear: case OpKind::Conv: case OpKind::ConvTranspose:
    case OpKind::MaxPool: case OpKind::AvgPool: case OpKind::MaxPoolGrad: case OpKind::ConvWeightGrad:
      return true;
    default:
      return false;
  }
}

std::string device_name() {
  const HostCompiler& compiler = HostCompiler::instance();
  if (!compiler.available())
    return "cpu (" + compiler.why_not() +
           ": compiled programs run on the reference interpreter, except a package's, which brings its kernels)";
  return "cpu (generated C++, " + compiler.description() + ")";
}

class CpuBackend : public reference::HostBackend {
 public:
  // oneDNN and the generated kernels run on OpenMP's team: as many threads as the reference pool
  // (KILN_CPU_THREADS, default one per core).
  CpuBackend() { omp_set_num_threads(reference::num_threads()); }
  BackendKind kind() const override { return BackendKind::Cpu; }
  std::string name() const override { return device_name(); }
  DeviceCaps caps() const override {
    DeviceCaps c = HostBackend::caps();
    c.timestamps = true;
    c.memory_bytes = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE));
    return c;
  }
  // Matmul, conv and pooling run their oneDNN primitive, made on the first call of each shape;
  // transcendentals and f32 layer, batch and group norms their vectorized loops (vector_math.h,
  // norms.h); every other op its reference kernel.
  void execute(const OpRun& run) override {
    if (run_vector_math(run) || run_norm(run)) return;
    if (!runs_as_host_op(run.kind) || !have_onednn()) {
      reference::run_reference_kernel(run);
      return;
    }
    HostOp op = host_op_of(run);
    op.constants.assign(op.constants.size(), nullptr);  // eager operands change from call to call
    const HostOpProgram& program = eager_program(op);
    std::vector<Buffer*> buffers;
    for (const BufferView& v : run.inputs) buffers.push_back(v.buffer);
    for (const BufferView& v : run.outputs) buffers.push_back(v.buffer);
    program.run(buffers);
  }

  std::optional<kernel::CodegenTarget> codegen() const override {
    // Code an exported package carries runs without a compiler (KernelBatcher::bind_provided).
    const HostCompiler& compiler = HostCompiler::instance();
    if (compiler.available() || provided_artifacts()) {
      kernel::CodegenTarget target{kernel::Dialect::Cpp};
      target.read_through_views_up_to = reference::kParallelGrain;  // views one thread would copy
      return target;
    }
    static std::once_flag said;
    std::call_once(said, [&] {
      log::warn("cpu: " + compiler.why_not() + "; compiled programs run on the reference interpreter");
    });
    return std::nullopt;
  }

  bool has_template(OpKind kind) const override { return runs_as_host_op(kind); }
  // Convs and window pools oneDNN runs on nhwc activations: its AVX-512 and AVX2 kernels read and
  // write them in place, where channels-first ones cost a reorder each way around every conv.
  bool prefers_channels_last(const OpRun& run) override {
    if (!have_onednn() || run.inputs.empty() || run.outputs.size() != 1 || run.inputs[0].dims.size() != 4) return false;
    if (run.kind != OpKind::Conv && run.kind != OpKind::MaxPool && run.kind != OpKind::AvgPool) return false;
    AttrMap attrs = run.attrs;
    attrs.set("channels_last", true);
    std::vector<BufferView> ins(run.inputs.begin(), run.inputs.end()), outs(run.outputs.begin(), run.outputs.end());
    ins[0].dims = channels_last_dims(ins[0].dims);
    outs[0].dims = channels_last_dims(outs[0].dims);
    return make_onednn_op(OpRun{run.kind, attrs, ins, outs}) != nullptr;
  }
  // A conv's gradients run as oneDNN primitives where oneDNN takes them; else as a conv and a
  // matmul (their expansions), which oneDNN does take.
  bool runs_unexpanded(const OpRun& run) override {
    return have_onednn() && runs_as_host_op(run.kind) && make_onednn_op(run) != nullptr;
  }
  std::optional<TemplateLaunch> plan_template(const OpRun& run) override {
    if (!runs_as_host_op(run.kind) || !takes_inputs(run)) return std::nullopt;
    return launch_of(host_op_of(run), run);
  }
  // A matmul or conv with its epilogue as oneDNN post-ops (onednn_ops.h says which steps), when
  // oneDNN takes them on the op's own kernel; asked once per distinct op.
  std::optional<TemplateLaunch> plan_fused_template(const OpRun& run, std::span<const EpilogueStep> epilogue) override {
    if (!runs_as_host_op(run.kind) || !have_onednn() || !takes_inputs(run)) return std::nullopt;
    HostOp op = host_op_of(run);
    for (const EpilogueStep& step : epilogue) op.epilogue.push_back({step.kind, *step.attrs, step.operand, step.operand_first});
    const size_t index = host_op_index(op);
    {
      std::lock_guard lock(host_ops_mutex_);
      auto [known, inserted] = fuses_.emplace(index, false);
      if (inserted) known->second = make_onednn_op(run, epilogue) != nullptr;
      if (!known->second) return std::nullopt;
    }
    return launch_of(op, run);
  }

  std::unique_ptr<CompiledKernel> compile(const KernelSource& source) override {
    if (source.language == "cpp") return std::make_unique<GeneratedProgram>(batcher_, source.name, source.text);
    if (source.language == "host") {
      std::lock_guard lock(host_ops_mutex_);
      size_t index = std::stoul(source.text.substr(source.text.find('#') + 1));
      return std::make_unique<HostOpProgram>(host_ops_.at(index));
    }
    throw Error("cpu: cannot compile '" + source.name + "' written in '" + source.language +
                "'; the cpu backend takes C++ (cpp) kernels");
  }
  std::vector<std::unique_ptr<CompiledKernel>> compile_all(const std::vector<KernelSource>& sources) override {
    std::vector<std::unique_ptr<CompiledKernel>> programs;
    for (const KernelSource& s : sources) programs.push_back(compile(s));
    batcher_.flush();
    return programs;
  }
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<CpuStream>(); }

 private:
  TemplateLaunch launch_of(const HostOp& op, const OpRun& run) {
    TemplateLaunch t;
    t.name = "host_" + std::string(op_name(run.kind));
    t.language = "host";
    t.source = "host op #" + std::to_string(host_op_index(op)) + ": " + op.text();
    for (size_t i = 0; i < run.inputs.size() + run.outputs.size(); ++i) t.args.push_back(int(i));
    return t;
  }

  // Strided inputs (views read in place) only where oneDNN's matmul reads them; the reference
  // kernels read row-major buffers.
  static bool takes_inputs(const OpRun& run) {
    const bool strided =
        std::any_of(run.inputs.begin(), run.inputs.end(), [](const BufferView& v) { return !v.row_major(); });
    return !strided || (run.kind == OpKind::MatMul && have_onednn() && make_onednn_op(run) != nullptr);
  }

  static HostOp host_op_of(const OpRun& run) {
    HostOp op{run.kind, run.attrs, {}, {}, {}, {}, {}, {}, {}, {}, {}};
    for (const BufferView& v : run.inputs) {
      op.input_types.push_back(v.dtype);
      op.input_dims.push_back(v.dims);
      op.input_strides.push_back(v.strides);
      op.input_offsets.push_back(v.offset);
      op.constants.push_back(v.buffer);
      op.stable.push_back(v.stable);
    }
    for (const BufferView& v : run.outputs) {
      op.output_types.push_back(v.dtype);
      op.output_dims.push_back(v.dims);
    }
    return op;
  }

  const HostOpProgram& eager_program(const HostOp& op) {
    const size_t index = host_op_index(op);
    std::lock_guard lock(host_ops_mutex_);
    std::unique_ptr<HostOpProgram>& program = eager_programs_[index];
    if (!program) program = std::make_unique<HostOpProgram>(host_ops_[index]);
    return *program;
  }

  // Equal ops share one entry, so a program's text names the same op in every run.
  size_t host_op_index(const HostOp& op) {
    std::lock_guard lock(host_ops_mutex_);
    for (size_t i = 0; i < host_ops_.size(); ++i)
      if (host_ops_[i] == op) return i;
    host_ops_.push_back(op);
    return host_ops_.size() - 1;
  }

  KernelBatcher batcher_;
  std::mutex host_ops_mutex_;
  std::vector<HostOp> host_ops_;
  std::map<size_t, std::unique_ptr<HostOpProgram>> eager_programs_;  // by host op index
  std::map<size_t, bool> fuses_;  // by host op index: whether oneDNN takes its epilogue
};

}  // namespace
}  // namespace cpu

BackendFactory cpu_backend_factory() {
  return {BackendKind::Cpu,
          [](std::string*) {
            cpu::CpuBackend b;
            return std::vector<DeviceEntry>{{BackendKind::Cpu, 0, b.name(), b.caps()}};
          },
          [](int) -> std::unique_ptr<Backend> { return std::make_unique<cpu::CpuBackend>(); },
          [](const DeviceEntry&) { return 5; },  // after any GPU
          /*indexed=*/false};
}

}  // namespace kiln
