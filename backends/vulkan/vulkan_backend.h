// The Vulkan backend's public face: device enumeration, the backend with its Vulkan-only extras
// (programs from SPIR-V, memory and stream statistics) and the validation-message log tests read.
// Free of Vulkan headers so callers need not have them.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace kiln {

// Devices Vulkan can open, best first (discrete > integrated > virtual > CPU such as lavapipe).
// Empty with the reason in `why_not` when there is no loader, driver or Vulkan 1.2 compute device.
std::vector<DeviceEntry> enumerate_vulkan_devices(std::string* why_not);
BackendFactory vulkan_backend_factory();

namespace vulkan {

// Messages (warnings and errors) reported through VK_EXT_debug_utils while KILN_VULKAN_VALIDATION=1
// turned on VK_LAYER_KHRONOS_validation; collected from every Vulkan backend in the process.
std::vector<std::string> validation_messages();
void clear_validation_messages();
// Whether an open backend actually runs with the validation layer (false when it is not installed).
bool validation_active();

// How a binding is bound. Texel buffers see the kiln buffer through a VkBufferView, which lets
// llvmpipe (lavapipe) gather 8 lanes at once where a storage-buffer load is a per-lane loop.
enum class BindingKind : uint8_t { StorageBuffer, UniformTexelBuffer, StorageTexelBuffer };

// The interface of a compiled kernel: N buffers at set 0, bindings 0..N-1, and push constants.
struct ProgramLayout {
  uint32_t buffers = 0;
  uint32_t push_constant_bytes = 0;
  std::array<uint32_t, 3> local_size{1, 1, 1};
  std::vector<bool> buffer_written;  // per binding: the shader may write it (not `readonly`)
  std::vector<bool> buffer_read;     // per binding: the shader may read it (not `writeonly`)
  std::vector<BindingKind> binding_kind;  // per binding (empty: all storage buffers)
  std::vector<uint32_t> texel_format;     // per binding: the VkFormat of a texel buffer's view
};

class VulkanProgram : public CompiledKernel {
 public:
  virtual const std::string& name() const = 0;
  virtual const ProgramLayout& layout() const = 0;
};

struct StreamStats {
  size_t launches = 0;
  size_t barriers = 0;  // compute->compute barriers between dispatches (hazards only)
  size_t submits = 0;
};

class VulkanStream : public Stream {
 public:
  virtual StreamStats stats() const = 0;
};

struct MemoryStats {
  size_t device_allocations = 0;  // live vkAllocateMemory blocks (shared + dedicated)
  size_t buffers = 0;             // live kiln buffers
  size_t bytes_reserved = 0;      // bytes held in device memory blocks
  size_t bytes_in_use = 0;        // bytes handed out to buffers (after alignment)
  size_t bytes_cached = 0;        // freed big buffers' blocks kept for reuse (part of bytes_reserved)
  bool direct_map = false;        // buffers are host-visible: upload/download are memcpy
};

struct ShaderCompileStats {
  size_t compiles = 0;    // GLSL -> SPIR-V runs (shaderc + optimizer + validator)
  size_t cache_hits = 0;  // compile() calls answered from the in-memory cache
  size_t disk_hits = 0;   // compile() calls answered from the disk cache (KILN_CACHE_DIR)
  bool pipeline_cache_loaded = false;  // VkPipelineCache data came from the disk cache at creation
  size_t autotune_timed = 0;       // matmul shape classes max-autotune timed on the device
  size_t autotune_disk_hits = 0;   // matmul shape classes whose tile came from the disk cache
  std::string autotune_last;       // "shape class -> tile" of the latest choice
};

struct VulkanOptions {
  bool force_staging = false;            // copy through staging buffers even where memory is mappable
  size_t block_bytes = 64ull << 20;      // sub-allocator block size
  // At most this much device memory for buffers, in all (0: as much as the heaps hold), as
  // torch.cuda.set_per_process_memory_fraction caps a process on a shared GPU. The device opened
  // through the registry takes it from KILN_VULKAN_MEMORY_LIMIT ("512MiB", "2GiB", bytes).
  size_t memory_limit_bytes = 0;
  // A portability profile (vulkan_caps_profile.h) clamping the device's limits and features; the
  // registry's device takes it from KILN_VULKAN_CAPS. Empty: the device as it is.
  std::string caps_profile;
};

// VulkanOptions from the environment (KILN_VULKAN_MEMORY_LIMIT, KILN_VULKAN_CAPS); throws kiln::Error naming the
// variable when its value does not parse.
VulkanOptions options_from_environment();

class VulkanBackend : public Backend {
 public:
  // A program from ready SPIR-V words (the fixed shaders); validated by spirv-val first.
  virtual std::unique_ptr<VulkanProgram> program_from_spirv(const std::string& name,
                                                           std::span<const uint32_t> words) = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual ShaderCompileStats compile_stats() const = 0;
  virtual std::string driver_info() const = 0;
  // Sends a warning through the validation messenger, to prove messages are collected.
  virtual void debug_message(const std::string& text) = 0;
  // Test hook: the next wait for the device reports VK_ERROR_DEVICE_LOST, as a GPU reset or a
  // driver crash would; the device then stays lost.
  virtual void simulate_device_loss() = 0;
};

std::unique_ptr<VulkanBackend> open_backend(int index, const VulkanOptions& options = {});

// SPIR-V of the fixed shaders in shaders/ ("fill", "copy"), compiled by glslc at build time.
std::span<const uint32_t> fixed_shader(std::string_view name);

}  // namespace vulkan
}  // namespace kiln
