// VulkanBackend: ties device, memory, compiler, programs and streams into kiln's Backend, plus
// device enumeration and the factory the registry uses. SPIR-V, VkPipelineCache data and autotune
// choices persist in the disk cache (KILN_CACHE_DIR).
#include "backends/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "backends/template_epilogue.h"
#include "backends/template_util.h"
#include "backends/vulkan/vulkan_compiler.h"
#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_memory.h"
#include "backends/vulkan/vulkan_program.h"
#include "backends/vulkan/vulkan_stream.h"
#include "backends/vulkan/vulkan_conv_template.h"
#include "backends/vulkan/vulkan_pool_template.h"
#include "backends/vulkan/vulkan_templates.h"
#include "core/support/disk_cache.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {
namespace vulkan {
namespace {

// Everything that makes compiled code or pipeline-cache data specific to a device and driver.
std::string device_key(VkPhysicalDevice physical) {
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &driver;
  vkGetPhysicalDeviceProperties2(physical, &props);
  const VkPhysicalDeviceProperties& p = props.properties;
  std::string uuid;
  for (uint8_t b : p.pipelineCacheUUID) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b);
    uuid += hex;
  }
  return std::string(p.deviceName) + "|vendor=" + std::to_string(p.vendorID) + "|device=" +
         std::to_string(p.deviceID) + "|driver=" + std::to_string(p.driverVersion) + " " +
         driver.driverName + " " + driver.driverInfo + "|uuid=" + uuid;
}

class VulkanBackendImpl : public VulkanBackend {
 public:
  VulkanBackendImpl(int index, const VulkanOptions& options)
      : index_(index), memory_limit_(options.memory_limit_bytes), instance_(validation_requested()) {
    std::string why;
    auto devices = instance_.usable_devices(&why);
    if (index < 0 || index >= int(devices.size()))
      throw Error("vulkan: device " + std::to_string(index) + " is not available (" +
                  std::to_string(devices.size()) + " usable)" + (why.empty() ? "" : ": " + why));
    std::optional<CapsProfile> profile;
    if (!options.caps_profile.empty()) profile = read_caps_profile(options.caps_profile);
    device_ = std::make_unique<VulkanDevice>(devices[index], profile ? &*profile : nullptr);
    allocator_ = std::make_unique<MemoryAllocator>(*device_, options);
    transfer_ = std::make_unique<Transfer>(*device_, *allocator_);
    device_key_ = device_key(device_->physical());
    compiler_ = std::make_unique<ShaderCompiler>(device_->scalar_block_layout(), disk_, device_key_);
    VkPipelineCacheCreateInfo cache_info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    std::optional<std::vector<uint8_t>> data = disk_.load("pipeline", pipeline_key());
    if (data) {
      cache_info.initialDataSize = data->size();
      cache_info.pInitialData = data->data();
    }
    VkResult created = vkCreatePipelineCache(device_->handle(), &cache_info, nullptr, &pipeline_cache_);
    if (created != VK_SUCCESS && data) {
      log::warn("disk cache: the driver rejected the stored VkPipelineCache data; starting empty");
      cache_info.initialDataSize = 0;
      cache_info.pInitialData = nullptr;
      data.reset();
      created = vkCreatePipelineCache(device_->handle(), &cache_info, nullptr, &pipeline_cache_);
    }
    check(created, "vkCreatePipelineCache");
    pipeline_cache_loaded_ = data.has_value();
  }

  ~VulkanBackendImpl() override {
    release_eager_executor();  // its queued launches and programs, before the device
    if (device_) {
      device_->wait_idle();
      save_pipeline_cache();
      vkDestroyPipelineCache(device_->handle(), pipeline_cache_, nullptr);
    }
    // Members go in reverse order: transfer, allocator, then the device, then the instance.
  }

