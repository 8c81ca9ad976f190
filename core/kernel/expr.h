// Kernel IR expressions: a small typed expression DAG that both code generators print. Leaves are
// constants, integer parameters (sizes and strides, passed at launch so one compiled kernel serves
// every size), the output coordinate and loads; inner nodes reuse the graph's op kinds for math
// (add, exp, where, cast, ...). Every node keeps the graph nodes it came from.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/op.h"

namespace kiln::kernel {

struct Expr;
using ExprRef = std::shared_ptr<const Expr>;

enum class ExprKind {
  Const,  // value
  Param,  // integer launch parameter `index`
  Coord,  // output coordinate along dim `index` (i32); index -1: the linear output index
  Load,   // element of buffer `index` at args[0] (an i32 element offset)
  Op,     // math: `op` applied to args (unary, binary, Where = select, Cast = convert to `type`)
  ReductionIndex,  // the reduction loop counter (i32), Reduce kernels only
  Accumulator,     // the reduction result, in a Reduce kernel's stores only
};

struct Expr {
  ExprKind kind = ExprKind::Const;
  DType type = DType::F32;   // result type; index math is I32, predicates Bool
  double value = 0;          // Const
  int index = 0;             // Param slot, Coord dim, Load buffer
  OpKind op = OpKind::Add;   // Op
  AttrMap attrs;             // Op attributes the printer needs (leaky_relu alpha, gelu form)
  std::vector<ExprRef> args;
  std::vector<int> origins;  // ids of the graph nodes this expression computes
};

// Builders. Types follow the graph's rules for math; index helpers work on I32.
ExprRef constant(double value, DType type);
ExprRef param(int slot);
ExprRef coord(int dim);
ExprRef linear_index();  // the output element's row-major index
ExprRef load(int buffer, DType type, ExprRef offset);
ExprRef op(OpKind kind, DType type, std::vector<ExprRef> args, AttrMap attrs = {});
ExprRef cast(ExprRef e, DType type);
ExprRef select(ExprRef condition, ExprRef a, ExprRef b);

// I32 index arithmetic with constant folding of the trivial cases (x*1, x+0, 0*x).
ExprRef iadd(ExprRef a, ExprRef b);
ExprRef imul(ExprRef a, ExprRef b);
ExprRef idiv(ExprRef a, ExprRef b);
ExprRef imod(ExprRef a, ExprRef b);

// Merges structurally equal expressions (same kind, type, value, index, op, attributes, origins and
// arguments) into one node, so that printers, which name each node once, compute them once. A
// fused group rebuilds a member for every output of another shape; their trees come out equal.
// One instance per scope whose values may be shared (a kernel's stores; a reduction's body).
class ExprSharing {
 public:
  ExprRef operator()(const ExprRef& e);

 private:
  std::map<const Expr*, ExprRef> shared_;             // input node -> its shared node
  std::map<std::string, std::vector<ExprRef>> nodes_;  // key without attributes -> shared nodes
};

// A copy of e whose node (not its arguments) lists `origins`.
ExprRef with_origins(const ExprRef& e, std::vector<int> origins);
// Every origin id in the expression tree, sorted and unique.
std::vector<int> collect_origins(const ExprRef& e);

}  // namespace kiln::kernel
