// Vulkan instance, physical-device choice, logical device with one compute queue, and the
// capability query behind DeviceCaps. Every other piece of the backend borrows a VulkanDevice.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/vulkan/vulkan_caps_profile.h"

namespace kiln::vulkan {

// Throws kiln::Error("vulkan: <what> failed: VK_ERROR_...") unless `result` is VK_SUCCESS.
void check(VkResult result, const char* what);
const char* result_name(VkResult result);

// Owns a VkInstance (with the validation layer and messenger when KILN_VULKAN_VALIDATION=1).
class Instance {
 public:
  // Throws kiln::Error when there is no Vulkan loader or driver.
  explicit Instance(bool validation);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  bool validation() const { return messenger_ != VK_NULL_HANDLE; }
  // Sends `text` through the debug-utils messenger as a warning (no-op without validation).
  void submit_message(const std::string& text) const;
  // Devices usable by kiln (Vulkan 1.2, a compute queue), best first.
  std::vector<VkPhysicalDevice> usable_devices(std::string* why_not) const;

 private:
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
};

bool validation_requested();       // KILN_VULKAN_VALIDATION=1, or =sync
bool sync_validation_requested();  // KILN_VULKAN_VALIDATION=sync: synchronization validation too
DeviceCaps query_caps(VkPhysicalDevice physical);
std::string device_name(VkPhysicalDevice physical);

// The logical device: one compute queue, the features kiln uses that the device has.
class VulkanDevice {
 public:
  // With a profile, the limits and caps kiln reads are clamped to it (vulkan_caps_profile.h).
  explicit VulkanDevice(VkPhysicalDevice physical, const CapsProfile* profile = nullptr);
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceProperties& properties() const { return properties_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_properties_; }
  const DeviceCaps& caps() const { return caps_; }
  const std::string& name() const { return name_; }
  uint32_t timestamp_valid_bits() const { return timestamp_valid_bits_; }
  bool scalar_block_layout() const { return scalar_block_layout_; }

  // Submits under the queue lock (queues need external synchronization). Returns
  // VK_ERROR_DEVICE_LOST rather than throwing it, so the caller can say what was lost (mark_lost);
  // throws DeviceLostError at once when the device was lost before, and kiln::Error on other
  // failures.
  VkResult submit(VkCommandBuffer cmd, VkFence fence);
  // Waits for `fence`; VK_ERROR_DEVICE_LOST is returned as submit() returns it.
  VkResult wait(VkFence fence);
  void wait_idle();
  // Records that the device is lost (it stays lost) and returns the message: what ran, `what`.
  std::string mark_lost(const std::string& what);
  // Test hook: the next wait reports VK_ERROR_DEVICE_LOST, as a GPU reset or driver crash would.
  void simulate_loss() { simulate_loss_ = true; }

 private:
  VkPhysicalDevice physical_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  uint32_t timestamp_valid_bits_ = 0;
  bool scalar_block_layout_ = false;
  VkPhysicalDeviceProperties properties_{};
  VkPhysicalDeviceMemoryProperties memory_properties_{};
  DeviceCaps caps_;
  std::string name_;
  std::mutex queue_mutex_;
  std::atomic<bool> simulate_loss_{false};
  std::string lost_;  // why the device is lost (under queue_mutex_); empty while it works
};

}  // namespace kiln::vulkan
