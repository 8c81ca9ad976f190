// Vulkan runtime on whatever device is first (lavapipe on machines without a GPU), under the
// Khronos validation layer: every test ends with an empty validation-message list.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "backends/vulkan/vulkan_backend.h"
#include "core/runtime/eager_programs.h"
#include "core/support/error.h"

namespace kiln {
namespace {

// Before any Vulkan instance exists (gtest_main owns main()).
const bool kValidationRequested = [] { return setenv("KILN_VULKAN_VALIDATION", "1", 0) == 0; }();

constexpr size_t kMiB = size_t(1) << 20;

template <typename T>
std::vector<uint8_t> pack(const T& value) {
  std::vector<uint8_t> bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

const char* kSaxpy = R"(#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Params { float a; uint n; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

struct SaxpyParams {
  float a;
  uint32_t n;
};

Launch saxpy_launch(const CompiledKernel& program, Buffer& x, Buffer& y, float a, uint32_t n) {
  Launch l;
  l.program = &program;
  l.buffers = {&x, &y};
  l.push_constants = pack(SaxpyParams{a, n});
  l.groups = {(n + 63) / 64, 1, 1};
  return l;
}

struct FillParams {
  uint32_t value;
  uint32_t count;
};

Launch fill_launch(const CompiledKernel& program, Buffer& out, uint32_t value, uint32_t count) {
  Launch l;
  l.program = &program;
  l.buffers = {&out};
  l.push_constants = pack(FillParams{value, count});
  l.groups = {(count + 255) / 256, 1, 1};
  return l;
}

std::vector<float> ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * float(i % 1000);
  return v;
}

class VulkanRuntime : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto devices = enumerate_vulkan_devices(&why_not_);
    if (devices.empty()) return;
    backend_ = vulkan::open_backend(0);
  }
  static void TearDownTestSuite() {
    backend_.reset();
    auto messages = vulkan::validation_messages();
    EXPECT_TRUE(messages.empty()) << "validation at teardown: " << messages.front();
  }
  void SetUp() override {
    ASSERT_TRUE(kValidationRequested);
    if (!backend_) GTEST_SKIP() << "no Vulkan device: " << why_not_;
    vulkan::clear_validation_messages();
  }
  void TearDown() override {
    if (!backend_) return;
    auto messages = vulkan::validation_messages();
    std::string all;
    for (const auto& m : messages) all += m + "\n";
    EXPECT_TRUE(messages.empty()) << messages.size() << " validation message(s):\n" << all;
  }

  std::unique_ptr<CompiledKernel> compile_saxpy() {
    return backend_->compile({"saxpy", "glsl", kSaxpy});
  }
  std::vector<float> download_floats(const Buffer& b, size_t n) {
    std::vector<float> v(n);
    backend_->download(b, v.data(), n * sizeof(float));
    return v;
  }

  static inline std::unique_ptr<vulkan::VulkanBackend> backend_;
  static inline std::string why_not_;
};

TEST_F(VulkanRuntime, EnumerationFindsLavapipeLastWithItsCaps) {
  std::string why;
  auto devices = enumerate_vulkan_devices(&why);
  ASSERT_FALSE(devices.empty()) << why;
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].kind, BackendKind::Vulkan);
    EXPECT_EQ(devices[i].index, int(i));
    if (i + 1 < devices.size()) EXPECT_FALSE(devices[i].caps.is_cpu && !devices[i + 1].caps.is_cpu)
        << "CPU devices must come after GPUs";
  }
  EXPECT_EQ(backend_->name(), devices[0].name);
  EXPECT_EQ(backend_->kind(), BackendKind::Vulkan);
  if (backend_->caps().is_cpu) {
    bool found = false;
    for (const auto& d : devices) {
      if (d.name.find("llvmpipe") == std::string::npos) continue;
      found = true;
      EXPECT_TRUE(d.caps.is_cpu);
      EXPECT_EQ(d.caps.max_buffer_bytes, 128 * kMiB);  // lavapipe's maxStorageBufferRange
      EXPECT_GE(d.caps.shared_memory_bytes, 16u * 1024);
      EXPECT_TRUE(d.caps.timestamps);
      EXPECT_TRUE(d.caps.int64);
      EXPECT_TRUE(d.caps.f16);
      EXPECT_GE(d.caps.subgroup_size, 4u);
      EXPECT_GE(d.caps.max_workgroup_invocations, 256u);
      EXPECT_GE(d.caps.max_workgroup_size[0], 256u);
      EXPECT_GT(d.caps.memory_bytes, 0u);
    }
    EXPECT_TRUE(found) << "expected lavapipe (llvmpipe) among the Vulkan devices";
  }
}

