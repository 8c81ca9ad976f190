// Reading a portability profile and clamping a device's limits and caps to it.
#include "backends/vulkan/vulkan_caps_profile.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/support/error.h"

namespace kiln::vulkan {
namespace {

using nlohmann::json;

const std::set<std::string> kFields = {
    "name", "comment", "maxComputeSharedMemorySize", "maxPushConstantsSize", "maxStorageBufferRange",
    "maxComputeWorkGroupInvocations", "maxComputeWorkGroupSize", "maxPerStageDescriptorStorageBuffers",
    "shaderFloat16", "shaderFloat64", "shaderInt64", "shaderInt16", "subgroups", "deviceType"};

template <class T>
std::optional<T> read_number(const json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key)) return std::nullopt;
  const json& v = j.at(key);
  if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > uint64_t(T(~T(0))))
    throw Error(where + ": '" + key + "' must be a positive integer that fits " + std::to_string(sizeof(T) * 8) +
                " bits, not " + v.dump());
  return v.get<T>();
}

std::optional<bool> read_bool(const json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key)) return std::nullopt;
  if (!j.at(key).is_boolean()) throw Error(where + ": '" + key + "' must be true or false, not " + j.at(key).dump());
  return j.at(key).get<bool>();
}

}  // namespace

CapsProfile read_caps_profile(const std::string& path) {
  const std::string where = "vulkan caps profile " + path;
  std::ifstream in(path);
  if (!in) throw Error(where + ": cannot be read (KILN_VULKAN_CAPS names a JSON file)");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw Error(where + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(where + ": must hold a JSON object");
  for (const auto& [key, value] : j.items())
    if (!kFields.count(key)) throw Error(where + ": unknown field '" + key + "'");
  CapsProfile p;
  p.name = j.contains("name") && j.at("name").is_string() ? j.at("name").get<std::string>() : path;
  p.max_shared_memory = read_number<uint32_t>(j, "maxComputeSharedMemorySize", where);
  p.max_push_constants = read_number<uint32_t>(j, "maxPushConstantsSize", where);
  p.max_storage_buffer_range = read_number<uint64_t>(j, "maxStorageBufferRange", where);
  p.max_invocations = read_number<uint32_t>(j, "maxComputeWorkGroupInvocations", where);
  p.max_storage_buffers = read_number<uint32_t>(j, "maxPerStageDescriptorStorageBuffers", where);
  if (j.contains("maxComputeWorkGroupSize")) {
    const json& v = j.at("maxComputeWorkGroupSize");
    if (!v.is_array() || v.size() != 3)
      throw Error(where + ": 'maxComputeWorkGroupSize' must be three integers, not " + v.dump());
    std::array<uint32_t, 3> size{};
    for (size_t i = 0; i < 3; ++i) {
      if (!v[i].is_number_unsigned() || v[i].get<uint64_t>() == 0 || v[i].get<uint64_t>() > UINT32_MAX)
        throw Error(where + ": 'maxComputeWorkGroupSize' must be three positive integers, not " + v.dump());
      size[i] = v[i].get<uint32_t>();
    }
    p.max_workgroup_size = size;
  }
  p.f16 = read_bool(j, "shaderFloat16", where);
  p.f64 = read_bool(j, "shaderFloat64", where);
  p.int64 = read_bool(j, "shaderInt64", where);
  p.int16 = read_bool(j, "shaderInt16", where);
  p.subgroups = read_bool(j, "subgroups", where);
  if (j.contains("deviceType")) {
    const json& v = j.at("deviceType");
    if (v != "cpu" && v != "gpu") throw Error(where + ": 'deviceType' must be \"cpu\" or \"gpu\", not " + v.dump());
    p.software = v == "cpu";
  }
  return p;
}

void apply_caps_profile(const CapsProfile& p, VkPhysicalDeviceLimits& limits, DeviceCaps& caps) {
  auto clamp = [](auto& value, const auto& limit) {
    if (limit) value = std::min<std::decay_t<decltype(value)>>(value, *limit);
  };
  clamp(limits.maxComputeSharedMemorySize, p.max_shared_memory);
  clamp(limits.maxPushConstantsSize, p.max_push_constants);
  if (p.max_storage_buffer_range)
    limits.maxStorageBufferRange = uint32_t(std::min<uint64_t>(limits.maxStorageBufferRange, *p.max_storage_buffer_range));
  clamp(limits.maxComputeWorkGroupInvocations, p.max_invocations);
  clamp(limits.maxPerStageDescriptorStorageBuffers, p.max_storage_buffers);
  if (p.max_workgroup_size)
    for (int i = 0; i < 3; ++i)
      limits.maxComputeWorkGroupSize[i] = std::min(limits.maxComputeWorkGroupSize[i], (*p.max_workgroup_size)[size_t(i)]);

  caps.shared_memory_bytes = limits.maxComputeSharedMemorySize;
  caps.max_buffer_bytes = std::min<size_t>(caps.max_buffer_bytes, limits.maxStorageBufferRange & ~uint32_t(15));
  caps.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) caps.max_workgroup_size[size_t(i)] = limits.maxComputeWorkGroupSize[i];
  auto turn_off = [](bool& feature, const std::optional<bool>& allowed) { feature = feature && allowed.value_or(true); };
  turn_off(caps.f16, p.f16);
  turn_off(caps.f64, p.f64);
  turn_off(caps.int64, p.int64);
  turn_off(caps.int16, p.int16);
  turn_off(caps.subgroups, p.subgroups);
  if (p.software) caps.is_cpu = *p.software;
}

}  // namespace kiln::vulkan
