// A compute pipeline with its descriptor-set layout (N storage or texel buffers) and push-constant range.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <span>
#include <string>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_device.h"

namespace kiln::vulkan {

// The descriptor type binding `binding` of `layout` takes.
VkDescriptorType descriptor_type(const ProgramLayout& layout, uint32_t binding);

class ComputeProgram : public VulkanProgram {
 public:
  // Builds the pipeline through `cache`; `words` must already be validated.
  ComputeProgram(VulkanDevice& device, VkPipelineCache cache, std::string name,
                 std::span<const uint32_t> words, ProgramLayout layout);
  ~ComputeProgram() override;

  const std::string& name() const override { return name_; }
  const ProgramLayout& layout() const override { return layout_; }
  VkPipeline pipeline() const { return pipeline_; }
  VkPipelineLayout pipeline_layout() const { return pipeline_layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  VulkanDevice& device_;
  std::string name_;
  ProgramLayout layout_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace kiln::vulkan