TEST_F(VulkanRuntime, ValidationMessagesAreCollectedAndCleared) {
  if (!vulkan::validation_active()) GTEST_SKIP() << "VK_LAYER_KHRONOS_validation is not installed";
  backend_->debug_message("kiln messenger self-test");
  auto messages = vulkan::validation_messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_NE(messages[0].find("kiln messenger self-test"), std::string::npos) << messages[0];
  vulkan::clear_validation_messages();
  EXPECT_TRUE(vulkan::validation_messages().empty());
}

TEST_F(VulkanRuntime, OversizedWorkgroupIsRejectedBeforeThePipeline) {
  std::string text = "#version 450\nlayout(local_size_x = 1024, local_size_y = 1024) in;\nvoid main() {}\n";
  try {
    backend_->compile({"huge_group", "glsl", text});
    FAIL() << "compile should throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("huge_group"), std::string::npos) << e.what();
  }
}

TEST_F(VulkanRuntime, ExecutesAnEagerOpThroughGeneratedKernels) {
  EXPECT_TRUE(backend_->supports(OpKind::Neg, DType::F32));
  EXPECT_EQ(backend_->supports(OpKind::Neg, DType::F64), backend_->caps().f64);
  std::vector<float> in = {1.5f, -2.0f, 0.0f};
  auto x = backend_->alloc(12), y = backend_->alloc(12);
  backend_->upload(*x, in.data(), 12);
  AttrMap attrs;
  std::vector<BufferView> inputs = {{x.get(), DType::F32, {3}}};
  std::vector<BufferView> outputs = {{y.get(), DType::F32, {3}}};
  run_on_backend(*backend_, OpRun{OpKind::Neg, attrs, inputs, outputs});
  std::vector<float> out(3);
  backend_->download(*y, out.data(), 12);
  EXPECT_EQ(out, (std::vector<float>{-1.5f, 2.0f, -0.0f}));
}

void expect_round_trip(Backend& backend, size_t bytes) {
  std::vector<uint8_t> data(bytes), back(bytes, 0xEE);
  for (size_t i = 0; i < bytes; ++i) data[i] = uint8_t((i * 131 + bytes) % 251);
  auto buffer = backend.alloc(bytes);
  ASSERT_EQ(buffer->bytes(), bytes);
  backend.upload(*buffer, data.data(), bytes);
  backend.download(*buffer, back.data(), bytes);
  EXPECT_TRUE(data == back) << "round trip of " << bytes << " bytes differs";
  // A partial write at an unaligned offset leaves the rest alone.
  if (bytes >= 8) {
    const uint8_t patch[3] = {1, 2, 3};
    size_t offset = bytes / 2 + 1 > bytes - 3 ? bytes - 3 : bytes / 2 + 1;
    backend.upload(*buffer, patch, 3, offset);
    std::memcpy(data.data() + offset, patch, 3);
    backend.download(*buffer, back.data(), bytes);
    EXPECT_TRUE(data == back) << "partial upload at offset " << offset << " of " << bytes;
    uint8_t tail[5];
    backend.download(*buffer, tail, 5, bytes - 5);
    EXPECT_EQ(0, std::memcmp(tail, data.data() + bytes - 5, 5));
  }
}

TEST_F(VulkanRuntime, UploadDownloadRoundTripsUnalignedAndMultiBlockSizes) {
  for (size_t bytes : {size_t(1), size_t(3), size_t(4), size_t(17), size_t(255), size_t(4096),
                       size_t(1000003), 70 * kMiB + 5})  // the last is past one 64 MiB block
    expect_round_trip(*backend_, bytes);
  auto small = backend_->alloc(8);
  uint8_t eight[8] = {};
  EXPECT_THROW(backend_->upload(*small, eight, 8, 1), Error);
}

