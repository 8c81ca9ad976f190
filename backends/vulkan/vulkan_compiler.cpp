// The compile pipeline (shaderc, optimizer, validator), its in-memory cache and its disk entries.
#include "backends/vulkan/vulkan_compiler.h"

#include <shaderc/shaderc.hpp>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>

#include <cstring>
#include <optional>

#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln::vulkan {
namespace {

constexpr spv_target_env kTargetEnv = SPV_ENV_VULKAN_1_2;

// Collects SPIRV-Tools diagnostics as "error: line: message" lines.
spvtools::MessageConsumer collect_into(std::string* out) {
  return [out](spv_message_level_t level, const char*, const spv_position_t& pos, const char* message) {
    const char* kind = level <= SPV_MSG_ERROR ? "error" : level == SPV_MSG_WARNING ? "warning" : "info";
    *out += std::string(kind) + ": " + (pos.index ? "word " + std::to_string(pos.index) + ": " : "") +
            message + "\n";
  };
}

spvtools::ValidatorOptions validator_options(bool scalar_block_layout) {
  spvtools::ValidatorOptions options;
  options.SetScalarBlockLayout(scalar_block_layout);
  return options;
}

// Disk payload: buffers, push bytes, local size, per binding a word (bit 0 written, bit 1 read,
// bits 2-3 the binding kind, bits 8-31 a texel buffer's VkFormat), then the words.
std::vector<uint8_t> serialize(const CompiledShader& shader) {
  std::vector<uint32_t> w;
  const ProgramLayout& l = shader.layout;
  w.push_back(l.buffers);
  w.push_back(l.push_constant_bytes);
  w.insert(w.end(), l.local_size.begin(), l.local_size.end());
  for (uint32_t i = 0; i < l.buffers; ++i)
    w.push_back((i < l.buffer_written.size() && l.buffer_written[i] ? 1u : 0u) |
                (i < l.buffer_read.size() && l.buffer_read[i] ? 2u : 0u) |
                (i < l.binding_kind.size() ? uint32_t(l.binding_kind[i]) << 2 : 0u) |
                (i < l.texel_format.size() ? l.texel_format[i] << 8 : 0u));
  w.insert(w.end(), shader.words.begin(), shader.words.end());
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  return bytes;
}

std::optional<CompiledShader> deserialize(const std::vector<uint8_t>& bytes) {
  if (bytes.size() % 4 != 0 || bytes.size() < 5 * 4) return std::nullopt;
  std::vector<uint32_t> w(bytes.size() / 4);
  std::memcpy(w.data(), bytes.data(), bytes.size());
  CompiledShader shader;
  ProgramLayout& l = shader.layout;
  l.buffers = w[0];
  l.push_constant_bytes = w[1];
  l.local_size = {w[2], w[3], w[4]};
  // A horizontal kernel binds its members' buffers: up to a device's per-stage resource limit.
  if (l.buffers > 4096 || w.size() < 5 + size_t(l.buffers) + 5) return std::nullopt;
  for (uint32_t i = 0; i < l.buffers; ++i) {
    l.buffer_written.push_back(w[5 + i] & 1u);
    l.buffer_read.push_back(w[5 + i] & 2u);
    uint32_t kind = (w[5 + i] >> 2) & 3u;
    if (kind > uint32_t(BindingKind::StorageTexelBuffer)) return std::nullopt;
    l.binding_kind.push_back(BindingKind(kind));
    l.texel_format.push_back(w[5 + i] >> 8);
  }
  shader.words.assign(w.begin() + 5 + l.buffers, w.end());
  if (shader.words[0] != 0x07230203u) return std::nullopt;  // SPIR-V magic
  return shader;
}

}  // namespace

std::string ShaderCompiler::disk_key(const std::string& text) const {
  return "spirv|" + device_key_ + "|scalar=" + std::to_string(scalar_block_layout_) + "|" +
         stable_hash_hex(text) + "|" + std::to_string(text.size());
}

void ShaderCompiler::validate(const std::string& name, std::span<const uint32_t> words) const {
  std::string messages;
  spvtools::SpirvTools tools(kTargetEnv);
  tools.SetMessageConsumer(collect_into(&messages));
  if (!tools.Validate(words.data(), words.size(), validator_options(scalar_block_layout_)))
    throw Error("vulkan: SPIR-V for '" + name + "' failed spirv-val:\n" +
                (messages.empty() ? "(no message)\n" : messages));
}

CompiledShader ShaderCompiler::compile_glsl(const std::string& name, const std::string& text) {
  {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(text);
    if (it != cache_.end()) {
      ++stats_.cache_hits;
      return it->second;
    }
  }
  const std::string key = disk_.enabled() ? disk_key(text) : std::string();
  if (disk_.enabled()) {
    if (auto bytes = disk_.load("spirv", key)) {
      std::optional<CompiledShader> cached = deserialize(*bytes);
      if (cached) {
        std::lock_guard lock(mutex_);
        ++stats_.disk_hits;
        cache_.emplace(text, *cached);
        return *cached;
      }
      log::warn("disk cache: SPIR-V entry for '" + name + "' does not parse; recompiling");
    }
  }
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  options.SetTargetSpirv(shaderc_spirv_version_1_5);
  // The SPIRV-Tools optimizer below does the optimizing; shaderc's own -O would run it twice.
  options.SetOptimizationLevel(shaderc_optimization_level_zero);
  shaderc::SpvCompilationResult result =
      compiler.CompileGlslToSpv(text, shaderc_glsl_compute_shader, name.c_str(), "main", options);
  if (result.GetCompilationStatus() != shaderc_compilation_status_success)
    throw Error("vulkan: GLSL compile of '" + name + "' failed:\n" + result.GetErrorMessage());
  std::vector<uint32_t> spirv(result.cbegin(), result.cend());

  CompiledShader shader;
  shader.layout = reflect_layout(name, spirv);

  std::string messages;
  spvtools::Optimizer optimizer(kTargetEnv);
  optimizer.SetMessageConsumer(collect_into(&messages));
  optimizer.RegisterPerformancePasses();
  spvtools::OptimizerOptions opt_options;
  opt_options.set_run_validator(false);  // validated once, on the result, below
  if (!optimizer.Run(spirv.data(), spirv.size(), &shader.words, opt_options))
    throw Error("vulkan: the SPIR-V optimizer failed on '" + name + "':\n" + messages);
  validate(name, shader.words);
  if (disk_.enabled()) disk_.store("spirv", key, serialize(shader));

  std::lock_guard lock(mutex_);
  ++stats_.compiles;
  cache_.emplace(text, shader);
  return shader;
}

ShaderCompileStats ShaderCompiler::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::string disassemble_spirv(std::span<const uint32_t> words) {
  std::string messages, text;
  spvtools::SpirvTools tools(kTargetEnv);
  tools.SetMessageConsumer(collect_into(&messages));
  if (!tools.Disassemble(words.data(), words.size(), &text,
                         SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT))
    throw Error("vulkan: cannot disassemble SPIR-V: " + messages);
  return text;
}

}  // namespace kiln::vulkan
