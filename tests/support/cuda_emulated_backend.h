// "cuda-emulated": a test-only Backend that runs kiln's CUDA dialect on the host through
// CudaHostEmulator (host-memory buffers, kernels compiled by the host C++ compiler), so eager ops,
// compiled programs and CUDA templates are checked numerically without a GPU. It reports
// BackendKind::Cuda so kiln generates CUDA C for it; the registry never lists it, and a test makes
// it reachable through Device with install_backend.
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "backends/backend.h"
#include "backends/template_epilogue.h"
#include "backends/template_util.h"
#include "support/cuda_host_emulator.h"

namespace kiln::testing {

struct CudaEmulatedOptions {
  // > 0: ops a CUDA template takes (kiln::cuda::plan_cuda_template for this compute capability,
  // e.g. 70 for the SIMT variants) run it, eagerly and in compiled programs; 0: generated kernels only.
  int template_sm = 0;
  CudaHostEmulator::Options emulator;
};

class CudaEmulatedBackend : public Backend {
 public:
  explicit CudaEmulatedBackend(CudaEmulatedOptions options = {});
  ~CudaEmulatedBackend() override;

  BackendKind kind() const override { return BackendKind::Cuda; }
  std::string name() const override { return "cuda-emulated (host CPU)"; }
  DeviceCaps caps() const override;
  bool supports(OpKind kind, DType dtype) const override;

  std::unique_ptr<Buffer> allocate(size_t bytes) override;
  void upload(Buffer& dst, const void* src, size_t bytes, size_t offset = 0) override;
  void download(const Buffer& src, void* dst, size_t bytes, size_t offset = 0) override;

  bool eager_compiles_kernels() const override { return true; }
  std::optional<TemplateLaunch> plan_template(const OpRun& run) override {
    std::optional<TemplateLaunch> t = templates_ ? templates_(run, caps()) : std::nullopt;
    if (t) ++templates_planned_;
    return t;
  }
  // As the CUDA backend: matmul and conv templates take their epilogue (template_epilogue.h).
  std::optional<TemplateLaunch> plan_fused_template(const OpRun& run, std::span<const EpilogueStep> epilogue) override {
    std::optional<TemplateLaunch> t =
        templates::plan_template_epilogue(run, epilogue, [this](const OpRun& anchor) { return plan_template(anchor); });
    if (t) ++templates_planned_;
    return t;
  }
  bool has_template(OpKind kind) const override { return templates::has_row_or_linalg_template(kind); }
  std::optional<kernel::CodegenTarget> codegen() const override {
    return kernel::CodegenTarget{kernel::Dialect::Cuda};
  }
  // Templates handed out through plan_template, to compiled programs and eager ops alike (eager
  // template launches also count in eager_stats().template_launches).
  size_t templates_planned() const { return templates_planned_; }

  // Registers the source with the emulator; it compiles, batched with every other source
  // registered before, at its first launch.
  std::unique_ptr<CompiledKernel> compile(const KernelSource& source) override;
  std::unique_ptr<Stream> create_stream() override;

  CudaHostEmulator& emulator() { return emulator_; }

 private:
  CudaHostEmulator emulator_;
  TemplatePlanner templates_;  // empty: generated kernels only
  std::atomic<size_t> templates_planned_{0};
};

}  // namespace kiln::testing
