// The null backend: allocates nothing and runs nothing, so planners and schedulers can be tested
// on any machine. Buffers remember only their size; reads return zeros.
#include <cstring>

#include "backends/backend.h"
#include "core/support/error.h"

namespace kiln {
namespace {

class NullBuffer : public Buffer {
 public:
  using Buffer::Buffer;
};

class NullProgram : public CompiledKernel {};

class NullStream : public Stream {
 public:
  // Checks what a real device would reject, so planner bugs show up in tests that run nowhere.
  void launch(const Launch& launch) override {
    if (launch.indirect) throw Error("null: launches with group counts from a buffer are not supported");
    if (!launch.offsets.empty() && launch.offsets.size() != launch.buffers.size())
      throw Error("null: launch gave " + std::to_string(launch.offsets.size()) + " offsets for " +
                  std::to_string(launch.buffers.size()) + " buffers");
    for (size_t i = 0; i < launch.offsets.size(); ++i)
      if (launch.offsets[i] % 256 != 0 || launch.offsets[i] >= launch.buffers[i]->bytes())
        throw Error("null: launch binds buffer " + std::to_string(i) + " at offset " +
                    std::to_string(launch.offsets[i]) + " (needs a multiple of 256 inside its " +
                    std::to_string(launch.buffers[i]->bytes()) + " bytes)");
  }
  void begin_recording() override {}
  void end_recording() override {}
  void replay() override {}
  void sync() override {}
};

class NullBackend : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::Null; }
  std::string name() const override { return "null (runs nothing)"; }
  DeviceCaps caps() const override {
    DeviceCaps c;
    c.f16 = c.f64 = c.int64 = c.int16 = true;
    return c;
  }
  bool supports(OpKind, DType) const override { return true; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override { return std::make_unique<NullBuffer>(bytes); }
  void upload(Buffer&, const void*, size_t, size_t) override {}
  void download(const Buffer&, void* dst, size_t bytes, size_t) override { std::memset(dst, 0, bytes); }
  void execute(const OpRun&) override {}
  // Compiled graphs are planned as for a GPU (GLSL), so planner and schedule tests run anywhere.
  std::optional<kernel::CodegenTarget> codegen() const override { return kernel::CodegenTarget{}; }
  std::unique_ptr<CompiledKernel> compile(const KernelSource&) override {
    return std::make_unique<NullProgram>();
  }
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<NullStream>(); }
};

}  // namespace

BackendFactory null_backend_factory() {
  return {BackendKind::Null,
          [](std::string*) {
            NullBackend b;
            return std::vector<DeviceEntry>{{BackendKind::Null, 0, b.name(), b.caps()}};
          },
          [](int) -> std::unique_ptr<Backend> { return std::make_unique<NullBackend>(); },
          [](const DeviceEntry&) { return 10 * kOnlyByName; },  // computes nothing
          /*indexed=*/false};
}

}  // namespace kiln
