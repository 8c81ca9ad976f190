// The block sub-allocator (first fit with coalescing), VulkanBuffer, and upload/download.
#include "backends/vulkan/vulkan_memory.h"

#include <algorithm>
#include <cstring>

#include "core/support/error.h"

namespace kiln::vulkan {

struct MemoryBlock {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint32_t type = 0;
  VkDeviceSize size = 0;
  uint8_t* mapped = nullptr;
  bool dedicated = false;
  bool host = false;  // staging memory: not a kiln buffer, not counted in stats
  std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size of each free range, coalesced
};

namespace {

constexpr VkDeviceSize kMinAlignment = 256;

VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

std::string mib(VkDeviceSize bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / (1 << 20));
  return text;
}

}  // namespace

MemoryAllocator::MemoryAllocator(VulkanDevice& device, const VulkanOptions& options)
    : device_(device),
      block_bytes_(std::max<VkDeviceSize>(options.block_bytes, 1 << 20)),
      limit_(options.memory_limit_bytes) {
  const auto& mem = device.memory_properties();
  heap_reserved_.assign(mem.memoryHeapCount, 0);
  // Direct map when the biggest device-local heap is also host-visible and coherent (lavapipe,
  // integrated GPUs): uploads become memcpy. A small BAR window on a discrete GPU does not count.
  uint32_t biggest_heap = 0;
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if ((mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        mem.memoryHeaps[h].size > mem.memoryHeaps[biggest_heap].size)
      biggest_heap = h;
  const VkMemoryPropertyFlags unified = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                        VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t)
    if ((mem.memoryTypes[t].propertyFlags & unified) == unified &&
        mem.memoryTypes[t].heapIndex == biggest_heap)
      direct_map_ = !options.force_staging;
  device_flags_ = direct_map_ ? unified : VkMemoryPropertyFlags(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  block_bytes_ = std::min<VkDeviceSize>(block_bytes_, mem.memoryHeaps[biggest_heap].size / 4);
  cache_limit_ = std::min<VkDeviceSize>(VkDeviceSize(1) << 30, mem.memoryHeaps[biggest_heap].size / 16);
  if (limit_) {  // a small limit gets blocks and a cache in proportion
    block_bytes_ = std::min(block_bytes_, std::max<VkDeviceSize>(limit_ / 4, 1 << 20));
    cache_limit_ = std::min(cache_limit_, limit_ / 16);
  }
}

MemoryAllocator::~MemoryAllocator() {
  for (auto& block : blocks_) vkFreeMemory(device_.handle(), block->memory, nullptr);
}

uint32_t MemoryAllocator::pick_type(uint32_t type_bits, VkMemoryPropertyFlags required) const {
  const auto& mem = device_.memory_properties();
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t)
    if ((type_bits & (1u << t)) && (mem.memoryTypes[t].propertyFlags & required) == required)
      return t;
  // Some devices have no DEVICE_LOCAL type for a buffer; any allowed type still works.
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t)
    if (type_bits & (1u << t)) return t;
  throw Error("vulkan: no memory type fits a storage buffer on " + device_.name());
}

