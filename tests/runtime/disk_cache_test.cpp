// The disk compile cache: entry round trips and damage detection (no device), then on Vulkan the
// second backend hitting the cache, a corrupted entry being rebuilt, and max-autotune's matmul choice.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/runtime/eager_programs.h"
#include "core/support/disk_cache.h"
#ifdef KILN_HAVE_VULKAN
#include "backends/vulkan/vulkan_backend.h"
#endif

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class DiskCacheDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_disk_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    const char* old = std::getenv("KILN_CACHE_DIR");
    had_env_ = old != nullptr;
    if (old) old_env_ = old;
    ::setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (had_env_) ::setenv("KILN_CACHE_DIR", old_env_.c_str(), 1);
    else ::unsetenv("KILN_CACHE_DIR");
    fs::remove_all(dir_);
  }
  std::vector<fs::path> files_under(const std::string& kind) const {
    std::vector<fs::path> out;
    if (fs::exists(dir_ / kind))
      for (const auto& e : fs::directory_iterator(dir_ / kind)) out.push_back(e.path());
    return out;
  }
  static std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

  fs::path dir_;
  bool had_env_ = false;
  std::string old_env_;
};

TEST_F(DiskCacheDir, StoreThenLoadRoundTripsAndLeavesNoTempFiles) {
  DiskCache cache = DiskCache::from_env();
  ASSERT_TRUE(cache.enabled());
  EXPECT_EQ(cache.dir(), dir_);
  cache.store("spirv", "key-a", bytes("payload one"));
  EXPECT_EQ(cache.load("spirv", "key-a"), bytes("payload one"));
  EXPECT_FALSE(cache.load("spirv", "key-b").has_value());
  cache.store("spirv", "key-a", bytes("payload two"));  // overwrite by rename
  EXPECT_EQ(cache.load("spirv", "key-a"), bytes("payload two"));
  ASSERT_EQ(files_under("spirv").size(), 1u);
  EXPECT_EQ(files_under("spirv")[0].extension(), ".bin");
}

TEST_F(DiskCacheDir, OffDisablesLoadsAndStores) {
  ::setenv("KILN_CACHE_DIR", "off", 1);
  DiskCache cache = DiskCache::from_env();
  EXPECT_FALSE(cache.enabled());
  cache.store("spirv", "k", bytes("x"));
  EXPECT_FALSE(cache.load("spirv", "k").has_value());
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(DiskCacheDir, FlippedByteTruncationAndOldVersionAreMissesAndRemoved) {
  DiskCache cache(dir_);
  const fs::path path = cache.path_for("spirv", "k");
  auto rewrite = [&](auto edit) {
    cache.store("spirv", "k", bytes("some compiled words"));
    std::ifstream in(path, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    edit(data);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  };
  rewrite([](std::string& d) { d.back() ^= 0x5a; });  // payload corruption: checksum catches it
  EXPECT_FALSE(cache.load("spirv", "k").has_value());
  EXPECT_FALSE(fs::exists(path));
  rewrite([](std::string& d) { d.resize(d.size() - 3); });  // truncated write
  EXPECT_FALSE(cache.load("spirv", "k").has_value());
  rewrite([](std::string& d) { d.resize(5); });  // shorter than the header
  EXPECT_FALSE(cache.load("spirv", "k").has_value());
  rewrite([](std::string& d) { d[8] = char(kDiskCacheVersion + 1); });  // version field
  EXPECT_FALSE(cache.load("spirv", "k").has_value());
  // After the damage is gone a new store is read back normally.
  cache.store("spirv", "k", bytes("fresh"));
  EXPECT_EQ(cache.load("spirv", "k"), bytes("fresh"));
}

TEST(DiskCacheHash, StableHashIsFnv1aAndDiffersForDifferentText) {
  EXPECT_EQ(stable_hash(""), 14695981039346656037ull);  // FNV-1a offset basis
  EXPECT_EQ(stable_hash_hex("a"), "af63dc4c8601ec8c");   // published FNV-1a 64 test vector
  EXPECT_NE(stable_hash("void main(){}"), stable_hash("void main(){ }"));
}

#ifdef KILN_HAVE_VULKAN
bool have_vulkan() {
  std::string why;
  return !enumerate_vulkan_devices(&why).empty();
}

const char kDoubleShader[] = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Data { float v[]; };
void main() { v[gl_GlobalInvocationID.x] *= 2.0; }
)";

TEST_F(DiskCacheDir, SecondVulkanBackendLoadsSpirvAndPipelineCacheFromDisk) {
  if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  {
    auto backend = vulkan::open_backend(0);
    backend->compile({"double", "glsl", kDoubleShader});
    vulkan::ShaderCompileStats s = backend->compile_stats();
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.disk_hits, 0u);
  }
  EXPECT_EQ(files_under("spirv").size(), 1u);
  EXPECT_EQ(files_under("pipeline").size(), 1u);  // saved when the backend went away
  auto backend = vulkan::open_backend(0);
  backend->compile({"double", "glsl", kDoubleShader});
  vulkan::ShaderCompileStats s = backend->compile_stats();
  EXPECT_EQ(s.compiles, 0u);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_TRUE(s.pipeline_cache_loaded);
}

