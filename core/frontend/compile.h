// kiln::compile: wraps a C++ function over Tensors so that its first call traces it into a graph,
// optimizes and builds a program for the inputs' device, and later calls replay that program while
// the call still satisfies the trace's guards (ranks, dtypes, devices, sizes, scalar values, shape
// decisions). Misses recompile and say why; past recompile_limit the policy is explicit.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/frontend/tensor.h"
#include "core/runtime/program.h"
#include "core/trace/bundle.h"

namespace kiln {

namespace nn {
class Module;
}

enum class Mode {
  Default,
  ReduceOverhead,  // record the launches once, replay them (build_program's reduce_overhead)
  MaxAutotune,     // time the Vulkan matmul template's tile variants, keep the fastest (persisted)
};

enum class Dynamic {
  Auto,      // first compile static; a dim that changes between calls becomes symbolic
  Static,    // always specialize on every size
  Symbolic,  // every dim of every tensor argument symbolic from the start (except sizes 0 and 1)
};

enum class OnLimit {
  Error,  // a miss past recompile_limit raises kiln::Error naming the function and last reason
  Eager,  // warn once, then run misses eagerly (cached entries still replay)
};

struct CompileOptions {
  Mode mode = Mode::Default;
  bool fullgraph = false;  // a graph break is a kiln::Error instead of an eager fallback
  Dynamic dynamic = Dynamic::Auto;
  int recompile_limit = 8;  // cache entries per function, like torch.compile's recompile_limit
  OnLimit on_limit = OnLimit::Error;
  std::string debug_dir;  // when set (or KILN_DEBUG=dir), each compile writes a trace bundle there
  // Differentiable calls: what the backward keeps of the forward. 0 saves the fewest bytes (a min
  // cut; cheap ops are recomputed), 1 saves all the backward reads and recomputes nothing
  // (core/autodiff/partition.h).
  double memory_budget = 0;
  std::string name;       // for messages; default "function compiled at <file>:<line>"
};

struct CompileStats {
  int64_t calls = 0;
  int64_t compiles = 0;    // traces that produced a cache entry (first compile included)
  int64_t recompiles = 0;  // compiles after the first
  int64_t cache_hits = 0;
  int64_t cache_entries = 0;
  int64_t eager_calls = 0;   // calls that ran fn eagerly (past the recompile limit)
  int64_t graph_breaks = 0;  // traces that stopped at a graph break
  int64_t lazy_calls = 0;    // calls run in lazy mode (fn has graph breaks)
  int64_t segments_compiled = 0;  // lazy-mode segments built (each structure once)
  int64_t segment_runs = 0;       // lazy-mode segments executed
  std::vector<std::string> recompile_reasons;  // one per recompile, in order
  std::vector<std::string> graph_break_locations;  // "model.cpp:12", one per break
  ProgramStats program;                            // of the most recently built program
};

namespace compile_detail {

enum class ArgKind { Tensor, Scalar, Module, Other };

// One argument of a call, as the guards see it. Points into the caller's frame.
struct ArgView {
  ArgKind kind = ArgKind::Other;
  const Tensor* tensor = nullptr;
  nn::Module* module = nullptr;
  DType scalar_kind = DType::I64;  // Bool, I64 or F64 (F32 for float)
  int64_t scalar_int = 0;
  double scalar_float = 0;
};

// A non-owning callable reference: the hot path builds no std::function.
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cv_t<F>, FunctionRef>)
  explicit FunctionRef(F& f)
      : object_(&f), call_([](void* o, A... a) -> R { return (*static_cast<F*>(o))(a...); }) {}
  R operator()(A... a) const { return call_(object_, a...); }

 private:
  void* object_;
  R (*call_)(void*, A...);
};

using TraceFn = FunctionRef<std::vector<Tensor>(std::vector<Tensor>&)>;
using EagerFn = FunctionRef<std::vector<Tensor>()>;

// The cache, guards and compile logic, shared by every copy of one compiled function.
class Engine {
 public:
  Engine(CompileOptions options, std::string name);
  ~Engine();
  // `trace` calls fn with one tracing tensor per tensor argument (in argument order, undefined
  // where the argument is); `eager` calls fn with the real arguments.
  std::vector<Tensor> call(std::span<const ArgView> args, TraceFn trace, EagerFn eager);
  CompileStats stats() const;
  trace::Bundle bundle() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

template <class A>
inline constexpr bool is_tensor_arg = std::is_same_v<std::remove_cvref_t<A>, Tensor>;
template <class A>
inline constexpr bool is_module_arg = std::is_base_of_v<nn::Module, std::remove_cvref_t<A>>;
template <class A>
inline constexpr bool is_scalar_arg = std::is_arithmetic_v<std::remove_cvref_t<A>>;

template <class A>
ArgView view_of(A& arg) {
  using T = std::remove_cvref_t<A>;
  ArgView v;
  if constexpr (is_tensor_arg<A>) {
    v.kind = ArgKind::Tensor;
    v.tensor = &arg;
  } else if constexpr (is_module_arg<A>) {
    v.kind = ArgKind::Module;
    v.module = const_cast<nn::Module*>(static_cast<const nn::Module*>(&arg));
  } else if constexpr (std::is_same_v<T, bool>) {
    v.kind = ArgKind::Scalar;
    v.scalar_kind = DType::Bool;
    v.scalar_int = arg ? 1 : 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    v.kind = ArgKind::Scalar;
    v.scalar_kind = std::is_same_v<T, float> ? DType::F32 : DType::F64;
    v.scalar_float = double(arg);
  } else if constexpr (std::is_integral_v<T>) {
    v.kind = ArgKind::Scalar;
    v.scalar_kind = DType::I64;
    v.scalar_int = int64_t(arg);
  }
  return v;
}

template <class R>
std::vector<Tensor> to_outputs(R&& result) {
  if constexpr (std::is_same_v<std::remove_cvref_t<R>, Tensor>)
    return {std::forward<R>(result)};
  else
    return std::vector<Tensor>(std::forward<R>(result));
}

// The signature of a function pointer, lambda or other callable with one operator().
template <class F>
struct Signature : Signature<decltype(&F::operator())> {};
template <class R, class... A>
struct Signature<R (*)(A...)> { using type = R(A...); };
template <class R, class... A>
struct Signature<R (*)(A...) noexcept> { using type = R(A...); };
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const> { using type = R(A...); };
template <class C, class R, class... A>
struct Signature<R (C::*)(A...)> { using type = R(A...); };
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const noexcept> { using type = R(A...); };
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) noexcept> { using type = R(A...); };

}  // namespace compile_detail

