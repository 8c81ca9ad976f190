// What a cpu reference kernel sees: host tensors (contiguous, row-major) and the node's
// attributes. Kernels are plain functions registered per OpKind by their family file.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/host_tensor.h"
#include "core/ir/op.h"

namespace kiln::reference {

struct KernelContext {
  OpKind kind;
  const AttrMap& attrs;  // complete: defaults filled
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> outputs;  // allocated, shapes from the op's shape rule
};

using Kernel = void (*)(const KernelContext&);

// The table every family fills; lookup returns nullptr for an op without a kernel.
class KernelTable {
 public:
  KernelTable();
  void set(OpKind kind, Kernel kernel) { kernels_[size_t(kind)] = kernel; }
  Kernel get(OpKind kind) const { return kernels_[size_t(kind)]; }

 private:
  std::vector<Kernel> kernels_;
};
const KernelTable& kernels();

void register_pointwise(KernelTable& table);
void register_reduce(KernelTable& table);
void register_linalg(KernelTable& table);
void register_conv(KernelTable& table);
void register_winograd(KernelTable& table);
void register_norm(KernelTable& table);
void register_shape(KernelTable& table);

// Maps an output index of `out_dims` to the offset in an input broadcast to it (numpy rules).
// Walks outputs in order; next() advances by one element.
class BroadcastIndex {
 public:
  BroadcastIndex(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims);
  void seek(int64_t linear);  // position at output element `linear`
  int64_t offset() const { return offset_; }
  void next();

 private:
  std::vector<int64_t> out_dims_, in_strides_, counter_;
  int64_t offset_ = 0;
};

}  // namespace kiln::reference