TEST_F(DiskCacheDir, CorruptSpirvAndPipelineEntriesAreRebuiltAndTheKernelStillRuns) {
  if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  vulkan::open_backend(0)->compile({"double", "glsl", kDoubleShader});
  for (const char* kind : {"spirv", "pipeline"})
    for (const fs::path& p : files_under(kind)) {
      std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
      f.seekp(-4, std::ios::end);
      f.write("\xde\xad\xbe\xef", 4);
    }
  auto backend = vulkan::open_backend(0);
  std::unique_ptr<CompiledKernel> program = backend->compile({"double", "glsl", kDoubleShader});
  vulkan::ShaderCompileStats s = backend->compile_stats();
  EXPECT_EQ(s.compiles, 1u);  // recompiled, not loaded
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_FALSE(s.pipeline_cache_loaded);
  // The rebuilt program computes v * 2 exactly.
  std::vector<float> host(256);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i) - 100.5f;
  auto buffer = backend->alloc(host.size() * 4);
  backend->upload(*buffer, host.data(), host.size() * 4);
  auto stream = backend->create_stream();
  stream->launch({program.get(), {buffer.get()}, {}, {}, {4, 1, 1}});
  stream->sync();
  std::vector<float> out(host.size());
  backend->download(*buffer, out.data(), out.size() * 4);
  for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(out[i], host[i] * 2) << i;
}

// out = a @ b on the device, checked against a float64 triple loop on the host.
// `max_autotune`: the op asks the matmul template to time its tiles (as a MaxAutotune compile does).
void expect_matmul_matches_host(vulkan::VulkanBackend& backend, int64_t m, int64_t n, int64_t k,
                                bool max_autotune = false) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(size_t(m * k)), b(size_t(k * n)), out(size_t(m * n));
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  auto da = backend.alloc(a.size() * 4), db = backend.alloc(b.size() * 4), dout = backend.alloc(out.size() * 4);
  backend.upload(*da, a.data(), a.size() * 4);
  backend.upload(*db, b.data(), b.size() * 4);
  AttrMap attrs;
  BufferView views[3] = {{da.get(), DType::F32, {m, k}}, {db.get(), DType::F32, {k, n}},
                         {dout.get(), DType::F32, {m, n}}};
  run_on_backend(backend, {OpKind::MatMul, attrs, std::span(views, 2), std::span(views + 2, 1), max_autotune});
  backend.download(*dout, out.data(), out.size() * 4);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += double(a[size_t(i * k + p)]) * double(b[size_t(p * n + j)]);
      ASSERT_NEAR(out[size_t(i * n + j)], want, 1e-4 * double(k)) << "at " << i << "," << j;
    }
}

TEST_F(DiskCacheDir, MaxAutotuneTimesTilesOnceThenReusesTheChoiceFromDisk) {
  if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  {
    auto backend = vulkan::open_backend(0);
    expect_matmul_matches_host(*backend, 96, 80, 72, true);  // sizes off every tile's multiple
    vulkan::ShaderCompileStats s = backend->compile_stats();
    EXPECT_EQ(s.autotune_timed, 1u);
    EXPECT_EQ(s.autotune_disk_hits, 0u);
    EXPECT_NE(s.autotune_last.find("m128_n128_k128"), std::string::npos) << s.autotune_last;
    EXPECT_NE(s.autotune_last.find("bm="), std::string::npos) << s.autotune_last;
    expect_matmul_matches_host(*backend, 100, 90, 70, true);  // same shape class: no second timing
    EXPECT_EQ(backend->compile_stats().autotune_timed, 1u);
  }
  EXPECT_EQ(files_under("autotune").size(), 1u);
  auto backend = vulkan::open_backend(0);
  expect_matmul_matches_host(*backend, 96, 80, 72, true);
  vulkan::ShaderCompileStats s = backend->compile_stats();
  EXPECT_EQ(s.autotune_timed, 0u);
  EXPECT_EQ(s.autotune_disk_hits, 1u);
}

TEST_F(DiskCacheDir, WithoutMaxAutotuneNothingIsTimed) {
  if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  auto backend = vulkan::open_backend(0);
  expect_matmul_matches_host(*backend, 96, 80, 72);
  EXPECT_EQ(backend->compile_stats().autotune_timed, 0u);
  EXPECT_TRUE(files_under("autotune").empty());
}

// Max-autotune belongs to the op that asks: one op timing its tiles leaves the next op of another
// shape class on the default tile, untimed.
TEST_F(DiskCacheDir, MaxAutotuneOfOneOpDoesNotTurnItOnForTheNext) {
  if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  auto backend = vulkan::open_backend(0);
  expect_matmul_matches_host(*backend, 96, 80, 72, true);
  EXPECT_EQ(backend->compile_stats().autotune_timed, 1u);
  expect_matmul_matches_host(*backend, 200, 150, 130);
  EXPECT_EQ(backend->compile_stats().autotune_timed, 1u);
  EXPECT_EQ(files_under("autotune").size(), 1u);
}
#endif

}  // namespace
}  // namespace kiln
