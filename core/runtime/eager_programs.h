// Eager ops on a code-generating backend, as one-node programs. The first run of an op with a
// given signature (kind, attributes, dtypes and dims) builds a graph of that one node and compiles
// it through compile_graph's stages after the graph passes: fusion (the schedule: one kernel, a
// template candidate or not), lowering to kernel IR, emission in the backend's dialect and the
// backend compile. Where the schedule marks the op a template candidate and the backend's template
// serves its sizes, that launch replaces the generic kernel, as in compiled programs. The launches
// are kept under the signature; every later run binds the op's buffers and queues them on one
// stream, and sync() (which the backend calls before the host touches a buffer a queued launch
// uses) waits for them. Kernel scratch is allocated per run; the stream keeps it until its launches
// finish.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/backend.h"
#include "core/kernel/dialect.h"
#include "core/runtime/kernel_programs.h"

namespace kiln {

struct EagerOptions {
  TemplatePlanner templates;  // asked instead of Backend::plan_template (tests force one variant)
  bool generic_only = false;  // no templates: every op runs its generic kernel (for comparisons)
  bool synchronous = false;   // wait after every op (for debugging)
};

class EagerPrograms : public EagerExecutor {
 public:
  explicit EagerPrograms(Backend& backend, EagerOptions options = {});
  ~EagerPrograms() override;

  // Queues the op's launches; Constant ops upload at once.
  void run(const OpRun& run) override;
  void sync() override;
  EagerStats stats() const override;
  // Distinct kernel sources compiled so far (op signatures with equal kernels share one).
  size_t programs_compiled() const;

 private:
  struct Planned;  // an op signature's launches
  const Planned& plan(const OpRun& run);
  Stream& stream();

  Backend& backend_;
  EagerOptions options_;
  kernel::CodegenTarget target_;
  DeviceCaps caps_;
  // Recursive: allocating a run's scratch may wait for queued launches (sync) to free memory.
  mutable std::recursive_mutex mutex_;
  std::unique_ptr<Stream> stream_;
  bool pending_ = false;  // launches queued since the last sync
  EagerStats stats_;
  KernelPrograms programs_;
  std::unordered_map<std::string, std::unique_ptr<Planned>> plans_;  // by op signature
};

// Runs one op now on `backend`: as a one-node program on the backend's EagerPrograms where its
// eager ops compile kernels (Backend::eager_compiles_kernels), else through Backend::execute.
void run_on_backend(Backend& backend, const OpRun& run);

}  // namespace kiln
