// Portability profiles: a JSON file (KILN_VULKAN_CAPS=profile.json) that clamps the device's limits
// and features to another GPU's, so kernel and template choices for that GPU run on this one
// (lavapipe): a Vulkan 1.2 minimum, an AMD-like, an Intel-like and a Mali-like profile ship in
// backends/vulkan/profiles/. Limits only go down and features only go off: a profile never lets
// kiln use what the device lacks.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <vulkan/vulkan.h>

#include "backends/backend.h"

namespace kiln::vulkan {

struct CapsProfile {
  std::string name;  // the file's "name"
  // Limits, named as VkPhysicalDeviceLimits names them.
  std::optional<uint32_t> max_shared_memory;          // maxComputeSharedMemorySize
  std::optional<uint32_t> max_push_constants;         // maxPushConstantsSize
  std::optional<uint64_t> max_storage_buffer_range;   // maxStorageBufferRange
  std::optional<uint32_t> max_invocations;            // maxComputeWorkGroupInvocations
  std::optional<std::array<uint32_t, 3>> max_workgroup_size;  // maxComputeWorkGroupSize
  std::optional<uint32_t> max_storage_buffers;        // maxPerStageDescriptorStorageBuffers
  // Features: false turns them off.
  std::optional<bool> f16, f64, int64, int16, subgroups;
  // "cpu" or "gpu": which kind of device kernel choices are made for.
  std::optional<bool> software;
};

// Reads a profile; throws kiln::Error naming the file and the field that does not parse.
CapsProfile read_caps_profile(const std::string& path);

// Clamps `limits` and `caps` (read from the device) to the profile.
void apply_caps_profile(const CapsProfile& profile, VkPhysicalDeviceLimits& limits, DeviceCaps& caps);

}  // namespace kiln::vulkan
