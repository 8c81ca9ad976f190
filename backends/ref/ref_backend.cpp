// The ref backend: host memory and the reference kernels, with compiled graphs run node by node by
// the interpreter. It is the oracle every other backend is checked against, so kernels favour
// clarity; matmul and conv are blocked and threaded. The cpu backend runs eager ops on these kernels.

#include "backends/backend.h"
#include "backends/ref/host_memory.h"
#include "backends/ref/ref_kernel.h"
#include "core/support/error.h"

namespace kiln {
namespace reference {
namespace {

class RefBackend : public HostBackend {
 public:
  BackendKind kind() const override { return BackendKind::Ref; }
  std::string name() const override { return "ref (reference interpreter)"; }
  void execute(const OpRun& run) override { run_reference_kernel(run); }
};

}  // namespace


KernelTable::KernelTable() : kernels_(kOpCount, nullptr) {}

const KernelTable& kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    register_pointwise(t);
    register_reduce(t);
    register_linalg(t);
    register_conv(t);
    register_winograd(t);
    register_norm(t);
    register_shape(t);
    return t;
  }();
  return table;
}

BroadcastIndex::BroadcastIndex(const std::vector<int64_t>& in_dims,
                               const std::vector<int64_t>& out_dims)
    : out_dims_(out_dims), in_strides_(out_dims.size(), 0), counter_(out_dims.size(), 0) {
  size_t lead = out_dims.size() - in_dims.size();
  int64_t stride = 1;
  for (size_t i = in_dims.size(); i-- > 0;) {
    in_strides_[lead + i] = in_dims[i] == 1 ? 0 : stride;
    stride *= in_dims[i];
  }
}

void BroadcastIndex::seek(int64_t linear) {
  offset_ = 0;
  for (size_t i = out_dims_.size(); i-- > 0;) {
    counter_[i] = out_dims_[i] ? linear % out_dims_[i] : 0;
    linear = out_dims_[i] ? linear / out_dims_[i] : 0;
    offset_ += counter_[i] * in_strides_[i];
  }
}

void BroadcastIndex::next() {
  for (size_t i = out_dims_.size(); i-- > 0;) {
    offset_ += in_strides_[i];
    if (++counter_[i] < out_dims_[i]) return;
    offset_ -= in_strides_[i] * counter_[i];
    counter_[i] = 0;
  }
}

}  // namespace reference

BackendFactory ref_backend_factory() {
  return {BackendKind::Ref,
          [](std::string*) {
            reference::RefBackend b;
            return std::vector<DeviceEntry>{{BackendKind::Ref, 0, b.name(), b.caps()}};
          },
          [](int) -> std::unique_ptr<Backend> { return std::make_unique<reference::RefBackend>(); },
          [](const DeviceEntry&) { return 5 * kOnlyByName; },  // the oracle, never chosen for speed
          /*indexed=*/false};
}

}  // namespace kiln
