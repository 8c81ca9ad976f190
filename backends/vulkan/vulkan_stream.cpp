// Command recording for launches: descriptor sets, push constants, dispatches, hazard-driven
// barriers, timestamp queries, and the fences behind sync().
#include "backends/vulkan/vulkan_stream.h"

#include <cstring>

#include "backends/vulkan/vulkan_memory.h"
#include "backends/vulkan/vulkan_program.h"
#include "core/support/error.h"

namespace kiln::vulkan {
namespace {

constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kDescriptorsPerPool = kSetsPerPool * 8;
constexpr uint32_t kLaunchesPerQueryPool = 256;  // two timestamps each

void global_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

// What a barrier before a dispatch waits for: its shader's reads and writes, and the group counts
// an indirect dispatch reads (Launch::indirect).
constexpr VkPipelineStageFlags kComputeOrIndirectStages =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT;
constexpr VkAccessFlags kComputeOrIndirectReads = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT;

}  // namespace

struct CommandStream::Batch {
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools;
  size_t current_pool = 0;
  std::vector<VkQueryPool> query_pools;
  size_t query_pools_reset = 0;  // pools reset so far in this recording (reset before first use)
  std::vector<std::string> names;  // program name per launch, for timings
  std::set<VkBuffer> read_since_barrier;
  std::set<VkBuffer> written_since_barrier;
  std::vector<std::shared_ptr<BufferMemory>> held;  // buffers used, kept alive until finished
  bool open = false;
  bool pending = false;
};

std::unique_ptr<CommandStream::Batch> CommandStream::new_batch() {
  auto batch = std::make_unique<Batch>();
  VkCommandBufferAllocateInfo cmd_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cmd_info.commandPool = command_pool_;
  cmd_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cmd_info.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(device_.handle(), &cmd_info, &batch->cmd), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(device_.handle(), &fence_info, nullptr, &batch->fence), "vkCreateFence");
  return batch;
}

CommandStream::CommandStream(VulkanDevice& device) : device_(device) {
  timestamps_ = device.caps().timestamps;
  VkCommandPoolCreateInfo info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  info.queueFamilyIndex = device.queue_family();
  check(vkCreateCommandPool(device.handle(), &info, nullptr, &command_pool_), "vkCreateCommandPool");
  eager_[0] = new_batch();
  eager_[1] = new_batch();
  recorded_ = new_batch();
}

CommandStream::~CommandStream() {
  VkDevice d = device_.handle();
  for (auto* batch : {eager_[0].get(), eager_[1].get(), recorded_.get()}) {
    if (!batch) continue;
    if (batch->pending) vkWaitForFences(d, 1, &batch->fence, VK_TRUE, UINT64_MAX);
    batch->held.clear();  // frees buffers whose owners went away while the batch ran
    vkDestroyFence(d, batch->fence, nullptr);
    for (VkDescriptorPool p : batch->descriptor_pools) vkDestroyDescriptorPool(d, p, nullptr);
    for (VkQueryPool q : batch->query_pools) vkDestroyQueryPool(d, q, nullptr);
  }
  vkDestroyCommandPool(d, command_pool_, nullptr);  // frees the command buffers
}

void CommandStream::begin(Batch& batch) {
  wait(batch);
  check(vkResetCommandBuffer(batch.cmd, 0), "vkResetCommandBuffer");
  for (VkDescriptorPool p : batch.descriptor_pools) vkResetDescriptorPool(device_.handle(), p, 0);
  batch.current_pool = 0;
  batch.query_pools_reset = 0;
  batch.names.clear();
  batch.held.clear();
  batch.read_since_barrier.clear();
  batch.written_since_barrier.clear();
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(batch.cmd, &begin), "vkBeginCommandBuffer");
  // Orders this batch after everything submitted before it (earlier batches, replays, uploads).
  global_barrier(batch.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                 kComputeOrIndirectStages, kComputeOrIndirectReads | VK_ACCESS_SHADER_WRITE_BIT);
  batch.open = true;
}

void CommandStream::end(Batch& batch) {
  // Results become visible to host reads (direct map) and transfer reads (staging downloads).
  global_barrier(batch.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT);
  check(vkEndCommandBuffer(batch.cmd), "vkEndCommandBuffer");
  batch.open = false;
}

// "3 launches, the last 'fused_mul_log'": what a batch runs, for a lost device's message.
std::string CommandStream::describe(const Batch& batch) const {
  if (batch.names.empty()) return "a batch of no launches";
  return std::to_string(batch.names.size()) + (batch.names.size() == 1 ? " launch" : " launches") +
         ", the last '" + batch.names.back() + "'";
}

