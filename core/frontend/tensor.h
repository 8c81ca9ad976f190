// kiln::Tensor: a handle that either owns device memory (eager: each op runs at once) or names a
// value in a graph being traced (compile). Both modes share every op function; see dispatch.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <type_traits>
#include <vector>

#include "core/ir/shape.h"
#include "core/runtime/device_tensor.h"
#include "core/support/error.h"

namespace kiln {

struct Value;
class Tracer;
struct AutogradNode;  // core/frontend/autograd.h

// A list of sizes that may hold symbolic dims: {2, -1}, {x.shape(0), 4}, or a std::vector.
class Dims {
 public:
  Dims(std::initializer_list<SymInt> dims) : dims_(dims) {}
  Dims(const std::vector<int64_t>& dims) : dims_(dims.begin(), dims.end()) {}  // NOLINT
  Dims(const Shape& dims) : dims_(dims) {}                                     // NOLINT
  const Shape& get() const { return dims_; }
  std::vector<int64_t> values() const { return static_dims(dims_); }

 private:
  Shape dims_;
};

// An eager tensor's data is its DeviceTensor part; a traced one leaves the buffer empty.
struct TensorImpl : DeviceTensor {
  TensorImpl() = default;
  explicit TensorImpl(DeviceTensor data) : DeviceTensor(std::move(data)) {}

  Value* value = nullptr;          // traced: the graph value this tensor stands for
  Tracer* tracer = nullptr;
  // Eager autograd (core/frontend/autograd.h): a leaf the user marked, or the output of an op
  // recorded because an input required grad (grad_fn, and which of its outputs this is).
  bool requires_grad = false;
  std::shared_ptr<AutogradNode> grad_fn;
  int grad_fn_output = 0;
  std::shared_ptr<TensorImpl> grad;  // a leaf's accumulated gradient
};

class Tensor {
 public:
  Tensor() = default;  // undefined: an absent optional input (conv2d's bias)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  bool is_traced() const { return impl_ && impl_->value != nullptr; }

  const Shape& shape() const;
  // One dim; while tracing a symbolic dim, comparing it records a guard at the caller's line.
  SymInt shape(int64_t dim, Loc loc = Loc::current()) const;
  std::vector<int64_t> sizes() const;  // static sizes; throws kiln::Error for symbolic dims
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  const TensorType& type() const;

  // Autograd, as libtorch's. requires_grad_ marks a floating-point leaf whose gradient backward()
  // accumulates into grad(); ops on such tensors record what their backward needs.
  Tensor& requires_grad_(bool requires_grad = true, Loc loc = Loc::current());
  bool requires_grad() const;
  // Undefined until a backward reaches this leaf; later backwards add to it.
  Tensor grad() const;
  // Differentiates this one-element tensor (or, with `gradient` of its shape, <gradient, this>)
  // with respect to every leaf that requires grad, adding the results to their grad().
  void backward(Loc loc = Loc::current()) const;
  void backward(const Tensor& gradient, Loc loc = Loc::current()) const;
  // The same data with no autograd history.
  Tensor detach() const;

  // A copy on another device (a no-op handle copy when already there).
  Tensor to(Device device, Loc loc = Loc::current()) const;
  // Element conversion (the cast op).
  Tensor to(DType dtype, Loc loc = Loc::current()) const;

  // Host copies of the data, converted to T. During tracing they break the graph.
  template <class T>
  std::vector<T> to_vector(Loc loc = Loc::current()) const {
    const auto n = static_cast<size_t>(numel());
    if constexpr (std::is_same_v<T, bool>) {  // vector<bool> is packed: read bytes, then unpack
      std::vector<uint8_t> bytes(n);
      if (n) read_into(bytes.data(), DType::Bool, loc);
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> out(n);
      if (n) read_into(out.data(), dtype_of<T>::value, loc);
      return out;
    }
  }
  template <class T>
  T item(Loc loc = Loc::current()) const {
    if (numel() != 1)
      throw Error("item() needs a tensor with one element, got " + type().str() + " at " +
                  short_location(loc));
    return to_vector<T>(loc)[0];
  }

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  void read_into(void* dst, DType dst_dtype, const Loc& loc) const;

  std::shared_ptr<TensorImpl> impl_;
};

// Operators capture the caller's line through these implicit conversions (operators cannot take
// default arguments themselves).
struct TensorArg {
  TensorArg(const Tensor& t, Loc loc = Loc::current()) : tensor(t), loc(loc) {}  // NOLINT
  const Tensor& tensor;
  Loc loc;
};

Tensor operator+(TensorArg a, TensorArg b);
Tensor operator-(TensorArg a, TensorArg b);
Tensor operator*(TensorArg a, TensorArg b);
Tensor operator/(TensorArg a, TensorArg b);
Tensor operator+(TensorArg a, double b);
Tensor operator-(TensorArg a, double b);
Tensor operator*(TensorArg a, double b);
Tensor operator/(TensorArg a, double b);
Tensor operator+(double a, TensorArg b);
Tensor operator-(double a, TensorArg b);
Tensor operator*(double a, TensorArg b);
Tensor operator/(double a, TensorArg b);
Tensor operator-(TensorArg a);

// Crossing into the runtime (core/runtime takes DeviceTensors): the data of eager tensors (an
// undefined Tensor gives an empty DeviceTensor), and runtime results as tensors without history.
std::vector<DeviceTensor> device_tensors(const std::vector<Tensor>& tensors);
Tensor tensor_of(DeviceTensor data);
std::vector<Tensor> tensors_of(std::vector<DeviceTensor> data);

}  // namespace kiln