template <class Sig>
class Compiled;

// The callable kiln::compile returns: same signature as fn. Copies share one cache.
template <class R, class... Args>
class Compiled<R(Args...)> {
  static_assert(std::is_same_v<R, Tensor> || std::is_same_v<R, std::vector<Tensor>>,
                "kiln::compile: the function must return Tensor or std::vector<Tensor>");
  static_assert((!std::is_rvalue_reference_v<Args> && ...),
                "kiln::compile: take arguments by value or by reference, not by rvalue reference");
  static_assert((!std::is_same_v<std::remove_cvref_t<Args>, std::vector<Tensor>> && ...),
                "kiln::compile: pass tensors as separate Tensor arguments; a vector of tensors "
                "would be captured as constants");

 public:
  Compiled(std::function<R(Args...)> fn, CompileOptions options, std::string name)
      : fn_(std::move(fn)),
        engine_(std::make_shared<compile_detail::Engine>(std::move(options), std::move(name))) {}

  R operator()(Args... args) const {
    // Called while another compiled function traces: trace through (inline) instead.
    bool nested = false;
    ((nested = nested || traced_arg<Args>(args)), ...);
    if (nested) return fn_(args...);

    std::array<compile_detail::ArgView, sizeof...(Args)> views{compile_detail::view_of(args)...};
    auto refs = std::tie(args...);
    auto trace = [&](std::vector<Tensor>& traced) {
      return invoke_traced(refs, traced, std::index_sequence_for<Args...>{});
    };
    auto eager = [&] { return compile_detail::to_outputs(fn_(args...)); };
    std::vector<Tensor> out = engine_->call(views, compile_detail::TraceFn(trace),
                                            compile_detail::EagerFn(eager));
    if constexpr (std::is_same_v<R, Tensor>)
      return std::move(out.at(0));
    else
      return out;
  }

  CompileStats stats() const { return engine_->stats(); }
  // The trace bundle (core/trace/bundle.h) of the most recent compile: its fused kernels with their
  // generated code and source lines, memory plan, passes and guards, as kiln-debug shows them
  // (kiln::debug::show). Throws kiln::Error before the first call or for a lazy-mode signature.
  trace::Bundle bundle() const { return engine_->bundle(); }

 private:
  template <class A>
  static bool traced_arg(const std::remove_reference_t<A>& arg) {
    if constexpr (compile_detail::is_tensor_arg<A>)
      return arg.is_traced();
    else
      return false;
  }

  // Argument I's index among the tensor arguments.
  static constexpr std::array<size_t, sizeof...(Args) + 1> tensor_index() {
    constexpr bool is_tensor[] = {compile_detail::is_tensor_arg<Args>..., false};
    std::array<size_t, sizeof...(Args) + 1> index{};
    size_t n = 0;
    for (size_t i = 0; i < sizeof...(Args); ++i) {
      index[i] = n;
      if (is_tensor[i]) ++n;
    }
    return index;
  }

  template <size_t I, class Refs>
  static decltype(auto) pick(Refs& refs, std::vector<Tensor>& traced) {
    using A = std::tuple_element_t<I, std::tuple<Args...>>;
    if constexpr (compile_detail::is_tensor_arg<A>)
      return (traced[tensor_index()[I]]);
    else
      return (std::get<I>(refs));
  }

  template <class Refs, size_t... I>
  std::vector<Tensor> invoke_traced(Refs& refs, std::vector<Tensor>& traced,
                                    std::index_sequence<I...>) const {
    return compile_detail::to_outputs(fn_(pick<I>(refs, traced)...));
  }

  std::function<R(Args...)> fn_;
  std::shared_ptr<compile_detail::Engine> engine_;
};

namespace compile_detail {
void check_options(const CompileOptions& options);
std::string default_name(const Loc& loc);
}  // namespace compile_detail

// Compiles fn lazily: tracing happens on the first call. fn takes any mix of Tensor (by value or
// const&), nn::Module& (its parameters are re-read at every call), arithmetic scalars (guarded by
// value) and other references (passed through untouched), and returns Tensor or vector<Tensor>.
template <class F>
auto compile(F fn, CompileOptions options = {}, Loc loc = Loc::current()) {
  using Sig = typename compile_detail::Signature<std::decay_t<F>>::type;
  compile_detail::check_options(options);
  std::string name = options.name.empty() ? compile_detail::default_name(loc) : options.name;
  return Compiled<Sig>(std::move(fn), std::move(options), std::move(name));
}

}  // namespace kiln
