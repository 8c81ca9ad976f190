// The fixed shaders from shaders/, compiled by glslc at build time (tools/cmake/embed_spirv.cmake).
#include <cstdint>
#include <string>

#include "backends/vulkan/vulkan_backend.h"
#include "core/support/error.h"

namespace kiln::vulkan {
namespace {

const uint32_t kFill[] = {
#include "fill.spv.inc"
};
const uint32_t kCopy[] = {
#include "copy.spv.inc"
};

}  // namespace

std::span<const uint32_t> fixed_shader(std::string_view name) {
  if (name == "fill") return kFill;
  if (name == "copy") return kCopy;
  throw Error("vulkan: no fixed shader named '" + std::string(name) + "' (have: fill, copy)");
}

}  // namespace kiln::vulkan