  BackendKind kind() const override { return BackendKind::Vulkan; }
  int index() const override { return index_; }
  std::string name() const override { return device_->name(); }
  DeviceCaps caps() const override {
    DeviceCaps c = device_->caps();
    if (memory_limit_) c.memory_bytes = std::min(c.memory_bytes, memory_limit_);
    return c;
  }
  bool supports(OpKind, DType dtype) const override {
    const DeviceCaps& c = device_->caps();
    if (dtype == DType::F64) return c.f64;
    if (dtype == DType::I64 || dtype == DType::U64) return c.int64;
    if (dtype == DType::I16 || dtype == DType::U16) return c.int16;
    if (dtype == DType::F16 || dtype == DType::BF16) return c.f16;
    return true;
  }

  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    try {
      return std::make_unique<VulkanBuffer>(*device_, *allocator_, bytes);
    } catch (const OutOfMemoryError&) {
      // Buffers freed while queued eager launches still read them come back once those finish.
      sync_eager();
      return std::make_unique<VulkanBuffer>(*device_, *allocator_, bytes);
    }
  }
  // Eager launches are queued: a transfer touching a buffer they use waits for them first.
  void upload(Buffer& dst, const void* src, size_t bytes, size_t offset) override {
    VulkanBuffer& vb = as_vulkan(dst);
    if (vb.in_flight()) sync_eager();
    transfer_->upload(vb, src, bytes, offset);
  }
  void download(const Buffer& src, void* dst, size_t bytes, size_t offset) override {
    const VulkanBuffer& vb = as_vulkan(src);
    if (vb.in_flight()) sync_eager();
    transfer_->download(vb, dst, bytes, offset);
  }

  bool eager_compiles_kernels() const override { return true; }
  std::optional<TemplateLaunch> plan_template(const OpRun& run) override { return templates_(run, caps()); }
  // Matmul, conv and pooling templates apply a pointwise chain where they store (template_epilogue.h).
  std::optional<TemplateLaunch> plan_fused_template(const OpRun& run, std::span<const EpilogueStep> epilogue) override {
    return templates::plan_template_epilogue(run, epilogue, [this](const OpRun& anchor) { return plan_template(anchor); });
  }
  // Measured on lavapipe (BENCHMARKS Run 38): ResNet's 3x3 layers run faster as Winograd where an
  // image has at least 32 tiles (14x14 outputs); at 7x7 the 16-row GEMMs run slower than the conv.
  // Channel counts keep the GEMM's texel reads aligned. Not yet measured on a GPU: off there.
  bool prefers_winograd(const OpRun& run) override {
    if (!caps().is_cpu || run.inputs.size() < 2 || run.outputs.size() != 1) return false;
    const std::vector<int64_t>& w = run.inputs[1].dims;
    const std::vector<int64_t>& y = run.outputs[0].dims;
    const int64_t tiles = ((y[2] + 1) / 2) * ((y[3] + 1) / 2);
    return w[0] % 4 == 0 && w[1] % 4 == 0 && w[1] >= 16 && tiles >= 32;
  }
  // A conv whose channels the texel conv cannot read four at a time and whose window is large (a
  // first conv: 7x7 over 3 channels) runs faster as im2col and a matmul on lavapipe (BENCHMARKS Run
  // 39); a 3x3 one over 3 channels runs slower so (its rows of 36 columns). Not yet measured on a GPU.
  bool prefers_conv_as_matmul(const OpRun& run) override {
    if (!caps().is_cpu || run.inputs.size() < 2 || run.inputs[1].dims.size() != 4) return false;
    const std::vector<int64_t>& w = run.inputs[1].dims;
    return w[1] % 4 != 0 && w[2] * w[3] >= 25;
  }
  bool has_template(OpKind kind) const override {
    return templates::has_row_or_linalg_template(kind) || kind == OpKind::MaxPool || kind == OpKind::AvgPool;
  }
  // Software devices (lavapipe) read through texel buffers and compute 4 elements per invocation.
  std::optional<kernel::CodegenTarget> codegen() const override {
    bool software = caps().is_cpu;
    kernel::CodegenTarget target{kernel::Dialect::Glsl, software, software};
    const VkPhysicalDeviceLimits& limits = device_->properties().limits;
    auto capped = [](uint32_t n) { return int(std::min<uint32_t>(n, 1u << 12)); };
    target.max_buffers = capped(limits.maxPerStageResources);
    target.max_storage_buffers = capped(limits.maxPerStageDescriptorStorageBuffers);
    // Texel inputs are uniform texel buffers, or storage texel buffers in vec4 kernels.
    target.max_texel_buffers =
        capped(std::min(limits.maxPerStageDescriptorSampledImages, limits.maxPerStageDescriptorStorageImages));
    target.max_params = int(limits.maxPushConstantsSize / 4);
    target.max_workgroup_size = int(std::min(limits.maxComputeWorkGroupInvocations, limits.maxComputeWorkGroupSize[0]));
    return target;
  }

  std::unique_ptr<CompiledKernel> compile(const KernelSource& source) override {
    if (source.language != "glsl")
      throw Error("vulkan: cannot compile '" + source.name + "' written in '" + source.language +
                  "'; the Vulkan backend takes GLSL");
    CompiledShader shader = compiler_->compile_glsl(source.name, source.text);
    return std::make_unique<ComputeProgram>(*device_, pipeline_cache_, source.name, shader.words,
                                            std::move(shader.layout));
  }

  // The optimized module the pipeline was built from (an in-memory cache hit after compile()).
  std::string disassemble(const KernelSource& source) override {
    if (source.language != "glsl") return {};
    return disassemble_spirv(compiler_->compile_glsl(source.name, source.text).words);
  }

  std::unique_ptr<VulkanProgram> program_from_spirv(const std::string& name,
                                                   std::span<const uint32_t> words) override {
    compiler_->validate(name, words);
    return std::make_unique<ComputeProgram>(*device_, pipeline_cache_, name, words,
                                            reflect_layout(name, words));
  }

  std::unique_ptr<Stream> create_stream() override { return std::make_unique<CommandStream>(*device_); }

  MemoryStats memory_stats() const override { return allocator_->stats(); }
  ShaderCompileStats compile_stats() const override {
    ShaderCompileStats stats = compiler_->stats();
    stats.pipeline_cache_loaded = pipeline_cache_loaded_;
    AutotuneStats tuned = autotuner_.stats();
    stats.autotune_timed = tuned.timed;
    stats.autotune_disk_hits = tuned.disk_hits;
    stats.autotune_last = tuned.last;
    return stats;
  }
  void debug_message(const std::string& text) override { instance_.submit_message(text); }
  void simulate_device_loss() override { device_->simulate_loss(); }
  std::string driver_info() const override {
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &driver;
    vkGetPhysicalDeviceProperties2(device_->physical(), &props);
    return std::string(driver.driverName) + " " + driver.driverInfo;
  }

 private:
  static VulkanBuffer& as_vulkan(Buffer& b) {
    auto* vb = dynamic_cast<VulkanBuffer*>(&b);
    if (!vb) throw Error("vulkan: buffer was not allocated by a Vulkan backend");
    return *vb;
  }
  static const VulkanBuffer& as_vulkan(const Buffer& b) { return as_vulkan(const_cast<Buffer&>(b)); }

  std::string pipeline_key() const { return "pipeline|" + device_key_; }
  // Best effort: a failure only costs the next process its pipeline warm start.
  void save_pipeline_cache() {
    if (!disk_.enabled() || !pipeline_cache_) return;
    size_t size = 0;
    if (vkGetPipelineCacheData(device_->handle(), pipeline_cache_, &size, nullptr) != VK_SUCCESS || !size)
      return;
    std::vector<uint8_t> data(size);
    if (vkGetPipelineCacheData(device_->handle(), pipeline_cache_, &size, data.data()) != VK_SUCCESS) return;
    data.resize(size);
    disk_.store("pipeline", pipeline_key(), data);
  }

  int index_;
  size_t memory_limit_;
  Instance instance_;
  std::unique_ptr<VulkanDevice> device_;
  std::unique_ptr<MemoryAllocator> allocator_;
  std::unique_ptr<Transfer> transfer_;
  std::unique_ptr<ShaderCompiler> compiler_;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  bool pipeline_cache_loaded_ = false;
  DiskCache disk_ = DiskCache::from_env();
  std::string device_key_;  // set in the constructor, before anything reads it
  MatmulAutotuner autotuner_{*this, disk_, device_key_};
  // The templates eager ops and compiled programs take.
  TemplatePlanner templates_ = with_pool_template(with_conv_template(glsl_template_planner({.autotuner = &autotuner_})));
};

}  // namespace

