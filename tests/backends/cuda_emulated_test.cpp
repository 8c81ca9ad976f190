// The CUDA dialect, run: kiln's CUDA C executes on the host through the CUDA host emulator
// (tests/support), so generated kernels, the CUDA templates (SIMT variants, sm_70) and compiled
// programs are checked against the cpu reference without a GPU. The emulator itself is checked
// first with hand-written kernels whose results are derived by hand (barriers, shuffles, votes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>

#include <kiln/kiln.h>

#include "backends/cuda/cuda_templates.h"
#include "core/frontend/dispatch.h"
#include "core/kernel/emit.h"
#include "core/kernel/lower.h"
#include "core/runtime/eager_programs.h"
#include "core/support/error.h"
#include "core/trace/bundle.h"
#include "kernel/op_cases.h"
#include "support/cuda_batch.h"
#include "support/cuda_emulated_backend.h"
#include "support/cuda_host_emulator.h"

namespace kiln {
namespace {

using kernel::testing::bytes_of;
using kernel::testing::Case;
using kernel::testing::first_mismatch;
using kernel::testing::Gen;
using kernel::testing::Input;
using kernel::testing::make_data;
using kernel::testing::numel_of;
using kernel::testing::Tolerance;
using testing::CudaEmulatedBackend;
using testing::CudaEmulatedOptions;
using testing::CudaHostEmulator;

// --- the emulator on hand-written kernels -----------------------------------------------------

// Block sum through shared memory and warp shuffles, plus every shuffle flavour and a ballot per
// lane, for blocks of 96 threads (three warps).
const char* kSyncKernel = R"(
extern "C" __global__ void __launch_bounds__(96) sync_kernel(const int* x, int* block_sums, int* lanes) {
  __shared__ int warp_sums[3];
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  int v = x[blockIdx.x * 96 + t];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (t == 0) block_sums[blockIdx.x] = warp_sums[0] + warp_sums[1] + warp_sums[2];
  int* out = lanes + (blockIdx.x * 96 + t) * 5;
  out[0] = __shfl_down_sync(0xffffffffu, t, 3);
  out[1] = __shfl_up_sync(0xffffffffu, t, 5);
  out[2] = __shfl_sync(0xffffffffu, t, 7);
  out[3] = __shfl_xor_sync(0xffffffffu, t, 9, 16);
  out[4] = int(__ballot_sync(0xffffffffu, (t & 3) == 1));
}
)";

TEST(CudaHostEmulator, BarriersShufflesAndVotesMatchTheirDefinitions) {
  CudaHostEmulator emu;
  const CudaHostEmulator::Kernel& k = emu.add("sync_kernel", kSyncKernel);
  EXPECT_EQ(k.launch_bounds, 96u);
  EXPECT_TRUE(k.needs_fibers);
  const int blocks = 3, n = blocks * 96;
  std::vector<int> x(n), sums(blocks, -1), lanes(size_t(n) * 5, -1);
  for (int i = 0; i < n; ++i) x[size_t(i)] = (i * 37) % 101 - 50;
  int *px = x.data(), *ps = sums.data(), *pl = lanes.data();
  void* args[] = {&px, &ps, &pl};
  emu.launch(k, {uint32_t(blocks), 1, 1}, {96, 1, 1}, args);
  for (int b = 0; b < blocks; ++b) {
    int want = 0;
    for (int t = 0; t < 96; ++t) want += x[size_t(b * 96 + t)];
    EXPECT_EQ(sums[size_t(b)], want) << "block " << b;
  }
  for (int i = 0; i < n; ++i) {
    const int t = i % 96, lane = t % 32, base = t - lane;
    const int* o = &lanes[size_t(i) * 5];
    EXPECT_EQ(o[0], lane + 3 < 32 ? t + 3 : t) << "shfl_down, thread " << t;
    EXPECT_EQ(o[1], lane >= 5 ? t - 5 : t) << "shfl_up, thread " << t;
    EXPECT_EQ(o[2], base + 7) << "shfl, thread " << t;
    EXPECT_EQ(o[3], (lane ^ 9) < (lane / 16 + 1) * 16 ? base + (lane ^ 9) : t) << "shfl_xor width 16, thread " << t;
    EXPECT_EQ(unsigned(o[4]), 0x22222222u) << "ballot, thread " << t;
  }
  EXPECT_EQ(emu.stats().libraries, 1u);
}

TEST(CudaHostEmulator, ManySourcesShareOneLibraryAndRunWithoutFibers) {
  CudaHostEmulator emu;
  std::vector<const CudaHostEmulator::Kernel*> ks;
  for (int i = 0; i < 3; ++i)
    ks.push_back(&emu.add("fill" + std::to_string(i),
                          "typedef long long int64_t;\nextern \"C\" __global__ void __launch_bounds__(64) k(int64_t* y) {\n"
                          "  y[blockIdx.x * blockDim.x + threadIdx.x] = " + std::to_string(i + 1) +
                          "ll * (blockIdx.x * blockDim.x + threadIdx.x);\n}\n"));
  emu.build();
  EXPECT_EQ(emu.stats().libraries, 1u);
  EXPECT_EQ(emu.stats().sources, 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(ks[size_t(i)]->needs_fibers);
    std::vector<long long> y(128, -1);
    long long* py = y.data();
    void* args[] = {&py};
    emu.launch(*ks[size_t(i)], {2, 1, 1}, {64, 1, 1}, args);
    for (int j = 0; j < 128; ++j) ASSERT_EQ(y[size_t(j)], (i + 1) * j) << "source " << i;
  }
}

TEST(CudaHostEmulator, DivergentBarrierIsAnErrorNotAHang) {
  CudaHostEmulator emu;
  const auto& k = emu.add("divergent", R"(
extern "C" __global__ void __launch_bounds__(32) divergent(float* y) {
  if (threadIdx.x < 16) __syncthreads();
  else y[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
})");
  std::vector<float> y(32);
  float* py = y.data();
  void* args[] = {&py};
  try {
    emu.launch(k, {1, 1, 1}, {32, 1, 1}, args);
    FAIL() << "a divergent barrier must not complete";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocked"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("divergent"), std::string::npos) << e.what();
  }
}

TEST(CudaHostEmulator, CompileErrorsNameTheKernelAndSpareTheOthers) {
  CudaHostEmulator emu;
  const auto& bad = emu.add("broken_kernel", "extern \"C\" __global__ void __launch_bounds__(32) b(float* y) { undeclared_thing = 1; }");
  const auto& good = emu.add("good_kernel", "extern \"C\" __global__ void __launch_bounds__(32) g(float* y) { y[threadIdx.x] = 2.0f; }");
  std::vector<float> y(32);
  float* py = y.data();
  void* args[] = {&py};
  try {
    emu.launch(bad, {1, 1, 1}, {32, 1, 1}, args);
    FAIL() << "a kernel that does not compile must not launch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken_kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
  }
  emu.launch(good, {1, 1, 1}, {32, 1, 1}, args);
  EXPECT_EQ(y[31], 2.0f);
}

// Where the CUDA toolkit is missing there is no host __half: f16 kernels are refused by name, and
// everything else (the shared prelude includes cuda_fp16.h) still builds and runs.
TEST(CudaHostEmulator, WithoutCudaHeadersHalfKernelsAreRefusedClearly) {
  CudaHostEmulator emu(CudaHostEmulator::Options{.cuda_headers = false});
  EXPECT_FALSE(emu.has_half());
  try {
    emu.add("half_kernel", "#include <cuda_fp16.h>\nextern \"C\" __global__ void __launch_bounds__(32) h(__half* y) {}\n");
    FAIL() << "an f16 kernel must be refused without cuda_fp16.h";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("half_kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda_fp16.h was not found"), std::string::npos) << e.what();
  }
  const auto& k = emu.add("erf_after_prelude", kernel::emit_prelude_for(kernel::Dialect::Cuda) +
                                                   "extern \"C\" __global__ void __launch_bounds__(32) g(float* y) {\n"
                                                   "  y[threadIdx.x] = kiln_erf(0.5f * float(threadIdx.x));\n}\n");
  std::vector<float> y(32);
  float* py = y.data();
  void* args[] = {&py};
  emu.launch(k, {1, 1, 1}, {32, 1, 1}, args);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[size_t(i)], std::erf(0.5 * i), 1.5e-7 + 1e-7) << i;  // A&S 7.1.26
}