TEST_F(VulkanRuntime, UploadDownloadRoundTripsThroughStagingBuffers) {
  auto staged = vulkan::open_backend(0, {.force_staging = true});
  EXPECT_FALSE(staged->memory_stats().direct_map);
  for (size_t bytes : {size_t(3), size_t(4096), size_t(1000003), 40 * kMiB + 3})  // > one 16 MiB staging chunk
    expect_round_trip(*staged, bytes);
}

TEST_F(VulkanRuntime, SaxpyCompiledAtRunTimeMatchesCpuLoop) {
  auto program = compile_saxpy();
  auto& layout = dynamic_cast<const vulkan::VulkanProgram&>(*program).layout();
  EXPECT_EQ(layout.buffers, 2u);
  EXPECT_EQ(layout.push_constant_bytes, 8u);
  EXPECT_EQ(layout.local_size[0], 64u);
  EXPECT_EQ(layout.buffer_written, (std::vector<bool>{false, true}));

  const uint32_t n = 100003;  // not a multiple of the workgroup size
  const float a = 1.75f;
  auto x = ramp(n, 0.5f, -3.0f), y = ramp(n, -0.25f, 2.0f);
  auto xb = backend_->alloc(n * sizeof(float)), yb = backend_->alloc(n * sizeof(float));
  backend_->upload(*xb, x.data(), n * sizeof(float));
  backend_->upload(*yb, y.data(), n * sizeof(float));
  auto stream = backend_->create_stream();
  stream->launch(saxpy_launch(*program, *xb, *yb, a, n));
  stream->sync();
  auto got = download_floats(*yb, n);
  // Tolerance: the device may fuse a*x+y into one FMA (one rounding instead of two).
  for (uint32_t i = 0; i < n; ++i) {
    float want = a * x[i] + y[i];
    ASSERT_NEAR(got[i], want, 1e-6f * (1 + std::abs(want))) << "element " << i;
  }
}

// Reads one buffer through a uniform texel buffer (r32f, bound 256 bytes in) and another through a
// storage texel buffer (rgba32f): the views' formats come from the SPIR-V and start at the offset.
TEST_F(VulkanRuntime, TexelBufferBindingsAreReflectedAndReadThroughViewsAtOffsets) {
  const char* source = R"(#version 450
layout(local_size_x = 64) in;
layout(binding = 0) uniform samplerBuffer x;
layout(binding = 1, rgba32f) uniform readonly imageBuffer x4;
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint n; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) y[i] = texelFetch(x, int(i)).x + 10.0 * imageLoad(x4, int(i / 4u))[i % 4u];
}
)";
  auto program = backend_->compile({"texel_read", "glsl", source});
  const auto& layout = dynamic_cast<const vulkan::VulkanProgram&>(*program).layout();
  using vulkan::BindingKind;
  EXPECT_EQ(layout.binding_kind, (std::vector<BindingKind>{BindingKind::UniformTexelBuffer,
                                                           BindingKind::StorageTexelBuffer,
                                                           BindingKind::StorageBuffer}));
  EXPECT_EQ(layout.texel_format, (std::vector<uint32_t>{100u, 109u, 0u}));  // R32_SFLOAT, R32G32B32A32_SFLOAT
  EXPECT_EQ(layout.buffer_written, (std::vector<bool>{false, false, true}));

  const uint32_t n = 1003, skip = 64;  // x is bound 64 floats (256 bytes) in
  auto x = ramp(n + skip, 0.5f, -3.0f), x4 = ramp(n + 1, -0.25f, 2.0f);
  auto xb = backend_->alloc(x.size() * 4), x4b = backend_->alloc(x4.size() * 4), yb = backend_->alloc(n * 4);
  backend_->upload(*xb, x.data(), x.size() * 4);
  backend_->upload(*x4b, x4.data(), x4.size() * 4);
  Launch l;
  l.program = program.get();
  l.buffers = {xb.get(), x4b.get(), yb.get()};
  l.offsets = {skip * 4, 0, 0};
  l.push_constants = pack(n);
  l.groups = {(n + 63) / 64, 1, 1};
  auto stream = backend_->create_stream();
  stream->launch(l);
  stream->sync();
  auto got = download_floats(*yb, n);
  for (uint32_t i = 0; i < n; ++i) {
    float want = x[skip + i] + 10.0f * x4[i];
    ASSERT_NEAR(got[i], want, 1e-6f * (1 + std::abs(want))) << "element " << i;
  }
}

