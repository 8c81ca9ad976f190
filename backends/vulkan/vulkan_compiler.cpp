// The compile pipeline (shaderc, optimizer, validator) and its in-memory cache.
#include "backends/vulkan/vulkan_compiler.h"

#include <shaderc/shaderc.hpp>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>

#include "core/support/error.h"

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

}  // namespace

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

  std::lock_guard lock(mutex_);
  ++stats_.compiles;
  cache_.emplace(text, shader);
  return shader;
}

CompileStats ShaderCompiler::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace kiln::vulkan
