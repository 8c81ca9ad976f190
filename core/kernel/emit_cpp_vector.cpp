// C++ kernels' vector blocks (emit_cpp_vector.h).
#include "core/kernel/emit_cpp_vector.h"

#include <map>
#include <set>

#include "core/kernel/emit_text.h"

namespace kiln::kernel {

namespace {

// Floats per vector: the prelude's KILN_LANES, one register's worth where the compiler targets
// AVX-512 (16), else 8 (one AVX2 register, two NEON ones).
const char* const kLanes = "KILN_LANES";
constexpr int kVectors = 8;  // vectors per step, each statement applied to all of them in turn
constexpr int kMaxNodes = 256;  // larger kernels keep the scalar loop alone (compile time, registers)

bool is_linear_index(const ExprRef& e) { return e->kind == ExprKind::Coord && e->index < 0; }
bool is_uniform_offset(const ExprRef& e) { return e->kind == ExprKind::Const || e->kind == ExprKind::Param; }

// The ops whose expression text (emit_text.cpp) computes on vectors as written, with the vector
// overloads of prelude_cpp_vector(): f32 arithmetic and functions, comparisons of f32 values into
// masks (bool values are kiln_vi lanes of 0 or -1), and selects and casts of masks.
bool prints_on_vectors(const Expr& e) {
  const bool floats = e.type == DType::F32;
  const bool float_args = !e.args.empty() && e.args[0]->type == DType::F32;
  switch (e.op) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Neg:
    case OpKind::Abs: case OpKind::Reciprocal: case OpKind::Sqrt: case OpKind::Rsqrt: case OpKind::Exp:
    case OpKind::Sigmoid: case OpKind::Silu: case OpKind::Tanh: case OpKind::Relu: case OpKind::LeakyRelu:
    case OpKind::Elu: case OpKind::Maximum: case OpKind::Minimum:
      return floats && float_args;
    case OpKind::Gelu:
      return floats && float_args && e.attrs.has("approximate") && e.attrs.get_string("approximate") == "tanh";
    case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge: case OpKind::Eq: case OpKind::Ne:
      return e.type == DType::Bool && float_args;
    case OpKind::Where:
      return floats && e.args[0]->type == DType::Bool;
    case OpKind::Cast:
      return floats && e.args[0]->type == DType::Bool;
    default:
      return false;
  }
}

class Qualifier {
 public:
  explicit Qualifier(const Kernel& k) : k_(k) {}

  bool kernel() {
    if (k_.kind != KernelKind::Pointwise || !k_.segments.empty() || k_.rank == 0 || k_.stores.empty()) return false;
    for (const Store& s : k_.stores)
      if (k_.buffers.at(size_t(s.buffer)).dtype != DType::F32 || !value(s.value)) return false;
    return seen_.size() <= size_t(kMaxNodes);
  }

 private:
  bool value(const ExprRef& e) {
    if (!seen_.insert(e.get()).second) return true;
    switch (e->kind) {
      case ExprKind::Const: return e->type == DType::F32;
      case ExprKind::Load:
        return e->type == DType::F32 && k_.buffers.at(size_t(e->index)).dtype == DType::F32 &&
               (is_linear_index(e->args[0]) || is_uniform_offset(e->args[0]));
      case ExprKind::Op:
        if (!prints_on_vectors(*e)) return false;
        for (const ExprRef& a : e->args)
          if (!value(a)) return false;
        return true;
      default: return false;
    }
  }

  const Kernel& k_;
  std::set<const Expr*> seen_;
};

class BlockPrinter {
 public:
  BlockPrinter(const Kernel& k, const std::function<std::string(int)>& param) : k_(k), param_(param) {}

  // Loop-invariant values (a load of one element for all) come out in `hoisted_`, the rest in
  // `body_`; a name ending in [l] is one of kVectors vectors.
  void stores() {
    const std::string lanes = kLanes;
    for (const Store& s : k_.stores) {
      const std::vector<int> origins = collect_origins(s.value);
      const std::string v = value(s.value, origins);
      body_.push_back({each_vector() + "{ const kiln_vf s = " + v + "; std::memcpy(b" + std::to_string(s.buffer) +
                           " + begin + " + lanes + " * l, &s, sizeof s); }",
                       origins});
    }
  }

  std::vector<CppVectorLine> hoisted_, body_;

 private:
  // Unrolled, so that the block's vectors are independent statements the CPU overlaps (GCC keeps
  // such a loop around a long statement, an exp, without the pragma).
  static std::string each_vector() {
    const std::string n = std::to_string(kVectors);
    return "_Pragma(\"GCC unroll " + n + "\") for (int l = 0; l < " + n + "; ++l) ";
  }