TEST_F(VulkanRuntime, EmbeddedFillAndCopyShadersWriteExactlyTheirRange) {
  auto fill = backend_->program_from_spirv("fill", vulkan::fixed_shader("fill"));
  auto copy = backend_->program_from_spirv("copy", vulkan::fixed_shader("copy"));
  EXPECT_EQ(fill->layout().buffers, 1u);
  EXPECT_EQ(fill->layout().push_constant_bytes, 8u);
  EXPECT_EQ(copy->layout().buffer_written, (std::vector<bool>{false, true}));
  const uint32_t words = 1024, count = 1000;
  std::vector<uint32_t> zeros(words, 0);
  auto a = backend_->alloc(words * 4), b = backend_->alloc(words * 4);
  backend_->upload(*a, zeros.data(), words * 4);
  backend_->upload(*b, zeros.data(), words * 4);
  auto stream = backend_->create_stream();
  const float one = 1.0f;
  uint32_t one_bits;
  std::memcpy(&one_bits, &one, 4);
  stream->launch(fill_launch(*fill, *a, one_bits, count));
  Launch c;
  c.program = copy.get();
  c.buffers = {a.get(), b.get()};
  struct { uint32_t count, src_offset, dst_offset; } params{10, 995, 3};  // 5 filled + 5 zero words
  c.push_constants.resize(12);
  std::memcpy(c.push_constants.data(), &params, 12);
  stream->launch(c);
  stream->sync();
  auto got_a = download_floats(*a, words);
  for (uint32_t i = 0; i < words; ++i) ASSERT_EQ(got_a[i], i < count ? 1.0f : 0.0f) << i;
  auto got_b = download_floats(*b, words);
  for (uint32_t i = 0; i < words; ++i)
    ASSERT_EQ(got_b[i], (i >= 3 && i < 8) ? 1.0f : 0.0f) << i;
  EXPECT_EQ(dynamic_cast<vulkan::VulkanStream&>(*stream).stats().barriers, 1u)
      << "copy reads what fill wrote: one barrier";
}

TEST_F(VulkanRuntime, BarriersOnlyBetweenDependentDispatches) {
  auto fill = backend_->program_from_spirv("fill", vulkan::fixed_shader("fill"));
  auto saxpy = compile_saxpy();
  auto x = backend_->alloc(256 * 4), y = backend_->alloc(256 * 4), z = backend_->alloc(256 * 4);
  auto stream = backend_->create_stream();
  auto& stats = dynamic_cast<vulkan::VulkanStream&>(*stream);
  auto bits = [](float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; };
  stream->launch(fill_launch(*fill, *x, bits(2.0f), 256));
  stream->launch(fill_launch(*fill, *y, bits(3.0f), 256));  // independent: no barrier
  stream->launch(fill_launch(*fill, *z, bits(7.0f), 256));
  EXPECT_EQ(stats.stats().barriers, 0u);
  stream->launch(saxpy_launch(*saxpy, *x, *y, 10.0f, 256));  // reads x, y: RAW
  EXPECT_EQ(stats.stats().barriers, 1u);
  stream->launch(saxpy_launch(*saxpy, *x, *z, 1.0f, 256));  // reads x again, writes z: no hazard
  EXPECT_EQ(stats.stats().barriers, 1u);
  stream->launch(fill_launch(*fill, *x, bits(0.0f), 256));  // overwrites x that was just read: WAR
  EXPECT_EQ(stats.stats().barriers, 2u);
  stream->sync();
  auto gy = download_floats(*y, 256), gz = download_floats(*z, 256), gx = download_floats(*x, 256);
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(gy[i], 23.0f) << i;  // 10 * 2 + 3
    ASSERT_EQ(gz[i], 9.0f) << i;   // 1 * 2 + 7
    ASSERT_EQ(gx[i], 0.0f) << i;
  }
}

