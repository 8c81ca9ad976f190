// Device memory for kiln buffers: a sub-allocator that carves large blocks into aligned ranges,
// the VkBuffer-backed kiln::Buffer, and host<->device transfers (direct map or staging copies).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_device.h"

namespace kiln::vulkan {

struct MemoryBlock;

struct Allocation {
  MemoryBlock* block = nullptr;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;
  uint8_t* mapped = nullptr;  // host pointer when the memory is mapped (direct-map mode)
};

class MemoryAllocator {
 public:
  MemoryAllocator(VulkanDevice& device, const VulkanOptions& options);
  ~MemoryAllocator();
  MemoryAllocator(const MemoryAllocator&) = delete;
  MemoryAllocator& operator=(const MemoryAllocator&) = delete;

  // Device-local memory for a storage buffer; throws kiln::Error when the heap is exhausted.
  Allocation allocate(const VkMemoryRequirements& requirements);
  void release(const Allocation& allocation);
  // Host-visible memory (staging), dedicated and mapped.
  Allocation allocate_host(const VkMemoryRequirements& requirements);

  bool direct_map() const { return direct_map_; }
  MemoryStats stats() const;

 private:
  uint32_t pick_type(uint32_t type_bits, VkMemoryPropertyFlags required) const;
  MemoryBlock* new_block(uint32_t type, VkDeviceSize size, bool dedicated, bool map);
  // new_block, after returning the cached blocks to the driver when the first try runs out of memory.
  MemoryBlock* new_block_or_uncache(uint32_t type, VkDeviceSize size, bool dedicated);
  void free_block(MemoryBlock* block);
  MemoryBlock* take_cached(uint32_t type, VkDeviceSize size);
  // Throws when `size` more device memory would pass VulkanOptions::memory_limit_bytes.
  void check_limit(VkDeviceSize size) const;

  VulkanDevice& device_;
  VkDeviceSize block_bytes_;
  VkDeviceSize limit_ = 0;  // VulkanOptions::memory_limit_bytes; 0: none
  bool direct_map_ = false;
  VkMemoryPropertyFlags device_flags_ = 0;
  std::vector<std::unique_ptr<MemoryBlock>> blocks_;
  std::vector<VkDeviceSize> heap_reserved_;
  // Freed dedicated blocks kept for the next big buffer of about their size, oldest first: eager
  // code frees and allocates same-sized activations every call, and a fresh block costs the
  // driver's allocation and first-touch page faults (on lavapipe as much as the kernel itself).
  std::vector<MemoryBlock*> cached_;
  VkDeviceSize cached_bytes_ = 0;
  VkDeviceSize cache_limit_ = 0;
  size_t bytes_in_use_ = 0;
  size_t buffers_ = 0;
  mutable std::mutex mutex_;
};

// A VkBuffer and its memory. Shared between the VulkanBuffer that owns it and the stream batches
// whose launches use it, so a tensor freed while a queued launch still reads it keeps its memory
// until that launch has finished.
struct BufferMemory {
  BufferMemory(VulkanDevice& device, MemoryAllocator& allocator) : device(device), allocator(allocator) {}
  ~BufferMemory();
  BufferMemory(const BufferMemory&) = delete;
  BufferMemory& operator=(const BufferMemory&) = delete;

  // The view texel-buffer bindings read through: [offset, offset + range) as `format`, made on first
  // use and kept until the buffer goes (a queued launch holds the buffer, so its views live too).
  VkBufferView texel_view(VkDeviceSize offset, VkDeviceSize range, VkFormat format);

  VulkanDevice& device;
  MemoryAllocator& allocator;
  VkBuffer buffer = VK_NULL_HANDLE;
  Allocation allocation;

 private:
  std::mutex views_mutex_;
  std::map<std::tuple<VkDeviceSize, VkDeviceSize, VkFormat>, VkBufferView> views_;
};

// A kiln buffer: its own VkBuffer bound to a range of a shared block.
class VulkanBuffer : public Buffer {
 public:
  // Throws kiln::Error (and leaks nothing) past maxStorageBufferRange or the device's memory.
  VulkanBuffer(VulkanDevice& device, MemoryAllocator& allocator, size_t bytes);
  ~VulkanBuffer() override = default;

  VkBuffer handle() const { return memory_->buffer; }
  VkDeviceSize range() const { return range_; }  // bytes rounded up to whole 16-byte words
  uint8_t* mapped() const { return memory_->allocation.mapped; }
  const std::shared_ptr<BufferMemory>& memory() const { return memory_; }
  // A stream batch that has not finished (or a recorded one) still holds this buffer.
  bool in_flight() const { return memory_.use_count() > 1; }

 private:
  VkDeviceSize range_ = 0;
  std::shared_ptr<BufferMemory> memory_;
};

// Upload/download: memcpy when buffers are mapped, else chunked copies through a staging buffer.
class Transfer {
 public:
  Transfer(VulkanDevice& device, MemoryAllocator& allocator);
  ~Transfer();
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  void upload(VulkanBuffer& dst, const void* src, size_t bytes, size_t offset);
  void download(const VulkanBuffer& src, void* dst, size_t bytes, size_t offset);

 private:
  void ensure_staging();
  void copy(VkBuffer from, VkDeviceSize from_offset, VkBuffer to, VkDeviceSize to_offset,
            VkDeviceSize bytes);

  static constexpr VkDeviceSize kStagingBytes = 16ull << 20;
  VulkanDevice& device_;
  MemoryAllocator& allocator_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkBuffer staging_ = VK_NULL_HANDLE;
  Allocation staging_memory_;
  std::mutex mutex_;
};

}  // namespace kiln::vulkan