// The NVRTC compile test's form: one translation unit of non-standalone kernels after
// emit_prelude_for(Cuda), entries k0..kN. Every entry builds on the host in one library.
TEST(CudaHostEmulator, NonStandaloneBatchBuildsEveryEntry) {
  kiln::testing::CudaBatch batch;
  for (const Case& c : kernel::testing::table()) {
    if (batch.kernels >= 40) break;
    std::vector<TensorType> in;
    for (const Input& i : c.inputs) in.push_back({i.dtype, make_shape(i.dims)});
    AttrMap attrs = complete_attrs(c.kind, c.attrs, {});
    for (const kernel::LoweredOp::Step& step : kernel::lower_op(c.kind, attrs, in, infer_types(c.kind, in, attrs, {})).steps)
      batch.add(step.kernel.kernel);
  }
  CudaHostEmulator emu;
  std::vector<const CudaHostEmulator::Kernel*> entries;
  for (int i = 0; i < batch.kernels; ++i) entries.push_back(&emu.add("op_table_batch", batch.source, "k" + std::to_string(i)));
  emu.build();
  EXPECT_EQ(emu.stats().libraries, 1u);
  for (const auto* k : entries) EXPECT_NE(k->fn, nullptr) << k->entry;
}

// The backend's buffers end at an inaccessible page: reading one element past the end faults at
// once, and the message names the kernel (on a GPU the read would return garbage silently).
TEST(CudaEmulatedBackendDeathTest, ReadingPastABufferFaultsNamingTheKernel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The dying child cannot clean up its compile directory: it goes under one the parent removes.
  const std::string dir = ::testing::TempDir() + "kiln_cuda_emu_death";
  auto overread = [&dir] {
    std::filesystem::create_directories(dir);
    setenv("TMPDIR", dir.c_str(), 1);
    CudaEmulatedBackend backend;
    std::unique_ptr<Buffer> x = backend.alloc(64 * sizeof(float)), y = backend.alloc(64 * sizeof(float));
    std::unique_ptr<CompiledKernel> program = backend.compile(
        {"overread", "cuda",
         "extern \"C\" __global__ void __launch_bounds__(64) overread(const float* x, float* y) {\n"
         "  y[threadIdx.x] = x[threadIdx.x + 64];\n}\n"});
    Launch launch;
    launch.program = program.get();
    launch.buffers = {x.get(), y.get()};
    backend.create_stream()->launch(launch);
  };
  EXPECT_DEATH(overread(), "kernel overread .*out-of-bounds");
  std::filesystem::remove_all(dir);
}

