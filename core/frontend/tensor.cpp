// Tensor accessors, device transfer, host read-back and the arithmetic operators.
#include "core/frontend/tensor.h"

#include "core/frontend/dispatch.h"
#include "core/frontend/lazy.h"
#include "core/frontend/scope.h"
#include "core/ir/provenance.h"

namespace kiln {

TensorImpl& Tensor::impl() const {
  if (!impl_) throw Error("use of an undefined (empty) Tensor");
  return *impl_;
}

const TensorType& Tensor::type() const { return impl().type; }
const Shape& Tensor::shape() const { return impl().type.shape; }
DType Tensor::dtype() const { return impl().type.dtype; }
Device Tensor::device() const { return impl().device; }
std::vector<int64_t> Tensor::sizes() const { return static_dims(shape()); }

int64_t Tensor::numel() const { return kiln::numel(shape()).hint(); }

SymInt Tensor::shape(int64_t dim, Loc loc) const {
  int64_t rank = this->dim();
  int64_t d;
  try {
    d = normalize_axis(dim, rank, "shape(" + std::to_string(dim) + ")");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " of " + type().str() + " at " + short_location(loc));
  }
  if (rank == 0) throw Error("shape(i) of a 0-d tensor at " + short_location(loc));
  return shape()[size_t(d)].with_origin(loc);
}

void Tensor::read_into(void* dst, DType dst_dtype, const Loc& loc) const {
  const TensorImpl& i = impl();
  if (i.value && i.tracer->lazy) i.tracer->lazy->flush();  // lazy mode: run the segment now
  if (i.value) {
    const std::string& scope = current_scope();
    throw GraphBreak("graph break at " + short_location(loc) +
                         (scope.empty() ? "" : " [" + scope + "]") +
                         ": to_vector()/item() reads a traced tensor's data, which a graph "
                         "cannot hold",
                     loc);
  }
  try {
    i.read_elements(dst, dst_dtype);
  } catch (const DeviceLostError& e) {  // queued eager launches fail when a read waits for them
    throw DeviceLostError("reading a " + i.type.str() + " tensor on " + i.device.name() + " at " +
                              short_location(loc) + ": " + e.what(),
                          e.last_launch());
  }
}

Tensor Tensor::to(Device device, Loc loc) const {
  const TensorImpl& i = impl();
  if (i.device == device) return *this;
  if (i.value && i.tracer->lazy) i.tracer->lazy->flush();
  if (i.value)
    throw Error("moving a traced tensor to " + device.name() + " at " + short_location(loc) +
                " is not supported inside a compiled function");
  return tensor_of(i.copy_to(device));
}

Tensor Tensor::to(DType dtype, Loc loc) const {
  if (dtype == this->dtype()) return *this;
  return run_op1(OpKind::Cast, {*this}, {{"dtype", dtype}}, loc);
}

namespace {
Tensor binary(OpKind kind, const Tensor& a, const Tensor& b, const Loc& loc) {
  return run_op1(kind, {a, b}, {}, loc);
}
}  // namespace

Tensor operator+(TensorArg a, TensorArg b) { return binary(OpKind::Add, a.tensor, b.tensor, a.loc); }
Tensor operator-(TensorArg a, TensorArg b) { return binary(OpKind::Sub, a.tensor, b.tensor, a.loc); }
Tensor operator*(TensorArg a, TensorArg b) { return binary(OpKind::Mul, a.tensor, b.tensor, a.loc); }
Tensor operator/(TensorArg a, TensorArg b) { return binary(OpKind::Div, a.tensor, b.tensor, a.loc); }

#define KILN_SCALAR_OPERATORS(sym, kind)                                          \
  Tensor operator sym(TensorArg a, double b) {                                    \
    return binary(kind, a.tensor, scalar_operand(b, a.tensor, a.loc), a.loc);     \
  }                                                                               \
  Tensor operator sym(double a, TensorArg b) {                                    \
    return binary(kind, scalar_operand(a, b.tensor, b.loc), b.tensor, b.loc);     \
  }
KILN_SCALAR_OPERATORS(+, OpKind::Add)
KILN_SCALAR_OPERATORS(-, OpKind::Sub)
KILN_SCALAR_OPERATORS(*, OpKind::Mul)
KILN_SCALAR_OPERATORS(/, OpKind::Div)
#undef KILN_SCALAR_OPERATORS

Tensor operator-(TensorArg a) { return run_op1(OpKind::Neg, {a.tensor}, {}, a.loc); }

std::vector<DeviceTensor> device_tensors(const std::vector<Tensor>& tensors) {
  std::vector<DeviceTensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(t.defined() ? DeviceTensor(t.impl()) : DeviceTensor{});
  return out;
}

Tensor tensor_of(DeviceTensor data) { return Tensor(std::make_shared<TensorImpl>(std::move(data))); }

std::vector<Tensor> tensors_of(std::vector<DeviceTensor> data) {
  std::vector<Tensor> out;
  out.reserve(data.size());
  for (DeviceTensor& d : data) out.push_back(tensor_of(std::move(d)));
  return out;
}

}  // namespace kiln