std::unique_ptr<VulkanBackend> open_backend(int index, const VulkanOptions& options) {
  return std::make_unique<VulkanBackendImpl>(index, options);
}

VulkanOptions options_from_environment() {
  VulkanOptions options;
  if (const char* profile = std::getenv("KILN_VULKAN_CAPS")) options.caps_profile = profile;
  const char* env = std::getenv("KILN_VULKAN_MEMORY_LIMIT");
  if (!env || !*env) return options;
  const std::string text = env;
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  const int shift = unit.empty() ? 0 : unit == "KiB" ? 10 : unit == "MiB" ? 20 : unit == "GiB" ? 30 : -1;
  const uint64_t value = digits == 0 || digits > 15 ? 0 : std::stoull(text.substr(0, digits));
  if (value == 0 || shift < 0 || value > (uint64_t(SIZE_MAX) >> shift))
    throw Error("KILN_VULKAN_MEMORY_LIMIT='" + text + "': give a positive size in bytes, or with KiB, MiB "
                "or GiB after it (512MiB)");
  options.memory_limit_bytes = size_t(value) << shift;
  return options;
}

}  // namespace vulkan

std::vector<DeviceEntry> enumerate_vulkan_devices(std::string* why_not) {
  // Devices do not come and go while kiln runs; the loader scan costs tens of milliseconds.
  static std::mutex mutex;
  static bool done = false;
  static std::vector<DeviceEntry> devices;
  static std::string reason;
  std::lock_guard lock(mutex);
  if (!done) {
    try {
      vulkan::Instance instance(false);
      auto physical = instance.usable_devices(&reason);
      for (size_t i = 0; i < physical.size(); ++i)
        devices.push_back({BackendKind::Vulkan, int(i), vulkan::device_name(physical[i]),
                           vulkan::query_caps(physical[i])});
    } catch (const Error& e) {
      reason = e.what();
    }
    done = true;
  }
  if (why_not && devices.empty()) *why_not = reason;
  return devices;
}

BackendFactory vulkan_backend_factory() {
  return {BackendKind::Vulkan, enumerate_vulkan_devices,
          [](int index) -> std::unique_ptr<Backend> {
            return vulkan::open_backend(index, vulkan::options_from_environment());
          },
          // A GPU is the best device; a software one (lavapipe) emulates a GPU on the host's
          // cores, slower than the cpu backend, so it runs only when named.
          [](const DeviceEntry& d) { return d.caps.is_cpu ? kOnlyByName : 0; }};
}

}  // namespace kiln
