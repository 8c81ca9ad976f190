// Reference kernels for the pointwise ops. Mixed-dtype binaries first convert their operands to
// the promoted dtype; 16-bit floats compute in float.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/parallel.h"
#include "core/support/error.h"

namespace kiln::reference {
namespace {

// How `in` broadcasts to `out` when its dims, less leading ones, equal one block of out's dims with
// only ones around it: element i of out reads element (i / inner) % count of in. A scalar is a
// block of 1 over every element, a bias row a block with inner 1, a per-channel scale [C,1,1] of
// [N,C,H,W] a block of C with inner H*W.
struct Block {
  int64_t count = 1, inner = 1;
};

std::optional<Block> broadcast_block(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() > out.size()) return std::nullopt;
  const size_t pad = out.size() - in.size();
  auto dim = [&](size_t d) { return d < pad ? int64_t(1) : in[d - pad]; };
  size_t first = 0, last = out.size();
  for (size_t d = 0; d < out.size(); ++d)
    if (dim(d) != 1) {
      if (last == out.size()) first = d;
      last = d;
    }
  Block block;
  if (last == out.size()) first = last = 0;  // a scalar: every dim is inner
  else ++last;
  for (size_t d = first; d < last; ++d) {
    if (dim(d) != out[d]) return std::nullopt;
    block.count *= out[d];
  }
  for (size_t d = last; d < out.size(); ++d) block.inner *= out[d];
  if (block.inner == 0) block.inner = 1;  // an empty output has no element to read
  return block;
}

// Element loop over `out` with each input's broadcast offset. Without `kRuns` only equal shapes
// get a plain loop and every broadcast walks indices: the rarely used dtypes take that, which
// keeps this file's build time down (each loop here is built per op and dtype).
template <size_t N, bool kRuns = true, class F>
void for_each_broadcast(const std::vector<int64_t>& out_dims,
                        const std::array<const std::vector<int64_t>*, N>& in_dims, int64_t n, F f) {
  std::array<bool, N> full;
  std::array<Block, N> blocks;
  bool same = true, all_blocks = true;
  int64_t shortest_run = n;
  for (size_t k = 0; k < N; ++k) {
    full[k] = *in_dims[k] == out_dims;
    same = same && full[k];
    if (full[k]) continue;
    std::optional<Block> block = broadcast_block(*in_dims[k], out_dims);
    if (!block) {
      all_blocks = false;
      continue;
    }
    blocks[k] = *block;
    shortest_run = std::min(shortest_run, block->inner);
  }
  if (same) {
    parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off;
      for (int64_t i = b; i < e; ++i) {
        off.fill(i);
        f(i, off);
      }
    });
    return;
  }
  if constexpr (N == 2 && kRuns) {
    // One operand the output's shape, the other a row of its last dims (a bias): plain loops, with
    // the row's offset wrapping.
    const bool one_row = full[0] != full[1] && all_blocks && shortest_run == 1;
    const int64_t row = one_row ? blocks[full[0] ? 1 : 0].count : 0;
    if (row > 1) {
      const bool first_full = full[0];
      parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e;) {
          const int64_t start = i % row, stop = std::min(e - i, row - start) + start;
          if (first_full)
            for (int64_t j = start; j < stop; ++j, ++i) f(i, std::array<int64_t, 2>{i, j});
          else
            for (int64_t j = start; j < stop; ++j, ++i) f(i, std::array<int64_t, 2>{j, i});
        }
      });
      return;
    }
  }
  if (kRuns && all_blocks && shortest_run >= 4) {
    // Every operand the output's shape or one block (a scalar, a per-channel value): runs of
    // elements over which each block operand reads one element.
    parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off{};
      for (int64_t i = b; i < e;) {
        int64_t stop = e;
        for (size_t k = 0; k < N; ++k) {
          if (full[k]) continue;
          const int64_t q = i / blocks[k].inner;
          off[k] = q % blocks[k].count;
          stop = std::min(stop, (q + 1) * blocks[k].inner);
        }
        if constexpr (N == 2) {
          if (full[0])
            for (; i < stop; ++i) f(i, std::array<int64_t, 2>{i, off[1]});
          else if (full[1])
            for (; i < stop; ++i) f(i, std::array<int64_t, 2>{off[0], i});
          else
            for (; i < stop; ++i) f(i, off);
        } else {
          for (; i < stop; ++i) {
            for (size_t k = 0; k < N; ++k)
              if (full[k]) off[k] = i;
            f(i, off);
          }
        }
      }
    });
    return;
  }
  parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
    std::vector<BroadcastIndex> idx;
    for (auto* d : in_dims) idx.emplace_back(*d, out_dims);
    for (auto& x : idx) x.seek(b);
    std::array<int64_t, N> off;
    for (int64_t i = b; i < e; ++i) {
      for (size_t k = 0; k < N; ++k) off[k] = idx[k].offset();
      f(i, off);
      for (auto& x : idx) x.next();
    }
  });
}

