// oneDNN matmul and convolution primitives for the cpu backend's host ops. Operands stay in kiln's
// row-major layouts (strided memory descriptors), so no reorder runs per call.
#include "backends/cpu/onednn_ops.h"

#include "backends/conv_problem.h"
#include "backends/matmul_problem.h"
#include "backends/ref/host_memory.h"

#ifdef KILN_HAVE_DNNL
#include <mutex>
#include <optional>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace kiln::cpu {

#ifdef KILN_HAVE_DNNL
namespace {

using dnnl::memory;
using tag = memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// One primitive and the memory descriptors of its arguments, bound to the launch's pointers.
class Primitive : public OneDnnOp {
 public:
  struct Arg {
    int dnnl_arg;
    memory::desc desc;
    int slot;  // the op's operand slot
  };
  Primitive(dnnl::primitive primitive, std::vector<Arg> args) : primitive_(std::move(primitive)), args_(std::move(args)) {}

  void run(const std::vector<void*>& pointers) override {
    thread_local dnnl::stream stream(engine());
    std::unordered_map<int, memory> bound;
    for (const Arg& a : args_) bound.emplace(a.dnnl_arg, memory(a.desc, engine(), pointers.at(size_t(a.slot))));
    primitive_.execute(stream, bound);
    stream.wait();
  }

 private:
  dnnl::primitive primitive_;
  std::vector<Arg> args_;
};

// A convolution in the layouts oneDNN's fastest kernels want (channel-blocked, nChw16c on
// AVX-512), with reorders from and to kiln's NCHW around it. Weights that are program constants are
// reordered once, when the primitive is made; others on every call.
class BlockedConv : public OneDnnOp {
 public:
  BlockedConv(const dnnl::convolution_forward::primitive_desc& pd, memory::desc src, memory::desc weights,
              memory::desc dst, std::optional<memory::desc> bias, const void* constant_weights)
      : conv_(pd), user_src_(src), user_weights_(weights), user_dst_(dst), bias_(bias),
        src_(pd.src_desc(), engine()), weights_(pd.weights_desc(), engine()), dst_(pd.dst_desc(), engine()) {
    if (constant_weights) {
      dnnl::stream stream(engine());
      memory user(user_weights_, engine(), const_cast<void*>(constant_weights));
      dnnl::reorder(user, weights_).execute(stream, user, weights_);
      stream.wait();
      weights_packed_ = true;
    }
  }

  void run(const std::vector<void*>& pointers) override {
    std::lock_guard lock(mutex_);
    thread_local dnnl::stream stream(engine());
    memory src(user_src_, engine(), pointers[0]), dst(user_dst_, engine(), pointers.back());
    dnnl::reorder(src, src_).execute(stream, src, src_);
    if (!weights_packed_) {
      memory w(user_weights_, engine(), pointers[1]);
      dnnl::reorder(w, weights_).execute(stream, w, weights_);
    }
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}};
    if (bias_) args.emplace(DNNL_ARG_BIAS, memory(*bias_, engine(), pointers[2]));
    conv_.execute(stream, args);
    dnnl::reorder(dst_, dst).execute(stream, dst_, dst);
    stream.wait();
  }

 private:
  std::mutex mutex_;
  dnnl::convolution_forward conv_;
  memory::desc user_src_, user_weights_, user_dst_;
  std::optional<memory::desc> bias_;
  memory src_, weights_, dst_;
  bool weights_packed_ = false;
};

// A [batch0, batch1, rows, cols] view of an operand with these element strides; a batch stride of
// 0 (the operand broadcasts) becomes a dim of 1.
memory::desc matrix(int64_t batch0, int64_t batch1, int64_t s0, int64_t s1, int64_t rows, int64_t cols,
                    int64_t row_stride, int64_t col_stride) {
  const int64_t b0 = s0 == 0 ? 1 : batch0, b1 = s1 == 0 ? 1 : batch1;
  const int64_t span = rows * cols;
  return memory::desc({b0, b1, rows, cols}, memory::data_type::f32,
                      {s0 == 0 ? span * b1 : s0, s1 == 0 ? span : s1, row_stride, col_stride});
}

