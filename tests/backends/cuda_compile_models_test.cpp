// The fused kernels that compiled programs run for the samples' models and the committed ONNX models
// (tests/onnx/models), printed in the CUDA dialect, compile with NVRTC for sm_80 and sm_90 and
// assemble with ptxas. The op-table test covers single ops; this one covers what fusion builds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "backends/cuda/nvrtc.h"
#include "core/frontend/tracer.h"
#include "core/kernel/emit.h"
#include "core/kernel/lower_group.h"
#include "core/passes/fusion.h"
#include "core/passes/pass.h"
#include "samples/common/sample_models.h"
#ifdef KILN_HAVE_ONNX
#include "core/onnx/onnx_import.h"
#endif

namespace kiln {
namespace {

// The graph kiln::compile would build for model.forward(x) with x of `type`.
template <class M>
Graph trace_forward(M& model, const TensorType& type) {
  Tracer tracer(Device::cpu());
  TracingScope scope(tracer);
  Tensor x = tracer.input(type, "x");
  tracer.set_outputs({model.forward(x)});
  return std::move(tracer.graph());
}

struct Batch {
  std::string source;
  int kernels = 0;
  std::vector<std::string> models;
};

void add_fused_kernels(Graph graph, const std::string& name, Batch& b, std::map<std::string, bool>& seen) {
  run_pipeline(graph, standard_pipeline());
  for (const FusionGroup& g : fuse_graph(graph)) {
    if (g.kind == FusionKind::Constant) continue;
    kernel::LoweredGroup lowered = kernel::lower_group(g.nodes, g.outputs);
    for (const kernel::LoweredOp::Step& step : lowered.op.steps) {
      kernel::EmitOptions o;
      o.dialect = kernel::Dialect::Cuda;
      o.standalone = false;
      o.entry = "k" + std::to_string(b.kernels);
      std::string body = kernel::emit(step.kernel.kernel, o).source;
      std::string key = body.substr(body.find('\n'));
      key = key.replace(key.find(o.entry), o.entry.size(), "");
      if (seen[key]) continue;
      seen[key] = true;
      b.source += body;
      ++b.kernels;
    }
  }
  b.models.push_back(name);
}

const Batch& model_kernels() {
  static const Batch batch = [] {
    Batch b;
    b.source = kernel::emit_prelude_for(kernel::Dialect::Cuda);
    std::map<std::string, bool> seen;
    Device cpu = Device::cpu();
    samples::Mlp mlp(32, 64, 10, cpu);
    add_fused_kernels(trace_forward(mlp, {DType::F32, make_shape({4, 32})}), "mlp", b, seen);
    samples::SmallCnn cnn(cpu);
    add_fused_kernels(trace_forward(cnn, {DType::F32, make_shape({2, 3, 16, 16})}), "cnn", b, seen);
    samples::TransformerBlock block(32, 2, cpu);
    add_fused_kernels(trace_forward(block, {DType::F32, make_shape({2, 8, 32})}), "transformer", b, seen);
    samples::ResNetBlock resnet(8, cpu);
    add_fused_kernels(trace_forward(resnet, {DType::F32, make_shape({1, 8, 8, 8})}), "resnet", b, seen);
#if defined(KILN_HAVE_ONNX) && defined(KILN_TEST_MODELS)
    namespace fs = std::filesystem;
    if (fs::is_directory(KILN_TEST_MODELS))
      for (const auto& e : fs::directory_iterator(KILN_TEST_MODELS))
        if (fs::exists(e.path() / "model.onnx"))
          add_fused_kernels(onnx::import_onnx((e.path() / "model.onnx").string()).graph.clone(),
                            "onnx:" + e.path().filename().string(), b, seen);
#endif
    return b;
  }();
  return batch;
}

std::string find_ptxas() {
  std::string home = std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda";
  for (std::string p : {home + "/bin/ptxas", std::string("/usr/bin/ptxas")})
    if (std::ifstream(p).good()) return p;
  return "";
}

class CudaCompileModels : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaCompileModels, EveryFusedKernelCompilesAndAssembles) {
  std::string why;
  if (!cuda::Nvrtc::available(&why)) GTEST_SKIP() << why;
  const Batch& batch = model_kernels();
  ASSERT_GE(batch.models.size(), 4u);
  ASSERT_GT(batch.kernels, 10);
  std::string sm = GetParam();
  cuda::PtxResult ptx;
  ASSERT_NO_THROW(ptx = cuda::Nvrtc::get().compile("model_kernels", batch.source, "compute_" + sm));
  std::string names;
  for (const std::string& m : batch.models) names += " " + m;
  std::printf("%d fused kernels of%s -> %zu bytes of PTX for compute_%s\n", batch.kernels,
              names.c_str(), ptx.ptx.size(), sm.c_str());
  std::string ptxas = find_ptxas();
  if (ptxas.empty()) GTEST_SKIP() << "ptxas not installed: PTX compiled but not assembled";
  std::string base = ::testing::TempDir() + "kiln_model_kernels_sm" + sm;
  std::ofstream(base + ".ptx") << ptx.ptx;
  std::string cmd = ptxas + " -arch=sm_" + sm + " " + base + ".ptx -o " + base + ".cubin 2> " + base + ".log";
  int rc = std::system(cmd.c_str());
  std::ifstream log(base + ".log");
  std::string messages((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << messages;
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaCompileModels, ::testing::Values("80", "90"));

}  // namespace
}  // namespace kiln
