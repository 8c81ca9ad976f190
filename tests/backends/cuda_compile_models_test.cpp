// The fused kernels that compiled programs run for the samples' models and the committed ONNX models
// (exported into the build tree by the onnx.models.export test), printed in the CUDA dialect, compile with NVRTC for sm_80 and sm_90 and
// assemble with ptxas. The op-table test covers single ops; this one covers what fusion builds.
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/cuda/nvrtc.h"
#include "core/frontend/tracer.h"
#include "core/kernel/lower_group.h"
#include "core/passes/fusion.h"
#include "core/passes/pass.h"
#include "core/runtime/standard_passes.h"
#include "samples/common/sample_models.h"
#include "support/cuda_batch.h"
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

struct Batch : testing::CudaBatch {
  std::vector<std::string> models;
};

// A while_loop's cond and body compile as programs of their own (segmented_program.h): their
// kernels are taken from the subgraphs, fused on their own.
void add_graph_kernels(Graph graph, Batch& b) {
  run_pipeline(graph, standard_pipeline());
  for (const FusionGroup& g : fuse_graph(graph)) {
    if (g.kind == FusionKind::Constant) continue;
    if (g.nodes.size() == 1 && g.nodes[0]->kind == OpKind::WhileLoop) {
      for (const char* part : {"cond", "body"}) add_graph_kernels(g.nodes[0]->attrs.get_graph(part).clone(), b);
      continue;
    }
    for (const kernel::LoweredOp::Step& step : kernel::lower_group(g.nodes, g.outputs).op.steps)
      b.add(step.kernel.kernel);
  }
}

void add_fused_kernels(Graph graph, const std::string& name, Batch& b) {
  add_graph_kernels(std::move(graph), b);
  b.models.push_back(name);
}

const Batch& model_kernels() {
  static const Batch batch = [] {
    Batch b;
    Device cpu = Device::cpu();
    samples::Mlp mlp(32, 64, 10, cpu);
    add_fused_kernels(trace_forward(mlp, {DType::F32, make_shape({4, 32})}), "mlp", b);
    samples::SmallCnn cnn(cpu);
    add_fused_kernels(trace_forward(cnn, {DType::F32, make_shape({2, 3, 16, 16})}), "cnn", b);
    samples::TransformerBlock block(32, 2, cpu);
    add_fused_kernels(trace_forward(block, {DType::F32, make_shape({2, 8, 32})}), "transformer", b);
    samples::ResNetBlock resnet(8, cpu);
    add_fused_kernels(trace_forward(resnet, {DType::F32, make_shape({1, 8, 8, 8})}), "resnet", b);
#if defined(KILN_HAVE_ONNX) && defined(KILN_TEST_MODELS)
    namespace fs = std::filesystem;
    if (fs::is_directory(KILN_TEST_MODELS))
      for (const auto& e : fs::directory_iterator(KILN_TEST_MODELS))
        if (fs::exists(e.path() / "model.onnx"))
          add_fused_kernels(onnx::import_onnx((e.path() / "model.onnx").string()).graph.clone(),
                            "onnx:" + e.path().filename().string(), b);
#endif
    return b;
  }();
  return batch;
}

class CudaCompileModels : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaCompileModels, EveryFusedKernelCompilesAndAssembles) {
  std::string why;
  if (!cuda::Nvrtc::available(&why)) GTEST_SKIP() << why;
  const Batch& batch = model_kernels();
  ASSERT_GE(batch.models.size(), 4u);
#if defined(KILN_HAVE_ONNX) && defined(KILN_TEST_MODELS)
  ASSERT_GT(batch.models.size(), 4u) << "no ONNX models in " KILN_TEST_MODELS;
#endif
  ASSERT_GT(batch.kernels, 10);
  std::string sm = GetParam();
  cuda::PtxResult ptx;
  ASSERT_NO_THROW(ptx = cuda::Nvrtc::get().compile("model_kernels", batch.source, "compute_" + sm));
  std::string names;
  for (const std::string& m : batch.models) names += " " + m;
  std::printf("%d fused kernels of%s -> %zu bytes of PTX for compute_%s\n", batch.kernels,
              names.c_str(), ptx.ptx.size(), sm.c_str());
  std::string ptxas = testing::find_ptxas();
  if (ptxas.empty()) GTEST_SKIP() << "ptxas not installed: PTX compiled but not assembled";
  std::string messages;
  EXPECT_EQ(testing::assemble_ptx(ptxas, ptx.ptx, sm,
                                  ::testing::TempDir() + "kiln_model_kernels_sm" + sm, &messages), 0)
      << messages;
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaCompileModels, ::testing::Values("80", "90"));

}  // namespace
}  // namespace kiln
