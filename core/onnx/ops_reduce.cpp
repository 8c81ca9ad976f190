// ONNX reductions -> kiln reduce ops: ReduceSum/Mean/Max/Min/Prod and the composite ReduceL1/L2/
// LogSum/LogSumExp/SumSquare (axes from the attribute or, from opset 13 for ReduceSum, an input),
// and ArgMax/ArgMin (select_last_index through a reversed view).

#include "core/onnx/import_context.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;
using Ints = std::vector<int64_t>;

enum class Post { None, Sqrt, Log };

struct ReduceSpec {
  OpKind kind;
  bool square = false;  // x*x first
  bool abs = false;     // |x| first
  Post post = Post::None;
};

void map_reduce(N& n, const ReduceSpec& spec) {
  Value* x = n.input(0);
  Ints axes;
  bool from_input = n.op_type() == "ReduceSum" && n.opset() >= 13;
  if (from_input) {
    if (n.has_input(1)) axes = n.constant_ints(1, "axes");
  } else {
    axes = n.attr_ints("axes");
  }
  const bool keepdims = n.attr_int("keepdims", 1) != 0;
  if (axes.empty() && from_input && n.attr_int("noop_with_empty_axes", 0)) {
    n.set_output(0, x);
    return;
  }
  const int64_t rank = int64_t(x->type.rank());
  for (int64_t& a : axes) a = normalize_axis_or(n, a, rank);
  if (axes.empty())  // all dims; spelled out so a 0-d input is handled by the op the same way
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (spec.kind == OpKind::Mean && !is_floating(x->type.dtype))
    n.unsupported("ReduceMean of " + std::string(dtype_name(x->type.dtype)));
  Value* v = x;
  if (spec.abs) v = n.emit(OpKind::Abs, {v});
  if (spec.square) v = n.emit(OpKind::Mul, {v, v});
  if (rank == 0) {
    n.set_output(0, v);
    return;
  }
  Value* r = n.emit(spec.kind, {v}, {{"dims", axes}, {"keepdim", keepdims}});
  if (spec.post == Post::Sqrt) r = n.emit(OpKind::Sqrt, {r});
  if (spec.post == Post::Log) r = n.emit(OpKind::Log, {r});
  n.set_output(0, n.cast(r, x->type.dtype));  // bool sums come back as i64 in kiln
}

void map_arg(N& n, OpKind kind) {
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", 0), rank);
  const bool keepdims = n.attr_int("keepdims", 1) != 0;
  if (!n.attr_int("select_last_index", 0)) {
    n.set_output(0, n.emit(kind, {x}, {{"dim", axis}, {"keepdim", keepdims}}));
    return;
  }
  // The last extreme index is (size-1) minus the first extreme index of the reversed axis.
  const SymInt& size = x->type.shape[size_t(axis)];
  Value* rev = n.emit(OpKind::Slice, {x}, {{"axes", Ints{axis}}, {"starts", Ints{-1}},
                                           {"ends", Ints{kSliceOpenBegin}}, {"steps", Ints{-1}}});
  Value* idx = n.emit(kind, {rev}, {{"dim", axis}, {"keepdim", keepdims}});
  if (!size.is_static()) n.unsupported("select_last_index on a symbolic dim");
  n.set_output(0, n.emit(OpKind::Sub, {n.scalar(double(size.value() - 1), DType::I64), idx}));
}

}  // namespace

void register_reduce_ops(OpTable& t) {
  auto add = [&](const std::string& name, ReduceSpec spec) {
    t[name] = [spec](N& n) { map_reduce(n, spec); };
  };
  add("ReduceSum", {OpKind::Sum});
  add("ReduceMean", {OpKind::Mean});
  add("ReduceMax", {OpKind::ReduceMax});
  add("ReduceMin", {OpKind::ReduceMin});
  add("ReduceProd", {OpKind::Prod});
  add("ReduceL1", {OpKind::Sum, false, true});
  add("ReduceL2", {OpKind::Sum, true, false, Post::Sqrt});
  add("ReduceSumSquare", {OpKind::Sum, true});
  add("ReduceLogSum", {OpKind::Sum, false, false, Post::Log});
  add("ReduceLogSumExp", {OpKind::LogSumExp});
  t["ArgMax"] = [](N& n) { map_arg(n, OpKind::ArgMax); };
  t["ArgMin"] = [](N& n) { map_arg(n, OpKind::ArgMin); };
}

}  // namespace kiln::onnx::detail
