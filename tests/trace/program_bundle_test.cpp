// Bundles from compiled programs: the kernels, launches, SPIR-V, memory plan and times recorded
// must be the ones the PlannedProgram ran (checked against the program's own records and the
// graph), round trip through bundle.json, come out of kiln::compile's debug_dir, and open in
// kiln-debug.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include <kiln/kiln.h>

#include "core/frontend/compile.h"
#include "core/runtime/planned_program.h"
#include "core/trace/bundle.h"
#include "core/trace/program_bundle.h"
#include "trace/trace_test_model.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::optional<Device> vulkan_device() {
  for (const DeviceEntry& e : available_devices())
    if (e.kind == BackendKind::Vulkan) return Device(e.kind, e.index);
  return std::nullopt;
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_program_bundle_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

size_t line_count(const std::string& text) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Random inputs of the graph's input types (symbols at their hints), on `device`.
std::vector<Tensor> inputs_for(const Graph& g, Device device) {
  std::vector<Tensor> out;
  uint64_t seed = 1;
  for (const Value* v : g.inputs()) {
    std::vector<int64_t> dims;
    for (const SymInt& d : v->type.shape) dims.push_back(d.hint());
    out.push_back(randn(Dims(dims), device, seed++));
  }
  return out;
}

struct ProgramRun {
  testing_model::Traced traced = testing_model::trace_model();
  std::unique_ptr<PlannedProgram> program;
  std::vector<LaunchTiming> timings;
  trace::Bundle bundle;
};

void make(ProgramRun& r, Device device) {
  const Graph& g = r.traced.tracer->graph();
  r.program = std::make_unique<PlannedProgram>(g, device);
  r.program->run_profiled(device_tensors(inputs_for(g, device)), r.timings);
  r.bundle = trace::make_program_bundle(g, *r.program, r.timings, {.name = "model"});
}

TEST(ProgramBundle, KernelsAndLaunchesAreTheProgramsOwn) {
  auto vk = vulkan_device();
  if (!vk) GTEST_SKIP() << "no Vulkan device";
  ProgramRun r;
  make(r, *vk);
  const trace::Bundle& b = r.bundle;
  EXPECT_EQ(b.kind, "program");
  EXPECT_EQ(b.device, vk->name());
  const std::vector<PlannedKernel>& kernels = r.program->kernels();
  ASSERT_EQ(b.kernels.size(), kernels.size());
  std::vector<PlannedLaunch> launches = r.program->launches();
  size_t launch = 0, fused = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const trace::BundleKernel& bk = b.kernels[k];
    EXPECT_EQ(bk.name, kernels[k].name);
    std::set<int> origins(bk.origins.begin(), bk.origins.end());
    for (int id : kernels[k].origins) EXPECT_TRUE(origins.count(id)) << "kernel " << k << " node " << id;
    if (bk.origins.size() > 1) ++fused;
    for (const trace::KernelSource& src : bk.sources) {
      ASSERT_LT(launch, launches.size());
      EXPECT_EQ(launches[launch].kernel, int(k));
      EXPECT_EQ(src.text, launches[launch].source);
      EXPECT_EQ(src.groups, launches[launch].groups);
      EXPECT_EQ(src.is_template, launches[launch].is_template);
      ++launch;
      // Every line's origins are nodes of this kernel, and some line names one.
      EXPECT_EQ(src.line_origins.size(), line_count(src.text)) << src.program;
      bool any = false;
      for (const std::vector<int>& line : src.line_origins)
        for (int id : line) {
          EXPECT_TRUE(origins.count(id)) << src.program << " line names node " << id;
          any = true;
        }
      EXPECT_TRUE(any) << src.program;
      // The SPIR-V the pipeline was built from.
      EXPECT_NE(src.spirv.find("OpEntryPoint GLCompute"), std::string::npos) << src.program;
    }
  }
  EXPECT_EQ(launch, launches.size());
  EXPECT_GT(fused, 0u) << "the model's pointwise chains should fuse";
  EXPECT_LT(b.kernels.size(), r.traced.tracer->graph().num_nodes());
  // Each node is in exactly one kernel or says why it is in none.
  std::map<int, int> kernels_of;
  for (const trace::BundleKernel& bk : b.kernels)
    for (int id : bk.origins) ++kernels_of[id];
  for (const trace::BundleNode& n : b.nodes) {
    if (!n.no_kernel.empty()) EXPECT_EQ(kernels_of[n.id], 0) << n.op;
    else EXPECT_EQ(kernels_of[n.id], 1) << "%" << n.id << " " << n.op;
  }
  // Bytes and FLOPs: the matmul kernels at least count 2*M*N*K.
  for (const trace::BundleKernel& bk : b.kernels) EXPECT_GT(bk.bytes_read + bk.bytes_written, 0) << bk.name;
}