// Holds a converted copy of an operand when its dtype differs from the compute dtype.
struct Operand {
  std::vector<uint8_t> storage;
  const void* data;
  Operand(const HostTensor& t, DType want) : data(t.data) {
    if (t.dtype != want) {
      storage.resize(size_t(t.numel()) * dtype_size(want));
      convert_elements(t.data, t.dtype, storage.data(), want, size_t(t.numel()));
      data = storage.data();
    }
  }
};

template <class C>
C gelu_value(C x, bool tanh_form) {
  if (tanh_form) {
    const C k = C(0.7978845608028654);  // sqrt(2/pi)
    return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
  }
  return C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476)));
}

template <class T, class F>
void map_unary(const KernelContext& ctx, F f) {
  const T* in = ctx.inputs[0].as<T>();
  T* out = ctx.outputs[0].as<T>();
  parallel_for(ctx.inputs[0].numel(), kParallelGrain, [&](int64_t b, int64_t e) {
    // Locals the stores cannot alias: read through the closure, f's captures (a clip's bounds)
    // would be loaded again after every store, and the loop would stay scalar.
    const F fn = f;
    const T* __restrict src = in;
    T* __restrict dst = out;
    for (int64_t i = b; i < e; ++i) dst[i] = T(fn(compute_t<T>(src[i])));
  });
}

void unary_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  if (ctx.kind == OpKind::Cast) {
    convert_elements(x.data, x.dtype, ctx.outputs[0].data, ctx.outputs[0].dtype, size_t(x.numel()));
    return;
  }
  if (ctx.kind == OpKind::LogicalNot) {
    Operand in(x, DType::Bool);
    const bool* a = static_cast<const bool*>(in.data);
    bool* out = ctx.outputs[0].as<bool>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = !a[i];
    return;
  }
  visit_dtype(x.dtype, [&]<class T>() {
    using C = compute_t<T>;
    constexpr bool is_float = std::is_floating_point_v<C>;
    switch (ctx.kind) {
      case OpKind::Neg: map_unary<T>(ctx, [](C v) { return C(-v); }); break;
      case OpKind::Abs: map_unary<T>(ctx, [](C v) { return v < C(0) ? C(-v) : v; }); break;
      case OpKind::Exp: map_unary<T>(ctx, [](C v) { return std::exp(v); }); break;
      case OpKind::Log: map_unary<T>(ctx, [](C v) { return std::log(v); }); break;
      case OpKind::Sqrt: map_unary<T>(ctx, [](C v) { return std::sqrt(v); }); break;
      case OpKind::Rsqrt: map_unary<T>(ctx, [](C v) { return C(1) / std::sqrt(v); }); break;
      case OpKind::Sin: map_unary<T>(ctx, [](C v) { return std::sin(v); }); break;
      case OpKind::Cos: map_unary<T>(ctx, [](C v) { return std::cos(v); }); break;
      case OpKind::Tanh: map_unary<T>(ctx, [](C v) { return std::tanh(v); }); break;
      case OpKind::Sigmoid: map_unary<T>(ctx, [](C v) { return C(1) / (C(1) + std::exp(-v)); }); break;
      case OpKind::Relu: map_unary<T>(ctx, [](C v) { return v > C(0) ? v : C(0); }); break;
      case OpKind::Silu: map_unary<T>(ctx, [](C v) { return v / (C(1) + std::exp(-v)); }); break;
      case OpKind::Erf: map_unary<T>(ctx, [](C v) { return std::erf(v); }); break;
      case OpKind::Reciprocal: map_unary<T>(ctx, [](C v) { return C(1) / v; }); break;
      case OpKind::Floor:
        map_unary<T>(ctx, [](C v) { if constexpr (is_float) return std::floor(v); else return v; });
        break;
      case OpKind::Ceil:
        map_unary<T>(ctx, [](C v) { if constexpr (is_float) return std::ceil(v); else return v; });
        break;
      case OpKind::Round:  // nearbyint rounds half to even in the default rounding mode
        map_unary<T>(ctx, [](C v) { if constexpr (is_float) return std::nearbyint(v); else return v; });
        break;
      case OpKind::Sign:
        map_unary<T>(ctx, [](C v) { return C((v > C(0)) - (v < C(0))); });
        break;
      case OpKind::LeakyRelu: {
        C alpha = C(ctx.attrs.get_float("alpha"));
        map_unary<T>(ctx, [alpha](C v) { return v >= C(0) ? v : C(alpha * v); });
        break;
      }
      case OpKind::Elu: {
        C alpha = C(ctx.attrs.get_float("alpha"));
        map_unary<T>(ctx, [alpha](C v) { return v > C(0) ? v : C(alpha * (std::exp(v) - C(1))); });
        break;
      }
      case OpKind::Gelu: {
        bool tanh_form = ctx.attrs.get_string("approximate") == "tanh";
        map_unary<T>(ctx, [tanh_form](C v) { return gelu_value(v, tanh_form); });
        break;
      }
      case OpKind::Clip: {
        double lo = ctx.attrs.get_float("min"), hi = ctx.attrs.get_float("max");
        const C low = C(lo), high = C(hi);
        map_unary<T>(ctx, [lo, hi, low, high](C v) {  // NaN fails both tests and stays; selects vectorize
          return double(v) < lo ? low : double(v) > hi ? high : v;
        });
        break;
      }
      default:
        throw Error("pointwise: unexpected unary op " + std::string(op_name(ctx.kind)));
    }
  });
}

