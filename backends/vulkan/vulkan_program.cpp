// SPIR-V interface reflection (bindings, access, push-constant size) and pipeline creation.
#include "backends/vulkan/vulkan_program.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "backends/vulkan/vulkan_compiler.h"
#include "core/support/error.h"

namespace kiln::vulkan {
namespace {

// The few SPIR-V enumerants reflection needs (spirv.h values).
enum Op : uint32_t {
  OpExecutionMode = 16, OpTypeInt = 21, OpTypeFloat = 22, OpTypeVector = 23, OpTypeMatrix = 24,
  OpTypeArray = 28, OpTypeRuntimeArray = 29, OpTypeStruct = 30, OpTypePointer = 32,
  OpConstant = 43, OpVariable = 59, OpDecorate = 71, OpMemberDecorate = 72,
};
enum Decoration : uint32_t {
  DecBlock = 2, DecBufferBlock = 3, DecArrayStride = 6, DecMatrixStride = 7, DecNonWritable = 24,
  DecNonReadable = 25, DecBinding = 33, DecDescriptorSet = 34, DecOffset = 35,
};
enum StorageClass : uint32_t { ScUniformConstant = 0, ScUniform = 2, ScPushConstant = 9, ScStorageBuffer = 12 };
constexpr uint32_t kExecutionModeLocalSize = 17;

struct Module {
  std::map<uint32_t, std::vector<uint32_t>> types;      // id -> the defining instruction
  std::map<uint32_t, uint32_t> constants;               // id -> 32-bit value
  std::map<uint32_t, std::map<uint32_t, uint32_t>> decorations;  // id -> decoration -> operand
  std::map<std::pair<uint32_t, uint32_t>, std::map<uint32_t, uint32_t>> member_decorations;
  std::vector<std::array<uint32_t, 3>> variables;       // result type, id, storage class
  std::array<uint32_t, 3> local_size{1, 1, 1};
};

Module parse(const std::string& name, std::span<const uint32_t> words) {
  if (words.size() < 5 || words[0] != 0x07230203)
    throw Error("vulkan: '" + name + "' is not a SPIR-V module (bad magic number)");
  Module m;
  for (size_t i = 5; i < words.size();) {
    uint32_t count = words[i] >> 16, op = words[i] & 0xffff;
    if (count == 0 || i + count > words.size())
      throw Error("vulkan: '" + name + "' has a truncated SPIR-V instruction at word " + std::to_string(i));
    std::span<const uint32_t> in = words.subspan(i, count);
    switch (op) {
      case OpTypeInt: case OpTypeFloat: case OpTypeVector: case OpTypeMatrix: case OpTypeArray:
      case OpTypeRuntimeArray: case OpTypeStruct: case OpTypePointer:
        m.types[in[1]] = std::vector<uint32_t>(in.begin(), in.end());
        break;
      case OpConstant:
        if (count >= 4) m.constants[in[2]] = in[3];
        break;
      case OpVariable:
        m.variables.push_back({in[1], in[2], in[3]});
        break;
      case OpDecorate:
        m.decorations[in[1]][in[2]] = count > 3 ? in[3] : 1;
        break;
      case OpMemberDecorate:
        m.member_decorations[{in[1], in[2]}][in[3]] = count > 4 ? in[4] : 1;
        break;
      case OpExecutionMode:
        if (in[2] == kExecutionModeLocalSize && count >= 6) m.local_size = {in[3], in[4], in[5]};
        break;
      default: break;
    }
    i += count;
  }
  return m;
}

bool decorated(const Module& m, uint32_t id, uint32_t decoration) {
  auto it = m.decorations.find(id);
  return it != m.decorations.end() && it->second.count(decoration);
}

uint32_t decoration_value(const Module& m, uint32_t id, uint32_t decoration, uint32_t fallback) {
  auto it = m.decorations.find(id);
  if (it == m.decorations.end()) return fallback;
  auto d = it->second.find(decoration);
  return d == it->second.end() ? fallback : d->second;
}

// Every member of the block carries `decoration` (glslang puts readonly/writeonly on members).
bool all_members(const Module& m, uint32_t struct_id, uint32_t decoration) {
  const auto& type = m.types.at(struct_id);
  size_t members = type.size() - 2;
  if (members == 0) return false;
  for (uint32_t i = 0; i < members; ++i) {
    auto it = m.member_decorations.find({struct_id, i});
    if (it == m.member_decorations.end() || !it->second.count(decoration)) return false;
  }
  return true;
}

uint32_t type_size(const Module& m, uint32_t id) {
  const auto& t = m.types.at(id);
  switch (t[0] & 0xffff) {
    case OpTypeInt: case OpTypeFloat: return t[2] / 8;
    case OpTypeVector: return type_size(m, t[2]) * t[3];
    case OpTypeMatrix: return decoration_value(m, id, DecMatrixStride, type_size(m, t[2])) * t[3];
    case OpTypeArray: {
      uint32_t length = m.constants.count(t[3]) ? m.constants.at(t[3]) : 0;
      return decoration_value(m, id, DecArrayStride, type_size(m, t[2])) * length;
    }
    case OpTypeStruct: {
      uint32_t size = 0;
      for (uint32_t i = 0; i + 2 < t.size(); ++i) {
        uint32_t offset = 0;
        auto it = m.member_decorations.find({id, i});
        if (it != m.member_decorations.end() && it->second.count(DecOffset)) offset = it->second.at(DecOffset);
        size = std::max(size, offset + type_size(m, t[2 + i]));
      }
      return size;
    }
    default: return 0;
  }
}

}  // namespace

ProgramLayout reflect_layout(const std::string& name, std::span<const uint32_t> words) {
  Module m = parse(name, words);
  ProgramLayout layout;
  layout.local_size = m.local_size;
  std::map<uint32_t, std::pair<bool, bool>> bindings;  // binding -> (read, written)
  for (const auto& [pointer, id, storage] : m.variables) {
    if (storage != ScStorageBuffer && storage != ScUniform && storage != ScPushConstant &&
        storage != ScUniformConstant)
      continue;
    const auto& ptr = m.types.at(pointer);
    uint32_t pointee = ptr[3];
    if (storage == ScPushConstant) {
      layout.push_constant_bytes = (type_size(m, pointee) + 3) / 4 * 4;
      continue;
    }
    bool storage_buffer = storage == ScStorageBuffer ||
                          (storage == ScUniform && decorated(m, pointee, DecBufferBlock));
    if (!storage_buffer)
      throw Error("vulkan: '" + name + "' declares a uniform buffer, image or sampler; kiln kernels " +
                  "take storage buffers and push constants only");
    if (decoration_value(m, id, DecDescriptorSet, 0) != 0)
      throw Error("vulkan: '" + name + "' uses descriptor set " +
                  std::to_string(decoration_value(m, id, DecDescriptorSet, 0)) +
                  "; kiln binds every buffer at set 0");
    uint32_t binding = decoration_value(m, id, DecBinding, 0);
    bool is_struct = (m.types.at(pointee)[0] & 0xffff) == OpTypeStruct;
    bool readonly = decorated(m, id, DecNonWritable) || (is_struct && all_members(m, pointee, DecNonWritable));
    bool writeonly = decorated(m, id, DecNonReadable) || (is_struct && all_members(m, pointee, DecNonReadable));
    auto& access = bindings[binding];
    access.first |= !writeonly;
    access.second |= !readonly;
  }
  if (!bindings.empty()) layout.buffers = bindings.rbegin()->first + 1;
  layout.buffer_read.assign(layout.buffers, false);
  layout.buffer_written.assign(layout.buffers, false);
  for (const auto& [binding, access] : bindings) {
    layout.buffer_read[binding] = access.first;
    layout.buffer_written[binding] = access.second;
  }
  return layout;
}

ComputeProgram::ComputeProgram(Device& device, VkPipelineCache cache, std::string name,
                               std::span<const uint32_t> words, ProgramLayout layout)
    : device_(device), name_(std::move(name)), layout_(std::move(layout)) {
  VkDevice d = device.handle();
  const auto& limits = device.properties().limits;
  if (layout_.push_constant_bytes > limits.maxPushConstantsSize)
    throw Error("vulkan: '" + name_ + "' has " + std::to_string(layout_.push_constant_bytes) +
                " bytes of push constants; " + device.name() + " allows " +
                std::to_string(limits.maxPushConstantsSize));
  if (layout_.buffers > limits.maxPerStageDescriptorStorageBuffers)
    throw Error("vulkan: '" + name_ + "' binds " + std::to_string(layout_.buffers) +
                " storage buffers; " + device.name() + " allows " +
                std::to_string(limits.maxPerStageDescriptorStorageBuffers) + " per stage");

  uint64_t invocations = 1;
  for (int i = 0; i < 3; ++i) {
    invocations *= layout_.local_size[i];
    if (layout_.local_size[i] > limits.maxComputeWorkGroupSize[i])
      throw Error("vulkan: '" + name_ + "' has local_size " + "xyz"[i] + " = " +
                  std::to_string(layout_.local_size[i]) + "; " + device.name() + " allows " +
                  std::to_string(limits.maxComputeWorkGroupSize[i]));
  }
  if (invocations > limits.maxComputeWorkGroupInvocations)
    throw Error("vulkan: '" + name_ + "' has " + std::to_string(invocations) +
                " invocations per workgroup; " + device.name() + " allows " +
                std::to_string(limits.maxComputeWorkGroupInvocations));

  VkShaderModule module = VK_NULL_HANDLE;
  try {
    std::vector<VkDescriptorSetLayoutBinding> bindings(layout_.buffers);
    for (uint32_t i = 0; i < layout_.buffers; ++i)
      bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set_info.bindingCount = layout_.buffers;
    set_info.pBindings = bindings.data();
    check(vkCreateDescriptorSetLayout(d, &set_info, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");

    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, layout_.push_constant_bytes};
    VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &set_layout_;
    layout_info.pushConstantRangeCount = layout_.push_constant_bytes ? 1 : 0;
    layout_info.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(d, &layout_info, nullptr, &pipeline_layout_), "vkCreatePipelineLayout");

    VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module_info.codeSize = words.size() * sizeof(uint32_t);
    module_info.pCode = words.data();
    check(vkCreateShaderModule(d, &module_info, nullptr, &module), "vkCreateShaderModule");

    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.layout = pipeline_layout_;
    VkResult r = vkCreateComputePipelines(d, cache, 1, &info, nullptr, &pipeline_);
    if (r != VK_SUCCESS)
      throw Error(std::string("vulkan: creating the pipeline for '") + name_ + "' failed: " + result_name(r));
    vkDestroyShaderModule(d, module, nullptr);  // the pipeline keeps what it needs
  } catch (...) {
    if (module) vkDestroyShaderModule(d, module, nullptr);
    if (pipeline_layout_) vkDestroyPipelineLayout(d, pipeline_layout_, nullptr);
    if (set_layout_) vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
    throw;
  }
}

ComputeProgram::~ComputeProgram() {
  VkDevice d = device_.handle();
  vkDestroyPipeline(d, pipeline_, nullptr);
  vkDestroyPipelineLayout(d, pipeline_layout_, nullptr);
  vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
}

}  // namespace kiln::vulkan
