// oneDNN matmul, convolution and pooling primitives for the cpu backend's host ops. Matmul operands
// stay in kiln's row-major layouts (strided memory descriptors); convolutions reorder to and from
// oneDNN's blocked layouts.
#include "backends/cpu/onednn_ops.h"

#include "backends/conv_problem.h"
#include "backends/matmul_problem.h"
#include "backends/template_util.h"
#include "backends/ref/host_memory.h"

#ifdef KILN_HAVE_DNNL
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "backends/cpu/onednn_post_ops.h"
#include "backends/cpu/small_matmul.h"
#endif

namespace kiln::cpu {

#ifdef KILN_HAVE_DNNL
namespace {

using dnnl::memory;
using tag = memory::format_tag;

std::atomic<uint64_t> reorders_of_weights{0};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Ops below this many flops run on the calling thread alone: waking OpenMP's team costs more than
// the work (the MLP's and LSTM's matmuls at batch 1).
constexpr double kSerialFlops = 4e5;

// For the scope of one small op, OpenMP (and so oneDNN, which asks it at execution) runs one thread.
class SerialScope {
 public:
  explicit SerialScope(bool serial) : saved_(serial ? omp_get_max_threads() : 0) {
    if (serial) omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (saved_) omp_set_num_threads(saved_);
  }

 private:
  int saved_;
};

// One primitive and its arguments' memory objects, made once and pointed at each launch's buffers.
class Primitive : public HostKernel {
 public:
  struct Arg {
    int dnnl_arg;
    memory::desc desc;
    int slot;  // the op's operand slot
  };
  Primitive(dnnl::primitive primitive, const std::vector<Arg>& args, bool serial)
      : primitive_(std::move(primitive)), serial_(serial) {
    for (const Arg& a : args) {
      slots_.push_back({a.slot, memory(a.desc, engine(), DNNL_MEMORY_NONE)});
      bound_.emplace(a.dnnl_arg, slots_.back().second);
    }
  }

  void run(const std::vector<HostOperand>& operands) override {
    std::lock_guard lock(mutex_);
    SerialScope scope(serial_);
    thread_local dnnl::stream stream(engine());
    for (auto& [slot, mem] : slots_) mem.set_data_handle(operands.at(size_t(slot)).data);
    primitive_.execute(stream, bound_);
    stream.wait();
  }

 private:
  std::mutex mutex_;
  dnnl::primitive primitive_;
  bool serial_;
  std::vector<std::pair<int, memory>> slots_;
  std::unordered_map<int, memory> bound_;  // handles sharing slots_' memory objects
};

// What a convolution-like primitive reads and writes, in the op's operand order: the two inputs
// (the second one the op's "weights": reordered once where constant, kept where stable), then the
// output; and the layouts the primitive chose for them.
struct ConvOperands {
  int src = DNNL_ARG_SRC, weights = DNNL_ARG_WEIGHTS, dst = DNNL_ARG_DST;
  memory::desc want_src, want_weights, want_dst;
  bool keep_weights = true;  // false: the second input is reordered on every call, stable or not
};

// A convolution (or one of its gradients: deconvolution, backward weights) in the layouts oneDNN's
// fastest kernels want (channel-blocked, nChw16c on AVX-512), with reorders from and to kiln's
// NCHW around it. Weights that are program constants are reordered once, when the primitive is
// made. Stable weights (a parameter passed to a compiled program, or an eager op's operand) are
// reordered on the first call that sees their buffer and kept for the next ones: the last
// kKeptWeights buffers are remembered, since equal convolutions (ResNet's blocks) share this
// primitive. Other weights are reordered on every call.
class BlockedConv : public HostKernel {
 public:
  BlockedConv(dnnl::primitive primitive, const ConvOperands& operands, memory::desc src, memory::desc weights,
              memory::desc dst, std::optional<memory::desc> bias, const std::vector<Primitive::Arg>& epilogue_operands,
              const void* constant_weights, bool serial)
      : serial_(serial), conv_(std::move(primitive)), weights_arg_(operands.weights), keep_(operands.keep_weights),
        user_src_(src, engine(), DNNL_MEMORY_NONE), user_weights_(weights, engine(), DNNL_MEMORY_NONE),
        user_dst_(dst, engine(), DNNL_MEMORY_NONE) {
    // Each operand gets a blocked copy and its reorder only where oneDNN chose another layout.
    auto blocked = [](const memory::desc& want, memory& user, memory& copy, dnnl::reorder& to, bool in) {
      if (want == user.get_desc()) {
        copy = user;
        return;
      }
      copy = memory(want, engine());
      to = in ? dnnl::reorder(user, copy) : dnnl::reorder(copy, user);
    };
    blocked(operands.want_src, user_src_, src_, src_in_, true);
    blocked(operands.want_weights, user_weights_, weights_, weights_in_, true);
    blocked(operands.want_dst, user_dst_, dst_, dst_out_, false);
    if (bias) bias_ = memory(*bias, engine(), DNNL_MEMORY_NONE);
    args_ = {{operands.src, src_}, {operands.weights, weights_}, {operands.dst, dst_}};
    if (bias_) args_.emplace(DNNL_ARG_BIAS, *bias_);
    for (const Primitive::Arg& a : epilogue_operands) {
      epilogue_operands_.push_back({a.slot, memory(a.desc, engine(), DNNL_MEMORY_NONE)});
      args_.emplace(a.dnnl_arg, epilogue_operands_.back().second);
    }
    if (constant_weights && weights_in_) {
      dnnl::stream stream(engine());
      user_weights_.set_data_handle(const_cast<void*>(constant_weights));
      weights_in_.execute(stream, user_weights_, weights_);
      stream.wait();
      weights_packed_ = true;
      ++reorders_of_weights;
    }
  }