TEST(ProgramBundle, MemoryPlanAndTimesAreRecorded) {
  auto vk = vulkan_device();
  if (!vk) GTEST_SKIP() << "no Vulkan device";
  ProgramRun r;
  make(r, *vk);
  const trace::BundleMemory& m = r.bundle.memory;
  const MemoryPlan& plan = r.program->memory_plan();
  ASSERT_EQ(m.buffers.size(), r.program->plan_values().size());
  ASSERT_FALSE(m.buffers.empty());
  EXPECT_EQ(m.planned_bytes, plan.planned_bytes);
  EXPECT_LE(m.lower_bound_bytes, m.planned_bytes);
  EXPECT_LE(m.planned_bytes, m.naive_bytes);
  std::set<int> values;
  for (const trace::BundleNode& n : r.bundle.nodes) values.insert(n.outputs.begin(), n.outputs.end());
  for (const trace::BundleBuffer& buf : m.buffers) {
    if (buf.value >= 0) EXPECT_TRUE(values.count(buf.value)) << buf.name;
    EXPECT_LE(buf.first, buf.last);
    EXPECT_LT(buf.last, int(r.bundle.kernels.size()));
    ASSERT_GE(buf.arena, 0);
    ASSERT_LT(size_t(buf.arena), m.arena_bytes.size());
    EXPECT_LE(buf.offset + buf.bytes, m.arena_bytes[size_t(buf.arena)]) << buf.name;
  }
  if (!vk->backend().caps().timestamps) GTEST_SKIP() << "the device records no timestamps";
  ASSERT_EQ(r.timings.size(), r.program->launches().size());
  double sum = 0, previous_end = 0;
  for (const trace::BundleKernel& bk : r.bundle.kernels) {
    if (bk.sources.empty()) continue;
    ASSERT_TRUE(bk.time_us && bk.start_us) << bk.name;
    EXPECT_GE(*bk.time_us, 0);
    // Device timestamps: a kernel starts once the one before it has ended (one queue, dependent
    // launches), at the first launch's clock reading 0.
    if (previous_end == 0) EXPECT_EQ(*bk.start_us, 0) << bk.name;
    EXPECT_GE(*bk.start_us, previous_end - 1e-3) << bk.name;
    previous_end = *bk.start_us + *bk.time_us;
    double launches = 0;
    for (const trace::KernelSource& s : bk.sources) launches += s.time_us.value_or(-1e9);
    EXPECT_NEAR(launches, *bk.time_us, 1e-6 * (1 + launches));
    sum += *bk.time_us;
  }
  double want = 0;
  for (const LaunchTiming& t : r.timings) want += t.time_us;
  EXPECT_NEAR(sum, want, 1e-6 * (1 + want));
  EXPECT_GT(sum, 0);
  std::printf("profiled %zu kernels: %.1f us\n", r.bundle.kernels.size(), sum);
}

TEST(ProgramBundle, RoundTripsThroughBundleJson) {
  auto vk = vulkan_device();
  if (!vk) GTEST_SKIP() << "no Vulkan device";
  ProgramRun r;
  make(r, *vk);
  fs::path dir = fresh_dir("roundtrip");
  trace::write_bundle(dir.string(), r.bundle);
  trace::Bundle read = trace::read_bundle(dir.string());
  for (auto& k : read.kernels)
    for (auto& s : k.sources) s.file.clear();
  EXPECT_TRUE(read == r.bundle);
  EXPECT_TRUE(fs::exists(dir / "sources/kernel_0.spvasm"));
  fs::remove_all(dir);
}

Tensor chain(const Tensor& x, const Tensor& w) { return relu(matmul(x * 0.5 + 1.0, w)) * 2.0; }

TEST(ProgramBundle, CompileDebugDirWritesWhatRanOnVulkanAndCpuAndPerNodeOnRef) {
  for (std::string name : {"vulkan", "cpu", "ref"}) {
    std::optional<Device> device = name == "vulkan" ? vulkan_device() : std::optional<Device>(Device::parse(name));
    if (!device) continue;
    const bool gpu = name != "ref";  // a program of generated kernels
    fs::path dir = fresh_dir("compile_" + name);
    auto f = compile(chain, {.debug_dir = dir.string()});
    Tensor x = randn({4, 8}, *device, 1), w = randn({8, 3}, *device, 2);
    f(x, w);
    std::vector<fs::path> bundles;
    for (const auto& e : fs::directory_iterator(dir))
      if (fs::exists(e.path() / "bundle.json")) bundles.push_back(e.path());
    ASSERT_EQ(bundles.size(), 1u);
    trace::Bundle b = trace::read_bundle(bundles[0].string());
    EXPECT_FALSE(b.passes.empty());
    EXPECT_EQ(b.device, device->name());
    if (gpu) {
      EXPECT_EQ(b.kind, "program");
      size_t launches = 0;
      for (const trace::BundleKernel& k : b.kernels) launches += k.sources.size();
      EXPECT_EQ(int64_t(launches), f.stats().program.kernels);
      // mul and add fuse: fewer kernels than computing nodes.
      EXPECT_LT(b.kernels.size(), 5u);
      if (device->backend().caps().timestamps)
        for (const trace::BundleKernel& k : b.kernels) EXPECT_TRUE(k.time_us.has_value()) << k.name;
    } else {
      EXPECT_EQ(b.kind, "per-node");
    }
    fs::remove_all(dir);
  }
}

#ifdef KILN_DEBUG_EXE
TEST(ProgramBundle, KilnDebugOpensAProgramBundleHeadless) {
  auto vk = vulkan_device();
  if (!vk) GTEST_SKIP() << "no Vulkan device";
  ProgramRun r;
  make(r, *vk);
  fs::path dir = fresh_dir("debugger");
  trace::write_bundle(dir.string(), r.bundle);
  std::string command = std::string(KILN_DEBUG_EXE) + " --headless --frames 3 --kernel 1 " + dir.string() + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 512> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("3 frames"), std::string::npos) << output;
  fs::remove_all(dir);
}
#endif

}  // namespace
}  // namespace kiln