void CommandStream::submit(Batch& batch) {
  check(vkResetFences(device_.handle(), 1, &batch.fence), "vkResetFences");
  const std::string last = batch.names.empty() ? "" : batch.names.back();
  VkResult r;
  try {
    r = device_.submit(batch.cmd, batch.fence);
  } catch (const DeviceLostError& e) {  // lost before: this batch does not run
    throw DeviceLostError(std::string(e.what()) + "; not run: " + describe(batch), last);
  }
  if (r == VK_ERROR_DEVICE_LOST)
    throw DeviceLostError(device_.mark_lost("when " + describe(batch) + " was submitted"), last);
  batch.pending = true;
  ++stats_.submits;
}

void CommandStream::wait(Batch& batch) {
  if (!batch.pending) return;
  batch.pending = false;  // a lost device does not run it either
  if (device_.wait(batch.fence) == VK_ERROR_DEVICE_LOST)
    throw DeviceLostError(device_.mark_lost("while " + describe(batch) + " ran"),
                          batch.names.empty() ? "" : batch.names.back());
  if (&batch != recorded_.get()) batch.held.clear();  // a recorded batch runs again at replay()
  if (!timestamps_ || batch.names.empty()) return;
  const double ns_per_tick = device_.properties().limits.timestampPeriod;
  const uint64_t mask = device_.timestamp_valid_bits() >= 64
                            ? ~0ull
                            : (1ull << device_.timestamp_valid_bits()) - 1;
  for (size_t pool = 0; pool * kLaunchesPerQueryPool < batch.names.size(); ++pool) {
    size_t first = pool * kLaunchesPerQueryPool;
    size_t n = std::min<size_t>(kLaunchesPerQueryPool, batch.names.size() - first);
    std::vector<uint64_t> ticks(2 * n);
    check(vkGetQueryPoolResults(device_.handle(), batch.query_pools[pool], 0, uint32_t(2 * n),
                                ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
    for (size_t i = 0; i < n; ++i) {
      uint64_t start = ticks[2 * i] & mask, stop = ticks[2 * i + 1] & mask;
      uint64_t elapsed = (stop - start) & mask;  // survives a counter wrap
      // The start is written after the work before it completes: with barriers between dependent
      // dispatches, that is when this one could begin.
      timings_.push_back({batch.names[first + i], double(elapsed) * ns_per_tick / 1000.0,
                          double(start) * ns_per_tick / 1000.0});
    }
  }
}

VkDescriptorSet CommandStream::allocate_set(Batch& batch, VkDescriptorSetLayout layout) {
  VkDevice d = device_.handle();
  for (;; ++batch.current_pool) {
    if (batch.current_pool == batch.descriptor_pools.size()) {
      const VkDescriptorPoolSize sizes[] = {
          {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kDescriptorsPerPool},
          {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, kDescriptorsPerPool},
          {VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER, kDescriptorsPerPool}};
      VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      info.maxSets = kSetsPerPool;
      info.poolSizeCount = 3;
      info.pPoolSizes = sizes;
      VkDescriptorPool pool;
      check(vkCreateDescriptorPool(d, &info, nullptr, &pool), "vkCreateDescriptorPool");
      batch.descriptor_pools.push_back(pool);
    }
    VkDescriptorSetAllocateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    info.descriptorPool = batch.descriptor_pools[batch.current_pool];
    info.descriptorSetCount = 1;
    info.pSetLayouts = &layout;
    VkDescriptorSet set;
    VkResult r = vkAllocateDescriptorSets(d, &info, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
      check(r, "vkAllocateDescriptorSets");
  }
}

VkQueryPool CommandStream::query_pool_for(Batch& batch, size_t launch_index) {
  size_t pool = launch_index / kLaunchesPerQueryPool;
  if (pool == batch.query_pools.size()) {
    VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = 2 * kLaunchesPerQueryPool;
    VkQueryPool q;
    check(vkCreateQueryPool(device_.handle(), &info, nullptr, &q), "vkCreateQueryPool");
    batch.query_pools.push_back(q);
  }
  if (pool == batch.query_pools_reset) {
    vkCmdResetQueryPool(batch.cmd, batch.query_pools[pool], 0, 2 * kLaunchesPerQueryPool);
    ++batch.query_pools_reset;
  }
  return batch.query_pools[pool];
}

VkBufferView CommandStream::texel_view(const std::string& name, size_t binding, const VulkanBuffer& buffer,
                                       VkDeviceSize offset, VkFormat format) {
  const auto& limits = device_.properties().limits;
  const VkDeviceSize texel = format == VK_FORMAT_R32G32B32A32_SFLOAT || format == VK_FORMAT_R32G32B32A32_SINT ||
                                     format == VK_FORMAT_R32G32B32A32_UINT
                                 ? 16
                                 : 4;
  if (offset % limits.minTexelBufferOffsetAlignment != 0)
    throw Error("vulkan: launch of '" + name + "' reads buffer " + std::to_string(binding) +
                " as a texel buffer at offset " + std::to_string(offset) + ", not a multiple of the device's " +
                std::to_string(limits.minTexelBufferOffsetAlignment) + "-byte texel-buffer alignment");
  const VkDeviceSize range = (buffer.range() - offset) / texel * texel;
  if (range / texel > limits.maxTexelBufferElements)
    throw Error("vulkan: launch of '" + name + "' reads buffer " + std::to_string(binding) + " (" +
                std::to_string(range / texel) + " elements) as a texel buffer; " + device_.name() +
                " allows " + std::to_string(limits.maxTexelBufferElements) +
                " (maxTexelBufferElements): split the tensor");
  return buffer.memory()->texel_view(offset, range, format);
}

void CommandStream::record(Batch& batch, const Launch& launch) {
  auto* program = dynamic_cast<const ComputeProgram*>(launch.program);
  if (!program) throw Error("vulkan: launch needs a program compiled by this Vulkan backend");
  const ProgramLayout& layout = program->layout();
  const std::string& name = program->name();
  if (launch.buffers.size() != layout.buffers)
    throw Error("vulkan: launch of '" + name + "' gave " + std::to_string(launch.buffers.size()) +
                " buffers; the kernel binds " + std::to_string(layout.buffers));
  if (launch.push_constants.size() != layout.push_constant_bytes)
    throw Error("vulkan: launch of '" + name + "' gave " + std::to_string(launch.push_constants.size()) +
                " bytes of push constants; the kernel's block is " +
                std::to_string(layout.push_constant_bytes) + " bytes");
  const auto& limits = device_.properties().limits;
  for (int i = 0; i < 3; ++i)
    if (launch.groups[i] > limits.maxComputeWorkGroupCount[i])
      throw Error("vulkan: launch of '" + name + "' asks for " + std::to_string(launch.groups[i]) +
                  " workgroups in dimension " + std::to_string(i) + "; " + device_.name() +
                  " allows " + std::to_string(limits.maxComputeWorkGroupCount[i]));
  if (!launch.offsets.empty() && launch.offsets.size() != launch.buffers.size())
    throw Error("vulkan: launch of '" + name + "' gave " + std::to_string(launch.offsets.size()) +
                " offsets for " + std::to_string(launch.buffers.size()) + " buffers");
  for (size_t i = 0; i < launch.offsets.size(); ++i) {
    if (launch.offsets[i] % limits.minStorageBufferOffsetAlignment != 0)
      throw Error("vulkan: launch of '" + name + "' binds buffer " + std::to_string(i) + " at offset " +
                  std::to_string(launch.offsets[i]) + ", not a multiple of the device's " +
                  std::to_string(limits.minStorageBufferOffsetAlignment) + "-byte alignment");
    if (launch.offsets[i] >= launch.buffers[i]->bytes())
      throw Error("vulkan: launch of '" + name + "' binds buffer " + std::to_string(i) + " at offset " +
                  std::to_string(launch.offsets[i]) + ", past its " +
                  std::to_string(launch.buffers[i]->bytes()) + " bytes");
  }
  std::vector<const VulkanBuffer*> buffers;
  for (Buffer* b : launch.buffers) {
    auto* vb = dynamic_cast<const VulkanBuffer*>(b);
    if (!vb) throw Error("vulkan: launch of '" + name + "' got a buffer not allocated by a Vulkan backend");
    buffers.push_back(vb);
  }
  const VulkanBuffer* indirect = nullptr;
  if (launch.indirect) {
    indirect = dynamic_cast<const VulkanBuffer*>(launch.indirect);
    if (!indirect)
      throw Error("vulkan: launch of '" + name +
                  "' reads its group counts from a buffer not allocated by a Vulkan backend");
    if (launch.indirect_offset % 4 != 0 || launch.indirect_offset + 12 > launch.indirect->bytes())
      throw Error("vulkan: launch of '" + name + "' reads its group counts at byte " +
                  std::to_string(launch.indirect_offset) + " of a " + std::to_string(launch.indirect->bytes()) +
                  "-byte buffer (needs a multiple of 4 with 12 bytes inside it)");
  }
  if (!batch.open) begin(batch);

  // A barrier only where this dispatch touches what an earlier one wrote (RAW, WAW) or writes
  // what an earlier one read (WAR); independent dispatches may overlap.
  bool hazard = false;
  for (size_t i = 0; i < buffers.size(); ++i) {
    VkBuffer h = buffers[i]->handle();
    if (batch.written_since_barrier.count(h)) hazard = true;
    if (layout.buffer_written[i] && batch.read_since_barrier.count(h)) hazard = true;
  }
  if (indirect && batch.written_since_barrier.count(indirect->handle())) hazard = true;
  if (hazard) {
    global_barrier(batch.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   kComputeOrIndirectStages, kComputeOrIndirectReads | VK_ACCESS_SHADER_WRITE_BIT);
    batch.read_since_barrier.clear();
    batch.written_since_barrier.clear();
    ++stats_.barriers;
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    batch.held.push_back(buffers[i]->memory());
    if (layout.buffer_read[i]) batch.read_since_barrier.insert(buffers[i]->handle());
    if (layout.buffer_written[i]) batch.written_since_barrier.insert(buffers[i]->handle());
  }
  if (indirect) {
    batch.held.push_back(indirect->memory());
    batch.read_since_barrier.insert(indirect->handle());
  }

  VkCommandBuffer cmd = batch.cmd;
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, program->pipeline());
  if (layout.buffers > 0) {
    VkDescriptorSet set = allocate_set(batch, program->set_layout());
    std::vector<VkDescriptorBufferInfo> infos(buffers.size());
    std::vector<VkBufferView> views(buffers.size());
    std::vector<VkWriteDescriptorSet> writes(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) {
      VkDeviceSize offset = launch.offsets.empty() ? 0 : launch.offsets[i];
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = set;
      writes[i].dstBinding = uint32_t(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = descriptor_type(layout, uint32_t(i));
      if (writes[i].descriptorType == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER) {
        infos[i] = {buffers[i]->handle(), offset, buffers[i]->range() - offset};
        writes[i].pBufferInfo = &infos[i];
      } else {
        views[i] = texel_view(name, i, *buffers[i], offset, VkFormat(layout.texel_format[i]));
        writes[i].pTexelBufferView = &views[i];
      }
    }
    vkUpdateDescriptorSets(device_.handle(), uint32_t(writes.size()), writes.data(), 0, nullptr);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, program->pipeline_layout(), 0, 1,
                            &set, 0, nullptr);
  }
  if (!launch.push_constants.empty())
    vkCmdPushConstants(cmd, program->pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       uint32_t(launch.push_constants.size()), launch.push_constants.data());
  size_t index = batch.names.size();
  VkQueryPool queries = timestamps_ ? query_pool_for(batch, index) : VK_NULL_HANDLE;
  uint32_t query = uint32_t(2 * (index % kLaunchesPerQueryPool));
  // Bottom-of-pipe on both sides: the start stamp lands once earlier work has drained.
  if (queries) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, query);
  if (indirect) vkCmdDispatchIndirect(cmd, indirect->handle(), launch.indirect_offset);
  else vkCmdDispatch(cmd, launch.groups[0], launch.groups[1], launch.groups[2]);
  if (queries) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, query + 1);
  batch.names.push_back(name);
  ++stats_.launches;
}