  void run(const std::vector<HostOperand>& operands) override {
    std::lock_guard lock(mutex_);
    SerialScope scope(serial_);
    thread_local dnnl::stream stream(engine());
    user_src_.set_data_handle(operands[0].data);
    user_dst_.set_data_handle(operands.back().data);
    if (bias_) bias_->set_data_handle(operands[2].data);
    for (auto& [slot, mem] : epilogue_operands_) mem.set_data_handle(operands[size_t(slot)].data);
    if (src_in_) src_in_.execute(stream, user_src_, src_);
    if (!weights_packed_) {
      user_weights_.set_data_handle(operands[1].data);
      args_[weights_arg_] = weights_in_ ? packed_weights(stream, keep_ ? operands[1].serial : 0) : user_weights_;
    }
    conv_.execute(stream, args_);
    if (dst_out_) dst_out_.execute(stream, dst_, user_dst_);
    stream.wait();
  }

 private:
  std::mutex mutex_;
  bool serial_;
  dnnl::primitive conv_;
  int weights_arg_;
  bool keep_;
  memory user_src_, user_weights_, user_dst_;  // kiln's NCHW / OIHW buffers, set per launch
  memory src_, weights_, dst_;                 // what the convolution reads and writes
  std::optional<memory> bias_;
  std::vector<std::pair<int, memory>> epilogue_operands_;  // by op slot: binary post-ops' operands
  dnnl::reorder src_in_, weights_in_, dst_out_;  // empty where the layouts agree
  std::unordered_map<int, memory> args_;
  bool weights_packed_ = false;

