// GLSL -> SPIR-V: libshaderc (compute, Vulkan 1.2, no optimization), the SPIRV-Tools optimizer's
// performance passes, then spirv-val; results cached in memory by source text and on disk (SPIR-V
// plus reflected layout) by source hash, device and driver.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/vulkan/vulkan_backend.h"
#include "core/support/disk_cache.h"

namespace kiln::vulkan {

struct CompiledShader {
  std::vector<uint32_t> words;  // optimized and validated
  ProgramLayout layout;         // reflected from the unoptimized module, as the source declares it
};

class ShaderCompiler {
 public:
  // `device_key` names the device and driver; disk entries from another device or driver miss.
  ShaderCompiler(bool scalar_block_layout, DiskCache disk = {}, std::string device_key = {})
      : scalar_block_layout_(scalar_block_layout), disk_(std::move(disk)), device_key_(std::move(device_key)) {}

  // Throws kiln::Error with shaderc's message (compile errors), the optimizer's, or spirv-val's.
  CompiledShader compile_glsl(const std::string& name, const std::string& text);
  // Throws kiln::Error naming `name` with the validator's messages when `words` is invalid.
  void validate(const std::string& name, std::span<const uint32_t> words) const;
  ShaderCompileStats stats() const;

 private:
  std::string disk_key(const std::string& text) const;

  bool scalar_block_layout_;
  DiskCache disk_;
  std::string device_key_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, CompiledShader> cache_;  // keyed by the source text's hash
  ShaderCompileStats stats_;
};

// The kernel interface read from SPIR-V: storage- and texel-buffer bindings at set 0 (readonly /
// writeonly, a texel buffer's view format), push-constant block size and local size. Throws
// kiln::Error for descriptors kiln cannot bind.
ProgramLayout reflect_layout(const std::string& name, std::span<const uint32_t> words);
// SPIR-V assembly text of `words` (spvBinaryToText, friendly names); throws kiln::Error when the
// module cannot be disassembled.
std::string disassemble_spirv(std::span<const uint32_t> words);

}  // namespace kiln::vulkan
