// The conformance suite's cases: single ops over every dtype and layout kiln supports, and
// multi-op programs whose compiled form must fuse or take a template, each with its tolerance.
#include "backends/conformance_cases.h"

#include "core/frontend/dispatch.h"

namespace kiln::conformance {
namespace {

Tensor rnd(const Dims& shape, uint64_t seed, DType dtype = DType::F32) {
  return randn(shape, Device::ref(), seed).to(dtype);
}
Tensor positive(const Dims& shape, uint64_t seed) { return rand(shape, Device::ref(), seed) + 0.1; }
Tensor ints(const Dims& shape, uint64_t seed, DType dtype = DType::I32) {
  return cast(floor(rnd(shape, seed) * 5.0), dtype);
}

}  // namespace

std::vector<OpCase> op_cases() {
  std::vector<OpCase> c;
  auto unary = [&](std::string name, Tensor (*fn)(const Tensor&, Loc), bool pos = false, double tol = 1e-5) {
    c.push_back({name, [pos] { return std::vector<Tensor>{pos ? positive({3, 17}, 1) : rnd({3, 17}, 1)}; },
                 [fn](const std::vector<Tensor>& x) { return fn(x[0], Loc::current()); }, tol, tol});
  };
  unary("neg", neg);
  unary("abs", abs);
  unary("exp", exp);
  unary("log", log, true);
  unary("sqrt", sqrt, true);
  unary("rsqrt", rsqrt, true);
  unary("sin", sin);
  unary("cos", cos);
  unary("tanh", tanh);
  unary("sigmoid", sigmoid);
  unary("relu", relu);
  unary("silu", silu);
  unary("erf", erf, false, 1e-5);
  unary("floor", floor);
  unary("ceil", ceil);
  unary("round", round);
  unary("sign", sign);
  unary("reciprocal", reciprocal, true);
  c.push_back({"leaky_relu", [] { return std::vector<Tensor>{rnd({40}, 2)}; },
               [](auto& x) { return leaky_relu(x[0], 0.2); }});
  c.push_back({"elu", [] { return std::vector<Tensor>{rnd({40}, 2)}; }, [](auto& x) { return elu(x[0], 0.7); }});
  c.push_back({"gelu", [] { return std::vector<Tensor>{rnd({40}, 2)}; }, [](auto& x) { return gelu(x[0]); }, 1e-5, 1e-6});
  c.push_back({"gelu_tanh", [] { return std::vector<Tensor>{rnd({40}, 2)}; }, [](auto& x) { return gelu(x[0], "tanh"); }});
  c.push_back({"clip", [] { return std::vector<Tensor>{rnd({40}, 3)}; }, [](auto& x) { return clip(x[0], -0.5, 0.7); }});
  c.push_back({"logical_not", [] { return std::vector<Tensor>{gt(rnd({9}, 3), 0.0)}; }, [](auto& x) { return logical_not(x[0]); }});
  for (DType to : {DType::F16, DType::BF16, DType::I32, DType::Bool, DType::U8, DType::I64, DType::F64})
    c.push_back({"cast_f32_to_" + std::string(dtype_name(to)), [] { return std::vector<Tensor>{rnd({33}, 4) * 3.0}; },
                 [to](auto& x) { return cast(x[0], to); }});

  auto binary = [&](std::string name, Tensor (*fn)(const Tensor&, const Tensor&, Loc), DType dt = DType::F32,
                    bool pos_rhs = false) {
    c.push_back({name + "_" + std::string(dtype_name(dt)),
                 [dt, pos_rhs] {
                   Tensor b = pos_rhs ? positive({5, 1}, 6) : rnd({5, 1}, 6);
                   bool integer = !is_floating(dt);
                   if (integer) return std::vector<Tensor>{ints({2, 5, 7}, 5, dt), cast(ceil(positive({5, 1}, 6) * 3.0), dt)};
                   return std::vector<Tensor>{rnd({2, 5, 7}, 5).to(dt), b.to(dt)};
                 },
                 [fn](auto& x) { return fn(x[0], x[1], Loc::current()); },
                 dt == DType::F16 ? 2e-3 : dt == DType::BF16 ? 1e-2 : 1e-5,
                 dt == DType::F16 ? 2e-3 : dt == DType::BF16 ? 1e-2 : 1e-5});
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    binary("add", add, dt);
    binary("sub", sub, dt);
    binary("mul", mul, dt);
    binary("maximum", maximum, dt);
    binary("minimum", minimum, dt);
    binary("lt", lt, dt);
    binary("eq", eq, dt);
  }
  binary("div", div, DType::F32, true);
  binary("div", div, DType::I32, true);
  binary("pow", pow, DType::F32, true);
  binary("pow", pow, DType::I32, true);
  binary("remainder", remainder, DType::F32, true);
  binary("remainder", remainder, DType::I32, true);
  binary("fmod", fmod, DType::I64, true);
  binary("ge", ge);
  binary("ne", ne);
  binary("le", le);
  binary("gt", gt);
  binary("add", add, DType::F64);
  // ONNX's narrow and unsigned integers compute in 32 (u64: 64) bits and wrap to their width after
  // every op, so a fused chain overflows where the reference, which stores each op, does.
  for (DType dt : {DType::I8, DType::I16, DType::U16, DType::U32, DType::U64}) {
    binary("add", add, dt);
    binary("mul", mul, dt);
    binary("maximum", maximum, dt);
    binary("lt", lt, dt);
    binary("remainder", remainder, dt, true);
    const std::string name(dtype_name(dt));
    c.push_back({"wrapping_chain_" + name,
                 [dt] { return std::vector<Tensor>{cast(rnd({40}, 7) * 90.0, dt), cast(rnd({40}, 8) * 90.0, dt)}; },
                 [](auto& x) { return sub(mul(x[0], x[1]) + x[0], x[1]); }});
    c.push_back({"cast_f32_to_" + name, [] { return std::vector<Tensor>{rnd({33}, 4) * 300.0}; },
                 [dt](auto& x) { return cast(x[0], dt); }});
    c.push_back({"cast_" + name + "_to_f32", [dt] { return std::vector<Tensor>{cast(rnd({33}, 4) * 300.0, dt)}; },
                 [](auto& x) { return cast(x[0], DType::F32); }});
  }
  // Seeded random numbers are the same on every device, eager and compiled (a dropout mask).
  c.push_back({"rand_dropout_mask", [] { return std::vector<Tensor>{rnd({6, 70}, 9)}; },
               [](auto& x) { return x[0] * cast(ge(rand(x[0].shape(), x[0].device(), 21), 0.3), DType::F32); },
               0.0, 0.0, /*has_gradient=*/false});
  c.push_back({"logical_and_or_xor", [] { return std::vector<Tensor>{gt(rnd({4, 6}, 7), 0.0), gt(rnd({6}, 8), 0.0)}; },
               [](auto& x) { return logical_xor(logical_and(x[0], x[1]), logical_or(x[0], x[1])); }});
  c.push_back({"where", [] { return std::vector<Tensor>{gt(rnd({4, 1}, 9), 0.0), rnd({4, 6}, 10), rnd({6}, 11)}; },
               [](auto& x) { return where(x[0], x[1], x[2]); }});
  c.push_back({"mixed_i32_f32", [] { return std::vector<Tensor>{ints({8}, 12), rnd({8}, 13)}; },
               [](auto& x) { return x[0] * x[1]; }});

  // Reductions.
  auto reduce = [&](std::string name, std::function<Tensor(const Tensor&)> fn, DType dt = DType::F32, double tol = 1e-5) {
    c.push_back({name + "_" + std::string(dtype_name(dt)),
                 [dt] { return std::vector<Tensor>{is_floating(dt) ? rnd({3, 4, 50}, 14).to(dt) : ints({3, 4, 50}, 14, dt)}; },
                 [fn](auto& x) { return fn(x[0]); }, tol, tol});
  };
  for (DType dt : {DType::F32, DType::F16, DType::I32}) {
    double tol = dt == DType::F16 ? 5e-3 : 1e-5;
    reduce("sum_dim2", [](const Tensor& x) { return sum(x, {2}); }, dt, tol);
    reduce("sum_dims01_keep", [](const Tensor& x) { return sum(x, {0, 1}, true); }, dt, tol);
    reduce("sum_all", [](const Tensor& x) { return sum(x); }, dt, tol);
    reduce("amax_dim1", [](const Tensor& x) { return amax(x, {1}); }, dt, tol);
    reduce("amin_dim0", [](const Tensor& x) { return amin(x, {0}); }, dt, tol);
    reduce("argmax_dim2", [](const Tensor& x) { return argmax(x, 2); }, dt, tol);
    reduce("argmin_dim0_keep", [](const Tensor& x) { return argmin(x, 0, true); }, dt, tol);
  }
  reduce("mean_dims12", [](const Tensor& x) { return mean(x, {1, 2}); });
  reduce("prod_dim1", [](const Tensor& x) { return prod(x, {1}); });
  reduce("logsumexp_dim2", [](const Tensor& x) { return logsumexp(x, {2}); });
  reduce("softmax_dim2", [](const Tensor& x) { return softmax(x, 2); });
  reduce("softmax_dim0", [](const Tensor& x) { return softmax(x, 0); });
  reduce("log_softmax_dim1", [](const Tensor& x) { return log_softmax(x, 1); });

  // Linear algebra, convolution, pooling, normalization.
  c.push_back({"matmul_batched", [] { return std::vector<Tensor>{rnd({2, 5, 7}, 20), rnd({7, 3}, 21)}; },
               [](auto& x) { return matmul(x[0], x[1]); }, 1e-4, 1e-5});
  c.push_back({"matmul_vec", [] { return std::vector<Tensor>{rnd({7}, 20), rnd({2, 7, 3}, 21)}; },
               [](auto& x) { return matmul(x[0], x[1]); }, 1e-4, 1e-5});
  c.push_back({"gemm_trans", [] { return std::vector<Tensor>{rnd({6, 4}, 22), rnd({5, 6}, 23), rnd({5}, 24)}; },
               [](auto& x) { return gemm(x[0], x[1], x[2], 0.5, 2.0, true, true); }, 1e-4, 1e-5});
  c.push_back({"linear", [] { return std::vector<Tensor>{rnd({2, 3, 8}, 25), rnd({4, 8}, 26), rnd({4}, 27)}; },
               [](auto& x) { return linear(x[0], x[1], x[2]); }, 1e-4, 1e-5});
  c.push_back({"conv2d_stride_pad_groups", [] { return std::vector<Tensor>{rnd({2, 4, 9, 8}, 28), rnd({6, 2, 3, 3}, 29), rnd({6}, 30)}; },
               [](auto& x) { return conv2d(x[0], x[1], x[2], {2, 1}, 1, 1, 2); }, 1e-4, 1e-5});
  // A first conv as ResNet's (7x7, stride 2 over 3 channels), of 1024 output pixels an image:
  // compiled on lavapipe it runs as im2col and a matmul, and its weight gradient in a part per image.
  c.push_back({"conv2d_first_conv", [] { return std::vector<Tensor>{rnd({2, 3, 64, 64}, 44), rnd({8, 3, 7, 7}, 45), rnd({8}, 46)}; },
               [](auto& x) { return conv2d(x[0], x[1], x[2], 2, 3); }, 1e-4, 1e-5});
  c.push_back({"conv2d_dilation", [] { return std::vector<Tensor>{rnd({1, 3, 10, 10}, 31), rnd({4, 3, 3, 3}, 32)}; },
               [](auto& x) { return conv2d(x[0], x[1], {}, 1, 2, 2); }, 1e-4, 1e-5});
  c.push_back({"conv1d", [] { return std::vector<Tensor>{rnd({2, 3, 20}, 33), rnd({5, 3, 4}, 34)}; },
               [](auto& x) { return conv1d(x[0], x[1], {}, 2, 1); }, 1e-4, 1e-5});
  c.push_back({"conv_transpose2d", [] { return std::vector<Tensor>{rnd({1, 4, 5, 5}, 35), rnd({4, 3, 3, 3}, 36), rnd({3}, 37)}; },
               [](auto& x) { return conv_transpose2d(x[0], x[1], x[2], 2, 1, 1); }, 1e-4, 1e-5});
  c.push_back({"max_pool2d_ceil_pad", [] { return std::vector<Tensor>{rnd({2, 3, 9, 9}, 38)}; },
               [](auto& x) { return max_pool2d(x[0], 3, 2, 1, 1, true); }});
  c.push_back({"avg_pool2d_exclude_pad", [] { return std::vector<Tensor>{rnd({2, 3, 9, 9}, 39)}; },
               [](auto& x) { return avg_pool2d(x[0], 3, 2, 1, false, false); }});
  c.push_back({"global_avg_pool", [] { return std::vector<Tensor>{rnd({2, 3, 7, 5}, 40)}; },
               [](auto& x) { return global_avg_pool(x[0]); }});
  // Channels-last activations ([N, H, W, C]), as the channels-last pass gives them to the cpu
  // backend's oneDNN kernels; other devices run the generic kernel.
  c.push_back({"conv2d_channels_last", [] { return std::vector<Tensor>{rnd({2, 9, 8, 4}, 41), rnd({6, 2, 3, 3}, 42), rnd({6}, 43)}; },
               [](auto& x) {
                 return run_op1(OpKind::Conv, x, {{"stride", std::vector<int64_t>{2, 1}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}},
                                                  {"groups", int64_t(2)}, {"channels_last", true}}, Loc::current());
               }, 1e-4, 1e-5, false});
  c.push_back({"max_pool2d_channels_last_ceil", [] { return std::vector<Tensor>{rnd({2, 9, 9, 3}, 44)}; },
               [](auto& x) {
                 return run_op1(OpKind::MaxPool, x, {{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                                                     {"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"ceil_mode", true},
                                                     {"channels_last", true}}, Loc::current());
               }, 1e-5, 1e-5, false});
  c.push_back({"avg_pool2d_channels_last_include_pad", [] { return std::vector<Tensor>{rnd({2, 7, 9, 5}, 45)}; },
               [](auto& x) {
                 return run_op1(OpKind::AvgPool, x, {{"kernel", std::vector<int64_t>{3, 2}}, {"stride", std::vector<int64_t>{2, 2}},
                                                     {"padding", std::vector<int64_t>{1, 0, 1, 1}}, {"count_include_pad", true},
                                                     {"channels_last", true}}, Loc::current());
               }, 1e-5, 1e-5, false});
  c.push_back({"layer_norm", [] { return std::vector<Tensor>{rnd({3, 4, 16}, 41), rnd({16}, 42), rnd({16}, 43)}; },
               [](auto& x) { return layer_norm(x[0], {16}, x[1], x[2]); }, 1e-4, 1e-5});
  c.push_back({"batch_norm", [] { return std::vector<Tensor>{rnd({2, 3, 4, 4}, 44), rnd({3}, 45), positive({3}, 46), rnd({3}, 47), rnd({3}, 48)}; },
               [](auto& x) { return batch_norm(x[0], x[1], x[2], x[3], x[4]); }, 1e-4, 1e-5});
  c.push_back({"group_norm", [] { return std::vector<Tensor>{rnd({2, 6, 5}, 49), rnd({6}, 50), rnd({6}, 51)}; },
               [](auto& x) { return group_norm(x[0], 3, x[1], x[2]); }, 1e-4, 1e-5});

  // Data movement.
  c.push_back({"reshape_permute", [] { return std::vector<Tensor>{rnd({2, 3, 4}, 52)}; },
               [](auto& x) { return permute(reshape(x[0], {3, 2, 4}), {2, 0, 1}); }});
  c.push_back({"transpose_i64", [] { return std::vector<Tensor>{ints({5, 7}, 53, DType::I64)}; },
               [](auto& x) { return transpose(x[0], 0, 1); }});
  c.push_back({"slice_negative_step", [] { return std::vector<Tensor>{rnd({6, 9}, 54)}; },
               [](auto& x) { return slice(x[0], 1, -2, 0, -3); }});
  c.push_back({"concat", [] { return std::vector<Tensor>{rnd({2, 3}, 55), rnd({2, 5}, 56), rnd({2, 1}, 57)}; },
               [](auto& x) { return concat({x[0], x[1], x[2]}, 1); }});
  c.push_back({"concat_wide_tree", [] {
                 std::vector<Tensor> x;
                 for (int64_t k = 1; k <= 13; ++k) x.push_back(rnd({2, k, 3, 2}, 100 + uint64_t(k)));
                 return x;
               },
               [](auto& x) { return concat(x, 1); }});
  c.push_back({"split", [] { return std::vector<Tensor>{rnd({7, 4}, 58)}; },
               [](auto& x) { return split(x[0], 3, 0).at(2); }});
  c.push_back({"gather", [] { return std::vector<Tensor>{rnd({4, 5}, 59), cast(floor(rand({4, 3}, Device::ref(), 60) * 5.0), DType::I64)}; },
               [](auto& x) { return gather(x[0], 1, x[1]); }});
  c.push_back({"index_select", [] { return std::vector<Tensor>{rnd({6, 5}, 61), from_vector<int64_t>({5, 0, -1, 2}, {2, 2}, Device::ref())}; },
               [](auto& x) { return index_select(x[0], 0, x[1]); }});
  c.push_back({"embedding", [] { return std::vector<Tensor>{from_vector<int32_t>({1, 3, 3}, {3}, Device::ref()), rnd({4, 6}, 62)}; },
               [](auto& x) { return embedding(x[0], x[1]); }});
  c.push_back({"expand", [] { return std::vector<Tensor>{rnd({3, 1}, 63)}; },
               [](auto& x) { return expand(x[0], {2, 3, 4}); }});
  c.push_back({"pad_constant", [] { return std::vector<Tensor>{rnd({2, 3, 4}, 64)}; },
               [](auto& x) { return pad(x[0], {1, 2, 0, 1}, "constant", 0.5); }});
  c.push_back({"pad_reflect", [] { return std::vector<Tensor>{rnd({2, 3, 4}, 65)}; },
               [](auto& x) { return pad(x[0], {2, 1, 1, 2}, "reflect"); }});
  c.push_back({"pad_replicate", [] { return std::vector<Tensor>{rnd({2, 3, 4}, 66)}; },
               [](auto& x) { return pad(x[0], {3, 0}, "replicate"); }});
  c.push_back({"tile", [] { return std::vector<Tensor>{rnd({2, 3}, 67)}; },
               [](auto& x) { return tile(x[0], {2, 1, 3}); }});
  c.push_back({"flatten_squeeze_unsqueeze", [] { return std::vector<Tensor>{rnd({2, 1, 3, 4}, 68)}; },
               [](auto& x) { return unsqueeze(flatten(squeeze(x[0], 1), 1), 0); }});
  return c;
}

// Sizes put the matmul past the templates' size floor (2 * 64^3 flops) and the rows (softmax,
// layer_norm) at 64 elements, so Vulkan and CUDA run their templates; the reduction is over a
// middle axis, which no rows template takes, so it fuses with its producers and epilogue.
std::vector<ProgramCase> program_cases() {
  std::vector<ProgramCase> c;
  c.push_back({{"pointwise_chain_broadcast_view",
                [] { return std::vector<Tensor>{rnd({4, 6, 8}, 200), rnd({6, 8}, 201), rnd({8}, 202)}; },
                [](auto& x) {
                  Tensor v = transpose(x[0] * x[1] + x[2], 1, 2);  // a view of the group's value joins it
                  return relu(v) - exp(-abs(v)) * 0.5;
                }},
               1, std::nullopt, 1,
               [] { return std::vector<Tensor>{rnd({3, 6, 8}, 220), rnd({6, 8}, 221), rnd({8}, 222)}; }});
  c.push_back({{"reduce_producers_epilogue", [] { return std::vector<Tensor>{rnd({6, 5, 40}, 203), rnd({40}, 204)}; },
                [](auto& x) { return sigmoid(sum(exp(x[0] * 0.1) * x[1], {1}) * 0.5 + 1.0); }},
               1, std::nullopt, 1, [] { return std::vector<Tensor>{rnd({7, 9, 40}, 223), rnd({40}, 224)}; }});
  c.push_back({{"matmul_bias_relu", [] { return std::vector<Tensor>{rnd({64, 96}, 205), rnd({96, 64}, 206), rnd({64}, 207)}; },
                [](auto& x) { return relu(matmul(x[0], x[1]) + x[2]); }, 1e-4, 1e-4},
               1, OpKind::MatMul, 2,
               [] { return std::vector<Tensor>{rnd({80, 96}, 225), rnd({96, 64}, 226), rnd({64}, 227)}; }});
  c.push_back({{"softmax_of_pointwise", [] { return std::vector<Tensor>{rnd({16, 64}, 208), rnd({64}, 209)}; },
                [](auto& x) { return softmax(x[0] * 0.5 + x[1], 1); }, 1e-5, 1e-6},
               2, OpKind::Softmax, 2,  // softmax takes no pointwise producers
               [] { return std::vector<Tensor>{rnd({5, 64}, 228), rnd({64}, 229)}; }});
  c.push_back({{"layer_norm_residual",
                [] { return std::vector<Tensor>{rnd({8, 64}, 210), rnd({8, 64}, 211), rnd({64}, 212), rnd({64}, 213)}; },
                [](auto& x) { return layer_norm(x[0] + x[1], {64}, x[2], x[3]) * 2.0; }, 1e-4, 1e-5},
               3, OpKind::LayerNorm, 3,  // nor does layer_norm, nor an epilogue
               [] { return std::vector<Tensor>{rnd({3, 64}, 230), rnd({3, 64}, 231), rnd({64}, 232), rnd({64}, 233)}; }});
  // Three parameters' SGD updates, independent pointwise kernels of three sizes: one horizontal
  // kernel computes them, then the concat that reads them all. Resized, two sizes are symbolic.
  auto updates = [](int64_t rows) {
    return [rows] {
      return std::vector<Tensor>{rnd({rows * 8}, 240), rnd({rows * 8}, 241), rnd({16}, 242),
                                 rnd({16}, 243), rnd({rows * 15}, 244), rnd({rows * 15}, 245)};
    };
  };
  c.push_back({{"horizontal_updates", updates(12),
                [](auto& x) { return concat({x[0] - x[1] * 0.1, x[2] - x[3] * 0.1, x[4] - x[5] * 0.1}, 0); },
                1e-5, 1e-6},
               2, std::nullopt, 2, updates(7)});
  c.push_back({{"conv2d_bias_relu", [] { return std::vector<Tensor>{rnd({2, 3, 10, 10}, 214), rnd({8, 3, 3, 3}, 215), rnd({8}, 216)}; },
                [](auto& x) { return relu(conv2d(x[0], x[1], x[2], 1, 1)); }, 1e-4, 1e-5},
               1, OpKind::Conv, 2,
               [] { return std::vector<Tensor>{rnd({3, 3, 12, 10}, 234), rnd({8, 3, 3, 3}, 235), rnd({8}, 236)}; }});
  return c;
}

}  // namespace kiln::conformance