struct Prepared {
  AttrMap attrs;
  std::vector<TensorType> in_types, out_types;
};

Prepared prepare(const Case& c) {
  Prepared p{complete_attrs(c.kind, c.attrs, {}), {}, {}};
  for (const Input& in : c.inputs) p.in_types.push_back({in.dtype, make_shape(in.dims)});
  p.out_types = infer_types(c.kind, p.in_types, p.attrs, {});
  return p;
}

// Registers with the emulator every source the backend's runner will compile for these cases, so
// they build as one batch instead of one host compile per kernel.
void prebuild(CudaEmulatedBackend& backend, const std::vector<Case>& cases, int template_sm) {
  for (const Case& c : cases) {
    Prepared p = prepare(c);
    if (template_sm > 0) {
      std::vector<BufferView> ins, outs;
      for (const TensorType& t : p.in_types) ins.push_back({nullptr, t.dtype, static_dims(t.shape)});
      for (const TensorType& t : p.out_types) outs.push_back({nullptr, t.dtype, static_dims(t.shape)});
      if (auto launch = cuda::plan_cuda_template(OpRun{c.kind, p.attrs, ins, outs}, backend.caps(), template_sm)) {
        std::string entry;
        unsigned block = 0;
        if (cuda::cuda_entry_point(launch->source, &entry, &block)) backend.emulator().add(launch->name, launch->source, entry);
        continue;
      }
    }
    kernel::LoweredOp lowered;
    try {
      lowered = kernel::lower_op(c.kind, p.attrs, p.in_types, p.out_types);
    } catch (const Error&) {
      continue;  // the case reports it
    }
    kernel::EmitOptions o;  // as EagerPrograms emits for a device that is not the host
    o.dialect = kernel::Dialect::Cuda;
    for (const kernel::LoweredOp::Step& s : lowered.steps) {
      if (s.kernel.elements() == 0) continue;
      o.static_params = s.kernel.static_param_values();
      std::string source = kernel::emit(s.kernel.kernel, o).source;
      if (source.find("__half") != std::string::npos && !backend.emulator().has_half()) continue;
      backend.emulator().add(s.kernel.kernel.name, source);
    }
  }
  backend.emulator().build();
}

bool runs_here(const Case& c, const CudaEmulatedBackend& b) {
  if (b.caps().f16) return true;
  for (const Input& in : c.inputs)
    if (in.dtype == DType::F16) return false;
  Prepared p = prepare(c);
  for (const TensorType& t : p.out_types)
    if (t.dtype == DType::F16) return false;
  return true;
}

void check_case(CudaEmulatedBackend& backend, const Case& c, uint64_t seed, bool* lowered);

// Runs `c` on `backend` and on the cpu reference and expects every output within the case's
// tolerance. Returns false when the op has no kernel lowering yet (nothing was checked).
bool expect_matches_reference(CudaEmulatedBackend& backend, const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  bool lowered = true;
  check_case(backend, c, seed, &lowered);
  return lowered;
}