template <class C>
C int_pow(C base, C exp) {
  if (exp < C(0)) return base == C(1) ? C(1) : base == C(-1) ? (exp % C(2) ? C(-1) : C(1)) : C(0);
  C result = 1;
  while (exp > C(0)) {
    if (exp % C(2)) result *= base;
    base *= base;
    exp /= C(2);
  }
  return result;
}

template <class C>
C mod_value(C a, C b, bool c_fmod) {
  C r;
  if constexpr (std::is_floating_point_v<C>) r = std::fmod(a, b);
  else r = a % b;
  if (!c_fmod && r != C(0) && ((r < C(0)) != (b < C(0)))) r += b;
  return r;
}

// out[i] = f(a, b) with broadcasting; R is the output storage type.
template <class T, class R, class F>
void map_binary(const KernelContext& ctx, const void* a, const void* b, F f) {
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  R* out = ctx.outputs[0].as<R>();
  using C = compute_t<T>;
  const auto& od = ctx.outputs[0].dims;
  // Broadcast runs for the dtypes models compute in.
  constexpr bool kRuns = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                         std::is_same_v<T, int32_t> || std::is_same_v<T, bool>;
  for_each_broadcast<2, kRuns>(od, {&ctx.inputs[0].dims, &ctx.inputs[1].dims}, ctx.outputs[0].numel(),
                               [&](int64_t i, const std::array<int64_t, 2>& o) {
                                 out[i] = R(f(C(pa[o[0]]), C(pb[o[1]])));
                               });
}

