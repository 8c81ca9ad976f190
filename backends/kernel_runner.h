// Runs ops eagerly on a code-generating backend: a hand-tuned template where one fits, else lower
// the op to kernel IR and print it in the backend's dialect; compile once per distinct source
// (cached), launch with the sizes as push constants. Launches are asynchronous: they queue on one
// stream, and sync() (which the backend calls before the host reads a buffer a queued launch uses)
// waits for them. Shared by every GPU backend; the cpu backend runs reference kernels instead.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "core/kernel/emit.h"

namespace kiln {

// Returns nothing when no template fits the op (dtype, shapes, size); the generic lowering runs.
using TemplatePlanner = std::function<std::optional<TemplateLaunch>(const OpRun&, const DeviceCaps&)>;

struct KernelRunnerOptions {
  TemplatePlanner templates;  // optional
  bool synchronous = false;   // wait after every op (the old behaviour; for debugging)
};

struct KernelRunnerStats {
  size_t ops = 0;
  size_t launches = 0;
  size_t template_launches = 0;
  size_t syncs = 0;  // sync() calls that had launches to wait for
};

class KernelRunner {
 public:
  // Kernels are emitted for what `backend` declares (Backend::codegen()), read at the first op.
  explicit KernelRunner(Backend& backend, KernelRunnerOptions options = {});
  ~KernelRunner();

  // Queues the op's launches; Constant ops upload at once.
  void run(const OpRun& run);
  // Waits for every queued launch. Cheap when nothing is queued.
  void sync();
  size_t programs_compiled() const;
  KernelRunnerStats stats() const;
  // The template the runner would use for this op, if any (for compiled programs). Asks the
  // backend for its caps: caps_ is only filled once the first eager op runs, and a compiled
  // program may plan before any has.
  std::optional<TemplateLaunch> plan_template(const OpRun& run) const {
    return options_.templates ? options_.templates(run, backend_.caps()) : std::nullopt;
  }

 private:
  struct Planned;  // a lowered op's launches with their programs, cached by op signature
  const Program& program_for(const std::string& name, const std::string& source, const std::string& language);
  const Planned& plan(const OpRun& run);
  Stream& stream();

  Backend& backend_;
  KernelRunnerOptions options_;
  kernel::CodegenTarget target_;
  DeviceCaps caps_;
  mutable std::mutex mutex_;
  std::unique_ptr<Stream> stream_;
  bool pending_ = false;  // launches queued since the last sync
  KernelRunnerStats stats_;
  std::unordered_map<std::string, std::unique_ptr<Program>> programs_;  // by source text
  std::unordered_map<std::string, std::unique_ptr<Planned>> plans_;     // by op signature
};

}  // namespace kiln
