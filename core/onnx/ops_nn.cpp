// ONNX neural-network ops -> kiln linalg/conv/norm ops: Gemm, MatMul, Conv, ConvTranspose,
// pooling (auto_pad resolved here), BatchNormalization, LayerNormalization, InstanceNormalization,
// Softmax/LogSoftmax (flattening semantics before opset 13), Flatten and LRN.
#include <cmath>
#include <numeric>

#include "core/onnx/import_context.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;
using Ints = std::vector<int64_t>;

// Spatial dims of x ([N, C, *spatial]); kiln's conv and pool ops take 1 or 2.
size_t spatial_dims(N& n, const TensorType& x) {
  if (x.rank() != 3 && x.rank() != 4)
    n.unsupported(std::to_string(x.rank() < 2 ? 0 : x.rank() - 2) +
                  " spatial dims (kiln's conv and pooling take 1 or 2)");
  return x.rank() - 2;
}

void require_float(N& n) {
  if (!is_floating(n.input_type(0).dtype))
    n.unsupported("element type " + std::string(dtype_name(n.input_type(0).dtype)));
}

// Explicit pads (all begins, then all ends) from `pads` or auto_pad, for a window of `extent`
// (the dilated kernel) moving by `stride` over static input sizes.
Ints resolve_pads(N& n, const TensorType& x, const Ints& kernel, const Ints& stride,
                  const Ints& dilation) {
  const size_t s = kernel.size();
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  Ints pads = n.attr_ints("pads", Ints(2 * s, 0));
  if (pads.size() != 2 * s) n.fail("pads needs " + std::to_string(2 * s) + " values");
  if (auto_pad == "NOTSET") return pads;
  if (auto_pad == "VALID") return Ints(2 * s, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") n.fail("unknown auto_pad " + auto_pad);
  for (size_t i = 0; i < s; ++i) {
    const SymInt& d = x.shape[2 + i];
    if (!d.is_static()) n.unsupported("auto_pad SAME on a symbolic dim");
    const int64_t in = d.value(), out = (in + stride[i] - 1) / stride[i];
    const int64_t total =
        std::max<int64_t>(0, (out - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - in);
    const int64_t small = total / 2, big = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : big;
    pads[s + i] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

// A per-spatial-dim attribute: `s` values, each at least `min`; `fallback` for each when absent.
Ints spatial_attr(N& n, const std::string& name, size_t s, int64_t fallback, int64_t min) {
  const Ints v = n.attr_ints(name, Ints(s, fallback));
  if (v.size() != s)
    n.fail(name + " needs " + std::to_string(s) + " values, has " + std::to_string(v.size()));
  for (int64_t x : v)
    if (x < min)
      n.fail(name + " values must be >= " + std::to_string(min) + ", got " + std::to_string(x));
  return v;
}

Ints kernel_of(N& n, const TensorType& w, size_t spatial) {
  if (w.rank() != spatial + 2)
    n.fail("the weights " + w.str() + " need rank " + std::to_string(spatial + 2) + ", as X has");
  Ints fallback;
  for (size_t i = 0; i < spatial; ++i) fallback.push_back(w.shape[2 + i].hint());
  if (!n.has_attr("kernel_shape")) return fallback;
  return spatial_attr(n, "kernel_shape", spatial, 1, 1);
}

void map_conv(N& n) {
  require_float(n);
  std::vector<Value*> in = {n.input(0), n.input(1)};
  if (n.has_input(2)) in.push_back(n.input(2));
  n.set_output(0, n.emit(OpKind::Conv, in, conv_attributes(n, 0, 1)));
}

void map_conv_transpose(N& n) {
  require_float(n);
  const TensorType& x = n.input_type(0);
  const size_t s = spatial_dims(n, x);
  const Ints kernel = kernel_of(n, n.input_type(1), s);
  const Ints stride = spatial_attr(n, "strides", s, 1, 1);
  const Ints dilation = spatial_attr(n, "dilations", s, 1, 1);
  Ints out_pad = spatial_attr(n, "output_padding", s, 0, 0);
  Ints pads = n.attr_ints("pads", Ints(2 * s, 0));
  if (pads.size() != 2 * s) n.fail("pads needs " + std::to_string(2 * s) + " values");
  const Ints output_shape = n.attr_ints("output_shape");
  if (!output_shape.empty() && output_shape.size() < s)
    n.fail("output_shape needs at least " + std::to_string(s) + " values");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < s; ++i) {
      const int64_t in = x.shape[2 + i].hint();
      const int64_t want = output_shape.empty() ? in * stride[i]
                                                : output_shape[output_shape.size() - s + i];
      const int64_t full = stride[i] * (in - 1) + out_pad[i] + (kernel[i] - 1) * dilation[i] + 1;
      int64_t total = full - want;
      if (total < 0) {  // more output than the windows cover: extend with output padding
        out_pad[i] -= total;
        total = 0;
      }
      const int64_t small = total / 2, big = total - small;
      const bool upper = auto_pad != "SAME_LOWER";
      pads[i] = upper ? small : big;
      pads[s + i] = upper ? big : small;
    }
  } else if (auto_pad == "VALID") {
    pads.assign(2 * s, 0);
  }
  AttrMap a{{"stride", stride}, {"dilation", dilation}, {"padding", pads},
            {"output_padding", out_pad}, {"groups", n.attr_int("group", 1)}};
  std::vector<Value*> in = {n.input(0), n.input(1)};
  if (n.has_input(2)) in.push_back(n.input(2));
  n.set_output(0, n.emit(OpKind::ConvTranspose, in, a));
}

void map_pool(N& n, bool is_max) {
  const TensorType& x = n.input_type(0);
  const size_t s = spatial_dims(n, x);
  if (is_max && n.has_output(1)) n.unsupported("the Indices output");
  if (is_max) n.require_attr_int("storage_order", 0);
  if (!n.has_attr("kernel_shape")) n.fail("kernel_shape is required");
  const Ints kernel = spatial_attr(n, "kernel_shape", s, 1, 1);
  const Ints stride = spatial_attr(n, "strides", s, 1, 1);
  const Ints dilation = is_max ? spatial_attr(n, "dilations", s, 1, 1) : Ints(s, 1);
  if (!is_max && n.has_attr("dilations")) n.unsupported("AveragePool dilations");
  Ints pads = resolve_pads(n, x, kernel, stride, dilation);
  bool wide = false;  // kiln's pooling pads at most half the window: wider pads become a Pad op
  for (size_t i = 0; i < s; ++i) {
    const int64_t extent = dilation[i] * (kernel[i] - 1) + 1;
    wide = wide || pads[i] > extent / 2 || pads[s + i] > extent / 2;
  }
  const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
  AttrMap a{{"kernel", kernel}, {"stride", stride}, {"padding", wide ? Ints(2 * s, 0) : pads},
            {"ceil_mode", bool(n.attr_int("ceil_mode", 0))}};
  if (is_max) a.set("dilation", dilation);
  else a.set("count_include_pad", include_pad);
  const OpKind kind = is_max ? OpKind::MaxPool : OpKind::AvgPool;
  if (!wide) {
    n.set_output(0, n.emit(kind, {n.input(0)}, a));
    return;
  }
  if (!is_floating(x.dtype)) n.unsupported("wide pooling pads on a non-float input");
  Ints full_pads(2 * x.rank(), 0);  // ONNX order: all begins, then all ends
  for (size_t i = 0; i < s; ++i) {
    full_pads[x.rank() - s + i] = pads[i];
    full_pads[2 * x.rank() - s + i] = pads[s + i];
  }
  const double fill = is_max ? -INFINITY : 0.0;
  Value* padded = n.emit(OpKind::Pad, {n.input(0)},
                         {{"pads", full_pads}, {"mode", std::string("constant")}, {"value", fill}});
  Value* y = n.emit(kind, {padded}, a);
  if (!is_max && !include_pad) {
    // Average over real elements only: divide by the pooled share of a padded ones-mask.
    if (!is_static(x.shape)) n.unsupported("wide pooling pads on symbolic dims");
    Ints mshape = static_dims(x.shape);
    for (size_t i = 0; i + s < mshape.size(); ++i) mshape[i] = 1;
    Literal ones{x.dtype, mshape, {}};
    const double one = 1.0;
    ones.bytes.resize(size_t(ones.numel()) * dtype_size(x.dtype));
    for (int64_t e = 0; e < ones.numel(); ++e)
      convert_elements(&one, DType::F64, ones.bytes.data() + size_t(e) * dtype_size(x.dtype), x.dtype, 1);
    Value* mask = n.emit(OpKind::Pad, {n.constant_value(ones)},
                         {{"pads", full_pads}, {"mode", std::string("constant")}, {"value", 0.0}});
    y = n.emit(OpKind::Div, {y, n.emit(OpKind::AvgPool, {mask}, a)});
  }
  n.set_output(0, y);
}

// Softmax family: opset < 13 flattens to [prod(d[:axis]), prod(d[axis:])] first.
void map_softmax(N& n, OpKind kind) {
  require_float(n);
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", n.opset() < 13 ? 1 : -1), rank);
  if (n.opset() >= 13 || axis == rank - 1) {
    n.set_output(0, n.emit(kind, {x}, {{"dim", axis}}));
    return;
  }
  SymInt outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    if (i < axis) outer = outer * x->type.shape[size_t(i)];
    else inner = inner * x->type.shape[size_t(i)];
  Value* flat = n.reshape(x, {outer, inner});
  n.set_output(0, n.reshape(n.emit(kind, {flat}, {{"dim", int64_t(1)}}), x->type.shape));
}

// Training mode normalizes with the batch's mean and (biased) variance, computed here so that
// they differentiate through; outputs 1 and 2 are the running statistics updated by `momentum`.
void map_batch_norm(N& n) {
  require_float(n);
  if (n.attr_int("spatial", 1) != 1) n.unsupported("spatial=0 (opset < 9)");
  const bool training = n.attr_int("training_mode", 0) != 0;
  if (!training)
    for (size_t i = 1; i < n.num_outputs(); ++i)
      if (n.has_output(i)) n.unsupported("running mean/var outputs outside training_mode");
  Value* x = n.input(0);
  Value* mean = n.input(3);
  Value* var = n.input(4);
  if (training) {
    Ints dims = {0};
    for (size_t d = 2; d < x->type.rank(); ++d) dims.push_back(int64_t(d));
    Value* kept = n.emit(OpKind::Mean, {x}, {{"dims", dims}, {"keepdim", true}});
    Value* centered = n.emit(OpKind::Sub, {x, kept});
    Value* squares = n.emit(OpKind::Mul, {centered, centered});
    var = n.emit(OpKind::Mean, {squares}, {{"dims", dims}, {"keepdim", false}});
    mean = n.emit(OpKind::Reshape, {kept}, {{"shape", Shape{x->type.shape[1]}}});
    const double momentum = n.attr_float("momentum", 0.9);
    auto running = [&](Value* old_value, Value* batch) {  // old * momentum + batch * (1 - momentum)
      const DType t = old_value->type.dtype;
      Value* kept_part = n.emit(OpKind::Mul, {old_value, n.scalar(momentum, t)});
      if (batch->type.dtype != t) batch = n.emit(OpKind::Cast, {batch}, {{"dtype", t}});
      Value* batch_part = n.emit(OpKind::Mul, {batch, n.scalar(1 - momentum, t)});
      return n.emit(OpKind::Add, {kept_part, batch_part});
    };
    if (n.has_output(1)) n.set_output(1, running(n.input(3), mean));
    if (n.has_output(2)) n.set_output(2, running(n.input(4), var));
  }
  AttrMap a{{"eps", n.attr_float("epsilon", 1e-5)}};
  // kiln order: x, mean, var, weight, bias.
  n.set_output(0, n.emit(OpKind::BatchNorm, {x, mean, var, n.input(1), n.input(2)}, a));
}

void map_layer_norm(N& n) {
  require_float(n);
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", -1), rank);
  const double eps = n.attr_float("epsilon", 1e-5);
  const Shape normalized(x->type.shape.begin() + axis, x->type.shape.end());
  auto fit = [&](Value* p) {  // Scale/B may be given with fewer dims: broadcast to x.shape[axis:]
    return p->type.rank() == normalized.size() ? p : n.emit(OpKind::Expand, {p}, {{"shape", normalized}});
  };
  std::vector<Value*> in = {x, fit(n.input(1))};
  if (n.has_input(2)) in.push_back(fit(n.input(2)));
  n.set_output(0, n.emit(OpKind::LayerNorm, in, {{"axis", axis}, {"eps", eps}}));
  if (n.has_output(1) || n.has_output(2)) {
    Ints dims;
    for (int64_t i = axis; i < rank; ++i) dims.push_back(i);
    Value* mean = n.emit(OpKind::Mean, {x}, {{"dims", dims}, {"keepdim", true}});
    Value* d = n.emit(OpKind::Sub, {x, mean});
    Value* var = n.emit(OpKind::Mean, {n.emit(OpKind::Mul, {d, d})}, {{"dims", dims}, {"keepdim", true}});
    Value* inv = n.emit(OpKind::Rsqrt, {n.emit(OpKind::Add, {var, n.scalar(eps, x->type.dtype)})});
    n.set_output(1, mean);
    n.set_output(2, inv);
  }
}

void map_instance_norm(N& n) {
  require_float(n);
  Value* x = n.input(0);
  if (x->type.rank() < 3) n.fail("input must be [N, C, *spatial]");
  const SymInt& c = x->type.shape[1];
  if (!c.is_static()) n.unsupported("a symbolic channel count");
  n.set_output(0, n.emit(OpKind::GroupNorm, {x, n.input(1), n.input(2)},
                         {{"num_groups", c.value()}, {"eps", n.attr_float("epsilon", 1e-5)}}));
}

void map_flatten(N& n) {
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < -rank || axis > rank) n.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  SymInt outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    if (i < axis) outer = outer * x->type.shape[size_t(i)];
    else inner = inner * x->type.shape[size_t(i)];
  n.set_output(0, n.reshape(x, {outer, inner}));
}

// LRN: x / (bias + alpha/size * sum of x^2 over `size` neighbouring channels)^beta. The channel
// window sum is an average pool over a [N, 1, C, H*W] view.
void map_lrn(N& n) {
  require_float(n);
  Value* x = n.input(0);
  const Shape& shape = x->type.shape;
  if (shape.size() < 3) n.fail("input must be [N, C, *spatial]");
  const int64_t size = n.attr_int("size", 1);
  SymInt rest = 1;
  for (size_t i = 2; i < shape.size(); ++i) rest = rest * shape[i];
  Value* sq = n.reshape(n.emit(OpKind::Mul, {x, x}), {shape[0], 1, shape[1], rest});
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  sq = n.emit(OpKind::Pad, {sq}, {{"pads", Ints{0, 0, before, 0, 0, 0, after, 0}}});
  Value* avg = n.emit(OpKind::AvgPool, {sq}, {{"kernel", Ints{size, 1}}});
  Value* sum = n.reshape(avg, shape);  // avg * size == sum; alpha/size * sum == alpha * avg
  const DType dt = x->type.dtype;
  Value* base = n.emit(OpKind::Add, {n.scalar(n.attr_float("bias", 1.0), dt),
                                     n.emit(OpKind::Mul, {sum, n.scalar(n.attr_float("alpha", 1e-4), dt)})});
  Value* den = n.emit(OpKind::Pow, {base, n.scalar(n.attr_float("beta", 0.75), dt)});
  n.set_output(0, n.emit(OpKind::Div, {x, den}));
}

}  // namespace

