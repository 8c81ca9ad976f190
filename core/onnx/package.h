// kiln packages: an imported model compiled for a device, in one file that an app loads and runs
// where no compiler is installed (`kiln export`, then `kiln run model.kpkg`).
//
// A package holds the model's graph in kiln's IR text form (the plan's input: passes, fusion and
// memory planning run again when it loads, and need no compiler), its inputs, outputs and shape
// guards, its weights, and the compiled code the export built: on cpu, the shared objects of the
// generated kernels, with the CPU features they were compiled for. Loading binds those instead of
// running a compiler. Vulkan and CUDA packages carry no code: shaderc and NVRTC are part of kiln's
// runtime. docs/package.md describes the file layout.
#pragma once

#include <cstdint>
#include <string>

#include "core/onnx/onnx_import.h"

namespace kiln::onnx {

// Bumped whenever the layout or the meaning of a section changes; other formats are refused.
inline constexpr uint32_t kPackageFormat = 1;

struct PackageSummary {
  size_t bytes = 0;      // the file's size
  size_t weights = 0;    // weight tensors
  size_t artifacts = 0;  // compiled objects (cpu: shared objects)
  size_t kernels = 0;    // generated kernels in them
};

// Compiles `model` for `device` as CompiledModel does, recording the code it builds, and writes the
// package to `path` (a temporary file renamed over it). Throws kiln::Error when it cannot write.
PackageSummary export_package(const ImportedModel& model, Device device, const std::string& path,
                              const ProgramOptions& options = {});

// Whether `path` starts as a package does.
bool is_package(const std::string& path);

struct Package {
  ImportedModel model;  // model.artifacts holds the compiled code
  std::string device;   // the device it was compiled for ("cpu")
  std::string kiln;     // the kiln that wrote it ("kiln 0.1.0")
};

// Reads `path`. Throws kiln::Error naming the file and what is wrong: not a package, another
// format, truncated or damaged (the checksum), or a section that does not parse.
Package read_package(const std::string& path);

}  // namespace kiln::onnx