void CommandStream::launch(const Launch& launch) {
  if (recording_ == Recording::Active) {
    record(*recorded_, launch);
    return;
  }
  record(eager(), launch);
  if (eager().names.size() >= kEagerBatchLaunches) {
    // Start the device on what is queued and keep recording into the other batch; bounds the
    // memory held by queued launches and overlaps recording with execution.
    end(eager());
    submit(eager());
    current_eager_ ^= 1;
  }
}

void CommandStream::begin_recording() {
  if (recording_ == Recording::Active) throw Error("vulkan: begin_recording() while already recording");
  begin(*recorded_);
  recording_ = Recording::Active;
}

void CommandStream::end_recording() {
  if (recording_ != Recording::Active) throw Error("vulkan: end_recording() without begin_recording()");
  end(*recorded_);
  recording_ = Recording::Done;
}

void CommandStream::replay() {
  if (recording_ != Recording::Done)
    throw Error(recording_ == Recording::Active ? "vulkan: replay() before end_recording()"
                                                : "vulkan: replay() with nothing recorded");
  if (eager().open) {  // launches made before replay() run before it
    end(eager());
    submit(eager());
    current_eager_ ^= 1;
  }
  wait(*recorded_);  // one command buffer can be pending only once
  submit(*recorded_);
}

void CommandStream::sync() {
  if (eager().open) {
    end(eager());
    submit(eager());
    current_eager_ ^= 1;
  }
  // The batch now current was submitted before the other one: wait in submission order so the
  // timings come out in launch order.
  wait(eager());
  wait(*eager_[current_eager_ ^ 1]);
  wait(*recorded_);
}

std::vector<KernelTiming> CommandStream::timings() {
  std::vector<KernelTiming> out;
  out.swap(timings_);
  return out;
}

}  // namespace kiln::vulkan
