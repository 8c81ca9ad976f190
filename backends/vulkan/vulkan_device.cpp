// Instance creation (validation layer + debug messenger on request), device ranking, the
// capability query and the logical device with one compute queue.
#include "backends/vulkan/vulkan_device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backends/vulkan/vulkan_backend.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln::vulkan {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::mutex g_messages_mutex;
std::vector<std::string> g_messages;
std::atomic<bool> g_validation_active{false};

VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT,
                                                const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                void*) {
  std::string text = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error: " : "warning: ";
  text += data && data->pMessage ? data->pMessage : "(no message)";
  log::warn("vulkan validation " + text);
  std::lock_guard lock(g_messages_mutex);
  g_messages.push_back(std::move(text));
  return VK_FALSE;  // never abort the call: the test reads the list
}

VkDebugUtilsMessengerCreateInfoEXT messenger_info() {
  VkDebugUtilsMessengerCreateInfoEXT info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = on_debug_message;
  return info;
}

bool has_layer(const char* name) {
  uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

// An instance extension of the loader and drivers, or (with `layer`) one that layer provides.
bool has_instance_extension(const char* name, const char* layer = nullptr) {
  uint32_t count = 0;
  if (vkEnumerateInstanceExtensionProperties(layer, &count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> exts(count);
  vkEnumerateInstanceExtensionProperties(layer, &count, exts.data());
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

bool has_device_extension(VkPhysicalDevice physical, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> exts(count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, exts.data());
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

// The compute queue family: one with timestamps if any has them.
int compute_queue_family(VkPhysicalDevice physical, uint32_t* timestamp_bits) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
  int best = -1;
  for (uint32_t i = 0; i < count; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || (families[best].timestampValidBits == 0 && families[i].timestampValidBits > 0))
      best = int(i);
  }
  if (best >= 0 && timestamp_bits) *timestamp_bits = families[best].timestampValidBits;
  return best;
}

// The features kiln enables when present, queried and requested through one chain.
struct FeatureChain {
  VkPhysicalDeviceFeatures2 core{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  FeatureChain() {
    core.pNext = &v11;
    v11.pNext = &v12;
  }
  FeatureChain(const FeatureChain&) = delete;
};

void query_features(VkPhysicalDevice physical, FeatureChain& f) {
  vkGetPhysicalDeviceFeatures2(physical, &f.core);
}

// Copies into `want` only the features kiln uses that `have` reports.
void select_features(const FeatureChain& have, FeatureChain& want) {
  want.core.features.shaderFloat64 = have.core.features.shaderFloat64;
  want.core.features.shaderInt64 = have.core.features.shaderInt64;
  want.core.features.shaderInt16 = have.core.features.shaderInt16;
  want.v11.storageBuffer16BitAccess = have.v11.storageBuffer16BitAccess;
  want.v11.uniformAndStorageBuffer16BitAccess = have.v11.uniformAndStorageBuffer16BitAccess;
  want.v11.storagePushConstant16 = have.v11.storagePushConstant16;
  want.v12.shaderFloat16 = have.v12.shaderFloat16;
  want.v12.shaderInt8 = have.v12.shaderInt8;
  want.v12.storageBuffer8BitAccess = have.v12.storageBuffer8BitAccess;
  want.v12.uniformAndStorageBuffer8BitAccess = have.v12.uniformAndStorageBuffer8BitAccess;
  want.v12.storagePushConstant8 = have.v12.storagePushConstant8;
  want.v12.scalarBlockLayout = have.v12.scalarBlockLayout;
  want.v12.vulkanMemoryModel = have.v12.vulkanMemoryModel;
  want.v12.shaderSubgroupExtendedTypes = have.v12.shaderSubgroupExtendedTypes;
}

}  // namespace

const char* result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult(unknown)";
  }
}

void check(VkResult result, const char* what) {
  if (result != VK_SUCCESS)
    throw Error(std::string("vulkan: ") + what + " failed: " + result_name(result) + " (" +
                std::to_string(int(result)) + ")");
}

bool validation_requested() {
  const char* env = std::getenv("KILN_VULKAN_VALIDATION");
  return env && (std::string_view(env) == "1" || std::string_view(env) == "sync");
}

bool sync_validation_requested() {
  const char* env = std::getenv("KILN_VULKAN_VALIDATION");
  return env && std::string_view(env) == "sync";
}

std::vector<std::string> validation_messages() {
  std::lock_guard lock(g_messages_mutex);
  return g_messages;
}

void clear_validation_messages() {
  std::lock_guard lock(g_messages_mutex);
  g_messages.clear();
}

bool validation_active() { return g_validation_active.load(); }

Instance::Instance(bool validation) {
  uint32_t api = 0;
  if (vkEnumerateInstanceVersion(&api) != VK_SUCCESS || api < VK_API_VERSION_1_2)
    throw Error("vulkan: the Vulkan loader is older than 1.2 (found " +
                std::to_string(VK_API_VERSION_MAJOR(api)) + "." +
                std::to_string(VK_API_VERSION_MINOR(api)) + "); kiln needs Vulkan 1.2");

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  if (validation) {
    if (!has_layer(kValidationLayer)) {
      log::warn(std::string("vulkan: KILN_VULKAN_VALIDATION=1 but ") + kValidationLayer +
                " is not installed (Debian: apt install vulkan-validationlayers); running without it");
      validation = false;
    } else if (!has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
      log::warn("vulkan: VK_EXT_debug_utils is missing; validation messages cannot be collected");
      validation = false;
    } else {
      layers.push_back(kValidationLayer);
      extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }
  }
  VkInstanceCreateFlags flags = 0;
  if (has_instance_extension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    // MoltenVK and other non-conformant drivers are listed only when we ask for them.
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = uint32_t(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VkDebugUtilsMessengerCreateInfoEXT messenger = messenger_info();
  if (validation) info.pNext = &messenger;  // also catches vkCreate/DestroyInstance problems
  // Synchronization validation: missing or wrong barriers between launches, copies and host reads.
  const VkValidationFeatureEnableEXT sync_checks = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync_checks;
  if (validation && sync_validation_requested()) {
    if (!has_instance_extension(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME, kValidationLayer))
      throw Error(std::string("vulkan: KILN_VULKAN_VALIDATION=sync, but ") + kValidationLayer +
                  " lacks " + VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    info.enabledExtensionCount = uint32_t(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    messenger.pNext = &features;
  }
  VkResult r = vkCreateInstance(&info, nullptr, &instance_);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    throw Error("vulkan: no Vulkan driver is installed (VK_ERROR_INCOMPATIBLE_DRIVER); on a machine "
                "without a GPU install Mesa's lavapipe (Debian: mesa-vulkan-drivers)");
  check(r, "vkCreateInstance");
  if (validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (!create || create(instance_, &messenger, nullptr, &messenger_) != VK_SUCCESS) {
      vkDestroyInstance(instance_, nullptr);
      throw Error("vulkan: creating the debug-utils messenger failed");
    }
    g_validation_active = true;
  }
}

Instance::~Instance() {
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  vkDestroyInstance(instance_, nullptr);
}

void Instance::submit_message(const std::string& text) const {
  if (!messenger_) return;
  auto submit = reinterpret_cast<PFN_vkSubmitDebugUtilsMessageEXT>(
      vkGetInstanceProcAddr(instance_, "vkSubmitDebugUtilsMessageEXT"));
  if (!submit) return;
  VkDebugUtilsMessengerCallbackDataEXT data{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CALLBACK_DATA_EXT};
  data.pMessage = text.c_str();
  submit(instance_, VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
         VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT, &data);
}

std::vector<VkPhysicalDevice> Instance::usable_devices(std::string* why_not) const {
  uint32_t count = 0;
  check(vkEnumeratePhysicalDevices(instance_, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> all(count);
  check(vkEnumeratePhysicalDevices(instance_, &count, all.data()), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> usable;
  std::string rejected;
  for (VkPhysicalDevice p : all) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(p, &props);
    if (props.apiVersion < VK_API_VERSION_1_2) {
      rejected += std::string(rejected.empty() ? "" : "; ") + props.deviceName + " is Vulkan " +
                  std::to_string(VK_API_VERSION_MAJOR(props.apiVersion)) + "." +
                  std::to_string(VK_API_VERSION_MINOR(props.apiVersion)) + " (kiln needs 1.2)";
      continue;
    }
    if (compute_queue_family(p, nullptr) < 0) {
      rejected += std::string(rejected.empty() ? "" : "; ") + props.deviceName + " has no compute queue";
      continue;
    }
    usable.push_back(p);
  }
  std::stable_sort(usable.begin(), usable.end(), [](VkPhysicalDevice a, VkPhysicalDevice b) {
    VkPhysicalDeviceProperties pa, pb;
    vkGetPhysicalDeviceProperties(a, &pa);
    vkGetPhysicalDeviceProperties(b, &pb);
    return type_rank(pa.deviceType) < type_rank(pb.deviceType);
  });
  if (usable.empty() && why_not)
    *why_not = all.empty() ? "the Vulkan loader found no devices (no GPU driver; on a machine without a "
                             "GPU install Mesa's lavapipe: mesa-vulkan-drivers)"
                           : "no usable Vulkan device: " + rejected;
  return usable;
}

std::string device_name(VkPhysicalDevice physical) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical, &props);
  return props.deviceName;
}

DeviceCaps query_caps(VkPhysicalDevice physical) {
  FeatureChain f;
  query_features(physical, f);
  VkPhysicalDeviceVulkan11Properties v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props2.pNext = &v11;
  vkGetPhysicalDeviceProperties2(physical, &props2);
  const VkPhysicalDeviceLimits& limits = props2.properties.limits;
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(physical, &mem);
  uint32_t timestamp_bits = 0;
  compute_queue_family(physical, &timestamp_bits);

  DeviceCaps c;
  c.f16 = f.v12.shaderFloat16 && f.v11.storageBuffer16BitAccess;
  c.f64 = f.core.features.shaderFloat64;
  c.int64 = f.core.features.shaderInt64;
  c.int16 = f.core.features.shaderInt16 && f.v11.storageBuffer16BitAccess;
  const VkSubgroupFeatureFlags needed =
      VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  c.subgroups = (v11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                (v11.subgroupSupportedOperations & needed) == needed;
  c.subgroup_size = std::max(1u, v11.subgroupSize);
  c.shared_memory_bytes = limits.maxComputeSharedMemorySize;
  // Buffers take 16-byte steps (vulkan_memory.cpp): the largest is the range rounded down to one.
  c.max_buffer_bytes = limits.maxStorageBufferRange & ~VkDeviceSize(15);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      c.memory_bytes = std::max<size_t>(c.memory_bytes, mem.memoryHeaps[i].size);
  for (int i = 0; i < 3; ++i) c.max_workgroup_size[i] = limits.maxComputeWorkGroupSize[i];
  c.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  c.timestamps = limits.timestampPeriod > 0 && timestamp_bits > 0;
  c.indirect_launch = true;  // vkCmdDispatchIndirect is core Vulkan 1.0
  c.is_cpu = props2.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  return c;
}

VulkanDevice::VulkanDevice(VkPhysicalDevice physical, const CapsProfile* profile) : physical_(physical) {
  vkGetPhysicalDeviceProperties(physical, &properties_);
  vkGetPhysicalDeviceMemoryProperties(physical, &memory_properties_);
  caps_ = query_caps(physical);
  name_ = properties_.deviceName;
  if (profile) {
    apply_caps_profile(*profile, properties_.limits, caps_);
    name_ += " as " + profile->name;
  }
  queue_family_ = uint32_t(compute_queue_family(physical, &timestamp_valid_bits_));

  FeatureChain have, want;
  query_features(physical, have);
  select_features(have, want);
  scalar_block_layout_ = want.v12.scalarBlockLayout;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  std::vector<const char*> extensions;
  if (has_device_extension(physical, "VK_KHR_portability_subset"))
    extensions.push_back("VK_KHR_portability_subset");  // required when the device offers it
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &want.core;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue_info;
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  check(vkCreateDevice(physical, &info, nullptr, &device_), "vkCreateDevice");
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
}

VulkanDevice::~VulkanDevice() {
  if (device_) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
  }
}

VkResult VulkanDevice::submit(VkCommandBuffer cmd, VkFence fence) {
  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  info.commandBufferCount = 1;
  info.pCommandBuffers = &cmd;
  VkResult r;
  {
    std::lock_guard lock(queue_mutex_);
    if (!lost_.empty())
      throw DeviceLostError(lost_ + "; it stays lost and runs nothing more (use another device, or a new "
                            "process once the driver has recovered)");
    r = vkQueueSubmit(queue_, 1, &info, fence);
  }
  if (r != VK_ERROR_DEVICE_LOST) check(r, "vkQueueSubmit");
  return r;
}

VkResult VulkanDevice::wait(VkFence fence) {
  VkResult r = vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX);
  if (r == VK_SUCCESS && simulate_loss_.exchange(false)) r = VK_ERROR_DEVICE_LOST;
  if (r != VK_ERROR_DEVICE_LOST) check(r, "vkWaitForFences");
  return r;
}

std::string VulkanDevice::mark_lost(const std::string& what) {
  std::lock_guard lock(queue_mutex_);
  if (lost_.empty()) lost_ = "vulkan: device " + name_ + " was lost (VK_ERROR_DEVICE_LOST) " + what;
  return lost_ + " (the driver gives no fault details: VK_EXT_device_fault is not used)";
}

void VulkanDevice::wait_idle() {
  std::lock_guard lock(queue_mutex_);
  check(vkQueueWaitIdle(queue_), "vkQueueWaitIdle");
}

}  // namespace kiln::vulkan