// Indirect launches (DeviceCaps::indirect_launch, device-side loops): the group counts come from a
// buffer an earlier dispatch of the same stream wrote (one barrier, which the sync-validation run
// checks); counts of zero run nothing; a misplaced count is refused before recording.
TEST_F(VulkanRuntime, IndirectLaunchesReadGroupCountsAnEarlierDispatchWrote) {
  EXPECT_TRUE(backend_->caps().indirect_launch);
  auto fill = backend_->program_from_spirv("fill", vulkan::fixed_shader("fill"));
  const uint32_t words = 512;  // two of fill's 256-wide workgroups
  std::vector<uint32_t> zeros(words, 0);
  auto on = backend_->alloc(12), off = backend_->alloc(12), y = backend_->alloc(words * 4), z = backend_->alloc(words * 4);
  backend_->upload(*y, zeros.data(), words * 4);
  backend_->upload(*z, zeros.data(), words * 4);
  auto stream = backend_->create_stream();
  stream->launch(fill_launch(*fill, *on, 1, 3));   // group counts (1, 1, 1)
  stream->launch(fill_launch(*fill, *off, 0, 3));  // (0, 0, 0)
  auto bits = [](float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; };
  Launch first = fill_launch(*fill, *y, bits(5.0f), words);  // 2 groups directly, 1 from `on`
  first.indirect = on.get();
  stream->launch(first);
  EXPECT_EQ(dynamic_cast<vulkan::VulkanStream&>(*stream).stats().barriers, 1u) << "the counts were just written";
  Launch none = fill_launch(*fill, *z, bits(5.0f), words);
  none.indirect = off.get();
  stream->launch(none);
  Launch misplaced = none;
  misplaced.indirect_offset = 2;
  EXPECT_THROW(stream->launch(misplaced), Error);
  stream->sync();
  auto got_y = download_floats(*y, words), got_z = download_floats(*z, words);
  for (uint32_t i = 0; i < words; ++i) {
    ASSERT_EQ(got_y[i], i < 256 ? 5.0f : 0.0f) << i;  // one workgroup ran
    ASSERT_EQ(got_z[i], 0.0f) << i;
  }
}

TEST_F(VulkanRuntime, RecordOnceReplayThreeTimesAccumulates) {
  auto program = compile_saxpy();
  const uint32_t n = 5000;
  const float a = 0.5f;
  auto x = ramp(n, 1.0f, 0.0f), y = ramp(n, 2.0f, 1.0f);
  auto xb = backend_->alloc(n * 4), yb = backend_->alloc(n * 4);
  backend_->upload(*xb, x.data(), n * 4);
  backend_->upload(*yb, y.data(), n * 4);
  auto stream = backend_->create_stream();
  stream->begin_recording();
  stream->launch(saxpy_launch(*program, *xb, *yb, a, n));
  stream->end_recording();
  auto after_recording = download_floats(*yb, n);
  EXPECT_EQ(after_recording, y) << "recording must not run anything";
  for (int r = 0; r < 3; ++r) stream->replay();
  stream->sync();
  auto got = download_floats(*yb, n);
  for (uint32_t i = 0; i < n; ++i) {
    float want = y[i];
    for (int r = 0; r < 3; ++r) want = a * x[i] + want;
    ASSERT_NEAR(got[i], want, 1e-5f * (1 + std::abs(want))) << "element " << i;
  }
  EXPECT_EQ(dynamic_cast<vulkan::VulkanStream&>(*stream).stats().submits, 3u);
  EXPECT_THROW(stream->end_recording(), Error);
}

