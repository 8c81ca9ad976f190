// The cpu backend: host memory and the reference kernels. It is the oracle other backends are
// checked against, so kernels favour clarity; matmul and conv are blocked and threaded.
#include <cstdlib>
#include <cstring>
#include <new>

#include "backends/backend.h"
#include "backends/cpu/cpu_kernel.h"
#include "core/support/error.h"

namespace kiln {
namespace cpu {
namespace {

class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) : Buffer(bytes) {
    // 64-byte alignment suits every dtype and vector loads; never a null pointer, even for 0 bytes.
    size_t rounded = (bytes + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!data_)
      throw Error("cpu: out of host memory allocating " + std::to_string(bytes) + " bytes");
  }
  ~HostBuffer() override { std::free(data_); }
  void* data() const { return data_; }

 private:
  void* data_;
};

void* data_of(const Buffer* b) { return static_cast<const HostBuffer*>(b)->data(); }

class CpuBackend : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::Cpu; }
  std::string name() const override { return "cpu (reference)"; }
  DeviceCaps caps() const override {
    DeviceCaps c;
    c.f16 = c.f64 = c.int64 = true;
    c.is_cpu = true;
    return c;
  }
  bool supports(OpKind kind, DType) const override { return kernels().get(kind) != nullptr; }

  std::unique_ptr<Buffer> alloc(size_t bytes) override { return std::make_unique<HostBuffer>(bytes); }
  void upload(Buffer& dst, const void* src, size_t bytes, size_t offset) override {
    check_range(dst, bytes, offset, "upload");
    if (bytes == 0) return;  // src may be null (an empty tensor's data), which memcpy forbids
    std::memcpy(static_cast<char*>(data_of(&dst)) + offset, src, bytes);
  }
  void download(const Buffer& src, void* dst, size_t bytes, size_t offset) override {
    check_range(src, bytes, offset, "download");
    if (bytes == 0) return;
    std::memcpy(dst, static_cast<const char*>(data_of(&src)) + offset, bytes);
  }

  void execute(const OpRun& run) override {
    Kernel kernel = kernels().get(run.kind);
    if (!kernel)
      throw Error("no cpu reference kernel for op '" + std::string(op_name(run.kind)) + "' yet");
    KernelContext ctx{run.kind, run.attrs, {}, {}};
    for (const BufferView& v : run.inputs) ctx.inputs.push_back({v.dtype, v.dims, data_of(v.buffer)});
    for (const BufferView& v : run.outputs) ctx.outputs.push_back({v.dtype, v.dims, data_of(v.buffer)});
    kernel(ctx);
  }

 private:
  static void check_range(const Buffer& b, size_t bytes, size_t offset, const char* what) {
    if (offset + bytes > b.bytes())
      throw Error(std::string("cpu: ") + what + " of " + std::to_string(bytes) + " bytes at offset " +
                  std::to_string(offset) + " exceeds the buffer's " + std::to_string(b.bytes()));
  }
};

}  // namespace


KernelTable::KernelTable() : kernels_(kOpCount, nullptr) {}

const KernelTable& kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    register_pointwise(t);
    register_reduce(t);
    register_linalg(t);
    register_conv(t);
    register_norm(t);
    register_shape(t);
    return t;
  }();
  return table;
}

BroadcastIndex::BroadcastIndex(const std::vector<int64_t>& in_dims,
                               const std::vector<int64_t>& out_dims)
    : out_dims_(out_dims), in_strides_(out_dims.size(), 0), counter_(out_dims.size(), 0) {
  size_t lead = out_dims.size() - in_dims.size();
  int64_t stride = 1;
  for (size_t i = in_dims.size(); i-- > 0;) {
    in_strides_[lead + i] = in_dims[i] == 1 ? 0 : stride;
    stride *= in_dims[i];
  }
}

void BroadcastIndex::seek(int64_t linear) {
  offset_ = 0;
  for (size_t i = out_dims_.size(); i-- > 0;) {
    counter_[i] = out_dims_[i] ? linear % out_dims_[i] : 0;
    linear = out_dims_[i] ? linear / out_dims_[i] : 0;
    offset_ += counter_[i] * in_strides_[i];
  }
}

void BroadcastIndex::next() {
  for (size_t i = out_dims_.size(); i-- > 0;) {
    offset_ += in_strides_[i];
    if (++counter_[i] < out_dims_[i]) return;
    offset_ -= in_strides_[i] * counter_[i];
    counter_[i] = 0;
  }
}

}  // namespace cpu

BackendFactory cpu_backend_factory() {
  return {BackendKind::Cpu,
          [](std::string*) {
            cpu::CpuBackend b;
            return std::vector<DeviceEntry>{{BackendKind::Cpu, 0, b.name(), b.caps()}};
          },
          [](int) -> std::unique_ptr<Backend> { return std::make_unique<cpu::CpuBackend>(); }};
}

}  // namespace kiln
