// The cpu backend: compiled programs run as generated C++ built by the host compiler, checked
// against the ref interpreter; matmul and conv run as host ops inside them; the disk cache serves
// a second compile without running the compiler; eager ops never compile anything. (The
// conformance suite runs every op case and fusion program on cpu as on every other device.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "backends/cpu/host_compiler.h"
#include "backends/cpu/onednn_ops.h"
#include "backends/ref/host_memory.h"
#include "core/kernel/emit.h"
#include "core/kernel/lower.h"
#include "core/trace/bundle.h"

namespace kiln {
namespace {

::testing::AssertionResult close(const Tensor& actual, const Tensor& expected, double tol) {
  if (actual.type().str() != expected.type().str())
    return ::testing::AssertionFailure() << "type " << actual.type().str() << " vs " << expected.type().str();
  std::vector<double> a = actual.to(Device::ref()).to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - e[i]) <= tol * (1 + std::abs(e[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
  return ::testing::AssertionSuccess();
}

Tensor gelu_block(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor h = gelu(matmul(x, w) + b);
  return softmax(h * 0.5 - tanh(h), -1);
}

TEST(CpuBackend, IsTheBestDeviceWithoutAGpuAndGeneratesCpp) {
  bool gpu = false;
  for (const DeviceEntry& e : available_devices())
    gpu = gpu || e.kind == BackendKind::Cuda || (e.kind == BackendKind::Vulkan && !e.caps.is_cpu);
  if (!gpu && !std::getenv("KILN_DEVICE")) {
    EXPECT_EQ(Device::best(), Device::cpu());
  }
  ASSERT_TRUE(cpu::HostCompiler::instance().available()) << cpu::HostCompiler::instance().why_not();
  auto target = Device::cpu().backend().codegen();
  ASSERT_TRUE(target.has_value());
  EXPECT_EQ(target->dialect, kernel::Dialect::Cpp);
  EXPECT_FALSE(Device::ref().backend().codegen().has_value()) << "ref is the interpreter";
}

TEST(CpuBackend, EmitsALoopOverARangeTaggedWithItsOrigins) {
  kernel::LoweredOp op = kernel::lower_op(OpKind::Add, {}, {{DType::F32, {3, 4}}, {DType::F32, {4}}},
                                          {{DType::F32, {3, 4}}}, 7);
  kernel::EmitOptions o;
  o.dialect = kernel::Dialect::Cpp;
  o.describe_origin = [](int id) { return "%" + std::to_string(id) + " add @ net.cpp:3"; };
  kernel::EmittedKernel k = kernel::emit(op.steps.at(0).kernel.kernel, o);
  EXPECT_NE(k.source.find("void kiln_kernel(void* const* buffers, const int* params, long begin, long end)"),
            std::string::npos)
      << k.source;
  // Row by row: the innermost dim is a counted loop the compiler can vectorize.
  EXPECT_NE(k.source.find("while (next < int(end))"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("for (int c1 = first; c1 < stop; ++c1)"), std::string::npos) << k.source;
  size_t modulos = 0;
  for (size_t at = k.source.find(" % ", k.source.find("void kiln_kernel")); at != std::string::npos; at = k.source.find(" % ", at + 1)) ++modulos;
  EXPECT_EQ(modulos, 1u) << "one modulo, before the loop:\n" << k.source;
  EXPECT_NE(k.source.find("%7 add @ net.cpp:3"), std::string::npos) << k.source;
  EXPECT_EQ(k.workgroup_size, 1);
  ASSERT_EQ(k.line_origins.size(), size_t(std::count(k.source.begin(), k.source.end(), '\n')));
}

// An update of a [64, 8, 3, 3] weight by a scalar reads each element at gid alone: one loop over
// the range, not rows of 3 with carries.
TEST(CpuBackend, KernelsThatReadNoCoordinateWalkTheirRangeAsOneLoop) {
  kernel::LoweredOp op = kernel::lower_op(OpKind::Mul, {}, {{DType::F32, {64, 8, 3, 3}}, {DType::F32, {}}},
                                          {{DType::F32, {64, 8, 3, 3}}}, 1);
  kernel::EmitOptions o;
  o.dialect = kernel::Dialect::Cpp;
  const std::string source = kernel::emit(op.steps.at(0).kernel.kernel, o).source;
  EXPECT_NE(source.find("for (int gid = int(begin); gid < int(end); ++gid)"), std::string::npos) << source;
  EXPECT_EQ(source.find("while (next"), std::string::npos) << source;
}

// A batch norm's scale of [2, 16, 7, 7] by [16, 1, 1] reads the channel coordinate c1 alone: its
// rows are 7 * 7 long.
TEST(CpuBackend, RowsSpanTheInnermostDimsNoExpressionReads) {
  kernel::LoweredOp op = kernel::lower_op(OpKind::Mul, {}, {{DType::F32, {2, 16, 7, 7}}, {DType::F32, {16, 1, 1}}},
                                          {{DType::F32, {2, 16, 7, 7}}}, 1);
  kernel::EmitOptions o;
  o.dialect = kernel::Dialect::Cpp;
  o.static_params = op.steps.at(0).kernel.static_param_values();
  const std::string source = kernel::emit(op.steps.at(0).kernel.kernel, o).source;
  EXPECT_NE(source.find("const int row_size = 7 * 7;"), std::string::npos) << source;
  EXPECT_NE(source.find("for (int in_row = first; in_row < stop; ++in_row)"), std::string::npos) << source;
  EXPECT_EQ(source.find("c2"), std::string::npos) << source;
}

// A C++ kernel's static sizes are literals, so a permute's index divisions are by constants (which
// the compiler turns into shifts and multiplies); a symbolic size stays a param read at run time.
TEST(CpuBackend, StaticSizesAreLiteralsInCppKernels) {
  auto emit_permute = [](const SymInt& batch) {
    kernel::LoweredOp op = kernel::lower_op(OpKind::Permute, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}},
                                            {{DType::F32, {batch, 4, 32, 64}}}, {{DType::F32, {batch, 32, 4, 64}}}, 1);
    kernel::EmitOptions o;
    o.dialect = kernel::Dialect::Cpp;
    o.static_params = op.steps.at(0).kernel.static_param_values();
    return kernel::emit(op.steps.at(0).kernel.kernel, o).source;
  };
  const std::string fixed = emit_permute(SymInt(2));
  EXPECT_EQ(fixed.find("pc.p["), std::string::npos) << fixed;
  EXPECT_NE(fixed.find("% 32"), std::string::npos) << fixed;
  const std::string dynamic = emit_permute(SymInt::symbol("s0", 2));
  EXPECT_NE(dynamic.find("pc.p[0]"), std::string::npos) << "the batch is read at run time:\n" << dynamic;
  EXPECT_NE(dynamic.find("% 32"), std::string::npos) << dynamic;
}

TEST(CpuBackend, CompiledProgramMatchesTheReferenceInterpreter) {
  Tensor x = randn({8, 16}, Device::ref(), 1), w = randn({16, 32}, Device::ref(), 2), b = randn({32}, Device::ref(), 3);
  Tensor expected = gelu_block(x, w, b);
  auto compiled = compile(gelu_block, CompileOptions{.name = "gelu_block"});
  Tensor got = compiled(x.to(Device::cpu()), w.to(Device::cpu()), b.to(Device::cpu()));
  EXPECT_EQ(got.device(), Device::cpu());
  // Fused kernels compute in a different order than the reference's one op at a time.
  EXPECT_TRUE(close(got, expected, 1e-5));
  const trace::Bundle bundle = compiled.bundle();
  ASSERT_FALSE(bundle.kernels.empty());
  bool host_matmul = false, cpp = false;
  for (const trace::BundleKernel& k : bundle.kernels)
    for (const trace::KernelSource& s : k.sources) {
      host_matmul = host_matmul || (s.program == "host_matmul" && s.dialect == "host");
      cpp = cpp || s.dialect == "cpp";
    }
  EXPECT_TRUE(host_matmul) << "matmul runs as a host op (oneDNN)";
  EXPECT_TRUE(cpp) << "the fused epilogue is generated C++";
  // The fused pointwise chain is fewer kernels than ops.
  EXPECT_LT(compiled.stats().program.kernels, compiled.stats().program.nodes);
}

// An LSTM cell's gates, sliced from one value: the fused kernel reads small slices through their
// index maps, where a copy of each would cost a kernel run for a few hundred bytes, and copies
// large ones first, whose copy is a vectorized loop (CodegenTarget::read_through_views_up_to).
TEST(CpuBackend, SmallSlicesAreReadInPlaceLargeOnesCopiedFirst) {
  for (const int64_t rows : {1, 128}) {
    const int64_t hidden = 256;
    auto cell = [hidden](const Tensor& gates, const Tensor& c) {
      Tensor i = sigmoid(slice(gates, 1, 0, hidden)), f = sigmoid(slice(gates, 1, hidden, 2 * hidden));
      Tensor g = tanh(slice(gates, 1, 2 * hidden, 3 * hidden)), o = sigmoid(slice(gates, 1, 3 * hidden, 4 * hidden));
      return o * tanh(f * c + i * g);
    };
    Tensor gates = randn({rows, 4 * hidden}, Device::ref(), 1), c = randn({rows, hidden}, Device::ref(), 2);
    auto compiled = compile(cell, CompileOptions{.name = "lstm_cell"});
    EXPECT_TRUE(close(compiled(gates.to(Device::cpu()), c.to(Device::cpu())), cell(gates, c), 1e-5)) << rows << " rows";
    // 256 elements a slice: one kernel. 32,768: the three slices that do not start the fused
    // kernel are copies.
    EXPECT_EQ(compiled.stats().program.kernels, rows == 1 ? 1 : 4) << rows << " rows";
  }
}

// The same cell whose result is reshaped with leading size-1 dims, as an exported LSTM's step
// is: the slices' coordinates are the kernel's own along the matching dims, not divisions of its
// linear index, so the kernel walks rows of unit-stride reads, which GCC vectorizes (a read at
// (gid % 256) + (gid / 256) * 1024 is "no vectype" to it, and every tanh ran scalar).
TEST(CpuBackend, ViewsReshapedBySizeOneDimsAreReadAtTheKernelsCoordinates) {
  const int64_t hidden = 256;
  auto cell = [hidden](const Tensor& gates, const Tensor& c) {
    Tensor i = sigmoid(slice(gates, 1, 0, hidden)), g = tanh(slice(gates, 1, 2 * hidden, 3 * hidden));
    return reshape(tanh(c + i * g), {1, 1, 2, hidden});
  };
  Tensor gates = randn({2, 4 * hidden}, Device::ref(), 1), c = randn({2, hidden}, Device::ref(), 2);
  auto compiled = compile(cell, CompileOptions{.name = "lstm_step"});
  EXPECT_TRUE(close(compiled(gates.to(Device::cpu()), c.to(Device::cpu())), cell(gates, c), 1e-5));
  ASSERT_EQ(compiled.stats().program.kernels, 1);
  std::string source;
  for (const trace::BundleKernel& k : compiled.bundle().kernels)
    for (const trace::KernelSource& s : k.sources)
      if (s.dialect == "cpp") source = s.text;
  EXPECT_NE(source.find("const int row_size"), std::string::npos) << "the kernel walks rows:\n" << source;
  EXPECT_EQ(source.find("gid / 256"), std::string::npos) << source;
}

// A C++ sum adds into 16 partial sums, then the extent's last elements one by one: rows of 5
// (tail only), 32 (lanes only) and 37 elements. Sums of integers below 2^24 are exact in f32, so
// each row's sum is n (n + 1) / 2 whatever the order.
TEST(CpuBackend, SumsAddSixteenPartialSumsAndTheTail) {
  kernel::LoweredOp op = kernel::lower_op(OpKind::Sum, complete_attrs(OpKind::Sum, {{"dims", std::vector<int64_t>{1}}}, {}),
                                          {{DType::F32, {3, 37}}}, {{DType::F32, {3}}}, 1);
  kernel::EmitOptions o;
  o.dialect = kernel::Dialect::Cpp;
  const std::string source = kernel::emit(op.steps.at(0).kernel.kernel, o).source;
  EXPECT_NE(source.find("part[lane] += "), std::string::npos) << source;
  EXPECT_NE(source.find("for (int r = r0; "), std::string::npos) << "the tail:\n" << source;

  auto row_sums = compile([](const Tensor& x) { return sum(x, {1}); }, CompileOptions{.name = "row_sums"});
  for (int64_t n : {5, 32, 37}) {
    Tensor x = reshape(arange(1, double(2 * n + 1), 1, Device::ref()), {2, n});
    const std::vector<double> got = row_sums(x.to(Device::cpu())).to(Device::ref()).to_vector<double>();
    const double first = double(n * (n + 1) / 2), second = double(2 * n * (2 * n + 1) / 2) - first;
    EXPECT_EQ(got, (std::vector<double>{first, second})) << n << " elements a row";
  }
}

TEST(CpuBackend, ReduceOverheadReplaysAndNewSizesRecompile) {
  auto fn = [](const Tensor& x) { return sum(exp(x) * x, {1}); };
  auto compiled = compile(fn, CompileOptions{.mode = Mode::ReduceOverhead, .name = "sum_exp"});
  for (int64_t rows : {3, 3, 5}) {
    Tensor x = randn({rows, 40000}, Device::ref(), uint64_t(rows));
    EXPECT_TRUE(close(compiled(x.to(Device::cpu())), fn(x), 1e-5)) << rows << " rows";
  }
  EXPECT_EQ(compiled.stats().compiles, 2);
}

TEST(CpuBackend, TheDiskCacheServesASecondCompileWithoutTheCompiler) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln-cpu-cache-" + std::to_string(::getpid()));
  const char* old = std::getenv("KILN_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  auto fn = [](const Tensor& x) { return sigmoid(x) * 3.25 + 0.5; };  // a kernel no other test has
  Tensor x = randn({64}, Device::cpu(), 4);
  const cpu::CompileCounts before = cpu::HostCompiler::counts();
  Tensor first = compile(fn)(x);
  const cpu::CompileCounts middle = cpu::HostCompiler::counts();
  Tensor second = compile(fn)(x);  // a new compile: new programs, the same source
  const cpu::CompileCounts after = cpu::HostCompiler::counts();
  if (old) setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  else unsetenv("KILN_CACHE_DIR");
  fs::remove_all(dir);
  EXPECT_EQ(middle.compiled - before.compiled, 1);
  EXPECT_EQ(after.compiled, middle.compiled) << "the second compile ran the compiler";
  EXPECT_EQ(after.loaded - middle.loaded, 1);
  EXPECT_TRUE(close(second, first.to(Device::ref()), 0));
}

// An eager backward runs its gradient ops node by node, as eager ops run; the backward of a compiled
// function is compiled.
TEST(CpuBackend, EagerBackwardNeverRunsTheCompiler) {
  Tensor x = randn({16, 24}, Device::cpu(), 6).requires_grad_();
  Tensor w = randn({24, 8}, Device::cpu(), 7).requires_grad_();
  const cpu::CompileCounts before = cpu::HostCompiler::counts();
  sum(gelu(matmul(x, w)) * 0.75).backward();  // a gradient graph no other test has
  EXPECT_EQ(cpu::HostCompiler::counts().compiled, before.compiled);
  EXPECT_EQ(cpu::HostCompiler::counts().loaded, before.loaded);

  Tensor xr = x.detach().to(Device::ref()).requires_grad_(), wr = w.detach().to(Device::ref()).requires_grad_();
  sum(gelu(matmul(xr, wr)) * 0.75).backward();
  EXPECT_TRUE(close(x.grad(), xr.grad(), 1e-5));  // oneDNN sums in its own order
  EXPECT_TRUE(close(w.grad(), wr.grad(), 1e-5));

  auto loss = compile([](const Tensor& x, const Tensor& w) { return sum(gelu(matmul(x, w)) * 0.75); });
  Tensor x2 = x.detach().requires_grad_(), w2 = w.detach().requires_grad_();
  Tensor l = loss(x2, w2);
  const cpu::CompileCounts compiled_before = cpu::HostCompiler::counts();
  l.backward();
  const cpu::CompileCounts after = cpu::HostCompiler::counts();
  EXPECT_GT(after.compiled + after.loaded, compiled_before.compiled + compiled_before.loaded)
      << "the compiled function's backward built no program";
  EXPECT_TRUE(close(x2.grad(), xr.grad(), 1e-5));
  EXPECT_TRUE(close(w2.grad(), wr.grad(), 1e-5));
}

// Freed buffers of 4 MiB and more serve the next buffer of their size, without page faults
// (backends/ref/host_memory.cpp); not under AddressSanitizer, which should see every free. 74 MiB
// is a size no other test allocates.
TEST(CpuBackend, FreedLargeBuffersServeTheNextBufferOfTheirSize) {
  if (!reference::keeps_freed_buffers()) GTEST_SKIP() << "AddressSanitizer sees every free";
  Backend& backend = Device::cpu().backend();
  const size_t size = size_t(74) << 20;
  void* first = nullptr;
  {
    std::unique_ptr<Buffer> buffer = backend.alloc(size);
    first = reference::host_data(*buffer);
    static_cast<uint32_t*>(first)[0] = 0xC0FFEE;  // memory the system hands out afresh reads 0
  }
  std::unique_ptr<Buffer> other = backend.alloc(size + (size_t(2) << 20));
  EXPECT_NE(reference::host_data(*other), first) << "another size";
  std::unique_ptr<Buffer> again = backend.alloc(size);
  ASSERT_EQ(reference::host_data(*again), first);
  EXPECT_EQ(static_cast<uint32_t*>(first)[0], 0xC0FFEEu) << "the same memory, not the system's fresh pages";
  std::unique_ptr<Buffer> second = backend.alloc(size);
  EXPECT_NE(reference::host_data(*second), first) << "a kept buffer serves one buffer";
}

TEST(CpuBackend, EagerOpsNeverRunTheCompiler) {
  const cpu::CompileCounts before = cpu::HostCompiler::counts();
  Tensor x = randn({32, 32}, Device::cpu(), 5);
  Tensor y = softmax(matmul(x, x) + 1.0, -1);
  EXPECT_TRUE(close(y, softmax(matmul(x.to(Device::ref()), x.to(Device::ref())) + 1.0, -1), 1e-5));  // oneDNN sums in its own order
  EXPECT_EQ(cpu::HostCompiler::counts().compiled, before.compiled);
  EXPECT_EQ(cpu::HostCompiler::counts().loaded, before.loaded);
}

// Pooling runs as a host op (oneDNN's pooling on OpenMP's team) in compiled programs, including
// ceil_mode windows past the end padding; average pooling that counts padding there keeps the
// reference kernel, since oneDNN would count the extra windows' padding too.
TEST(CpuBackend, PoolingRunsAsAHostOp) {
  auto fn = [](const Tensor& x) {
    Tensor m = max_pool2d(x, 3, 2, 1);
    Tensor a = avg_pool2d(x, 2, 2, 0, /*ceil_mode=*/true, /*count_include_pad=*/false);
    Tensor c = avg_pool2d(x, 3, 2, 1, /*ceil_mode=*/true, /*count_include_pad=*/true);
    return sum(m, {2, 3}) + sum(a, {2, 3}) + sum(c, {2, 3});
  };
  const Tensor x = randn({2, 8, 13, 13}, Device::ref(), 7);
  auto compiled = compile(fn, CompileOptions{.name = "pools"});
  EXPECT_TRUE(close(compiled(x.to(Device::cpu())), fn(x), 1e-5));
  EXPECT_TRUE(close(fn(x.to(Device::cpu())), fn(x), 1e-5)) << "eager";
  int host_pools = 0;
  for (const trace::BundleKernel& k : compiled.bundle().kernels)
    for (const trace::KernelSource& s : k.sources)
      host_pools += s.dialect == "host" && (s.program == "host_max_pool" || s.program == "host_avg_pool");
  EXPECT_EQ(host_pools, 3);
}

// The host op's description of each compiled kernel that ran as one ("conv ... + relu").
std::vector<std::string> host_ops(const trace::Bundle& bundle) {
  std::vector<std::string> out;
  for (const trace::BundleKernel& k : bundle.kernels)
    for (const trace::KernelSource& s : k.sources)
      if (s.dialect == "host") out.push_back(s.text);
  return out;
}

// Activations and per-channel or scalar operands after a conv or matmul run inside oneDNN's
// kernel as post-ops; a full-size residual does not (its layout differs from the blocked result),
// nor does an op oneDNN has no post-op for.
TEST(CpuBackend, ConvAndMatmulEpiloguesRunAsOneDnnPostOps) {
  if (!cpu::have_onednn()) GTEST_SKIP() << "built without oneDNN";
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& w2, const Tensor& fw,
               const Tensor& fb) {
    Tensor y = minimum(maximum(conv2d(x, w, {}, 1, 1) * scale, 0.0), 6.0);  // scale [16,1,1], relu6
    Tensor r = relu(conv2d(y, w2, {}, 1, 1) + slice(y, 1, 0, 8));            // a residual
    Tensor f = gelu(linear(reshape(r, {2, -1}), fw, fb));
    return sin(f);
  };
  const Tensor x = randn({2, 8, 10, 10}, Device::ref(), 21), w = randn({16, 8, 3, 3}, Device::ref(), 22);
  const Tensor scale = randn({16, 1, 1}, Device::ref(), 23), fw = randn({12, 800}, Device::ref(), 24) * 0.02;
  const Tensor fb = randn({12}, Device::ref(), 25), w2 = randn({8, 16, 3, 3}, Device::ref(), 26);
  auto cpu = [](const Tensor& t) { return t.to(Device::cpu()); };
  auto compiled = compile(fn, CompileOptions{.name = "epilogues"});
  // oneDNN sums each output's 72, 144 and 800 products in its own order.
  EXPECT_TRUE(close(compiled(cpu(x), cpu(w), cpu(scale), cpu(w2), cpu(fw), cpu(fb)), fn(x, w, scale, w2, fw, fb), 1e-4));
  const std::vector<std::string> ops = host_ops(compiled.bundle());
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_NE(ops[0].find("+ mul #2 + maximum #3 + minimum #4"), std::string::npos) << ops[0];
  EXPECT_EQ(ops[1].find(" + "), std::string::npos) << "the residual add stays a kernel of its own: " << ops[1];
  EXPECT_NE(ops[2].find("linear"), std::string::npos) << ops[2];
  EXPECT_NE(ops[2].find("+ gelu"), std::string::npos) << ops[2];
  EXPECT_EQ(ops[2].find("sin"), std::string::npos) << "oneDNN has no sin post-op: " << ops[2];
}

// In a compiled program, a chain of convs (a stem, a depthwise and a 1x1 one), activations, a
// residual add and a max pool runs on channels-last activations: the layout changes once on the
// way in and once on the way out, and never between the convs.
TEST(CpuBackend, ConvChainsRunChannelsLastBetweenOneLayoutChangeEachWay) {
  if (!cpu::have_onednn()) GTEST_SKIP() << "built without oneDNN: convolutions run the reference kernel";
  auto fn = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& dw, const Tensor& w2) {
    Tensor y = clamp(conv2d(x, w1, b1, 2, 1), 0.0, 6.0);
    Tensor d = relu(conv2d(y, dw, {}, 1, 1, 1, 16));
    Tensor r = conv2d(d, w2) + y;
    return global_avg_pool(max_pool2d(r, 2));
  };
  const std::vector<Tensor> args = {randn({2, 3, 16, 16}, Device::ref(), 31), randn({16, 3, 3, 3}, Device::ref(), 32),
                                    randn({16}, Device::ref(), 33), randn({16, 1, 3, 3}, Device::ref(), 34),
                                    randn({16, 16, 1, 1}, Device::ref(), 35)};
  std::vector<Tensor> on_cpu;
  for (const Tensor& t : args) on_cpu.push_back(t.to(Device::cpu()));
  auto compiled = compile(fn, CompileOptions{.name = "channels_last_chain"});
  // oneDNN sums each output's 27, 9 and 16 products in its own order.
  EXPECT_TRUE(close(compiled(on_cpu[0], on_cpu[1], on_cpu[2], on_cpu[3], on_cpu[4]),
                    fn(args[0], args[1], args[2], args[3], args[4]), 1e-4));
  const std::vector<std::string> ops = host_ops(compiled.bundle());
  ASSERT_EQ(ops.size(), 4u);
  for (const std::string& op : ops) EXPECT_NE(op.find(" channels_last "), std::string::npos) << op;
  EXPECT_NE(ops[0].find("+ clip"), std::string::npos) << "the activation still runs as a post-op: " << ops[0];
  int permutes = 0;
  std::string names;
  for (const trace::BundleKernel& k : compiled.bundle().kernels) {
    permutes += k.name.find("permute") != std::string::npos;
    names += " " + k.name;
  }
  EXPECT_EQ(permutes, 2) << names;
}

// A parameter's buffer is written once, so a convolution reorders its weights into its blocked
// layout on the first call that sees the buffer and keeps them for later calls, compiled or eager.
// A new tensor gets new weights reordered, even at the address of a freed one.
TEST(CpuBackend, ConvolutionWeightsAreReorderedOncePerWeightTensor) {
  if (!cpu::have_onednn()) GTEST_SKIP() << "built without oneDNN: convolutions run the reference kernel";
  auto fn = [](const Tensor& x, const Tensor& w) { return relu(conv2d(x, w, {}, 1, 1)); };
  const Tensor x = randn({1, 32, 28, 28}, Device::ref(), 6);
  const Tensor xc = x.to(Device::cpu());
  std::vector<Tensor> weights;
  for (uint64_t i = 0; i < 2; ++i) weights.push_back(randn({64, 32, 3, 3}, Device::ref(), 10 + i));
  const Tensor w0 = weights[0].to(Device::cpu()), w1 = weights[1].to(Device::cpu());
  auto compiled = compile(fn);
  // oneDNN sums the 288 products of each output in its own order.
  const double tol = 1e-4;
  uint64_t before = cpu::weight_reorders();
  for (int rep = 0; rep < 3; ++rep) {
    EXPECT_TRUE(close(compiled(xc, w0), fn(x, weights[0]), tol)) << "call " << rep;
    EXPECT_TRUE(close(compiled(xc, w1), fn(x, weights[1]), tol)) << "call " << rep;
  }
  EXPECT_LE(cpu::weight_reorders() - before, 2u) << "compiled: once per weight tensor, not once per call";
  before = cpu::weight_reorders();
  for (int rep = 0; rep < 3; ++rep) EXPECT_TRUE(close(fn(xc, w0), fn(x, weights[0]), tol)) << "eager call " << rep;
  EXPECT_LE(cpu::weight_reorders() - before, 1u) << "eager: once per weight tensor";
  // More weight tensors than a primitive keeps, each freed before the next is made (so a new one
  // may land at a freed one's address): every call sees its own weights.
  for (uint64_t i = 0; i < 20; ++i) {
    const Tensor w = randn({64, 32, 3, 3}, Device::ref(), 100 + i);
    const Tensor wc = w.to(Device::cpu());
    EXPECT_TRUE(close(compiled(xc, wc), fn(x, w), tol)) << "weights " << i;
    EXPECT_TRUE(close(fn(xc, wc), fn(x, w), tol)) << "eager, weights " << i;
  }
  EXPECT_EQ(compiled.stats().compiles, 1);
}

}  // namespace
}  // namespace kiln