MemoryBlock* MemoryAllocator::new_block(uint32_t type, VkDeviceSize size, bool dedicated, bool map) {
  const auto& mem = device_.memory_properties();
  uint32_t heap = mem.memoryTypes[type].heapIndex;
  VkDeviceSize heap_size = mem.memoryHeaps[heap].size;
  // Check against the heap ourselves: software drivers overcommit and would fail much later.
  if (heap_reserved_[heap] + size > heap_size)
    throw OutOfMemoryError("vulkan: out of device memory on " + device_.name() + ": need " + mib(size) +
                           " more, " + mib(heap_reserved_[heap]) + " of the " + mib(heap_size) +
                           " heap already allocated; free buffers or use smaller batches");
  VkMemoryAllocateInfo info{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  info.allocationSize = size;
  info.memoryTypeIndex = type;
  auto block = std::make_unique<MemoryBlock>();
  VkResult r = vkAllocateMemory(device_.handle(), &info, nullptr, &block->memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw OutOfMemoryError("vulkan: out of device memory on " + device_.name() + " allocating " +
                           mib(size) + " (" + result_name(r) + "); " + mib(heap_reserved_[heap]) +
                           " already allocated");
  check(r, "vkAllocateMemory");
  if (map) {
    void* ptr = nullptr;
    r = vkMapMemory(device_.handle(), block->memory, 0, VK_WHOLE_SIZE, 0, &ptr);
    if (r != VK_SUCCESS) {
      vkFreeMemory(device_.handle(), block->memory, nullptr);
      check(r, "vkMapMemory");
    }
    block->mapped = static_cast<uint8_t*>(ptr);
  }
  block->type = type;
  block->size = size;
  block->dedicated = dedicated;
  block->free[0] = size;
  heap_reserved_[heap] += size;
  blocks_.push_back(std::move(block));
  return blocks_.back().get();
}

void MemoryAllocator::check_limit(VkDeviceSize size) const {
  if (!limit_) return;
  VkDeviceSize reserved = 0;  // device memory for buffers; staging does not count
  for (const auto& b : blocks_)
    if (!b->host) reserved += b->size;
  if (reserved + size > limit_)
    throw OutOfMemoryError("vulkan: out of device memory on " + device_.name() + ": need " + mib(size) +
                           " more, " + mib(reserved) + " of the " + mib(limit_) +
                           " limit (KILN_VULKAN_MEMORY_LIMIT) already allocated; free tensors, use "
                           "smaller batches or raise the limit");
}

MemoryBlock* MemoryAllocator::new_block_or_uncache(uint32_t type, VkDeviceSize size, bool dedicated) {
  try {
    check_limit(size);
    return new_block(type, size, dedicated, direct_map_);
  } catch (const Error&) {
    if (cached_.empty()) throw;
  }
  for (MemoryBlock* b : cached_) free_block(b);
  cached_.clear();
  cached_bytes_ = 0;
  check_limit(size);
  return new_block(type, size, dedicated, direct_map_);
}

// The smallest cached block that holds `size` without wasting more than an eighth of it.
MemoryBlock* MemoryAllocator::take_cached(uint32_t type, VkDeviceSize size) {
  auto best = cached_.end();
  for (auto it = cached_.begin(); it != cached_.end(); ++it)
    if ((*it)->type == type && (*it)->size >= size && (*it)->size <= size + size / 8 &&
        (best == cached_.end() || (*it)->size < (*best)->size))
      best = it;
  if (best == cached_.end()) return nullptr;
  MemoryBlock* block = *best;
  cached_.erase(best);
  cached_bytes_ -= block->size;
  return block;
}

void MemoryAllocator::free_block(MemoryBlock* block) {
  uint32_t heap = device_.memory_properties().memoryTypes[block->type].heapIndex;
  heap_reserved_[heap] -= block->size;
  vkFreeMemory(device_.handle(), block->memory, nullptr);  // unmaps implicitly
  auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](auto& b) { return b.get() == block; });
  blocks_.erase(it);
}

Allocation MemoryAllocator::allocate(const VkMemoryRequirements& req) {
  std::lock_guard lock(mutex_);
  uint32_t type = pick_type(req.memoryTypeBits, device_flags_);
  VkDeviceSize alignment = std::max(req.alignment, kMinAlignment);
  VkDeviceSize size = align_up(req.size, kMinAlignment);
  auto take = [&](MemoryBlock* block, VkDeviceSize offset) {
    Allocation a{block, block->memory, offset, size, block->mapped ? block->mapped + offset : nullptr};
    bytes_in_use_ += size;
    ++buffers_;
    return a;
  };
  if (size > block_bytes_ / 2) {  // big tensors get their own allocation instead of fragmenting blocks
    MemoryBlock* block = take_cached(type, size);
    if (!block) block = new_block_or_uncache(type, size, true);
    block->free.clear();
    return take(block, 0);
  }
  for (auto& b : blocks_) {
    if (b->dedicated || b->type != type || !b->memory) continue;
    for (auto it = b->free.begin(); it != b->free.end(); ++it) {
      VkDeviceSize start = align_up(it->first, alignment);
      VkDeviceSize end = it->first + it->second;
      if (start + size > end) continue;
      VkDeviceSize range_start = it->first;
      b->free.erase(it);
      if (start > range_start) b->free[range_start] = start - range_start;
      if (start + size < end) b->free[start + size] = end - (start + size);
      return take(b.get(), start);
    }
  }
  MemoryBlock* block = new_block_or_uncache(type, block_bytes_, false);
  block->free.clear();
  if (size < block_bytes_) block->free[size] = block_bytes_ - size;
  return take(block, 0);
}