  static std::string declare(const std::string& name, DType type = DType::F32) {
    return std::string(type == DType::Bool ? "kiln_vi " : "kiln_vf ") + name + "[" + std::to_string(kVectors) + "]; ";
  }

  // An op's text as every dialect prints it; C++ names std::tanh there, which takes no vector, so
  // the block calls the prelude's kiln_tanh instead. Relu is the prelude's kiln_greater, which
  // selects as the scalar text does (NaN gives 0) in one instruction where the ISA has one.
  static std::string vector_text(const Expr& e, const std::vector<std::string>& args, const std::vector<DType>& types) {
    if (e.op == OpKind::Relu) return "kiln_greater(" + args[0] + ", kiln_vf{})";
    std::string text = op_expression(e.op, e.attrs, e.type, types, args, Dialect::Cpp);
    for (size_t at = text.find("std::tanh("); at != std::string::npos; at = text.find("std::tanh(", at))
      text.replace(at, 10, "kiln_tanh(");
    return text;
  }

  std::string value(const ExprRef& e, const std::vector<int>& context) {
    auto it = names_.find(e.get());
    if (it != names_.end()) return it->second;
    const std::vector<int> origins = e->origins.empty() ? context : e->origins;
    std::string name;
    if (e->kind == ExprKind::Const) {
      name = "(kiln_vf{} + " + literal(e->value, DType::F32, Dialect::Cpp) + ")";
    } else if (e->kind == ExprKind::Load && !is_linear_index(e->args[0])) {
      const ExprRef& at = e->args[0];
      const std::string n = std::to_string(next_++);
      const std::string offset = at->kind == ExprKind::Param ? param_(at->index) : literal(at->value, at->type, Dialect::Cpp);
      name = "u" + n;
      hoisted_.push_back({"const kiln_vf " + name + " = kiln_vf{} + b" + std::to_string(e->index) + "[" + offset + "];",
                          origins});
    } else if (e->kind == ExprKind::Load) {
      const std::string n = std::to_string(next_++);
      name = "w" + n + "[l]";
      body_.push_back({declare("w" + n) + each_vector() + "std::memcpy(&" + name + ", b" + std::to_string(e->index) +
                           " + begin + " + std::string(kLanes) + " * l, sizeof(kiln_vf));",
                       origins});
    } else {
      std::vector<std::string> args;
      std::vector<DType> types;
      for (const ExprRef& a : e->args) {
        args.push_back(value(a, origins));
        types.push_back(a->type);
      }
      const std::string n = std::to_string(next_++);
      name = "w" + n + "[l]";
      body_.push_back({declare("w" + n, e->type) + each_vector() + name + " = " + vector_text(*e, args, types) + ";",
                       origins});
    }
    names_[e.get()] = name;
    return name;
  }

  const Kernel& k_;
  const std::function<std::string(int)>& param_;
  std::map<const Expr*, std::string> names_;
  int next_ = 0;
};

}  // namespace

std::vector<CppVectorLine> cpp_vector_block(const Kernel& k, const std::function<std::string(int)>& param,
                                            const std::string& total) {
  if (!Qualifier(k).kernel()) return {};
  BlockPrinter printer(k, param);
  printer.stores();
  const std::vector<int> all = k.origins();
  const std::string step = std::string(kLanes) + " * " + std::to_string(kVectors);
  std::vector<CppVectorLine> lines = {
      {"#if KILN_VECTOR_BLOCKS", all},
      {"  {", all},
      {"  const long stop = end < long(" + total + ") ? end : long(" + total + ");", all}};
  for (CppVectorLine& l : printer.hoisted_) lines.push_back({"  " + l.text, l.origins});
  lines.push_back({"  for (; begin + " + step + " <= stop; begin += " + step + ") {", all});
  for (CppVectorLine& l : printer.body_) lines.push_back({"  " + l.text, l.origins});
  lines.push_back({"  }", all});
  lines.push_back({"  }", all});
  lines.push_back({"#endif", all});
  return lines;
}

