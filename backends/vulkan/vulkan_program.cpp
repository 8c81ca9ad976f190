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
  OpTypeImage = 25, OpTypeSampledImage = 27, OpTypeArray = 28, OpTypeRuntimeArray = 29, OpTypeStruct = 30, OpTypePointer = 32,
  OpConstant = 43, OpVariable = 59, OpDecorate = 71, OpMemberDecorate = 72,
};
enum Decoration : uint32_t {
  DecBlock = 2, DecBufferBlock = 3, DecArrayStride = 6, DecMatrixStride = 7, DecNonWritable = 24,
  DecNonReadable = 25, DecBinding = 33, DecDescriptorSet = 34, DecOffset = 35,
};
enum StorageClass : uint32_t { ScUniformConstant = 0, ScUniform = 2, ScPushConstant = 9, ScStorageBuffer = 12 };
constexpr uint32_t kExecutionModeLocalSize = 17;
constexpr uint32_t kDimBuffer = 5;


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
      case OpTypeRuntimeArray: case OpTypeStruct: case OpTypePointer: case OpTypeImage:
      case OpTypeSampledImage:
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

// The view format of a texel-buffer binding: the image's declared format (storage texel buffers),
// else one 32-bit channel of the sampled type (samplerBuffer, isamplerBuffer, usamplerBuffer).
uint32_t texel_format(const Module& m, const std::vector<uint32_t>& image) {
  switch (image[8]) {  // SPIR-V ImageFormat
    case 1: return VK_FORMAT_R32G32B32A32_SFLOAT;
    case 3: return VK_FORMAT_R32_SFLOAT;
    case 21: return VK_FORMAT_R32G32B32A32_SINT;
    case 24: return VK_FORMAT_R32_SINT;
    case 30: return VK_FORMAT_R32G32B32A32_UINT;
    case 33: return VK_FORMAT_R32_UINT;
    case 0: break;
    default: return VK_FORMAT_UNDEFINED;
  }
  const auto& sampled = m.types.at(image[2]);
  if ((sampled[0] & 0xffff) == OpTypeFloat && sampled[2] == 32) return VK_FORMAT_R32_SFLOAT;
  if ((sampled[0] & 0xffff) == OpTypeInt && sampled[2] == 32)
    return sampled[3] ? VK_FORMAT_R32_SINT : VK_FORMAT_R32_UINT;
  return VK_FORMAT_UNDEFINED;
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

VkDescriptorType descriptor_type(const ProgramLayout& layout, uint32_t binding) {
  BindingKind kind = binding < layout.binding_kind.size() ? layout.binding_kind[binding] : BindingKind::StorageBuffer;
  switch (kind) {
    case BindingKind::UniformTexelBuffer: return VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    case BindingKind::StorageTexelBuffer: return VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
    case BindingKind::StorageBuffer: break;
  }
  return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
}

ProgramLayout reflect_layout(const std::string& name, std::span<const uint32_t> words) {
  Module m = parse(name, words);
  ProgramLayout layout;
  layout.local_size = m.local_size;
  std::map<uint32_t, std::pair<bool, bool>> bindings;  // binding -> (read, written)
  std::map<uint32_t, std::pair<BindingKind, uint32_t>> kinds;  // binding -> (kind, texel format)
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
    BindingKind kind = BindingKind::StorageBuffer;
    uint32_t format = 0;
    if (storage == ScUniformConstant) {
      const auto* image = &m.types.at(pointee);
      if (((*image)[0] & 0xffff) == OpTypeSampledImage) image = &m.types.at((*image)[2]);
      if (((*image)[0] & 0xffff) == OpTypeImage && (*image)[3] == kDimBuffer) {
        kind = (*image)[7] == 2 ? BindingKind::StorageTexelBuffer : BindingKind::UniformTexelBuffer;
        format = texel_format(m, *image);
        if (format == VK_FORMAT_UNDEFINED)
          throw Error("vulkan: '" + name + "' declares a texel buffer whose format kiln cannot bind; " +
                      "use one or four 32-bit channels (r32f, rgba32f, r32i, r32ui, ...)");
        storage_buffer = true;
      }
    }
    if (!storage_buffer)
      throw Error("vulkan: '" + name + "' declares a uniform buffer, image or sampler; kiln kernels " +
                  "take storage buffers, texel buffers and push constants only");
    if (decoration_value(m, id, DecDescriptorSet, 0) != 0)
      throw Error("vulkan: '" + name + "' uses descriptor set " +
                  std::to_string(decoration_value(m, id, DecDescriptorSet, 0)) +
                  "; kiln binds every buffer at set 0");
    uint32_t binding = decoration_value(m, id, DecBinding, 0);
    bool is_struct = (m.types.at(pointee)[0] & 0xffff) == OpTypeStruct;
    bool readonly = kind == BindingKind::UniformTexelBuffer || decorated(m, id, DecNonWritable) ||
                    (is_struct && all_members(m, pointee, DecNonWritable));
    bool writeonly = decorated(m, id, DecNonReadable) || (is_struct && all_members(m, pointee, DecNonReadable));
    auto [it, fresh] = kinds.emplace(binding, std::pair{kind, format});
    if (!fresh && it->second != std::pair{kind, format})
      throw Error("vulkan: '" + name + "' declares binding " + std::to_string(binding) +
                  " twice with different descriptor types or formats");
    auto& access = bindings[binding];
    access.first |= !writeonly;
    access.second |= !readonly;
  }
  if (!bindings.empty()) layout.buffers = bindings.rbegin()->first + 1;
  layout.buffer_read.assign(layout.buffers, false);
  layout.buffer_written.assign(layout.buffers, false);
  layout.binding_kind.assign(layout.buffers, BindingKind::StorageBuffer);
  layout.texel_format.assign(layout.buffers, 0);
  for (const auto& [binding, kind] : kinds) {
    layout.binding_kind[binding] = kind.first;
    layout.texel_format[binding] = kind.second;
  }
  for (const auto& [binding, access] : bindings) {
    layout.buffer_read[binding] = access.first;
    layout.buffer_written[binding] = access.second;
  }
  return layout;
}