void check_case(CudaEmulatedBackend& backend, const Case& c, uint64_t seed, bool* lowered) {
  std::mt19937 rng(unsigned(1234 + seed));
  Prepared p = prepare(c);
  std::vector<std::vector<uint8_t>> in_data;
  std::vector<Tensor> in_tensors;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<BufferView> ins, outs;
  for (const Input& in : c.inputs) {
    in_data.push_back(make_data(in, rng));
    in_tensors.push_back(from_bytes(in_data.back().data(), in.dtype, Dims(in.dims), Device::cpu()));
    buffers.push_back(backend.alloc(std::max<size_t>(in_data.back().size(), 4)));
    backend.upload(*buffers.back(), in_data.back().data(), in_data.back().size());
    ins.push_back({buffers.back().get(), in.dtype, in.dims});
  }
  std::vector<Tensor> want = run_op(c.kind, in_tensors, p.attrs, Loc::current());
  ASSERT_EQ(want.size(), p.out_types.size());
  for (const TensorType& t : p.out_types) {
    std::vector<int64_t> dims = static_dims(t.shape);
    size_t bytes = size_t(numel_of(dims)) * dtype_size(t.dtype);
    std::vector<uint8_t> poison(bytes, 0xCD);  // an element no kernel writes shows up
    buffers.push_back(backend.alloc(std::max<size_t>(bytes, 4)));
    backend.upload(*buffers.back(), poison.data(), bytes);
    outs.push_back({buffers.back().get(), t.dtype, dims});
  }
  try {
    run_on_backend(backend, OpRun{c.kind, p.attrs, ins, outs});
    backend.synchronize();
  } catch (const Error& e) {
    if (std::string(e.what()).find("has no kernel lowering yet") != std::string::npos) {
      *lowered = false;
      return;
    }
    FAIL() << c.name << ": " << e.what();
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    std::vector<uint8_t> got(size_t(numel_of(outs[o].dims)) * dtype_size(outs[o].dtype));
    if (!got.empty()) backend.download(*outs[o].buffer, got.data(), got.size());
    ASSERT_EQ(want[o].sizes(), outs[o].dims) << c.name;
    Tolerance tol = c.tol ? *c.tol : kernel::testing::default_tolerance(c.kind, outs[o].dtype);
    EXPECT_EQ(first_mismatch(got, bytes_of(want[o]), outs[o].dtype, tol, "emulated CUDA"), "")
        << c.name << " (" << op_name(c.kind) << ", output " << o << " " << dtype_name(outs[o].dtype) << ", rtol "
        << tol.rtol << " atol " << tol.atol << ")";
  }
}

// --- the op table's generated kernels ---------------------------------------------------------

// One test per op family, each a process of its own under ctest: its kernels build as one batch
// (a host compile per case would cost minutes).
class CudaEmulatedOps : public ::testing::TestWithParam<const char*> {};

std::optional<OpFamily> family_named(const std::string& name) {
  const std::pair<const char*, OpFamily> all[] = {
      {"Unary", OpFamily::Unary}, {"Binary", OpFamily::Binary}, {"Reduce", OpFamily::Reduce}, {"Linalg", OpFamily::Linalg},
      {"Conv", OpFamily::Conv},   {"Norm", OpFamily::Norm},     {"Shape", OpFamily::Shape}};
  for (const auto& [n, f] : all)
    if (name == n) return f;
  return std::nullopt;
}

TEST_P(CudaEmulatedOps, GeneratedKernelsMatchCpuReference) {
  CudaEmulatedBackend backend;
  std::vector<std::pair<size_t, Case>> cases;
  std::vector<Case> runnable;
  size_t no_half = 0, no_lowering = 0;
  for (size_t i = 0; i < kernel::testing::table().size(); ++i) {
    const Case& c = kernel::testing::table()[i];
    if (op_def(c.kind).family != *family_named(GetParam())) continue;
    if (!runs_here(c, backend)) {
      ++no_half;
      continue;
    }
    cases.emplace_back(i, c);
    runnable.push_back(c);
  }
  ASSERT_FALSE(cases.empty());
  prebuild(backend, runnable, 0);
  for (const auto& [index, c] : cases)
    if (!expect_matches_reference(backend, c, index)) ++no_lowering;
  CudaHostEmulator::Stats st = backend.emulator().stats();
  std::printf("%s: %zu cases run (%zu without a lowering yet), %zu f16 cases not run (no cuda_fp16.h); "
              "%zu kernels in %zu host libraries, %.1f s compiling, %zu launches\n",
              GetParam(), cases.size(), no_lowering, no_half, st.sources, st.libraries,
              st.compile_seconds, st.launches);
  EXPECT_LT(no_lowering, cases.size());
  // One batch (two libraries at most): otherwise prebuild() no longer emits what EagerPrograms
  // does, and each kernel paid its own host compile.
  EXPECT_LE(st.libraries, 2u) << "kernels compiled outside the prebuilt batch";
}

