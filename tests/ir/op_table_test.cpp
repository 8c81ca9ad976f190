// The op table is complete: every op has a definition, a unique name and a cpu reference kernel.
#include <gtest/gtest.h>

#include <set>

#include "backends/ref/ref_kernel.h"
#include "core/ir/op.h"
#include "core/support/error.h"

namespace kiln {
namespace {

TEST(OpTable, EveryOpIsDefinedOnceWithAUniqueName) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < kOpCount; ++i) {
    OpKind k = OpKind(i);
    EXPECT_NO_THROW(op_def(k)) << op_name(k);
    EXPECT_TRUE(names.insert(op_name(k)).second) << "duplicate name " << op_name(k);
    EXPECT_EQ(find_op(op_name(k)), k);
  }
  EXPECT_FALSE(find_op("no_such_op").has_value());
}

// Control-flow ops have no kernel of their own: they run their subgraphs' ops (execute_op.cpp).
TEST(OpTable, EveryOpHasACpuReferenceKernel) {
  for (size_t i = 0; i < kOpCount; ++i)
    if (op_def(OpKind(i)).family != OpFamily::Control)
      EXPECT_NE(reference::kernels().get(OpKind(i)), nullptr) << op_name(OpKind(i));
}

TEST(OpTable, AttributesAreCompletedAndChecked) {
  Provenance where;
  AttrMap full = complete_attrs(OpKind::LeakyRelu, {}, where);
  EXPECT_DOUBLE_EQ(full.get_float("alpha"), 0.01);
  EXPECT_THROW(complete_attrs(OpKind::LeakyRelu, {{"slope", 0.1}}, where), Error);
  EXPECT_THROW(complete_attrs(OpKind::LeakyRelu, {{"alpha", std::string("x")}}, where), Error);
  EXPECT_THROW(complete_attrs(OpKind::Cast, {}, where), Error);  // dtype is required
}

TEST(OpTable, ArityIsChecked) {
  TensorType t{DType::F32, {2}};
  try {
    infer_types(OpKind::Add, {t}, {}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes 2 inputs, got 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