// Vectors of one register: 16 floats where the compiler targets AVX-512, else 8 (AVX2). GCC passes
// a vector wider than the ISA's registers through memory, which made 16-float blocks slower than
// the scalar loop on an AVX2 machine, and 8-float ones on the x86-64 baseline (SSE2): blocks are
// built for AVX2 and AVX-512 only, where they were measured; other targets keep the scalar loop.
// The block's functions, inline, so that its eight chains overlap (glibc's vector exp is a call,
// across which the compiler reloads every constant and the block's vectors wait). Each is within
// 1 ulp of the correctly rounded result (tests/backends/cpu_vector_blocks_test.cpp: every 4099th
// float bit pattern, a range and the specials).
// - kiln_greater(a, b) is a > b ? a : b and kiln_lesser(a, b) a < b ? a : b, so b where either is
//   NaN: one vmaxps/vminps with AVX-512, whose compare-and-blend GCC does not fold into one.
// - kiln_scale(p, n) is p * 2^n for integral n, rounded once, so that results below 2^-126 round
//   once into subnormals: one vscalefps with AVX-512, else two products by powers of two.
// - exp: 2^n exp(r) with n = round(x / ln 2) and ln 2 split in two (Cody and Waite), exp(r) on
//   |r| <= ln(2)/2 by Cephes' expf polynomial, scaled by kiln_scale; results past the ends are 0
//   and inf; NaN stays NaN (it passes both clamps).
// - tanh: Cephes' tanhf, an odd polynomial below |x| = 0.625, else 1 - 2 / (exp(2|x|) + 1) with
//   x's sign.
const char* prelude_cpp_vector() {
  return R"(#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX2__)
#define KILN_VECTOR_BLOCKS 1
#if defined(__AVX512F__)
#define KILN_LANES 16
#else
#define KILN_LANES 8
#endif
typedef float kiln_vf __attribute__((vector_size(KILN_LANES * 4)));
typedef int kiln_vi __attribute__((vector_size(KILN_LANES * 4)));
#if defined(__AVX512F__)
#include <immintrin.h>
static inline kiln_vf kiln_greater(kiln_vf a, kiln_vf b) { return (kiln_vf)_mm512_max_ps((__m512)a, (__m512)b); }
static inline kiln_vf kiln_lesser(kiln_vf a, kiln_vf b) { return (kiln_vf)_mm512_min_ps((__m512)a, (__m512)b); }
static inline kiln_vf kiln_scale(kiln_vf p, kiln_vf n) { return (kiln_vf)_mm512_scalef_ps((__m512)p, (__m512)n); }
#else
static inline kiln_vf kiln_greater(kiln_vf a, kiln_vf b) { return a > b ? a : b; }
static inline kiln_vf kiln_lesser(kiln_vf a, kiln_vf b) { return a < b ? a : b; }
static inline kiln_vf kiln_scale(kiln_vf p, kiln_vf n) {
  const kiln_vi whole = __builtin_convertvector(n, kiln_vi), half = whole >> 1;
  return p * (kiln_vf)((half + 127) << 23) * (kiln_vf)((whole - half + 127) << 23);
}
#endif
static inline kiln_vf exp(kiln_vf x) {
  kiln_vf c = kiln_greater(kiln_vf{} - 104.0f, x);
  c = kiln_lesser(kiln_vf{} + 89.0f, c);
  const kiln_vf t = c * 1.44269504f + 12582912.0f;
  const kiln_vf n = t - 12582912.0f;
  kiln_vf r = n * -0.693145752f + c;
  r = n * -1.42860677e-6f + r;
  kiln_vf p = r * 1.98756912e-4f + 1.39819994e-3f;
  p = p * r + 8.33345610e-3f;
  p = p * r + 4.16664568e-2f;
  p = p * r + 1.66666716e-1f;
  p = p * r + 5.0e-1f;
  p = p * (r * r) + r + 1.0f;
  return kiln_scale(p, n);
}
static inline kiln_vf abs(kiln_vf x) { return (kiln_vf)((kiln_vi)x & 0x7fffffff); }
static inline kiln_vf sqrt(kiln_vf x) {
  kiln_vf r;
  for (int i = 0; i < KILN_LANES; ++i) r[i] = __builtin_sqrtf(x[i]);
  return r;
}
static inline kiln_vf kiln_tanh(kiln_vf x) {
  const kiln_vf a = abs(x), z = x * x;
  kiln_vf p = z * -5.70498872745e-3f + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const kiln_vf large = 1.0f - 2.0f / (exp(a + a) + 1.0f);
  return a < 0.625f ? p * z * x + x : (kiln_vf)((kiln_vi)large | ((kiln_vi)x & (int)0x80000000));
}
static inline kiln_vf kiln_max(kiln_vf a, kiln_vf b) { return (a != a) | (b != b) ? a + b : kiln_greater(a, b); }
static inline kiln_vf kiln_min(kiln_vf a, kiln_vf b) { return (a != a) | (b != b) ? a + b : kiln_lesser(a, b); }
#else
#define KILN_VECTOR_BLOCKS 0
#endif
)";
}

}  // namespace kiln::kernel