INSTANTIATE_TEST_SUITE_P(Table, CudaEmulatedOps,
                         ::testing::Values("Unary", "Binary", "Reduce", "Linalg", "Conv", "Norm", "Shape"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// Past 65535 blocks the launch grid gets a y dimension and kernels fold it into their element
// index; the table's cases are far smaller, so this one covers that path.
TEST(CudaEmulatedOpsLarge, GridWithYBlocksCoversEveryElement) {
  CudaEmulatedBackend backend;
  const Case c{"add_grid_y", OpKind::Add, {}, {{DType::F32, {4100, 4100}}, {DType::F32, {4100}}}, Tolerance{}};
  EXPECT_TRUE(expect_matches_reference(backend, c, 7));
  EXPECT_GT(backend.emulator().stats().launches, 0u);
}

// --- CUDA templates (SIMT variants, sm_70) ----------------------------------------------------

std::vector<Case> template_cases() {
  using O = OpKind;
  using I = std::vector<int64_t>;
  const DType f = DType::F32;
  const Tolerance dot{1e-5, 1e-4};  // long dot products, summed in another order
  std::vector<Case> t = {
      {"matmul_128x96x80", O::MatMul, {}, {{f, {128, 96}}, {f, {96, 80}}}, dot},
      {"matmul_batched_odd", O::MatMul, {}, {{f, {2, 65, 97}}, {f, {97, 33}}}, dot},
      {"matmul_vector_rhs_batch", O::MatMul, {}, {{f, {3, 70, 64}}, {f, {3, 64, 50}}}, dot},
      {"linear_bias", O::Linear, {}, {{f, {4, 32, 64}}, {f, {48, 64}}, {f, {48}}}, dot},
      {"gemm_trans_alpha_beta", O::Gemm, {{"trans_a", true}, {"trans_b", true}, {"alpha", 0.5}, {"beta", -2.0}},
       {{f, {96, 64}}, {f, {80, 96}}, {f, {64, 80}}}, dot},
      {"conv2d_pad_bias", O::Conv, {{"padding", I{1, 1, 1, 1}}}, {{f, {2, 8, 20, 20}}, {f, {16, 8, 3, 3}}, {f, {16}}}, dot},
      {"conv2d_stride_groups", O::Conv, {{"stride", I{2, 2}}, {"groups", int64_t(2)}, {"padding", I{1, 0, 1, 0}}},
       {{f, {1, 8, 17, 15}}, {f, {12, 4, 3, 3}}}, dot},
      {"conv1d_dilation", O::Conv, {{"dilation", I{2}}}, {{f, {2, 6, 50}}, {f, {10, 6, 5}}}, dot},
      {"sum_rows", O::Sum, {{"dims", I{-1}}, {"keepdim", false}}, {{f, {8, 100}}}, dot},
      {"mean_rows_keep", O::Mean, {{"dims", I{1, 2}}, {"keepdim", true}}, {{f, {6, 8, 8}}}, dot},
      {"amax_rows_nan", O::ReduceMax, {{"dims", I{-1}}, {"keepdim", false}}, {{f, {5, 33}, Gen::WithNaN}}, {}},
      {"amin_rows", O::ReduceMin, {{"dims", I{1}}, {"keepdim", false}}, {{f, {5, 40}}}, {}},
      {"softmax_rows", O::Softmax, {{"dim", int64_t(-1)}}, {{f, {7, 150}}}, Tolerance{1e-5, 1e-6}},
      {"log_softmax_rows", O::LogSoftmax, {{"dim", int64_t(-1)}}, {{f, {7, 300}}}, Tolerance{1e-5, 1e-5}},
      {"layer_norm_affine", O::LayerNorm, {{"axis", int64_t(-1)}}, {{f, {4, 3, 96}}, {f, {96}}, {f, {96}}}, dot},
      {"layer_norm_plain", O::LayerNorm, {{"axis", int64_t(1)}}, {{f, {5, 4, 10}}}, dot},
  };
  return t;
}

// Grouped by template (matmul, conv, rows), one process each under ctest, built as one batch.
class CudaEmulatedTemplates : public ::testing::TestWithParam<const char*> {};

const char* template_of(OpKind k) {
  if (k == OpKind::MatMul || k == OpKind::Linear || k == OpKind::Gemm) return "Matmul";
  if (k == OpKind::Conv) return "Conv";
  return "Rows";
}

TEST_P(CudaEmulatedTemplates, TemplatesMatchCpuReference) {
  CudaEmulatedBackend backend(CudaEmulatedOptions{.template_sm = 70});
  std::vector<Case> cases;
  for (const Case& c : template_cases())
    if (std::string(template_of(c.kind)) == GetParam()) cases.push_back(c);
  prebuild(backend, cases, 70);
  for (size_t i = 0; i < cases.size(); ++i) {
    const size_t before = backend.eager_stats().template_launches;
    EXPECT_TRUE(expect_matches_reference(backend, cases[i], 100 + i));
    EXPECT_GT(backend.eager_stats().template_launches, before)
        << cases[i].name << ": the planner took no template, so the generic kernels were checked instead";
  }
  std::printf("%s: %zu cases through %zu template sources\n", GetParam(), cases.size(),
              backend.emulator().stats().sources);
}

INSTANTIATE_TEST_SUITE_P(Sm70, CudaEmulatedTemplates, ::testing::Values("Matmul", "Conv", "Rows"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// --- compiled programs: fused kernels, templates, record/replay -------------------------------

Device emulated_device() {
  static const Device device = [] {
    install_backend(BackendKind::Cuda, 0, std::make_unique<CudaEmulatedBackend>(CudaEmulatedOptions{.template_sm = 70}));
    return Device(BackendKind::Cuda, 0);
  }();
  return device;
}

struct Block : nn::Module {
  explicit Block(Device device)
      : fc1(64, 96, true, device, 11), fc2(96, 32, true, device, 12), norm({96}, 1e-5, device) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("norm", norm);
  }
  std::string type_name() const override { return "Block"; }
  Tensor forward(const Tensor& x) {
    ScopeGuard guard = scope();
    Tensor h = gelu(norm(fc1(x)));
    return softmax(fc2(h) * 0.5 + sigmoid(sum(h, {-1}, true)), -1);
  }
  nn::Linear fc1, fc2;
  nn::LayerNorm norm;
};

Tensor block_fn(const Tensor& x, Block& m) { return m.forward(x); }

void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  ASSERT_EQ(got.type().str(), want.type().str());
  std::vector<double> g = got.to(Device::cpu()).to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), atol + rtol * std::abs(w[i])) << "element " << i << ": " << g[i] << " vs " << w[i];
}

