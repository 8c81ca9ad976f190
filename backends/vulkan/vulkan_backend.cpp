// VulkanBackend: ties device, memory, compiler, programs and streams into kiln's Backend, plus
// device enumeration and the factory the registry uses.
#include "backends/vulkan/vulkan_backend.h"

#include <mutex>

#include "backends/kernel_runner.h"
#include "backends/vulkan/vulkan_compiler.h"
#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_memory.h"
#include "backends/vulkan/vulkan_program.h"
#include "backends/vulkan/vulkan_stream.h"
#include "backends/vulkan/vulkan_templates.h"
#include "core/support/error.h"

namespace kiln {
namespace vulkan {
namespace {

class VulkanBackendImpl : public VulkanBackend {
 public:
  VulkanBackendImpl(int index, const VulkanOptions& options)
      : index_(index), instance_(validation_requested()) {
    std::string why;
    auto devices = instance_.usable_devices(&why);
    if (index < 0 || index >= int(devices.size()))
      throw Error("vulkan: device " + std::to_string(index) + " is not available (" +
                  std::to_string(devices.size()) + " usable)" + (why.empty() ? "" : ": " + why));
    device_ = std::make_unique<Device>(devices[index]);
    allocator_ = std::make_unique<MemoryAllocator>(*device_, options);
    transfer_ = std::make_unique<Transfer>(*device_, *allocator_);
    compiler_ = std::make_unique<ShaderCompiler>(device_->scalar_block_layout());
    VkPipelineCacheCreateInfo cache_info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    check(vkCreatePipelineCache(device_->handle(), &cache_info, nullptr, &pipeline_cache_),
          "vkCreatePipelineCache");
  }

  ~VulkanBackendImpl() override {
    if (device_) {
      device_->wait_idle();
      vkDestroyPipelineCache(device_->handle(), pipeline_cache_, nullptr);
    }
    // Members go in reverse order: transfer, allocator, then the device, then the instance.
  }

  BackendKind kind() const override { return BackendKind::Vulkan; }
  int index() const override { return index_; }
  std::string name() const override { return device_->name(); }
  DeviceCaps caps() const override { return device_->caps(); }
  bool supports(OpKind, DType dtype) const override {
    const DeviceCaps& c = device_->caps();
    if (dtype == DType::F64) return c.f64;
    if (dtype == DType::I64) return c.int64;
    if (dtype == DType::F16 || dtype == DType::BF16) return c.f16;
    return true;
  }

  std::unique_ptr<Buffer> alloc(size_t bytes) override {
    return std::make_unique<VulkanBuffer>(*device_, *allocator_, bytes);
  }
  // Eager launches are queued: a transfer touching a buffer they use waits for them first.
  void upload(Buffer& dst, const void* src, size_t bytes, size_t offset) override {
    VulkanBuffer& vb = as_vulkan(dst);
    if (vb.in_flight()) runner_.sync();
    transfer_->upload(vb, src, bytes, offset);
  }
  void download(const Buffer& src, void* dst, size_t bytes, size_t offset) override {
    const VulkanBuffer& vb = as_vulkan(src);
    if (vb.in_flight()) runner_.sync();
    transfer_->download(vb, dst, bytes, offset);
  }

  void execute(const OpRun& run) override { runner_.run(run); }

  std::unique_ptr<Program> compile(const ProgramSource& source) override {
    if (source.language != "glsl")
      throw Error("vulkan: cannot compile '" + source.name + "' written in '" + source.language +
                  "'; the Vulkan backend takes GLSL");
    CompiledShader shader = compiler_->compile_glsl(source.name, source.text);
    return std::make_unique<ComputeProgram>(*device_, pipeline_cache_, source.name, shader.words,
                                            std::move(shader.layout));
  }

  std::unique_ptr<VulkanProgram> program_from_spirv(const std::string& name,
                                                   std::span<const uint32_t> words) override {
    compiler_->validate(name, words);
    return std::make_unique<ComputeProgram>(*device_, pipeline_cache_, name, words,
                                            reflect_layout(name, words));
  }

  std::unique_ptr<Stream> create_stream() override { return std::make_unique<CommandStream>(*device_); }

  MemoryStats memory_stats() const override { return allocator_->stats(); }
  CompileStats compile_stats() const override { return compiler_->stats(); }
  KernelRunnerStats eager_stats() const override { return runner_.stats(); }
  void eager_sync() override { runner_.sync(); }
  void synchronize() override { runner_.sync(); }
  void debug_message(const std::string& text) override { instance_.submit_message(text); }
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

  int index_;
  Instance instance_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<MemoryAllocator> allocator_;
  std::unique_ptr<Transfer> transfer_;
  std::unique_ptr<ShaderCompiler> compiler_;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  // Last: its programs and queued launches go first.
  KernelRunner runner_{*this, kernel::Dialect::Glsl, {.templates = glsl_template_planner()}};
};

}  // namespace

std::unique_ptr<VulkanBackend> open_backend(int index, const VulkanOptions& options) {
  return std::make_unique<VulkanBackendImpl>(index, options);
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
          [](int index) -> std::unique_ptr<Backend> { return vulkan::open_backend(index); }};
}

}  // namespace kiln