TEST_F(VulkanRuntime, TimestampsArePositivePerDispatch) {
  if (!backend_->caps().timestamps) GTEST_SKIP() << "device has no timestamps";
  auto program = compile_saxpy();
  const uint32_t n = 1 << 20;
  auto xb = backend_->alloc(n * 4), yb = backend_->alloc(n * 4);
  auto stream = backend_->create_stream();
  for (int i = 0; i < 3; ++i) stream->launch(saxpy_launch(*program, *xb, *yb, 1.0f, n));
  stream->sync();
  auto timings = stream->timings();
  ASSERT_EQ(timings.size(), 3u);
  for (const auto& t : timings) {
    EXPECT_EQ(t.name, "saxpy");
    EXPECT_GT(t.microseconds, 0.0);
    EXPECT_LT(t.microseconds, 10e6);
  }
  EXPECT_TRUE(stream->timings().empty()) << "timings() drains";
}

TEST_F(VulkanRuntime, CompileErrorCarriesShadercMessageAndSourceName) {
  std::string bad = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { float v = undeclared_thing; }\n";
  try {
    backend_->compile({"broken_kernel", "glsl", bad});
    FAIL() << "compile should throw";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("undeclared_thing"), std::string::npos) << m;
    EXPECT_NE(m.find("broken_kernel"), std::string::npos) << m;
  }
  EXPECT_THROW(backend_->compile({"k", "cuda", "__global__ void k() {}"}), Error);
}

TEST_F(VulkanRuntime, InvalidSpirvFailsValidationWithSourceName) {
  auto words = vulkan::fixed_shader("fill");
  std::vector<uint32_t> broken(words.begin(), words.end());
  // Drop OpEntryPoint: the module still parses, but a shader module without an entry point (and
  // no Linkage capability) is invalid, and its OpExecutionMode now names no entry point.
  bool removed = false;
  for (size_t i = 5; i < broken.size();) {
    uint32_t count = broken[i] >> 16, op = broken[i] & 0xffff;
    if (op == 15 /*OpEntryPoint*/) {
      broken.erase(broken.begin() + long(i), broken.begin() + long(i + count));
      removed = true;
      break;
    }
    i += count;
  }
  ASSERT_TRUE(removed);
  try {
    backend_->program_from_spirv("fill_without_local_size", broken);
    FAIL() << "validation should fail";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("fill_without_local_size"), std::string::npos) << m;
    EXPECT_NE(m.find("spirv-val"), std::string::npos) << m;
  }
}

TEST_F(VulkanRuntime, CompileCacheAnswersTheSameSourceOnce) {
  auto before = backend_->compile_stats();
  std::string text = std::string(kSaxpy) + "// cache probe\n";
  auto p1 = backend_->compile({"probe", "glsl", text});
  auto p2 = backend_->compile({"probe", "glsl", text});
  auto after = backend_->compile_stats();
  // The first request compiles or, when an earlier run left it on disk, loads it; never twice.
  EXPECT_EQ((after.compiles + after.disk_hits) - (before.compiles + before.disk_hits), 1u);
  EXPECT_EQ(after.cache_hits - before.cache_hits, 1u);
}

TEST_F(VulkanRuntime, LaunchMismatchesThrow) {
  auto program = compile_saxpy();
  auto xb = backend_->alloc(64);
  auto stream = backend_->create_stream();
  Launch l = saxpy_launch(*program, *xb, *xb, 1.0f, 16);
  l.buffers.pop_back();
  EXPECT_THROW(stream->launch(l), Error);
  l = saxpy_launch(*program, *xb, *xb, 1.0f, 16);
  l.push_constants.push_back(0);
  EXPECT_THROW(stream->launch(l), Error);
  EXPECT_THROW(stream->replay(), Error);
}

TEST_F(VulkanRuntime, AllocationPastTheLimitThrowsLeaksNothingAndNextAllocationWorks) {
  auto before = backend_->memory_stats();
  size_t limit = backend_->caps().max_buffer_bytes;
  try {
    backend_->alloc(limit + 1);
    FAIL() << "allocating past maxStorageBufferRange should throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("maxStorageBufferRange"), std::string::npos) << e.what();
  }
  auto after = backend_->memory_stats();
  EXPECT_EQ(after.device_allocations, before.device_allocations);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.buffers, before.buffers);
  expect_round_trip(*backend_, 4096);
  expect_round_trip(*backend_, limit);  // exactly the limit is allowed
}