TEST(CudaEmulatedCompile, FusedKernelsAndTemplatesMatchCpu) {
  Device dev = emulated_device();
  auto& backend = dynamic_cast<CudaEmulatedBackend&>(dev.backend());
  Block cpu_block(Device::cpu()), dev_block(dev);
  const size_t planned = backend.templates_planned();  // eager ops ask the planner too
  for (Mode mode : {Mode::Default, Mode::ReduceOverhead}) {
    auto fast = compile(block_fn, CompileOptions{.mode = mode});
    for (int64_t batch : {64, 40}) {
      Tensor x = randn({batch, 64}, Device::cpu(), uint64_t(batch));
      const size_t launches = backend.emulator().stats().launches;
      Tensor got = fast(x.to(dev), dev_block);
      EXPECT_EQ(got.device(), dev);
      expect_close(got, block_fn(x, cpu_block), 1e-4, 1e-5);
      EXPECT_GT(backend.emulator().stats().launches, launches) << "the compiled program ran no kernel";
    }
  }
  // fc1 at batch 64 is past the matmul template's size floor.
  EXPECT_GT(backend.templates_planned(), planned) << "the planner gave the compiled program no CUDA template";
}

// A small CNN and a self-attention layer: convolution, pooling, normalization, batched matmuls,
// softmax and permutes, fused and planned the way a GPU would run them.
struct ConvAttention : nn::Module {
  explicit ConvAttention(Device device)
      : conv(3, 8, 3, 1, 1, 1, 1, true, device, 21), bn(8, 1e-5, 0.1, device), attn(16, 2, true, true, device, 22),
        head(16, 5, true, device, 23) {
    register_module("conv", conv);
    register_module("bn", bn);
    register_module("attn", attn);
    register_module("head", head);
    eval();  // inference: batch norm uses its running statistics
  }
  std::string type_name() const override { return "ConvAttention"; }
  Tensor forward(const Tensor& x) {
    ScopeGuard guard = scope();
    Tensor f = max_pool2d(relu(bn(conv(x))), 2);            // [B, 8, 4, 4]
    Tensor tokens = reshape(f, {f.shape(0), 8, 16});        // 8 tokens of 16 features
    Tensor a = attn(tokens, tokens, tokens) + tokens;
    return log_softmax(head(mean(a, {1})), -1);             // [B, 5]
  }
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
  nn::MultiheadAttention attn;
  nn::Linear head;
};

Tensor conv_attention_fn(const Tensor& x, ConvAttention& m) { return m.forward(x); }

