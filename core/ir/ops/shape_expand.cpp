// Expansions of shape ops (OpDef::expand, applied by the expand-ops pass on code-generating
// backends): a split is one slice per piece. A slice is a view, which fusion moves into the kernel
// that reads it, or a matmul template reads in place (a head split of a packed q/k/v projection):
// the pieces are never copied, where the split's kernel wrote every one.
#include "core/ir/grad_builder.h"
#include "core/ir/graph.h"
#include "core/ir/op.h"
#include "core/ir/shape.h"

namespace kiln::ops {
namespace {

std::vector<Value*> split_as_slices(GradBuilder& b) {
  const Node& node = b.node();
  Value* x = b.input(0);
  const int64_t dim = normalize_axis(b.attrs().get_int("dim"), int64_t(x->type.rank()), "split");
  std::vector<Value*> pieces;
  SymInt start = 0;
  for (const Value* out : node.outputs) {
    const SymInt end = start + out->type.shape[size_t(dim)];
    pieces.push_back(b.op(OpKind::Slice, {x},
                          {{"axes", std::vector<int64_t>{dim}},
                           {"starts", std::vector<SymInt>{start}},
                           {"ends", std::vector<SymInt>{end}},
                           {"steps", std::vector<int64_t>{1}}}));
    start = end;
  }
  return pieces;
}

}  // namespace

void define_shape_expansions(std::vector<OpDef>& t) { t[size_t(OpKind::Split)].expand = split_as_slices; }

}  // namespace kiln::ops
