// kiln-cross-backend: one model on every available device (cpu reference, each Vulkan and CUDA
// device), eager and compiled, in one table of error vs the cpu reference, times and kernels.
#include <cstdio>
#include <string>
#include <vector>

#include "samples/common/sample_models.h"

using namespace kiln;
using namespace kiln::samples;

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv, /*with_model=*/true);
  std::vector<DeviceEntry> entries;
  try {
    entries = available_devices();
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln-cross-backend: %s\n", e.what());
    return 1;
  }
  // The ref interpreter first: every other row is compared with its eager output.
  std::vector<Device> devices{Device::ref()};
  for (const DeviceEntry& e : entries)
    if (e.kind != BackendKind::Ref && e.kind != BackendKind::Null)
      devices.emplace_back(e.kind, e.index);

  std::vector<float> reference;
  try {
    reference = run_named(args.model, Device::ref(), args.small, 1).result.eager;
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln-cross-backend: cpu reference failed: %s\n", e.what());
    return 1;
  }

  std::printf("model %s, %zu device(s), times are medians of %d calls after a warm-up\n",
              args.model.c_str(), devices.size(), args.reps);
  std::printf("error: the worse of eager and compiled vs the cpu reference's eager output; rel is\n"
              "max|diff| / max|reference| (tolerance %.0e)\n\n", kRelTolerance);
  std::printf("%-8s %-10s %-36s %11s %11s %11s %11s %8s\n", "backend", "device", "name", "max abs",
              "max rel", "eager ms", "compiled ms", "kernels");
  int failures = 0;
  for (const Device& dev : devices) {
    std::string description;
    try {
      description = dev.description();
    } catch (const Error&) {
      description = "?";
    }
    if (description.size() > 36) description = description.substr(0, 33) + "...";
    std::printf("%-8s %-10s %-36s ", backend_kind_name(dev.kind()), dev.name().c_str(),
                description.c_str());
    std::fflush(stdout);
    try {
      RunResult r = run_named(args.model, dev, args.small, args.reps).result;
      Error2 eager = compare(r.eager, reference), compiled = compare(r.compiled, reference);
      Error2 worst{std::max(eager.abs, compiled.abs), std::max(eager.rel, compiled.rel)};
      if (std::isnan(eager.abs) || std::isnan(compiled.abs)) worst = {NAN, NAN};
      bool ok = worst.rel <= kRelTolerance;
      if (!ok) ++failures;
      std::printf("%11.3g %11.3g %11.3f %11.3f %8lld%s\n", worst.abs, worst.rel, r.eager_ms,
                  r.compiled_ms, (long long)r.stats.program.kernels, ok ? "" : "  FAIL");
    } catch (const Error& e) {
      ++failures;
      std::printf("failed: %s\n", e.what());
    }
  }
  if (failures) {
    std::fprintf(stderr, "kiln-cross-backend: %d device(s) failed or disagree with the cpu "
                 "reference\n", failures);
    return 1;
  }
  return 0;
}
