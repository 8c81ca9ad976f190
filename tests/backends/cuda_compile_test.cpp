// Every kernel the op table generates, printed in the CUDA dialect, compiles with NVRTC for sm_80 and
// sm_90 and assembles with ptxas. Runs without a GPU; skipped with the reason when NVRTC is missing.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "backends/cuda/nvrtc.h"
#include "backends/device.h"
#include "core/kernel/emit.h"
#include "core/kernel/lower.h"
#include "core/support/disk_cache.h"
#include "core/support/error.h"
#include "kernel/op_cases.h"
#include "support/cuda_batch.h"

namespace kiln::kernel {
namespace {

// One translation unit holding every distinct kernel the table lowers to.
const kiln::testing::CudaBatch& all_kernels() {
  static const kiln::testing::CudaBatch batch = [] {
    kiln::testing::CudaBatch b;
    for (const testing::Case& c : testing::table()) {
      std::vector<TensorType> in;
      for (const testing::Input& i : c.inputs) in.push_back({i.dtype, make_shape(i.dims)});
      std::vector<TensorType> out = infer_types(c.kind, in, c.attrs, {});
      AttrMap attrs = complete_attrs(c.kind, c.attrs, {});
      LoweredOp op = lower_op(c.kind, attrs, in, out, 1);
      for (const LoweredOp::Step& step : op.steps) b.add(step.kernel.kernel);
    }
    return b;
  }();
  return batch;
}

class CudaCompile : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaCompile, EveryGeneratedKernelCompilesAndAssembles) {
  std::string why;
  if (!cuda::Nvrtc::available(&why)) GTEST_SKIP() << why;
  const kiln::testing::CudaBatch& batch = all_kernels();
  ASSERT_GT(batch.kernels, 100);
  std::string sm = GetParam();  // "80"
  cuda::PtxResult ptx;
  ASSERT_NO_THROW(ptx = cuda::Nvrtc::get().compile("op_table_kernels", batch.source, "compute_" + sm));
  EXPECT_NE(ptx.ptx.find(".entry k0"), std::string::npos);
  std::printf("%d kernels -> %zu bytes of PTX for compute_%s\n", batch.kernels, ptx.ptx.size(), sm.c_str());
  std::string ptxas = kiln::testing::find_ptxas();
  if (ptxas.empty()) GTEST_SKIP() << "ptxas not installed: PTX compiled but not assembled";
  std::string messages;
  EXPECT_EQ(kiln::testing::assemble_ptx(ptxas, ptx.ptx, sm, ::testing::TempDir() + "kiln_kernels_sm" + sm,
                                  &messages), 0)
      << messages;
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaCompile, ::testing::Values("80", "90"));

TEST(CudaCompile, CompileErrorsCarryNvrtcsLog) {
  std::string why;
  if (!cuda::Nvrtc::available(&why)) GTEST_SKIP() << why;
  try {
    cuda::Nvrtc::get().compile("broken", "extern \"C\" __global__ void f() { undeclared_thing = 1; }",
                               "compute_80");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
  }
}

TEST(CudaCompile, PtxComesFromTheDiskCacheOnTheSecondCompile) {
  std::string why;
  if (!cuda::Nvrtc::available(&why)) GTEST_SKIP() << why;
  const std::string dir = ::testing::TempDir() + "kiln_ptx_cache";
  std::filesystem::remove_all(dir);
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  const std::string source = "extern \"C\" __global__ void __launch_bounds__(64) k(float* x) { x[0] = 1.f; }";
  const std::string first = cuda::cached_ptx("k", source, "compute_80", 12345);
  EXPECT_NE(first.find(".entry k"), std::string::npos);
  const std::string key = cuda::ptx_cache_key(source, "compute_80", cuda::Nvrtc::get().version(), 12345);
  DiskCache cache(dir);
  ASSERT_TRUE(std::filesystem::exists(cache.path_for("ptx", key)));
  // Plant a different payload under the key: the next compile must return it, not recompile.
  const std::string planted = "// planted\n" + first;
  cache.store("ptx", key, std::span(reinterpret_cast<const uint8_t*>(planted.data()), planted.size()));
  EXPECT_EQ(cuda::cached_ptx("k", source, "compute_80", 12345), planted);
  // Another driver version is another key: compiled afresh.
  EXPECT_EQ(cuda::cached_ptx("k", source, "compute_80", 12346), first);
}

}  // namespace
}  // namespace kiln::kernel

namespace kiln {
namespace {

TEST(CudaDevice, MissingDriverIsAClearErrorAndBestSkipsIt) {
  std::string why;
  bool has_devices = false;
  for (const DeviceEntry& e : available_devices()) has_devices |= e.kind == BackendKind::Cuda;
  if (has_devices) GTEST_SKIP() << "a CUDA device is present";
  try {
    Device::parse("cuda");
    FAIL() << "cuda should not open without a driver";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:0 is not available"), std::string::npos) << msg;
    EXPECT_TRUE(msg.find("libcuda") != std::string::npos || msg.find("NVRTC") != std::string::npos ||
                msg.find("no CUDA device") != std::string::npos || msg.find("cuInit") != std::string::npos)
        << msg;
  }
  EXPECT_NE(Device::best().kind(), BackendKind::Cuda);
}

}  // namespace
}  // namespace kiln