void binary_kernel(const KernelContext& ctx) {
  DType compute = promote_types(ctx.inputs[0].dtype, ctx.inputs[1].dtype);
  Operand a(ctx.inputs[0], compute), b(ctx.inputs[1], compute);
  visit_dtype(compute, [&]<class T>() {
    using C = compute_t<T>;
    constexpr bool is_float = std::is_floating_point_v<C>;
    bool zero_division = false;
    switch (ctx.kind) {
      case OpKind::Add: map_binary<T, T>(ctx, a.data, b.data, [](C x, C y) { return x + y; }); break;
      case OpKind::Sub: map_binary<T, T>(ctx, a.data, b.data, [](C x, C y) { return x - y; }); break;
      case OpKind::Mul: map_binary<T, T>(ctx, a.data, b.data, [](C x, C y) { return x * y; }); break;
      case OpKind::Div:
        map_binary<T, T>(ctx, a.data, b.data, [&](C x, C y) {
          if constexpr (!is_float) {
            if (y == C(0)) {
              zero_division = true;
              return C(0);
            }
          }
          return C(x / y);
        });
        break;
      case OpKind::Pow:
        map_binary<T, T>(ctx, a.data, b.data, [](C x, C y) {
          if constexpr (is_float) return std::pow(x, y);
          else return int_pow(x, y);
        });
        break;
      // NaN wins. Selects only, which vectorize: an arithmetic NaN (x + y) may not be computed
      // ahead of its test (-ftrapping-math), so it kept a branch per element and the loop scalar.
      case OpKind::Maximum:
        map_binary<T, T>(ctx, a.data, b.data, [](C x, C y) {
          const C larger = x > y ? x : y;
          if constexpr (is_float) return x != x ? x : (y != y ? y : larger);
          else return larger;
        });
        break;
      case OpKind::Minimum:
        map_binary<T, T>(ctx, a.data, b.data, [](C x, C y) {
          const C smaller = x < y ? x : y;
          if constexpr (is_float) return x != x ? x : (y != y ? y : smaller);
          else return smaller;
        });
        break;
      case OpKind::Mod: {
        bool c_fmod = ctx.attrs.get_bool("fmod");
        map_binary<T, T>(ctx, a.data, b.data, [&](C x, C y) {
          if constexpr (!is_float) {
            if (y == C(0)) {
              zero_division = true;
              return C(0);
            }
          }
          return mod_value(x, y, c_fmod);
        });
        break;
      }
      case OpKind::Eq: map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return x == y; }); break;
      case OpKind::Ne: map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return x != y; }); break;
      case OpKind::Lt: map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return x < y; }); break;
      case OpKind::Le: map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return x <= y; }); break;
      case OpKind::Gt: map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return x > y; }); break;
      case OpKind::Ge: map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return x >= y; }); break;
      case OpKind::LogicalAnd:
        map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return x != C(0) && y != C(0); });
        break;
      case OpKind::LogicalOr:
        map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return x != C(0) || y != C(0); });
        break;
      case OpKind::LogicalXor:
        map_binary<T, bool>(ctx, a.data, b.data, [](C x, C y) { return (x != C(0)) != (y != C(0)); });
        break;
      default:
        throw Error("pointwise: unexpected binary op " + std::string(op_name(ctx.kind)));
    }
    if (zero_division) throw Error("integer division by zero");
  });
}

// out = cond ? a : b, moving elements as unsigned integers of their size (E). The select is a mask
// of the condition's bits, not a ?: that GCC compiles to a branch, which a random mask (relu's
// gradient) mispredicts every other element.
template <class E>
void select_elements(const KernelContext& ctx, const void* a, const void* b) {
  const bool* cond = ctx.inputs[0].as<bool>();
  const E* pa = static_cast<const E*>(a);
  const E* pb = static_cast<const E*>(b);
  E* out = static_cast<E*>(ctx.outputs[0].data);
  for_each_broadcast<3>(ctx.outputs[0].dims, {&ctx.inputs[0].dims, &ctx.inputs[1].dims, &ctx.inputs[2].dims},
                        ctx.outputs[0].numel(), [&](int64_t i, const std::array<int64_t, 3>& o) {
                          const E take_a = E(0) - E(cond[o[0]]);
                          out[i] = E((pa[o[1]] & take_a) | (pb[o[2]] & E(~take_a)));
                        });
}

void where_kernel(const KernelContext& ctx) {
  DType dtype = ctx.outputs[0].dtype;
  Operand a(ctx.inputs[1], dtype), b(ctx.inputs[2], dtype);
  switch (dtype_size(dtype)) {
    case 1: select_elements<uint8_t>(ctx, a.data, b.data); return;
    case 2: select_elements<uint16_t>(ctx, a.data, b.data); return;
    case 4: select_elements<uint32_t>(ctx, a.data, b.data); return;
    case 8: select_elements<uint64_t>(ctx, a.data, b.data); return;
    default: throw Error("where: no element type of " + std::to_string(dtype_size(dtype)) + " bytes");
  }
}

}  // namespace

void register_pointwise(KernelTable& t) {
  for (size_t i = 0; i < kOpCount; ++i) {
    const OpKind k = OpKind(i);
    const OpDef* def = nullptr;
    try {
      def = &op_def(k);
    } catch (const Error&) {
      continue;
    }
    if (def->family == OpFamily::Unary) t.set(k, unary_kernel);
    if (def->family == OpFamily::Binary && k != OpKind::Where) t.set(k, binary_kernel);
  }
  t.set(OpKind::Where, where_kernel);
}

}  // namespace kiln::reference