ComputeProgram::ComputeProgram(VulkanDevice& device, VkPipelineCache cache, std::string name,
                               std::span<const uint32_t> words, ProgramLayout layout)
    : device_(device), name_(std::move(name)), layout_(std::move(layout)) {
  VkDevice d = device.handle();
  const auto& limits = device.properties().limits;
  if (layout_.push_constant_bytes > limits.maxPushConstantsSize)
    throw Error("vulkan: '" + name_ + "' has " + std::to_string(layout_.push_constant_bytes) +
                " bytes of push constants; " + device.name() + " allows " +
                std::to_string(limits.maxPushConstantsSize));
  uint32_t counts[3] = {0, 0, 0};  // by BindingKind
  for (uint32_t i = 0; i < layout_.buffers; ++i)
    ++counts[i < layout_.binding_kind.size() ? size_t(layout_.binding_kind[i]) : 0];
  const std::pair<const char*, uint32_t> allowed[3] = {
      {"storage buffers", limits.maxPerStageDescriptorStorageBuffers},
      {"uniform texel buffers", limits.maxPerStageDescriptorSampledImages},
      {"storage texel buffers", limits.maxPerStageDescriptorStorageImages}};
  for (size_t kind = 0; kind < 3; ++kind)
    if (counts[kind] > allowed[kind].second)
      throw Error("vulkan: '" + name_ + "' binds " + std::to_string(counts[kind]) + " " + allowed[kind].first +
                  "; " + device.name() + " allows " + std::to_string(allowed[kind].second) + " per stage");

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
      bindings[i] = {i, descriptor_type(layout_, i), 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
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
