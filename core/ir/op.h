// The op table: for every op, its name, attributes (types and defaults), input arity and the rule
// that gives its output types (shape and dtype) from its inputs, rejecting bad input with a clear
// error. Reference kernels live in backends/cpu, keyed by the same OpKind.
#pragma once

#include <algorithm>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/provenance.h"
#include "core/ir/shape.h"

namespace kiln {

enum class OpKind : uint16_t {
#define KILN_OP(e, name, family) e,
#include "core/ir/op_list.def"
#undef KILN_OP
  Count_
};
inline constexpr size_t kOpCount = size_t(OpKind::Count_);

enum class OpFamily { Unary, Binary, Reduce, Linalg, Conv, Norm, Shape, Control };

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<Attr> default_value;  // nullopt: required
};

// What a shape rule sees: input types and complete attributes (defaults filled). fail() throws a
// kiln::Error naming the op, the input types and the caller's location.
class InferContext {
 public:
  InferContext(OpKind kind, const std::vector<TensorType>& inputs, const AttrMap& attrs,
               const Provenance& where)
      : kind_(kind), inputs_(inputs), attrs_(attrs), where_(where) {}

  OpKind kind() const { return kind_; }
  size_t num_inputs() const { return inputs_.size(); }
  const TensorType& input(size_t i) const { return inputs_.at(i); }
  const std::vector<TensorType>& inputs() const { return inputs_; }
  const AttrMap& attrs() const { return attrs_; }
  int64_t axis(int64_t axis, int64_t rank) const;  // normalize or fail()
  [[noreturn]] void fail(const std::string& why) const;

 private:
  OpKind kind_;
  const std::vector<TensorType>& inputs_;
  const AttrMap& attrs_;
  const Provenance& where_;
};

using InferFn = std::function<std::vector<TensorType>(const InferContext&)>;

struct Value;       // core/ir/graph.h
class GradBuilder;  // core/ir/grad_builder.h
// The vector-Jacobian rule: from the gradients of a node's outputs, the gradients of its inputs
// (nullptr where none flows), built as ordinary nodes in kiln's own ops (GradBuilder::op).
using VjpFn = std::function<std::vector<Value*>(GradBuilder&)>;

// An op written in other ops (GradBuilder::op), for backends whose kernels run those faster than
// the op's own: one value per output, or none where this node cannot be written so. The expand-ops
// pass (core/passes/passes.h) applies it where the backend asks.
using ExpandFn = std::function<std::vector<Value*>(GradBuilder&)>;

// How gradients pass an op. Rule: `vjp` gives them. None: no gradient flows through it (its outputs
// are integers, booleans or indices, or piecewise constant: comparisons, argmax, floor, sign).
// Missing: differentiable, but no rule is written yet; a backward that needs one raises an error.
enum class Gradient { Missing, Rule, None };

struct OpDef {
  OpKind kind;
  std::string_view name;
  OpFamily family;
  std::vector<AttrSpec> attrs;
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic
  InferFn infer;
  Gradient gradient = Gradient::Missing;  // set with the rules, core/ir/ops/<family>_grad.cpp
  VjpFn vjp;
  ExpandFn expand;  // set by the family files that have expansions (conv_expand.cpp, shape_expand.cpp)
};

const OpDef& op_def(OpKind kind);
std::string_view op_name(OpKind kind);
std::optional<OpKind> find_op(std::string_view name);

// Fills defaults, rejects unknown or mistyped attributes and missing required ones.
AttrMap complete_attrs(OpKind kind, const AttrMap& given, const Provenance& where);
// Checks arity, completes attrs and runs the shape rule. Every error is a kiln::Error that names the
// op, the input types and `where`.
// `completed`, when given, receives the attributes with defaults filled, so callers need not
// complete them a second time.
std::vector<TensorType> infer_types(OpKind kind, const std::vector<TensorType>& inputs,
                                    const AttrMap& attrs, const Provenance& where,
                                    AttrMap* completed = nullptr);

// conv, max_pool and avg_pool: whether the activations (input and result) are channels-last,
// [N, *spatial, C], rather than [N, C, *spatial]. Weights keep [O, C/groups, *kernel] either way.
bool is_channels_last(const AttrMap& attrs);
// [N, *spatial, C] -> [N, C, *spatial] and back, for dims (int64_t) or a Shape; rank < 3 unchanged.
template <class Dims>
Dims channels_first_dims(Dims dims) {
  if (dims.size() >= 3) std::rotate(dims.begin() + 1, dims.end() - 1, dims.end());
  return dims;
}
template <class Dims>
Dims channels_last_dims(Dims dims) {
  if (dims.size() >= 3) std::rotate(dims.begin() + 1, dims.begin() + 2, dims.end());
  return dims;
}

// "op 'add' (f32[2,3], f32[4]) at demo.cpp:12 [scope]: <why>" — the one error format.
std::string op_error(OpKind kind, const std::vector<TensorType>& inputs, const Provenance& where,
                     const std::string& why);

// Each family file registers its ops' definitions (called once by op_def's table builder).
namespace ops {
void define_unary(std::vector<OpDef>& table);
void define_binary(std::vector<OpDef>& table);
void define_reduce(std::vector<OpDef>& table);
void define_linalg(std::vector<OpDef>& table);
void define_conv(std::vector<OpDef>& table);
void define_winograd(std::vector<OpDef>& table);
void define_norm(std::vector<OpDef>& table);
void define_shape(std::vector<OpDef>& table);
void define_control(std::vector<OpDef>& table);
// Gradient rules, per family: fill `gradient` and `vjp` of the ops defined above (`table` is
// indexed by OpKind).
void define_pointwise_grads(std::vector<OpDef>& table);
void define_reduce_grads(std::vector<OpDef>& table);
void define_linalg_grads(std::vector<OpDef>& table);
void define_conv_grads(std::vector<OpDef>& table);
void define_norm_grads(std::vector<OpDef>& table);
void define_shape_grads(std::vector<OpDef>& table);
// Expansions (`expand`), per family that has them.
void define_conv_expansions(std::vector<OpDef>& table);
void define_shape_expansions(std::vector<OpDef>& table);
}  // namespace ops

// numpy broadcasting of two shapes; nullopt when incompatible. Symbolic dims broadcast when they are
// the same expression or one side is 1.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace kiln
