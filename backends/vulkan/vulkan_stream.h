// A Vulkan stream: launches recorded into command buffers with only the barriers hazards need,
// record-once/replay-many, fence sync and per-dispatch timestamps.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_device.h"

namespace kiln::vulkan {

class VulkanBuffer;

// Launches outside recording go into an eager batch, submitted at sync() or once it holds
// kEagerBatchLaunches launches (then the next launches record into a second batch while the first
// runs); launches between begin_recording() and end_recording() go into a batch that replay()
// submits again and again. Batches hold the memory of the buffers they use until they have finished
// (or, recorded, until the stream dies), so buffers may be freed while launches are queued; programs
// must outlive the batches that use them.
class CommandStream : public VulkanStream {
 public:
  explicit CommandStream(VulkanDevice& device);
  ~CommandStream() override;

  void launch(const Launch& launch) override;
  void begin_recording() override;
  void end_recording() override;
  void replay() override;
  void sync() override;
  // Timings of the dispatches completed since the previous call, in launch order (call after sync).
  std::vector<KernelTiming> timings() override;
  StreamStats stats() const override { return stats_; }

 private:
  struct Batch;
  void begin(Batch& batch);
  void end(Batch& batch);
  void submit(Batch& batch);
  void wait(Batch& batch);
  std::string describe(const Batch& batch) const;
  void record(Batch& batch, const Launch& launch);
  // The view a texel-buffer binding reads `buffer` through from `offset` on; throws kiln::Error past
  // the device's texel-buffer alignment or size limits.
  VkBufferView texel_view(const std::string& name, size_t binding, const VulkanBuffer& buffer,
                          VkDeviceSize offset, VkFormat format);
  VkDescriptorSet allocate_set(Batch& batch, VkDescriptorSetLayout layout);
  VkQueryPool query_pool_for(Batch& batch, size_t launch_index);

  static constexpr size_t kEagerBatchLaunches = 128;
  std::unique_ptr<Batch> new_batch();
  Batch& eager() { return *eager_[current_eager_]; }

  VulkanDevice& device_;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  std::unique_ptr<Batch> eager_[2];  // eager_[current_eager_] records; the other may be running
  size_t current_eager_ = 0;
  std::unique_ptr<Batch> recorded_;
  enum class Recording { None, Active, Done } recording_ = Recording::None;
  bool timestamps_ = false;
  std::vector<KernelTiming> timings_;
  StreamStats stats_;
};

}  // namespace kiln::vulkan
