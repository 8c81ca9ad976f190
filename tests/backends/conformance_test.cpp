// The backend conformance suite: every case (tests/backends/conformance_cases.h) runs on every
// device that generates code, eagerly and compiled with kiln::compile, and must match the ref
// interpreter within the case's tolerance. Devices: each registered one but ref (cpu, Vulkan, CUDA,
// and null, which computes nothing: there each case must compile and plan with sane kernel counts)
// and the CUDA host emulator (tests/support) on a representative subset, since it compiles every
// kernel with the host compiler. Each case's gradients (eager autograd's backward program) must
// match ref's too. On Vulkan the Khronos validation layer is on and any validation message
// fails the test. A new backend passes this suite as is.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <utility>

#include <kiln/kiln.h>

#include "backends/conformance_cases.h"
#include "support/cuda_emulated_backend.h"

#ifdef KILN_HAVE_VULKAN
#include "backends/vulkan/vulkan_backend.h"
#endif

namespace kiln::conformance {
namespace {

// Before any backend opens: validation on for Vulkan devices.
const int kValidationOn = setenv("KILN_VULKAN_VALIDATION", "1", 0);

// The op cases the CUDA host emulator runs: one or two per family and dtype class, enough to reach
// every generated-kernel shape (pointwise, broadcast, cast, reduction, row op, matmul, conv, pool,
// norm, gather, concat, pad) while the host compiles stay within about a minute.
const std::set<std::string> kEmulatedOpCases = {
    "exp", "gelu_tanh", "cast_f32_to_i32", "cast_f32_to_f16", "add_f32", "maximum_i64", "lt_f16",
    "div_i32", "where", "sum_dim2_f32", "amax_dim1_i32", "argmin_dim0_keep_f32", "softmax_dim0_f32",
    "matmul_batched", "conv2d_stride_pad_groups", "max_pool2d_ceil_pad", "layer_norm", "gather",
    "concat", "pad_reflect", "linear", "conv_transpose2d", "avg_pool2d_exclude_pad", "slice_negative_step",
    "rand_dropout_mask", "wrapping_chain_i16", "remainder_u64"};

// The op cases whose gradients the CUDA host emulator runs (each backward is a program of several
// kernels, each compiled by the host compiler).
const std::set<std::string> kEmulatedGradientCases = {"exp", "add_f32", "softmax_dim0_f32", "matmul_batched",
                                                      "conv2d_stride_pad_groups", "max_pool2d_ceil_pad", "layer_norm"};

struct DeviceUnderTest {
  std::string label;  // test name prefix
  BackendKind kind;
  int index;
  bool emulated = false;  // the CUDA host emulator, installed at first use
};

std::vector<DeviceUnderTest> devices_under_test() {
  std::vector<DeviceUnderTest> out;
  int cuda_devices = 0;
  for (const DeviceEntry& e : available_devices()) {
    if (e.kind == BackendKind::Cuda) cuda_devices = std::max(cuda_devices, e.index + 1);
    if (e.kind != BackendKind::Ref)
      out.push_back({std::string(backend_kind_name(e.kind)) + std::to_string(e.index), e.kind, e.index});
  }
  // The emulator takes the first CUDA index no real GPU holds.
  out.push_back({"cuda_emulated", BackendKind::Cuda, cuda_devices, true});
  return out;
}

const std::vector<DeviceUnderTest>& devices() {
  static const std::vector<DeviceUnderTest> all = devices_under_test();
  return all;
}

Device open(const DeviceUnderTest& d) {
  if (d.emulated) {
    static const bool installed = [&] {
      install_backend(d.kind, d.index,
                      std::make_unique<testing::CudaEmulatedBackend>(testing::CudaEmulatedOptions{.template_sm = 70}));
      return true;
    }();
    (void)installed;
  }
  return Device(d.kind, d.index);
}

const std::vector<OpCase>& ops() {
  static const std::vector<OpCase> all = op_cases();
  return all;
}
const std::vector<ProgramCase>& programs() {
  static const std::vector<ProgramCase> all = program_cases();
  return all;
}

// kiln::compile needs a function of separate Tensor arguments; a case takes a vector. Builds the
// fullgraph-compiled function of N tensors that calls the case and runs it twice: the first call
// compiles, the second replays the cached program over the same arena, which must leave the first
// call's output intact. Given inputs of other sizes, a third call recompiles them (Dynamic::Auto
// makes the changed dims symbolic).
struct CompiledRun {
  Tensor output, replayed;
  CompileStats stats;  // after the two calls
  trace::Bundle bundle;
  Tensor resized;  // the third call's, when there is one
  CompileStats resized_stats;
  trace::Bundle resized_bundle;
};

template <size_t>
using TensorArg = const Tensor&;

template <size_t... I>
CompiledRun run_compiled_n(const OpCase& oc, const std::vector<Tensor>& x, const std::vector<Tensor>& resized,
                           Mode mode, std::index_sequence<I...>) {
  auto fn = [&oc](TensorArg<I>... a) -> Tensor { return oc.run({a...}); };
  auto compiled = compile(fn, CompileOptions{.mode = mode, .fullgraph = true, .name = oc.name});
  CompiledRun r;
  r.output = compiled(x[I]...);
  r.replayed = compiled(x[I]...);
  r.stats = compiled.stats();
  r.bundle = compiled.bundle();
  if (!resized.empty()) {
    r.resized = compiled(resized[I]...);
    r.resized_stats = compiled.stats();
    r.resized_bundle = compiled.bundle();
  }
  return r;
}

template <size_t N>
CompiledRun run_compiled_of(const OpCase& oc, const std::vector<Tensor>& x, const std::vector<Tensor>& resized,
                            Mode mode) {
  return run_compiled_n(oc, x, resized, mode, std::make_index_sequence<N>{});
}

using CompiledRunner = CompiledRun (*)(const OpCase&, const std::vector<Tensor>&, const std::vector<Tensor>&, Mode);

template <size_t... N>
constexpr auto compiled_runners(std::index_sequence<N...>) {
  return std::array<CompiledRunner, sizeof...(N)>{&run_compiled_of<N>...};
}

CompiledRun run_compiled(const OpCase& oc, const std::vector<Tensor>& x, Mode mode = Mode::Default,
                         const std::vector<Tensor>& resized = {}) {
  static constexpr auto runners = compiled_runners(std::make_index_sequence<16>{});
  if (x.size() >= runners.size()) throw Error("conformance: case " + oc.name + " has too many inputs");
  if (!resized.empty() && resized.size() != x.size()) throw Error("conformance: case " + oc.name + " resized arity");
  return runners[x.size()](oc, x, resized, mode);
}

// Every element within atol + rtol * |reference|; NaN matches NaN. Null computes nothing: there
// only the type and device are checked.
void expect_matches(const Tensor& actual, const Tensor& expected, const Device& dev, const OpCase& oc,
                    const std::string& path) {
  EXPECT_EQ(actual.device(), dev) << path;
  ASSERT_EQ(actual.type().str(), expected.type().str()) << path;
  if (dev.kind() == BackendKind::Null) return;
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < e.size(); ++i) {
    if (std::isnan(e[i]) && std::isnan(a[i])) continue;
    ASSERT_LE(std::abs(a[i] - e[i]), oc.atol + oc.rtol * std::abs(e[i]))
        << oc.name << " (" << path << ") on " << dev.description() << ": element " << i << " is " << a[i]
        << ", the cpu reference gives " << e[i];
  }
}

void expect_no_validation_messages(const Device& dev) {
#ifdef KILN_HAVE_VULKAN
  if (dev.kind() == BackendKind::Vulkan) {
    auto messages = vulkan::validation_messages();
    vulkan::clear_validation_messages();
    EXPECT_TRUE(messages.empty()) << messages.size() << " validation messages, the first: "
                                  << (messages.empty() ? "" : messages[0]);
  }
#else
  (void)dev;
#endif
}

size_t launches(const trace::Bundle& b) {
  size_t n = 0;
  for (const trace::BundleKernel& k : b.kernels) n += k.sources.size();
  return n;
}

// What every compiled program must satisfy on a code-generating device: one compile of one
// graph, no eager fallback, at least one kernel (every case computes something) and at most one
// per graph node, each kernel one or more launches, and an arena that holds the program's peak.
void expect_sane_program(const CompiledRun& r, const std::string& name) {
  EXPECT_EQ(r.stats.compiles, 1) << name;
  EXPECT_EQ(r.stats.cache_hits, 1) << name << ": the second call did not replay the program";
  EXPECT_EQ(r.stats.graph_breaks, 0) << name;
  EXPECT_EQ(r.stats.eager_calls, 0) << name;
  EXPECT_EQ(r.bundle.kind, "program") << name << ": the device ran the graph node by node";
  const ProgramStats& p = r.stats.program;
  const int64_t kernels = int64_t(r.bundle.kernels.size());
  EXPECT_GE(kernels, 1) << name;
  EXPECT_LE(kernels, p.nodes) << name << ": more kernels than graph nodes";
  for (const trace::BundleKernel& k : r.bundle.kernels) EXPECT_FALSE(k.sources.empty()) << name << ": " << k.name;
  EXPECT_EQ(int64_t(launches(r.bundle)), p.kernels) << name << ": launches per run";
  EXPECT_LE(p.lower_bound_bytes, p.planned_bytes) << name << ": the arena is smaller than the peak";
  // No worse than every planned buffer on its own, at the 256-byte binding alignment.
  int64_t separate = 0;
  for (const trace::BundleBuffer& b : r.bundle.memory.buffers) separate += (b.bytes + 255) / 256 * 256;
  EXPECT_LE(p.planned_bytes, separate) << name << ": the plan is worse than one buffer per value";
}

size_t template_launches(const trace::Bundle& b) {
  size_t n = 0;
  for (const trace::BundleKernel& k : b.kernels)
    for (const trace::KernelSource& s : k.sources) n += s.is_template ? 1 : 0;
  return n;
}

enum class Path { Eager, Compiled };

struct OpParam {
  size_t device, op;
  Path path;
};

std::vector<OpParam> op_params() {
  std::vector<OpParam> out;
  for (size_t d = 0; d < devices().size(); ++d)
    for (size_t c = 0; c < ops().size(); ++c) {
      if (devices()[d].emulated && !kEmulatedOpCases.count(ops()[c].name)) continue;
      for (Path p : {Path::Eager, Path::Compiled}) out.push_back({d, c, p});
    }
  return out;
}

// gtest prints parameters in failure messages and ctest names: say which device, path and case.
void PrintTo(const OpParam& p, std::ostream* os) {
  *os << devices()[p.device].label << (p.path == Path::Eager ? " eager " : " compiled ") << ops()[p.op].name;
}

class Conformance : public ::testing::TestWithParam<OpParam> {};

// An element type among a case's inputs and result that the device does not compute (a device
// without f64, f16 or 16- and 64-bit integers, or a portability profile clamping them away).
std::optional<DType> missing_dtype(const Device& dev, const std::vector<Tensor>& inputs, const Tensor& result) {
  std::vector<DType> used = {result.dtype()};
  for (const Tensor& t : inputs) used.push_back(t.dtype());
  for (DType t : used)
    if (!dev.backend().supports(OpKind::Add, t)) return t;
  return std::nullopt;
}

TEST_P(Conformance, MatchesCpuReference) {
  const OpParam& param = GetParam();
  const Device dev = open(devices()[param.device]);
  const OpCase& oc = ops()[param.op];
  if (dev.kind() == BackendKind::Cuda && !dev.backend().caps().f16 && oc.name.find("f16") != std::string::npos)
    GTEST_SKIP() << "cuda_fp16.h not found: f16 kernels cannot run on this CUDA device";
  std::vector<Tensor> host = oc.inputs();
  std::vector<Tensor> moved;
  for (const Tensor& t : host) moved.push_back(t.to(dev));
  const Tensor expected = oc.run(host);
  if (std::optional<DType> missing = missing_dtype(dev, host, expected))
    GTEST_SKIP() << dev.description() << " does not compute " << dtype_name(*missing);
  if (oc.name.rfind("rand", 0) == 0 && !dev.backend().supports(OpKind::RandUniform, DType::U64))
    GTEST_SKIP() << dev.description() << " has no 64-bit integers, in which random draws count";
  if (param.path == Path::Eager) {
    expect_matches(oc.run(moved), expected, dev, oc, "eager");
  } else {
    const CompiledRun r = run_compiled(oc, moved);
    expect_sane_program(r, oc.name);
    expect_matches(r.output, expected, dev, oc, "compiled");
    expect_matches(r.replayed, expected, dev, oc, "compiled, replayed");
  }
  expect_no_validation_messages(dev);
}

std::string op_param_name(const ::testing::TestParamInfo<OpParam>& info) {
  const OpParam& p = info.param;
  return devices()[p.device].label + (p.path == Path::Eager ? "_eager_" : "_compiled_") + ops()[p.op].name;
}

INSTANTIATE_TEST_SUITE_P(AllOps, Conformance, ::testing::ValuesIn(op_params()), op_param_name);

// A misspelt name would drop a case from the emulator without a word.
TEST(ConformanceCases, EmulatedSubsetNamesExistingCases) {
  std::set<std::string> names;
  for (const OpCase& oc : ops()) EXPECT_TRUE(names.insert(oc.name).second) << "two cases named " << oc.name;
  for (const std::string& name : kEmulatedOpCases) EXPECT_TRUE(names.count(name)) << "no op case named " << name;
  for (const std::string& name : kEmulatedGradientCases) EXPECT_TRUE(names.count(name)) << "no op case named " << name;
}

// --- gradients: eager autograd's backward programs ----------------------------------------------

// d/dx of L = sum(y * w) for every floating input x of the case, w a fixed pattern so that each
// element of y counts; empty when no gradient reaches the inputs (integer or piecewise-constant ops).
std::vector<Tensor> case_gradients(const OpCase& oc, std::vector<Tensor> inputs) {
  if (!oc.has_gradient) return {};
  std::vector<Tensor> wrt;
  for (Tensor& t : inputs)
    if (is_floating(t.dtype())) wrt.push_back(t.requires_grad_());
  if (wrt.empty()) return {};
  const Tensor y = oc.run(inputs);
  if (!is_floating(y.dtype()) || !y.requires_grad()) return {};
  std::vector<double> pattern(size_t(y.numel()));
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = std::sin(double(i) + 0.5);
  const Tensor w = from_vector(pattern, y.sizes()).to(y.dtype()).to(y.device());
  return grad({sum(y * w)}, wrt);
}

std::vector<size_t> gradient_devices() {
  std::vector<size_t> out;
  for (size_t d = 0; d < devices().size(); ++d)
    if (devices()[d].kind != BackendKind::Null) out.push_back(d);  // null computes no values
  return out;
}

class ConformanceGradient : public ::testing::TestWithParam<size_t> {};

// Every case's backward runs where its forward ran; the gradients match the cpu reference's within
// ten times the forward's tolerance (at least 1e-4), as they sum more terms. Where no gradient
// reaches the inputs (integer and piecewise-constant ops), none may on the device either. One test
// per device, the cases in turn (a process per case would cost more than the cases).
TEST_P(ConformanceGradient, EveryCaseMatchesCpuReference) {
  const DeviceUnderTest& under_test = devices()[GetParam()];
  const Device dev = open(under_test);
  for (OpCase oc : ops()) {
    if (under_test.emulated && !kEmulatedGradientCases.count(oc.name)) continue;
    if (dev.kind() == BackendKind::Cuda && !dev.backend().caps().f16 && oc.name.find("f16") != std::string::npos)
      continue;  // cuda_fp16.h not found: f16 kernels cannot run on this CUDA device
    SCOPED_TRACE("gradient of " + oc.name);
    const std::vector<Tensor> host = oc.inputs();
    if (missing_dtype(dev, host, oc.run(host))) continue;
    const std::vector<Tensor> expected = case_gradients(oc, host);
    std::vector<Tensor> moved;
    for (const Tensor& t : host) moved.push_back(t.to(dev));
    const std::vector<Tensor> actual = case_gradients(oc, moved);
    ASSERT_EQ(actual.size(), expected.size()) << "the device and the cpu disagree on which inputs get gradients";
    oc.rtol = std::max(10 * oc.rtol, 1e-4);
    oc.atol = std::max(10 * oc.atol, 1e-4);
    for (size_t i = 0; i < actual.size(); ++i)
      expect_matches(actual[i], expected[i], dev, oc, "gradient of floating input " + std::to_string(i));
    expect_no_validation_messages(dev);
  }
}

std::string gradient_param_name(const ::testing::TestParamInfo<size_t>& info) { return devices()[info.param].label; }

INSTANTIATE_TEST_SUITE_P(AllOps, ConformanceGradient, ::testing::ValuesIn(gradient_devices()), gradient_param_name);

// --- compiled programs of several ops: fused kernels and templates --------------------------------

struct ProgramParam {
  size_t device, program;
};

std::vector<ProgramParam> program_params() {
  std::vector<ProgramParam> out;
  for (size_t d = 0; d < devices().size(); ++d)
    for (size_t c = 0; c < programs().size(); ++c) out.push_back({d, c});
  return out;
}

void PrintTo(const ProgramParam& p, std::ostream* os) {
  *os << devices()[p.device].label << " " << programs()[p.program].program.name;
}

class ConformanceProgram : public ::testing::TestWithParam<ProgramParam> {};

TEST_P(ConformanceProgram, MatchesCpuReference) {
  const Device dev = open(devices()[GetParam().device]);
  const ProgramCase& pc = programs()[GetParam().program];
  const OpCase& oc = pc.program;
  std::vector<Tensor> host = oc.inputs();
  std::vector<Tensor> moved;
  for (const Tensor& t : host) moved.push_back(t.to(dev));
  const Tensor expected = oc.run(host);
  if (std::optional<DType> missing = missing_dtype(dev, host, expected))
    GTEST_SKIP() << dev.description() << " does not compute " << dtype_name(*missing);
  const std::vector<Tensor> resized = pc.resized_inputs();
  std::vector<Tensor> resized_moved;
  for (const Tensor& t : resized) resized_moved.push_back(t.to(dev));
  // ReduceOverhead records the launches at the first call and replays the recording at the second.
  for (Mode mode : {Mode::Default, Mode::ReduceOverhead}) {
    SCOPED_TRACE(mode == Mode::Default ? "Mode::Default" : "Mode::ReduceOverhead");
    const CompiledRun r = run_compiled(oc, moved, mode, resized_moved);
    expect_sane_program(r, oc.name);
    const bool has_template = pc.template_op && dev.backend().has_template(*pc.template_op);
    if (has_template)
      EXPECT_GE(template_launches(r.bundle), 1u) << oc.name << ": no template ran on " << dev.description();
    else
      EXPECT_EQ(template_launches(r.bundle), 0u) << oc.name;
    const int64_t most = has_template ? pc.kernels_with_template : pc.kernels;
    // A device binding few buffers per kernel (a portability profile's 8) splits kernels more.
    const std::optional<kernel::CodegenTarget> target = dev.backend().codegen();
    if (!target || target->max_storage_buffers >= 16) {
      EXPECT_LE(int64_t(r.bundle.kernels.size()), most) << oc.name << ": fusion left the program split";
      EXPECT_LE(int64_t(r.resized_bundle.kernels.size()), most)
          << oc.name << ": fusion left the program split once dims are symbolic";
    }
    expect_matches(r.output, expected, dev, oc, "compiled");
    expect_matches(r.replayed, expected, dev, oc, "compiled, replayed");
    EXPECT_EQ(r.resized_stats.recompiles, 1) << oc.name << ": other sizes did not recompile";
    EXPECT_EQ(r.resized_stats.graph_breaks, 0) << oc.name;
    expect_matches(r.resized, oc.run(resized), dev, oc, "compiled, other sizes");
    expect_no_validation_messages(dev);
  }
}

std::string program_param_name(const ::testing::TestParamInfo<ProgramParam>& info) {
  return devices()[info.param.device].label + "_" + programs()[info.param.program].program.name;
}

INSTANTIATE_TEST_SUITE_P(Fusion, ConformanceProgram, ::testing::ValuesIn(program_params()), program_param_name);

}  // namespace
}  // namespace kiln::conformance