AttrMap conv_attributes(NodeContext& n, size_t x_input, size_t w_input) {
  const TensorType& x = n.input_type(x_input);
  const size_t s = spatial_dims(n, x);
  const Ints kernel = kernel_of(n, n.input_type(w_input), s);
  const Ints stride = spatial_attr(n, "strides", s, 1, 1);
  const Ints dilation = spatial_attr(n, "dilations", s, 1, 1);
  return AttrMap{{"stride", stride},
                 {"dilation", dilation},
                 {"padding", resolve_pads(n, x, kernel, stride, dilation)},
                 {"groups", n.attr_int("group", 1)}};
}

void register_nn_ops(OpTable& t) {
  t["Gemm"] = [](N& n) {
    std::vector<Value*> in = {n.input(0), n.input(1)};
    if (n.has_input(2)) in.push_back(n.input(2));
    n.set_output(0, n.emit(OpKind::Gemm, in,
                           {{"alpha", n.attr_float("alpha", 1.0)},
                            {"beta", n.attr_float("beta", 1.0)},
                            {"trans_a", bool(n.attr_int("transA", 0))},
                            {"trans_b", bool(n.attr_int("transB", 0))}}));
  };
  t["MatMul"] = [](N& n) { n.set_output(0, n.emit(OpKind::MatMul, {n.input(0), n.input(1)})); };
  t["Conv"] = map_conv;
  t["ConvTranspose"] = map_conv_transpose;
  t["MaxPool"] = [](N& n) { map_pool(n, true); };
  t["AveragePool"] = [](N& n) { map_pool(n, false); };
  t["GlobalAveragePool"] = [](N& n) {
    require_float(n);
    n.set_output(0, n.emit(OpKind::GlobalAvgPool, {n.input(0)}));
  };
  t["GlobalMaxPool"] = [](N& n) {
    Value* x = n.input(0);
    Ints dims;
    for (size_t i = 2; i < x->type.rank(); ++i) dims.push_back(int64_t(i));
    n.set_output(0, n.emit(OpKind::ReduceMax, {x}, {{"dims", dims}, {"keepdim", true}}));
  };
  t["BatchNormalization"] = map_batch_norm;
  t["LayerNormalization"] = map_layer_norm;
  t["InstanceNormalization"] = map_instance_norm;
  t["Softmax"] = [](N& n) { map_softmax(n, OpKind::Softmax); };
  t["LogSoftmax"] = [](N& n) { map_softmax(n, OpKind::LogSoftmax); };
  t["Flatten"] = map_flatten;
  t["LRN"] = map_lrn;
}

}  // namespace kiln::onnx::detail