TEST(CudaEmulatedCompile, ConvAndAttentionMatchCpu) {
  Device dev = emulated_device();
  ConvAttention cpu_model(Device::cpu()), dev_model(dev);
  auto fast = compile(conv_attention_fn);
  for (int64_t batch : {2, 3}) {
    Tensor x = randn({batch, 3, 8, 8}, Device::cpu(), uint64_t(10 + batch));
    expect_close(fast(x.to(dev), dev_model), conv_attention_fn(x, cpu_model), 1e-4, 1e-5);
  }
}

// Attention's head split and key transpose, a transposed A, and the halves of a packed projection,
// read in place by the CUDA matmul template through leading dims, batch strides and first
// elements: each function is one template launch, checked against the cpu reference.
TEST(CudaEmulatedCompile, MatmulTemplatesReadViewsInPlace) {
  Device dev = emulated_device();
  auto& backend = dynamic_cast<CudaEmulatedBackend&>(dev.backend());
  auto scores = compile([](const Tensor& q, const Tensor& k) {
    return matmul(permute(q, {0, 2, 1, 3}), permute(k, {0, 2, 3, 1}));
  });
  auto transposed_a = compile([](const Tensor& g, const Tensor& x) { return matmul(transpose(g, 0, 1), x); });
  Tensor q = randn({2, 64, 2, 32}, Device::cpu(), 31), k = randn({2, 64, 2, 32}, Device::cpu(), 32);
  Tensor g = randn({96, 80}, Device::cpu(), 33), x = randn({96, 128}, Device::cpu(), 34);
  const size_t planned = backend.templates_planned();
  expect_close(scores(q.to(dev), k.to(dev)), matmul(permute(q, {0, 2, 1, 3}), permute(k, {0, 2, 3, 1})), 1e-4, 1e-5);
  expect_close(transposed_a(g.to(dev), x.to(dev)), matmul(transpose(g, 0, 1), x), 1e-4, 1e-5);
  EXPECT_EQ(scores.stats().program.kernels, 1);
  EXPECT_EQ(transposed_a.stats().program.kernels, 1);
  EXPECT_GT(backend.templates_planned(), planned);
  // The halves of a packed projection: the second starts 64 elements into each row.
  auto packed_scores = compile([](const Tensor& qk) {
    const std::vector<Tensor> halves = split(qk, 64, -1);
    return matmul(halves[0], transpose(halves[1], 0, 1));
  });
  Tensor qk = randn({96, 128}, Device::cpu(), 35);
  const std::vector<Tensor> halves = split(qk, 64, -1);
  expect_close(packed_scores(qk.to(dev)), matmul(halves[0], transpose(halves[1], 0, 1)), 1e-4, 1e-5);
  EXPECT_EQ(packed_scores.stats().program.kernels, 1);
}

// The pointwise chains after a conv or matmul run inside the CUDA templates, where they store: a
// per-channel scale and a clip, a full-size residual and a relu, a bias along a matmul's columns,
// a scalar on the left of a sub and gelu.
TEST(CudaEmulatedCompile, TemplatesRunTheirEpilogues) {
  Device dev = emulated_device();
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& w2, const Tensor& a,
               const Tensor& m, const Tensor& bias) -> std::vector<Tensor> {
    Tensor y = clamp(conv2d(x, w, {}, 1, 1) * scale, 0.0, 6.0);
    Tensor r = relu(conv2d(y, w2) + y);
    return {r, gelu(0.5 - (matmul(a, m) + bias))};
  };
  const std::vector<Tensor> args = {randn({2, 4, 10, 10}, Device::cpu(), 21), randn({8, 4, 3, 3}, Device::cpu(), 22),
                                    randn({8, 1, 1}, Device::cpu(), 23),      randn({8, 8, 1, 1}, Device::cpu(), 24),
                                    randn({64, 96}, Device::cpu(), 25),       randn({96, 64}, Device::cpu(), 26),
                                    randn({64}, Device::cpu(), 27)};
  std::vector<Tensor> on_dev;
  for (const Tensor& t : args) on_dev.push_back(t.to(dev));
  auto fast = compile(fn, CompileOptions{.name = "template_epilogues"});
  std::vector<Tensor> got = fast(on_dev[0], on_dev[1], on_dev[2], on_dev[3], on_dev[4], on_dev[5], on_dev[6]);
  std::vector<Tensor> want = fn(args[0], args[1], args[2], args[3], args[4], args[5], args[6]);
  for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], 1e-4, 1e-5);
  std::string programs;  // each kernel one launch of a template, named with its epilogue's steps
  for (const trace::BundleKernel& k : fast.bundle().kernels)
    for (const trace::KernelSource& source : k.sources) {
      EXPECT_TRUE(source.is_template) << source.program;
      programs += source.program + " ";
    }
  EXPECT_NE(programs.find("_mul_clip "), std::string::npos) << programs;
  EXPECT_NE(programs.find("_add_relu "), std::string::npos) << programs;
  EXPECT_NE(programs.find("_add_sub_gelu "), std::string::npos) << programs;
  EXPECT_EQ(fast.bundle().kernels.size(), 3u) << programs;
}

