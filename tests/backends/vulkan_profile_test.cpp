// Portability profiles (backends/vulkan/profiles/*.json, KILN_VULKAN_CAPS): each clamps the
// device's limits and features, eager ops and a compiled conv net run under it and match the cpu
// reference, kernel and template choices follow the clamped caps, and a bad profile is a clear
// error naming the file and the field. CTest also runs the op conformance cases under each profile
// (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_caps_profile.h"
#include "core/kiln.h"
#include "support/vulkan_template_test.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> profile_paths() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(KILN_VULKAN_PROFILES_DIR))
    if (entry.path().extension() == ".json") out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// conv 3x3 (8 -> 16 channels, bias) through `backend`'s own planner, host data in and out; with
// `template_name`, also the template the backend plans for it.
std::vector<float> run_conv(Backend& backend, std::string* template_name) {
  const std::vector<std::vector<int64_t>> dims = {{1, 8, 12, 12}, {16, 8, 3, 3}, {16}};
  const std::vector<int64_t> out = {1, 16, 12, 12};
  AttrMap attrs;
  attrs.set("stride", std::vector<int64_t>{1, 1});
  attrs.set("padding", std::vector<int64_t>{1, 1, 1, 1});
  attrs.set("dilation", std::vector<int64_t>{1, 1});
  attrs.set("groups", int64_t(1));
  if (template_name) {
    std::vector<BufferView> views;
    for (const auto& d : dims) views.push_back({nullptr, DType::F32, d});
    BufferView out_view{nullptr, DType::F32, out};
    const std::optional<TemplateLaunch> launch = backend.plan_template(OpRun{OpKind::Conv, attrs, views, std::span(&out_view, 1)});
    *template_name = launch ? launch->name : "none";
  }
  const std::vector<std::vector<float>> host = {testing::random_values(numel(dims[0]), 1),
                                                testing::random_values(numel(dims[1]), 2),
                                                testing::random_values(16, 3)};
  return testing::run_f32_op(backend, nullptr, OpKind::Conv, attrs, host, dims, out);
}

class VulkanProfile : public testing::VulkanTemplateTest<::testing::TestWithParam<std::string>> {};

TEST_P(VulkanProfile, ClampsTheDeviceAndKernelsFollow) {
  const vulkan::CapsProfile profile = vulkan::read_caps_profile(GetParam());
  auto backend = vulkan::open_backend(0, {.caps_profile = GetParam()});
  const DeviceCaps caps = backend->caps(), device = vk_->caps();
  EXPECT_NE(backend->name().find(" as " + profile.name), std::string::npos) << backend->name();
  if (profile.max_shared_memory) EXPECT_LE(caps.shared_memory_bytes, *profile.max_shared_memory);
  if (profile.max_invocations) EXPECT_LE(caps.max_workgroup_invocations, *profile.max_invocations);
  if (profile.max_storage_buffer_range) EXPECT_LE(caps.max_buffer_bytes, *profile.max_storage_buffer_range);
  EXPECT_EQ(caps.int64, device.int64 && profile.int64.value_or(true));
  EXPECT_EQ(caps.f16, device.f16 && profile.f16.value_or(true));
  EXPECT_EQ(backend->supports(OpKind::Add, DType::I64), caps.int64);
  EXPECT_EQ(backend->supports(OpKind::Add, DType::F64), caps.f64);
  EXPECT_EQ(caps.is_cpu, profile.software.value_or(device.is_cpu));
  const std::optional<kernel::CodegenTarget> target = backend->codegen();
  ASSERT_TRUE(target);
  EXPECT_LE(target->max_workgroup_size, int(caps.max_workgroup_invocations));
  EXPECT_EQ(target->texel_reads, caps.is_cpu);  // texels are the software devices' reads
  if (profile.max_storage_buffers) EXPECT_LE(target->max_storage_buffers, int(*profile.max_storage_buffers));
  // Past the profile's buffer range: refused with the limit named, as the device would.
  EXPECT_THROW(backend->alloc(caps.max_buffer_bytes + 16), Error);

  // The conv template takes the variant the clamped caps call for, and matches the reference.
  std::string name;
  const std::vector<float> got = run_conv(*backend, &name);
  const std::vector<float> want = run_conv(*cpu_, nullptr);
  EXPECT_EQ(name, caps.is_cpu ? "conv2d_f32_texel_bias" : "conv2d_f32_shared_bias") << profile.name;
  testing::expect_close_sums(got, want, 72, profile.name + " conv");
}

std::string profile_name(const ::testing::TestParamInfo<std::string>& info) {
  return fs::path(info.param).stem().string();
}

INSTANTIATE_TEST_SUITE_P(Shipped, VulkanProfile, ::testing::ValuesIn(profile_paths()), profile_name);

TEST(VulkanProfileFile, BadProfilesNameTheFileAndTheField) {
  const fs::path dir = fs::temp_directory_path() / "kiln_profile_test";
  fs::create_directories(dir);
  auto message_for = [&](const std::string& text) {
    const fs::path path = dir / "profile.json";
    std::ofstream(path) << text;
    try {
      vulkan::read_caps_profile(path.string());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_for(R"({"maxComputeSharedMemorySize": "big"})").find("'maxComputeSharedMemorySize' must be a positive integer"),
            std::string::npos);
  EXPECT_NE(message_for(R"({"maxSharedMemory": 16384})").find("unknown field 'maxSharedMemory'"), std::string::npos);
  EXPECT_NE(message_for(R"({"shaderInt64": 0})").find("'shaderInt64' must be true or false"), std::string::npos);
  EXPECT_NE(message_for(R"({"deviceType": "npu"})").find("'deviceType' must be \"cpu\" or \"gpu\""), std::string::npos);
  EXPECT_NE(message_for(R"({"maxComputeWorkGroupSize": [64, 64]})").find("three integers"), std::string::npos);
  EXPECT_NE(message_for("{not json").find("not JSON"), std::string::npos);
  EXPECT_NE(message_for("[]").find("must hold a JSON object"), std::string::npos);
  const std::string missing = (dir / "missing.json").string();
  try {
    vulkan::read_caps_profile(missing);
    FAIL() << "a missing profile should throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
