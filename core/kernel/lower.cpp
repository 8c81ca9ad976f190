// Kernel building blocks and the per-family dispatch of lower_op.
#include "core/kernel/lower.h"

#include "core/support/error.h"

namespace kiln::kernel {

KernelBuilder::KernelBuilder(std::string name, KernelKind kind, const Shape& space) : space_(space) {
  lowered_.kernel.name = std::move(name);
  lowered_.kernel.kind = kind;
  lowered_.kernel.rank = int(space.size());
  for (const SymInt& d : space) lowered_.params.push_back(d);
  lowered_.kernel.num_params = int(space.size());
}

int KernelBuilder::add_buffer(DType dtype, bool output) {
  lowered_.kernel.buffers.push_back({dtype, output});
  return int(lowered_.kernel.buffers.size()) - 1;
}

ExprRef KernelBuilder::param_for(const SymInt& value) {
  // Small constants are printed inline; sizes go through params so the kernel text is size-free.
  if (value.is_static() && value.value() >= 0 && value.value() <= 1)
    return constant(double(value.value()), DType::I32);
  lowered_.params.push_back(value);
  return param(lowered_.kernel.num_params++);
}

ExprRef KernelBuilder::broadcast_offset(const Shape& in) {
  if (in.size() == space_.size()) {
    bool same = true;
    for (size_t i = 0; i < in.size(); ++i) same = same && in[i].same_as(space_[i]);
    if (same) return linear_index();
  }
  size_t lead = space_.size() - in.size();
  ExprRef offset = constant(0, DType::I32);
  SymInt stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    bool broadcast = in[i].is_static() && in[i].value() == 1;
    if (!broadcast) offset = iadd(offset, imul(coord(int(lead + i)), param_for(stride)));
    stride = stride * in[i];
  }
  return offset;
}

ExprRef KernelBuilder::offset_of(const std::vector<ExprRef>& coords, const Shape& dims) {
  ExprRef offset = constant(0, DType::I32);
  SymInt stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    offset = iadd(offset, imul(coords[i], param_for(stride)));
    stride = stride * dims[i];
  }
  return offset;
}

LoweredKernel KernelBuilder::finish() { return std::move(lowered_); }

LoweredOp lower_op(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                   const std::vector<TensorType>& outputs, int origin) {
  switch (op_def(kind).family) {
    case OpFamily::Unary:
    case OpFamily::Binary:
      return lower_pointwise(kind, attrs, inputs, outputs, origin);
    case OpFamily::Reduce:
      return lower_reduce(kind, attrs, inputs, outputs, origin);
    case OpFamily::Shape:
      return lower_shape(kind, attrs, inputs, outputs, origin);
    case OpFamily::Linalg:
      return lower_linalg(kind, attrs, inputs, outputs, origin);
    case OpFamily::Conv:
      return lower_conv(kind, attrs, inputs, outputs, origin);
    case OpFamily::Norm:
      return lower_norm(kind, attrs, inputs, outputs, origin);
    default:
      throw Error("op '" + std::string(op_name(kind)) + "' has no kernel lowering yet");
  }
}

}  // namespace kiln::kernel