// A memory limit (KILN_VULKAN_MEMORY_LIMIT, here through VulkanOptions) runs out like a heap: the
// allocation that would pass it throws with the sizes, none of it stays allocated, and once buffers
// are freed the next allocation works. 40 MiB buffers are dedicated blocks: six fit in 256 MiB.
TEST_F(VulkanRuntime, OutOfMemoryUnderALimitThrowsLeaksNothingAndFreeingRecovers) {
  auto limited = vulkan::open_backend(0, {.memory_limit_bytes = 256 * kMiB});
  EXPECT_EQ(limited->caps().memory_bytes, 256 * kMiB);
  std::vector<std::unique_ptr<Buffer>> held;
  std::string message;
  while (message.empty() && held.size() < 16) {
    const vulkan::MemoryStats before = limited->memory_stats();
    try {
      held.push_back(limited->alloc(40 * kMiB));
    } catch (const OutOfMemoryError& e) {
      message = e.what();
      const vulkan::MemoryStats after = limited->memory_stats();
      EXPECT_EQ(after.device_allocations, before.device_allocations);
      EXPECT_EQ(after.buffers, before.buffers);
      EXPECT_EQ(after.bytes_reserved, before.bytes_reserved);
    }
  }
  EXPECT_EQ(held.size(), 6u);
  EXPECT_NE(message.find("out of device memory"), std::string::npos) << message;
  EXPECT_NE(message.find("need 40.0 MiB more, 240.0 MiB of the 256.0 MiB limit (KILN_VULKAN_MEMORY_LIMIT)"),
            std::string::npos)
      << message;
  held.pop_back();
  expect_round_trip(*limited, 40 * kMiB);
  held.clear();
  EXPECT_EQ(limited->memory_stats().buffers, 0u);
}

TEST(VulkanOptions, MemoryLimitComesFromTheEnvironmentAndABadValueNamesTheVariable) {
  auto with = [](const char* value) {
    setenv("KILN_VULKAN_MEMORY_LIMIT", value, 1);
    try {
      size_t bytes = vulkan::options_from_environment().memory_limit_bytes;
      unsetenv("KILN_VULKAN_MEMORY_LIMIT");
      return std::to_string(bytes);
    } catch (const Error& e) {
      unsetenv("KILN_VULKAN_MEMORY_LIMIT");
      return std::string(e.what());
    }
  };
  EXPECT_EQ(with("512MiB"), std::to_string(512 * kMiB));
  EXPECT_EQ(with("2GiB"), std::to_string(size_t(2) << 30));
  EXPECT_EQ(with("4096"), "4096");
  for (const char* bad : {"0", "512MB", "-1", "MiB", "1.5GiB", "99999999999999999999"})
    EXPECT_NE(with(bad).find("KILN_VULKAN_MEMORY_LIMIT='"), std::string::npos) << bad;
  EXPECT_EQ(vulkan::options_from_environment().memory_limit_bytes, 0u);
}

// A freed big buffer's memory serves the next buffer of about its size (eager code frees and
// allocates same-sized activations every call); a much bigger one still gets fresh memory.
TEST_F(VulkanRuntime, FreedBigBuffersAreReusedForTheNextOfTheirSize) {
  const size_t big = size_t(48) << 20;  // above half the 64 MiB shared block: a dedicated allocation
  backend_->alloc(big).reset();
  auto cached = backend_->memory_stats();
  EXPECT_GE(cached.bytes_cached, big);
  {
    auto again = backend_->alloc(big - 4096);
    auto during = backend_->memory_stats();
    EXPECT_EQ(during.device_allocations, cached.device_allocations);
    EXPECT_EQ(during.bytes_cached + big, cached.bytes_cached);
    std::vector<uint32_t> data(1024);
    for (uint32_t i = 0; i < data.size(); ++i) data[i] = i * 7u;
    backend_->upload(*again, data.data(), data.size() * 4, big - 8192);
    std::vector<uint32_t> back(data.size());
    backend_->download(*again, back.data(), back.size() * 4, big - 8192);
    EXPECT_EQ(back, data);
    auto bigger = backend_->alloc(2 * big);
    EXPECT_EQ(backend_->memory_stats().device_allocations, during.device_allocations + 1);
  }
  EXPECT_EQ(backend_->memory_stats().buffers, cached.buffers);
}