// Fused kernels over 16-bit floats and integers: loads and stores convert around float math.
TEST(CudaEmulatedCompile, HalfAndIntegerFusionsMatchCpu) {
  Device dev = emulated_device();
  if (!dev.backend().caps().f16) GTEST_SKIP() << "cuda_fp16.h not found: f16 kernels cannot run on the host";
  auto fn = [](const Tensor& a, const Tensor& b, const Tensor& i) -> std::vector<Tensor> {
    Tensor h = softmax(a * b + 1.0, -1);
    return {h, cast(sum(h, {0}), DType::F32) + cast(i * 3 - 1, DType::F32), amax(i, {1})};
  };
  auto fast = compile(fn);
  Tensor a = randn({6, 40}, Device::cpu(), 1).to(DType::F16), b = randn({40}, Device::cpu(), 2).to(DType::BF16).to(DType::F16);
  Tensor i = cast(floor(randn({6, 40}, Device::cpu(), 3) * 4.0), DType::I32);
  std::vector<Tensor> got = fast(a.to(dev), b.to(dev), i.to(dev)), want = fn(a, b, i);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) expect_close(got[k], want[k], 2e-3, 2e-3);
}

// A compiled while_loop in the CUDA dialect: the cond and body compile to kernels of their own, and
// the number of iterations follows each input (here 5 and 0), with one compile and no graph break.
TEST(CudaEmulatedCompile, AWhileLoopRunsItsCompiledBodyAsOftenAsTheDataSays) {
  Device dev = emulated_device();
  auto fn = [](const Tensor& x, const Tensor& w) {
    return while_loop([](const std::vector<Tensor>& c) { return lt(amax(c[0], {}), 50.0); },
                      [&w](const std::vector<Tensor>& c) { return std::vector<Tensor>{relu(c[0] * w) + 1.0}; },
                      {x})[0];
  };
  auto fast = compile(fn, CompileOptions{.fullgraph = true});
  const Tensor w = from_vector<float>({2, -1, 1.5f}, {3});
  for (const std::vector<float>& x : {std::vector<float>{1, 3, 2}, std::vector<float>{60, 0, 0}}) {
    const size_t launches = dynamic_cast<CudaEmulatedBackend&>(dev.backend()).emulator().stats().launches;
    Tensor got = fast(from_vector(x, {3}).to(dev), w.to(dev));
    expect_close(got, fn(from_vector(x, {3}), w), 1e-6, 1e-6);
    EXPECT_GT(dynamic_cast<CudaEmulatedBackend&>(dev.backend()).emulator().stats().launches, launches);
  }
  EXPECT_EQ(fast.stats().compiles, 1);
  EXPECT_EQ(fast.stats().graph_breaks, 0);
}

TEST(CudaEmulatedCompile, EagerOpsOnTheDeviceMatchCpu) {
  Device dev = emulated_device();
  Tensor a = randn({3, 70}, Device::cpu(), 3), b = randn({70}, Device::cpu(), 4);
  Tensor want = log_softmax(a * b - 1.0, 1);
  expect_close(log_softmax(a.to(dev) * b.to(dev) - 1.0, 1), want, 1e-5, 1e-5);
}

// --- regressions in the CUDA dialect found by running it ----------------------------------------

// f64 -> i32 / u8 casts saturate through clamp(); the CUDA prelude had only a float clamp, so f64
// values were rounded to float first (16777217 became 16777216, 254.9999999 became 255). Values
// past the i32 range saturate to INT32_MIN / INT32_MAX, as the reference does.
TEST(CudaDialect, CastF64ToIntegersKeepsEveryDigit) {
  Device dev = emulated_device();
  const std::vector<double> v = {16777217.0, -16777219.0, 2147483000.0, -2147483000.0, 123456789.0,
                                 254.9999999, -3e9, 3e9, 2147483647.5, 300.0, 0.5, -0.5};
  Tensor x = from_vector<double>(v, {int64_t(v.size())});
  for (DType to : {DType::I32, DType::U8, DType::I64}) {
    std::vector<int64_t> want = cast(x, to).to_vector<int64_t>();
    std::vector<int64_t> got = cast(x.to(dev), to).to(Device::cpu()).to_vector<int64_t>();
    EXPECT_EQ(got, want) << "cast f64 to " << dtype_name(to);
  }
}

}  // namespace
}  // namespace kiln