void MemoryAllocator::release(const Allocation& a) {
  if (!a.block) return;
  std::lock_guard lock(mutex_);
  MemoryBlock* block = a.block;
  if (!block->host) {
    bytes_in_use_ -= a.size;
    --buffers_;
  }
  if (block->dedicated) {
    if (block->host || block->size > cache_limit_) {
      free_block(block);
      return;
    }
    cached_.push_back(block);
    cached_bytes_ += block->size;
    while (cached_bytes_ > cache_limit_) {
      cached_bytes_ -= cached_.front()->size;
      free_block(cached_.front());
      cached_.erase(cached_.begin());
    }
    return;
  }
  auto [it, inserted] = block->free.emplace(a.offset, a.size);
  (void)inserted;
  auto next = std::next(it);
  if (next != block->free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    block->free.erase(next);
  }
  if (it != block->free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      block->free.erase(it);
    }
  }
  // Keep at most one empty shared block around for the next allocation; return the others.
  bool empty = block->free.size() == 1 && block->free.begin()->second == block->size;
  if (!empty) return;
  for (auto& b : blocks_)
    if (b.get() != block && !b->dedicated && b->free.size() == 1 && b->free.begin()->second == b->size) {
      free_block(block);
      return;
    }
}

Allocation MemoryAllocator::allocate_host(const VkMemoryRequirements& req) {
  std::lock_guard lock(mutex_);
  const VkMemoryPropertyFlags visible =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = pick_type(req.memoryTypeBits, visible | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  const auto& flags = device_.memory_properties().memoryTypes[type].propertyFlags;
  if ((flags & visible) != visible) type = pick_type(req.memoryTypeBits, visible);
  MemoryBlock* block = new_block(type, req.size, true, true);
  block->free.clear();
  block->host = true;
  return Allocation{block, block->memory, 0, req.size, block->mapped};
}

MemoryStats MemoryAllocator::stats() const {
  std::lock_guard lock(mutex_);
  MemoryStats s;
  s.device_allocations = blocks_.size();
  s.buffers = buffers_;
  for (auto& b : blocks_) s.bytes_reserved += b->size;
  s.bytes_in_use = bytes_in_use_;
  s.bytes_cached = cached_bytes_;
  s.direct_map = direct_map_;
  return s;
}

VkBufferView BufferMemory::texel_view(VkDeviceSize offset, VkDeviceSize range, VkFormat format) {
  std::lock_guard lock(views_mutex_);
  auto key = std::tuple{offset, range, format};
  if (auto it = views_.find(key); it != views_.end()) return it->second;
  VkBufferViewCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  info.buffer = buffer;
  info.format = format;
  info.offset = offset;
  info.range = range;
  VkBufferView view;
  check(vkCreateBufferView(device.handle(), &info, nullptr, &view), "vkCreateBufferView");
  views_.emplace(key, view);
  return view;
}

BufferMemory::~BufferMemory() {
  for (const auto& [key, view] : views_) vkDestroyBufferView(device.handle(), view, nullptr);
  if (buffer) vkDestroyBuffer(device.handle(), buffer, nullptr);
  allocator.release(allocation);
}

VulkanBuffer::VulkanBuffer(VulkanDevice& device, MemoryAllocator& allocator, size_t bytes)
    : Buffer(bytes), memory_(std::make_shared<BufferMemory>(device, allocator)) {
  const auto& limits = device.properties().limits;
  // 16-byte steps: vec4 texel views cover the last elements, and vec4 pointwise kernels store a
  // whole vec4 at the tensor's end (core/kernel/emit.cpp).
  range_ = align_up(std::max<VkDeviceSize>(bytes, 1), 16);
  if (range_ > limits.maxStorageBufferRange)
    throw Error("vulkan: cannot allocate a " + mib(bytes) + " (" + std::to_string(bytes) +
                " bytes) buffer on " + device.name() + ": a storage buffer may be at most " +
                mib(limits.maxStorageBufferRange) +
                " (maxStorageBufferRange); split the tensor or use a smaller batch");
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = range_;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
               VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  // On a throw below, memory_'s destructor destroys whatever was created.
  check(vkCreateBuffer(device.handle(), &info, nullptr, &memory_->buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device.handle(), memory_->buffer, &req);
  Allocation allocation = allocator.allocate(req);
  VkResult r = vkBindBufferMemory(device.handle(), memory_->buffer, allocation.memory, allocation.offset);
  if (r != VK_SUCCESS) {
    allocator.release(allocation);
    check(r, "vkBindBufferMemory");
  }
  memory_->allocation = allocation;
}

Transfer::Transfer(VulkanDevice& device, MemoryAllocator& allocator) : device_(device), allocator_(allocator) {}

Transfer::~Transfer() {
  VkDevice d = device_.handle();
  if (fence_) vkDestroyFence(d, fence_, nullptr);
  if (pool_) vkDestroyCommandPool(d, pool_, nullptr);
  if (staging_) vkDestroyBuffer(d, staging_, nullptr);
  allocator_.release(staging_memory_);
}

void Transfer::ensure_staging() {
  if (staging_) return;
  VkDevice d = device_.handle();
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = device_.queue_family();
  check(vkCreateCommandPool(d, &pool_info, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cmd_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cmd_info.commandPool = pool_;
  cmd_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cmd_info.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(d, &cmd_info, &cmd_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(d, &fence_info, nullptr, &fence_), "vkCreateFence");
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = kStagingBytes;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  check(vkCreateBuffer(d, &info, nullptr, &staging_), "vkCreateBuffer(staging)");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(d, staging_, &req);
  staging_memory_ = allocator_.allocate_host(req);
  check(vkBindBufferMemory(d, staging_, staging_memory_.memory, 0), "vkBindBufferMemory(staging)");
}

void Transfer::copy(VkBuffer from, VkDeviceSize from_offset, VkBuffer to, VkDeviceSize to_offset,
                    VkDeviceSize bytes) {
  check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(cmd_, &begin), "vkBeginCommandBuffer");
  VkBufferCopy region{from_offset, to_offset, bytes};
  vkCmdCopyBuffer(cmd_, from, to, 1, &region);
  // Make the copy's writes visible to the host (download) and to later shaders (upload).
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                       &barrier, 0, nullptr, 0, nullptr);
  check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  check(vkResetFences(device_.handle(), 1, &fence_), "vkResetFences");
  const bool lost = device_.submit(cmd_, fence_) == VK_ERROR_DEVICE_LOST ||
                    device_.wait(fence_) == VK_ERROR_DEVICE_LOST;
  if (lost) throw DeviceLostError(device_.mark_lost("during a staging copy"));
}

void Transfer::upload(VulkanBuffer& dst, const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > dst.bytes())
    throw Error("vulkan: upload of " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " overruns a " + std::to_string(dst.bytes()) + "-byte buffer");
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  device_.wait_idle();  // kernels still reading or writing the buffer must finish first
  if (dst.mapped()) {
    std::memcpy(dst.mapped() + offset, src, bytes);  // coherent: visible at the next submit
    return;
  }
  ensure_staging();
  const uint8_t* from = static_cast<const uint8_t*>(src);
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    size_t n = std::min<size_t>(kStagingBytes, bytes - done);
    std::memcpy(staging_memory_.mapped, from + done, n);
    copy(staging_, 0, dst.handle(), offset + done, n);
  }
}

void Transfer::download(const VulkanBuffer& src, void* dst, size_t bytes, size_t offset) {
  if (offset + bytes > src.bytes())
    throw Error("vulkan: download of " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " overruns a " + std::to_string(src.bytes()) + "-byte buffer");
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  device_.wait_idle();
  if (src.mapped()) {
    std::memcpy(dst, src.mapped() + offset, bytes);
    return;
  }
  ensure_staging();
  uint8_t* to = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    size_t n = std::min<size_t>(kStagingBytes, bytes - done);
    copy(src.handle(), offset + done, staging_, 0, n);
    std::memcpy(to + done, staging_memory_.mapped, n);
  }
}

}  // namespace kiln::vulkan