TEST_F(VulkanRuntime, ManySmallAllocationsShareBlocksAndDoNotOverlap) {
  auto before = backend_->memory_stats();
  std::vector<std::unique_ptr<Buffer>> buffers;
  for (uint32_t i = 0; i < 1000; ++i) {
    buffers.push_back(backend_->alloc(1000 + i % 7));
    uint32_t tag[2] = {i, ~i};
    backend_->upload(*buffers.back(), tag, sizeof tag);
  }
  auto during = backend_->memory_stats();
  EXPECT_LE(during.device_allocations - before.device_allocations, 1u)
      << "1000 small buffers should fit in one 64 MiB block";
  EXPECT_EQ(during.buffers - before.buffers, 1000u);
  for (uint32_t i = 0; i < 1000; ++i) {
    uint32_t tag[2];
    backend_->download(*buffers[i], tag, sizeof tag);
    ASSERT_EQ(tag[0], i);
    ASSERT_EQ(tag[1], ~i);
  }
  buffers.clear();
  auto after = backend_->memory_stats();
  EXPECT_EQ(after.buffers, before.buffers);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_LE(after.device_allocations, before.device_allocations + 1);
}

// Not a correctness check: reports upload bandwidth and per-launch overhead on this device.
TEST_F(VulkanRuntime, ReportsBandwidthAndLaunchOverhead) {
  using clock = std::chrono::steady_clock;
  const size_t bytes = 64 * kMiB;
  std::vector<uint8_t> host(bytes, 7);
  auto buffer = backend_->alloc(bytes);
  backend_->upload(*buffer, host.data(), bytes);
  auto t0 = clock::now();
  for (int i = 0; i < 4; ++i) backend_->upload(*buffer, host.data(), bytes);
  double upload_s = std::chrono::duration<double>(clock::now() - t0).count() / 4;
  t0 = clock::now();
  for (int i = 0; i < 4; ++i) backend_->download(*buffer, host.data(), bytes);
  double download_s = std::chrono::duration<double>(clock::now() - t0).count() / 4;

  auto fill = backend_->program_from_spirv("fill", vulkan::fixed_shader("fill"));
  auto small = backend_->alloc(256 * 4);
  auto stream = backend_->create_stream();
  const int launches = 1000;
  stream->launch(fill_launch(*fill, *small, 1, 256));
  stream->sync();
  t0 = clock::now();
  for (int i = 0; i < launches; ++i) stream->launch(fill_launch(*fill, *small, uint32_t(i), 256));
  stream->sync();
  double eager_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / launches;
  t0 = clock::now();
  stream->begin_recording();
  for (int i = 0; i < launches; ++i) stream->launch(fill_launch(*fill, *small, uint32_t(i), 256));
  stream->end_recording();
  double record_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / launches;
  stream->replay();
  stream->sync();
  t0 = clock::now();
  stream->replay();
  stream->sync();
  double replay_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / launches;
  stream->timings();
  uint32_t last = 0;
  backend_->download(*small, &last, 4);
  EXPECT_EQ(last, uint32_t(launches - 1));
  std::printf("[vulkan] %s (%s)\n", backend_->name().c_str(), backend_->driver_info().c_str());
  std::printf("[vulkan] upload %.2f GB/s, download %.2f GB/s (64 MiB, %s)\n",
              bytes / upload_s / 1e9, bytes / download_s / 1e9,
              backend_->memory_stats().direct_map ? "direct map" : "staging");
  std::printf("[vulkan] per launch: %.2f us host recording only, %.2f us eager (record+run), "
              "%.2f us replayed (run)\n", record_us, eager_us, replay_us);
}

}  // namespace
}  // namespace kiln