  static constexpr size_t kKeptWeights = 16;
  // The weights in the convolution's layout: kept ones for a stable buffer (serial != 0), else
  // reordered now into the scratch copy.
  memory packed_weights(dnnl::stream& stream, uint64_t serial) {
    for (size_t i = 0; serial != 0 && i < kept_.size(); ++i)
      if (kept_[i].first == serial) {
        std::rotate(kept_.begin(), kept_.begin() + long(i), kept_.begin() + long(i) + 1);  // most recent first
        return kept_.front().second;
      }
    ++reorders_of_weights;
    if (serial == 0) {
      weights_in_.execute(stream, user_weights_, weights_);
      return weights_;
    }
    memory packed(weights_.get_desc(), engine());
    weights_in_.execute(stream, user_weights_, packed);
    if (kept_.size() == kKeptWeights) kept_.pop_back();
    kept_.insert(kept_.begin(), {serial, packed});
    return packed;
  }
  std::vector<std::pair<uint64_t, memory>> kept_;  // by buffer serial, most recently used first
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

// A fused run's epilogue goes into `attr`, its operands into `args`; false when oneDNN cannot take
// it, or would take it only on another kernel than the op's own.
template <class PrimitiveDesc, class MakeDesc>
bool fuse_epilogue(const OpRun& run, std::span<const EpilogueStep> epilogue, const ChannelAxis& axis, MakeDesc make_desc,
                   PrimitiveDesc& pd, std::vector<Primitive::Arg>& args) {
  if (epilogue.empty()) return true;
  std::optional<PostOps> post = post_ops_of(run, epilogue, axis);
  if (!post) return false;
  PrimitiveDesc fused(make_desc(), post->attr, engine());
  if (std::string(fused.impl_info_str()) != pd.impl_info_str()) return false;
  pd = fused;
  for (const PostOpOperand& o : post->operands) args.push_back({o.dnnl_arg, o.desc, o.slot});
  return true;
}

std::unique_ptr<HostKernel> make_matmul(const OpRun& fused, std::span<const EpilogueStep> epilogue) {
  const OpRun run{fused.kind, fused.attrs, fused.inputs.first(anchor_inputs(fused, epilogue)), fused.outputs};
  std::optional<MatmulProblem> p = decode_matmul(run);
  if (!p || p->alpha != 1.0 || p->m == 0 || p->n == 0 || p->k == 0) return nullptr;
  fold_batch_into_rows(*p);  // epilogue operands broadcast over the result: its rows may fold
  for (const BufferView& v : run.inputs)
    if (v.dtype != DType::F32) return nullptr;
  if (run.outputs[0].dtype != DType::F32) return nullptr;
  const bool bias = p->has_c && p->beta == 1.0 && p->c_row == 0 && p->c_col == 1;
  if (p->has_c && !bias) return nullptr;
  memory::desc a = p->trans_a ? matrix(p->batch0, p->batch1, p->a_batch0, p->a_batch1, p->m, p->k, 1, p->lda)
                              : matrix(p->batch0, p->batch1, p->a_batch0, p->a_batch1, p->m, p->k, p->lda, 1);
  memory::desc b = p->trans_b ? matrix(p->batch0, p->batch1, p->b_batch0, p->b_batch1, p->k, p->n, 1, p->ldb)
                              : matrix(p->batch0, p->batch1, p->b_batch0, p->b_batch1, p->k, p->n, p->ldb, 1);
  memory::desc c = matrix(p->batch0, p->batch1, p->m * p->n * p->batch1, p->m * p->n, p->m, p->n, p->n, 1);
  std::vector<Primitive::Arg> args = {{DNNL_ARG_SRC, a, 0}, {DNNL_ARG_WEIGHTS, b, 1}};
  const memory::desc bias_desc({1, 1, 1, p->n}, memory::data_type::f32, {p->n, p->n, p->n, 1});
  auto desc = [&] { return bias ? dnnl::matmul::desc(a, b, bias_desc, c) : dnnl::matmul::desc(a, b, c); };
  dnnl::matmul::primitive_desc pd(desc(), engine());
  if (bias) args.push_back({DNNL_ARG_BIAS, bias_desc, 2});
  const ChannelAxis last{run.outputs[0].dims.size() - 1, 3, std::nullopt};
  if (!fuse_epilogue(fused, epilogue, last, desc, pd, args)) return nullptr;
  args.push_back({DNNL_ARG_DST, c, int(fused.inputs.size())});
  return std::make_unique<Primitive>(dnnl::matmul(pd), args, double(p->flops()) < kSerialFlops);
}

std::unique_ptr<HostKernel> make_conv(const OpRun& fused, std::span<const EpilogueStep> epilogue) {
  const OpRun run{fused.kind, fused.attrs, fused.inputs.first(anchor_inputs(fused, epilogue)), fused.outputs};
  std::optional<ConvProblem> problem = decode_conv(run);
  if (!problem) return nullptr;
  const ConvParams& q = problem->params;
  const memory::dims src{problem->batch, q.c, q.h, q.w}, dst{problem->batch, q.o, q.oh, q.ow};
  const memory::dims weights = q.groups == 1 ? memory::dims{q.o, q.cg, problem->kh, problem->kw}
                                             : memory::dims{q.groups, q.og, q.cg, problem->kh, problem->kw};
  const int64_t ekh = int64_t(q.dh) * (problem->kh - 1) + 1, ekw = int64_t(q.dw) * (problem->kw - 1) + 1;
  const memory::dims strides{q.sh, q.sw}, dilates{q.dh - 1, q.dw - 1}, pad_l{q.ph, q.pw};
  const memory::dims pad_r{(q.oh - 1) * int64_t(q.sh) + ekh - q.h - q.ph, (q.ow - 1) * int64_t(q.sw) + ekw - q.w - q.pw};
  // Channels-first activations go to whichever layout oneDNN prefers, through reorders; channels-last
  // ones are oneDNN's nhwc, which its AVX-512 and AVX2 kernels read and write directly.
  const tag activations = problem->channels_last ? tag::nhwc : tag::nchw;
  memory::desc src_md(src, memory::data_type::f32, activations), dst_md(dst, memory::data_type::f32, activations);
  memory::desc w_md(weights, memory::data_type::f32, q.groups == 1 ? tag::oihw : tag::goihw);
  memory::desc any_src = problem->channels_last ? src_md : memory::desc(src, memory::data_type::f32, tag::any);
  memory::desc any_dst = problem->channels_last ? dst_md : memory::desc(dst, memory::data_type::f32, tag::any);
  memory::desc any_w(weights, memory::data_type::f32, tag::any);
  const auto kind = dnnl::prop_kind::forward_inference;
  const auto algo = dnnl::algorithm::convolution_direct;
  std::optional<memory::desc> b_md;
  if (problem->has_bias) b_md = memory::desc({q.o}, memory::data_type::f32, tag::a);
  auto desc = [&] {
    return b_md ? dnnl::convolution_forward::desc(kind, algo, any_src, any_w, *b_md, any_dst, strides, dilates, pad_l, pad_r)
                : dnnl::convolution_forward::desc(kind, algo, any_src, any_w, any_dst, strides, dilates, pad_l, pad_r);
  };
  dnnl::convolution_forward::primitive_desc pd(desc(), engine());
  // oneDNN's reference kernel is far slower than a reorder to a layout its fast kernels take.
  if (problem->channels_last && std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
  std::vector<Primitive::Arg> operands;
  const ChannelAxis channels = problem->channels_last ? ChannelAxis{run.outputs[0].dims.size() - 1, 1, dst_md}
                                                     : ChannelAxis{1, 1, std::nullopt};
  if (!fuse_epilogue(fused, epilogue, channels, desc, pd, operands)) return nullptr;
  const void* constant_weights = run.inputs[1].buffer ? reference::host_data(*run.inputs[1].buffer) : nullptr;
  const double flops = 2.0 * double(problem->batch) * q.o * q.oh * q.ow * q.cg * problem->kh * problem->kw;
  const ConvOperands roles{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, pd.src_desc(), pd.weights_desc(), pd.dst_desc()};
  return std::make_unique<BlockedConv>(dnnl::convolution_forward(pd), roles, src_md, w_md, dst_md, b_md, operands,
                                       constant_weights, flops < kSerialFlops);
}

// The strides, dilations and paddings of a 2-d conv from activations of spatial size `in` to
// `out`, the right padding what oneDNN's size rule needs to give exactly `out`.
struct Window2d {
  memory::dims strides, dilates, pad_l, pad_r;
};
Window2d window_2d(const AttrMap& attrs, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                   const std::vector<int64_t>& kernel) {
  const memory::dims stride = templates::spatial_attr(attrs, "stride", 2, 1, 1);
  const memory::dims pads = templates::spatial_attr(attrs, "padding", 2, 2, 0);
  const memory::dims dilation = templates::spatial_attr(attrs, "dilation", 2, 1, 1);
  Window2d w;
  for (size_t i = 0; i < 2; ++i) {
    w.strides.push_back(stride[i]);
    w.dilates.push_back(dilation[i] - 1);
    w.pad_l.push_back(pads[i]);
    w.pad_r.push_back((out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - in[i] - pads[i]);
  }
  return w;
}

bool all_f32_4d(const OpRun& run) {
  for (const std::span<const BufferView>& views : {run.inputs, run.outputs})
    for (const BufferView& v : views)
      if (v.dtype != DType::F32 || v.dims.size() != 4) return false;
  return true;
}

memory::desc f32(const memory::dims& dims, tag layout) { return memory::desc(dims, memory::data_type::f32, layout); }

// A conv primitive's three operands as the caller holds them (nchw, and the weights in
// `weights_layout`), and their tag::any twins, from which oneDNN picks its blocked layouts.
struct ConvDescs {
  memory::desc src, weights, dst, any_src, any_weights, any_dst;
};
ConvDescs conv_descs(const memory::dims& src, const memory::dims& weights, tag weights_layout, const memory::dims& dst) {
  return {f32(src, tag::nchw), f32(weights, weights_layout), f32(dst, tag::nchw),
          f32(src, tag::any),  f32(weights, tag::any),       f32(dst, tag::any)};
}

double conv_flops(const std::vector<int64_t>& out, const std::vector<int64_t>& weight) {
  double flops = 2;
  for (int64_t d : out) flops *= double(d);
  for (size_t i = 1; i < weight.size(); ++i) flops *= double(weight[i]);
  return flops;
}

// conv_transpose, a conv's input gradient: oneDNN's deconvolution (its backward-data kernels). The
// weight [C, O / groups, kh, kw] is oneDNN's iohw.
std::unique_ptr<HostKernel> make_conv_transpose(const OpRun& run) {
  if (!all_f32_4d(run)) return nullptr;
  const std::vector<int64_t>& x = run.inputs[0].dims;
  const std::vector<int64_t>& weight = run.inputs[1].dims;
  const std::vector<int64_t>& y = run.outputs[0].dims;
  const int64_t groups = run.attrs.get_int("groups");
  // The conv it is the transpose of runs from y's spatial size to x's.
  const Window2d win = window_2d(run.attrs, {y[2], y[3]}, {x[2], x[3]}, {weight[2], weight[3]});
  const memory::dims w_dims = groups == 1 ? memory::dims{y[1], x[1], weight[2], weight[3]}
                                          : memory::dims{groups, y[1] / groups, x[1] / groups, weight[2], weight[3]};
  const ConvDescs d = conv_descs(x, w_dims, groups == 1 ? tag::iohw : tag::giohw, y);
  std::optional<memory::desc> bias;
  if (run.inputs.size() == 3) bias = memory::desc({y[1]}, memory::data_type::f32, tag::a);
  const auto kind = dnnl::prop_kind::forward_inference;
  const auto algo = dnnl::algorithm::deconvolution_direct;
  dnnl::deconvolution_forward::primitive_desc pd(
      bias ? dnnl::deconvolution_forward::desc(kind, algo, d.any_src, d.any_weights, *bias, d.any_dst, win.strides,
                                               win.dilates, win.pad_l, win.pad_r)
           : dnnl::deconvolution_forward::desc(kind, algo, d.any_src, d.any_weights, d.any_dst, win.strides,
                                               win.dilates, win.pad_l, win.pad_r),
      engine());
  const ConvOperands roles{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, pd.src_desc(), pd.weights_desc(), pd.dst_desc()};
  const void* constant_weights = run.inputs[1].buffer ? reference::host_data(*run.inputs[1].buffer) : nullptr;
  return std::make_unique<BlockedConv>(dnnl::deconvolution_forward(pd), roles, d.src, d.weights, d.dst, bias,
                                       std::vector<Primitive::Arg>{}, constant_weights,
                                       conv_flops(x, weight) < kSerialFlops);
}

// conv_weight_grad(x, g): oneDNN's convolution backward-weights, x as the source and g as the
// destination's gradient.
std::unique_ptr<HostKernel> make_conv_weight_grad(const OpRun& run) {
  if (!all_f32_4d(run)) return nullptr;
  const std::vector<int64_t>& x = run.inputs[0].dims;
  const std::vector<int64_t>& g = run.inputs[1].dims;
  const std::vector<int64_t>& dw = run.outputs[0].dims;
  const int64_t groups = run.attrs.get_int("groups");
  const Window2d win = window_2d(run.attrs, {x[2], x[3]}, {g[2], g[3]}, {dw[2], dw[3]});
  const memory::dims w_dims = groups == 1 ? memory::dims(dw.begin(), dw.end())
                                          : memory::dims{groups, dw[0] / groups, dw[1], dw[2], dw[3]};
  const ConvDescs d = conv_descs(x, w_dims, groups == 1 ? tag::oihw : tag::goihw, g);
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::primitive_desc hint(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, d.any_src, d.any_weights, d.any_dst,
                                      win.strides, win.dilates, win.pad_l, win.pad_r),
      engine());
  dnnl::convolution_backward_weights::primitive_desc pd(
      dnnl::convolution_backward_weights::desc(algo, d.any_src, d.any_weights, d.any_dst, win.strides, win.dilates,
                                               win.pad_l, win.pad_r),
      engine(), hint);
  // The output gradient takes the weights' place, reordered on every call: an activation's
  // gradient is seldom seen twice, and a kept copy would hold its memory.
  const ConvOperands roles{DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, pd.src_desc(), pd.diff_dst_desc(),
                           pd.diff_weights_desc(), false};
  return std::make_unique<BlockedConv>(dnnl::convolution_backward_weights(pd), roles, d.src, d.dst, d.weights, std::nullopt,
                                       std::vector<Primitive::Arg>{}, nullptr, conv_flops(g, dw) < kSerialFlops);
}

// Max and average pooling over [N, C, H, W] or [N, C, W] (or channels-last), on OpenMP's team like
// the convolutions around it. Windows past the end padding (ceil_mode) are oneDNN's extra right
// padding; average pooling that counts padding then declines, since oneDNN would count those too.
std::unique_ptr<HostKernel> make_pool(const OpRun& run) {
  if (run.inputs[0].dtype != DType::F32 || (run.inputs[0].dims.size() != 3 && run.inputs[0].dims.size() != 4))
    return nullptr;
  const bool channels_last = is_channels_last(run.attrs);
  std::vector<int64_t> x = run.inputs[0].dims, y = run.outputs[0].dims;  // in oneDNN's logical order
  if (channels_last) x = channels_first_dims(x), y = channels_first_dims(y);
  const size_t spatial = x.size() - 2;
  const bool is_max = run.kind == OpKind::MaxPool;
  const memory::dims kernel = templates::spatial_attr(run.attrs, "kernel", spatial, 1, 1);
  const memory::dims strides = templates::spatial_attr(run.attrs, "stride", spatial, 1, 1);
  const memory::dims pads = templates::spatial_attr(run.attrs, "padding", spatial, 2, 0);
  const memory::dims dilation =
      is_max ? templates::spatial_attr(run.attrs, "dilation", spatial, 1, 1) : memory::dims(spatial, 1);
  const bool include_pad = !is_max && run.attrs.get_bool("count_include_pad");
  memory::dims pad_l(pads.begin(), pads.begin() + long(spatial)), pad_r(pads.begin() + long(spatial), pads.end());
  memory::dims dilates(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = x[2 + i], out = y[2 + i];
    const int64_t extent = dilation[i] * (kernel[i] - 1) + 1;
    dilates[i] = dilation[i] - 1;
    if ((in + pad_l[i] + pad_r[i] - extent) / strides[i] + 1 == out) continue;
    if (include_pad) return nullptr;
    pad_r[i] = (out - 1) * strides[i] + extent - in - pad_l[i];
  }
  const tag layout = spatial == 2 ? (channels_last ? tag::nhwc : tag::nchw) : (channels_last ? tag::nwc : tag::ncw);
  memory::desc src(memory::dims(x.begin(), x.end()), memory::data_type::f32, layout);
  memory::desc dst(memory::dims(y.begin(), y.end()), memory::data_type::f32, layout);
  const auto algo = is_max ? dnnl::algorithm::pooling_max
                           : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                         : dnnl::algorithm::pooling_avg_exclude_padding;
  dnnl::pooling_v2_forward::primitive_desc pd(
      dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, algo, src, dst, strides, kernel, dilates,
                                     pad_l, pad_r),
      engine());
  double work = 1;
  for (int64_t d : y) work *= double(d);
  for (int64_t k : kernel) work *= double(k);
  return std::make_unique<Primitive>(dnnl::pooling_v2_forward(pd),
                                     std::vector<Primitive::Arg>{{DNNL_ARG_SRC, src, 0}, {DNNL_ARG_DST, dst, 1}},
                                     work < kSerialFlops);
}

}  // namespace

bool have_onednn() { return true; }
uint64_t weight_reorders() { return reorders_of_weights; }

std::unique_ptr<HostKernel> make_onednn_op(const OpRun& run, std::span<const EpilogueStep> epilogue) {
  try {
    if (run.kind == OpKind::Conv) return make_conv(run, epilogue);
    if (epilogue.empty() && run.kind == OpKind::ConvTranspose) return make_conv_transpose(run);
    if (epilogue.empty() && run.kind == OpKind::ConvWeightGrad) return make_conv_weight_grad(run);
    if (run.kind == OpKind::MatMul || run.kind == OpKind::Linear || run.kind == OpKind::Gemm) {
      if (std::unique_ptr<HostKernel> small = make_small_matmul(run, epilogue)) return small;
      return make_matmul(run, epilogue);
    }
    if (epilogue.empty() && (run.kind == OpKind::MaxPool || run.kind == OpKind::AvgPool)) return make_pool(run);
  } catch (const dnnl::error&) {
    return nullptr;  // a configuration oneDNN has no implementation for: the reference kernel runs it
  }
  return nullptr;
}

#else

bool have_onednn() { return false; }
uint64_t weight_reorders() { return 0; }
std::unique_ptr<HostKernel> make_onednn_op(const OpRun&, std::span<const EpilogueStep>) { return nullptr; }

#endif

}  // namespace kiln::cpu