std::unique_ptr<OneDnnOp> make_matmul(const OpRun& run) {
  std::optional<MatmulProblem> p = decode_matmul(run);
  if (!p || p->alpha != 1.0 || p->m == 0 || p->n == 0 || p->k == 0) return nullptr;
  for (const BufferView& v : run.inputs)
    if (v.dtype != DType::F32) return nullptr;
  if (run.outputs[0].dtype != DType::F32) return nullptr;
  const bool bias = p->has_c && p->beta == 1.0 && p->c_row == 0 && p->c_col == 1;
  if (p->has_c && !bias) return nullptr;
  memory::desc a = p->trans_a ? matrix(p->batch0, p->batch1, p->a_batch0, p->a_batch1, p->m, p->k, 1, p->m)
                              : matrix(p->batch0, p->batch1, p->a_batch0, p->a_batch1, p->m, p->k, p->k, 1);
  memory::desc b = p->trans_b ? matrix(p->batch0, p->batch1, p->b_batch0, p->b_batch1, p->k, p->n, 1, p->k)
                              : matrix(p->batch0, p->batch1, p->b_batch0, p->b_batch1, p->k, p->n, p->n, 1);
  memory::desc c = matrix(p->batch0, p->batch1, p->m * p->n * p->batch1, p->m * p->n, p->m, p->n, p->n, 1);
  std::vector<Primitive::Arg> args = {{DNNL_ARG_SRC, a, 0}, {DNNL_ARG_WEIGHTS, b, 1}};
  dnnl::matmul::primitive_desc pd;
  if (bias) {
    memory::desc bias_desc({1, 1, 1, p->n}, memory::data_type::f32, {p->n, p->n, p->n, 1});
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, bias_desc, c), engine());
    args.push_back({DNNL_ARG_BIAS, bias_desc, 2});
  } else {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine());
  }
  args.push_back({DNNL_ARG_DST, c, int(run.inputs.size())});
  return std::make_unique<Primitive>(dnnl::matmul(pd), std::move(args));
}

std::unique_ptr<OneDnnOp> make_conv(const OpRun& run) {
  std::optional<ConvProblem> problem = decode_conv(run);
  if (!problem) return nullptr;
  const ConvParams& q = problem->params;
  const memory::dims src{problem->batch, q.c, q.h, q.w}, dst{problem->batch, q.o, q.oh, q.ow};
  const memory::dims weights = q.groups == 1 ? memory::dims{q.o, q.cg, problem->kh, problem->kw}
                                             : memory::dims{q.groups, q.og, q.cg, problem->kh, problem->kw};
  const int64_t ekh = int64_t(q.dh) * (problem->kh - 1) + 1, ekw = int64_t(q.dw) * (problem->kw - 1) + 1;
  const memory::dims strides{q.sh, q.sw}, dilates{q.dh - 1, q.dw - 1}, pad_l{q.ph, q.pw};
  const memory::dims pad_r{(q.oh - 1) * int64_t(q.sh) + ekh - q.h - q.ph, (q.ow - 1) * int64_t(q.sw) + ekw - q.w - q.pw};
  memory::desc src_md(src, memory::data_type::f32, tag::nchw), dst_md(dst, memory::data_type::f32, tag::nchw);
  memory::desc w_md(weights, memory::data_type::f32, q.groups == 1 ? tag::oihw : tag::goihw);
  memory::desc any_src(src, memory::data_type::f32, tag::any), any_dst(dst, memory::data_type::f32, tag::any);
  memory::desc any_w(weights, memory::data_type::f32, tag::any);
  const auto kind = dnnl::prop_kind::forward_inference;
  const auto algo = dnnl::algorithm::convolution_direct;
  std::optional<memory::desc> b_md;
  if (problem->has_bias) b_md = memory::desc({q.o}, memory::data_type::f32, tag::a);
  auto desc = b_md ? dnnl::convolution_forward::desc(kind, algo, any_src, any_w, *b_md, any_dst, strides, dilates, pad_l, pad_r)
                   : dnnl::convolution_forward::desc(kind, algo, any_src, any_w, any_dst, strides, dilates, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, engine());
  const void* constant_weights = run.inputs[1].buffer ? reference::host_data(*run.inputs[1].buffer) : nullptr;
  return std::make_unique<BlockedConv>(pd, src_md, w_md, dst_md, b_md, constant_weights);
}

}  // namespace

bool have_onednn() { return true; }

std::unique_ptr<OneDnnOp> make_onednn_op(const OpRun& run) {
  try {
    if (run.kind == OpKind::Conv) return make_conv(run);
    if (run.kind == OpKind::MatMul || run.kind == OpKind::Linear || run.kind == OpKind::Gemm) return make_matmul(run);
  } catch (const dnnl::error&) {
    return nullptr;  // a configuration oneDNN has no implementation for: the reference kernel runs it
  }
  return nullptr;
}

#else

bool have_onednn() { return false; }
std::unique_ptr<OneDnnOp> make_onednn_op(const OpRun&) { return nullptr; }

#endif

}  // namespace kiln::cpu
