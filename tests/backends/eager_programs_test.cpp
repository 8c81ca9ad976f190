// Eager ops as one-node programs (core/runtime/eager_programs.h) on lavapipe, under the validation
// layer: compiled once per op signature, the schedule's template or the generic kernels with their
// scratch, checked against the reference backend.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/runtime/eager_programs.h"
#include "core/support/error.h"
#include "support/vulkan_template_test.h"

namespace kiln {
namespace {

using EagerProgramsTest = testing::VulkanTemplateTest<>;

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << what << " at " << i;
}

TEST_F(EagerProgramsTest, CompilesOncePerOpSignature) {
  if (IsSkipped()) return;
  EagerPrograms runner(*vk_);
  const std::vector<float> a = testing::random_values(64, 1), b = testing::random_values(64, 2);
  testing::run_f32_op(*vk_, &runner, OpKind::Add, {}, {a, b}, {{64}, {64}}, {64});
  const size_t compiled = runner.programs_compiled();
  EXPECT_EQ(compiled, 1u);
  std::vector<float> got = testing::run_f32_op(*vk_, &runner, OpKind::Add, {}, {b, a}, {{64}, {64}}, {64});
  EXPECT_EQ(runner.programs_compiled(), compiled) << "the same signature compiled again";
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], a[i] + b[i]);
  // Other dims are another signature whose kernel has the same text (its element count is a push
  // constant): one program serves both. Another op is another program.
  got = testing::run_f32_op(*vk_, &runner, OpKind::Add, {}, {{a.begin(), a.end() - 1}, {b.begin(), b.end() - 1}}, {{63}, {63}}, {63});
  EXPECT_EQ(runner.programs_compiled(), compiled);
  ASSERT_EQ(got.size(), 63u);
  EXPECT_FLOAT_EQ(got[62], a[62] + b[62]);
  testing::run_f32_op(*vk_, &runner, OpKind::Neg, {}, {a}, {{64}}, {64});
  EXPECT_EQ(runner.programs_compiled(), compiled + 1);
  EXPECT_EQ(runner.stats().ops, 4u);
  EXPECT_EQ(runner.stats().launches, 4u);
}

// Softmax lowers to three kernels (row max, sum of exponentials, normalize) over two scratch
// buffers; with templates off it runs them, against the reference backend.
TEST_F(EagerProgramsTest, GenericKernelsWithScratchMatchReference) {
  if (IsSkipped()) return;
  EagerPrograms generic(*vk_, {.generic_only = true});
  AttrMap attrs;
  attrs.set("dim", int64_t(-1));
  const std::vector<float> x = testing::random_values(6 * 300, 3);
  const std::vector<float> want = testing::run_f32_op(*cpu_, nullptr, OpKind::Softmax, attrs, {x}, {{6, 300}}, {6, 300});
  const std::vector<float> got = testing::run_f32_op(*vk_, &generic, OpKind::Softmax, attrs, {x}, {{6, 300}}, {6, 300});
  expect_near_all(got, want, 1e-6, "softmax");
  EXPECT_EQ(generic.stats().template_launches, 0u);
  EXPECT_EQ(generic.stats().launches, 3u) << "max, sum of exponentials, normalize";
}

// A template candidate in the one-node schedule takes the backend's template where it serves its
// sizes; the same op with templates off runs the generic kernel, and both match the reference.
TEST_F(EagerProgramsTest, TemplateOrGenericKernelAsTheScheduleSays) {
  if (IsSkipped()) return;
  EagerPrograms device_choice(*vk_), generic(*vk_, {.generic_only = true});
  const int64_t m = 128, k = 96, n = 160;
  const std::vector<float> a = testing::random_values(m * k, 4), b = testing::random_values(k * n, 5);
  const std::vector<float> want = testing::run_f32_op(*cpu_, nullptr, OpKind::MatMul, {}, {a, b}, {{m, k}, {k, n}}, {m, n});
  const std::vector<float> got = testing::run_f32_op(*vk_, &device_choice, OpKind::MatMul, {}, {a, b}, {{m, k}, {k, n}}, {m, n});
  const std::vector<float> got_generic = testing::run_f32_op(*vk_, &generic, OpKind::MatMul, {}, {a, b}, {{m, k}, {k, n}}, {m, n});
  testing::expect_close_sums(got, want, k, "matmul template");
  testing::expect_close_sums(got_generic, want, k, "matmul generic");
  EXPECT_EQ(device_choice.stats().template_launches, 1u);
  EXPECT_EQ(generic.stats().template_launches, 0u);
  EXPECT_GE(generic.stats().launches, 1u);
}

// Backend::execute is for backends whose eager ops run precompiled kernels; Vulkan's say so.
TEST_F(EagerProgramsTest, ExecuteOnACodeGeneratingBackendNamesTheEntry) {
  if (IsSkipped()) return;
  auto x = vk_->alloc(16), y = vk_->alloc(16);
  AttrMap attrs;
  BufferView views[2] = {{x.get(), DType::F32, {4}}, {y.get(), DType::F32, {4}}};
  const OpRun run{OpKind::Neg, attrs, std::span(views, 1), std::span(views + 1, 1)};
  try {
    vk_->execute(run);
    FAIL() << "execute() ran an op on a code-generating backend";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run_on_backend"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("neg"), std::string::npos) << e.what();
  }
  const size_t before = vk_->eager_stats().ops;
  run_on_backend(*vk_, run);  // the entry: the backend's own executor
  EXPECT_EQ(vk_->eager_stats().ops, before + 1);
}

}  // namespace
}  // namespace kiln
