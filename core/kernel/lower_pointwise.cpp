// Lowering of the pointwise ops: one kernel, one expression over broadcast loads.
#include "core/kernel/lower.h"

namespace kiln::kernel {

LoweredOp lower_pointwise(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                          const std::vector<TensorType>& outputs, int origin) {
  const TensorType& out = outputs.at(0);
  std::string name = std::string(op_name(kind)) + "_" + std::string(dtype_name(out.dtype)) + "_r" +
                     std::to_string(out.rank());
  KernelBuilder b(name, KernelKind::Pointwise, out.shape);
  // Binary math happens in the promoted type (comparisons output bool but compare promoted values).
  DType compute = out.dtype;
  if (op_def(kind).family == OpFamily::Binary && kind != OpKind::Where)
    compute = promote_types(inputs[0].dtype, inputs[1].dtype);
  if (kind == OpKind::Where) compute = out.dtype;

  std::vector<ExprRef> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    int slot = b.add_buffer(inputs[i].dtype, false);
    ExprRef v = load(slot, inputs[i].dtype, b.broadcast_offset(inputs[i].shape));
    bool is_condition = kind == OpKind::Where && i == 0;
    bool keep_type = kind == OpKind::Cast || kind == OpKind::LogicalNot || is_condition;
    if (!keep_type) v = cast(v, compute);
    if (kind == OpKind::LogicalNot) v = cast(v, DType::Bool);
    if ((kind == OpKind::LogicalAnd || kind == OpKind::LogicalOr || kind == OpKind::LogicalXor))
      v = cast(v, DType::Bool);
    args.push_back(v);
  }
  int out_slot = b.add_buffer(out.dtype, true);
  ExprRef value = op(kind, out.dtype, args, attrs);
  value = with_origins(value, {origin});
  b.kernel().stores.push_back({out_slot, value});

  LoweredOp lowered;
  std::vector<int> binding;
  for (size_t i = 0; i <= inputs.size(); ++i) binding.push_back(int(i));
  lowered.steps.push_back({b.finish(), binding});
  return lowered;
}

}  // namespace kiln::kernel
