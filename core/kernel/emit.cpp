// Kernel IR -> GLSL / CUDA C. Expressions become SSA temporaries in dependency order; values are
// computed in a "compute type" (float for 16-bit floats, bool for bool, uint for u8) and converted
// on load and store, so results match the cpu reference's arithmetic.
#include "core/kernel/emit.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "core/support/error.h"

namespace kiln::kernel {
namespace {

bool glsl(Dialect d) { return d == Dialect::Glsl; }

// The type values of `t` are computed in.
std::string compute_type(DType t, Dialect d) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return "float";
    case DType::F64: return "double";
    case DType::I32: return "int";
    case DType::I64: return glsl(d) ? "int64_t" : "long long";
    case DType::U8: return glsl(d) ? "uint" : "unsigned int";
    case DType::Bool: return "bool";
  }
  return "float";
}

// The type elements of `t` are stored as in a buffer.
std::string storage_type(DType t, Dialect d) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F16: return glsl(d) ? "float16_t" : "__half";
    case DType::BF16: return glsl(d) ? "uint16_t" : "unsigned short";
    case DType::F64: return "double";
    case DType::I32: return "int";
    case DType::I64: return glsl(d) ? "int64_t" : "long long";
    case DType::U8: case DType::Bool: return glsl(d) ? "uint8_t" : "unsigned char";
  }
  return "float";
}

std::string load_text(DType t, const std::string& elem, Dialect d) {
  switch (t) {
    case DType::F16: return glsl(d) ? "float(" + elem + ")" : "__half2float(" + elem + ")";
    case DType::BF16:
      return glsl(d) ? "uintBitsToFloat(uint(" + elem + ") << 16)"
                     : "__uint_as_float((unsigned int)(" + elem + ") << 16)";
    case DType::U8: return compute_type(t, d) + "(" + elem + ")";
    case DType::Bool: return "(" + elem + " != " + storage_type(t, d) + "(0))";
    default: return elem;
  }
}

std::string store_text(DType t, const std::string& v, Dialect d) {
  switch (t) {
    case DType::F16: return glsl(d) ? "float16_t(" + v + ")" : "__float2half_rn(" + v + ")";
    case DType::BF16: return glsl(d) ? "kiln_to_bf16(" + v + ")" : "kiln_to_bf16(" + v + ")";
    case DType::U8: return storage_type(t, d) + "(" + v + ")";
    case DType::Bool: return storage_type(t, d) + "(" + v + " ? 1 : 0)";
    default: return v;
  }
}

std::string float_literal(double v, DType t, Dialect d) {
  std::string type = compute_type(t, d);
  if (std::isnan(v)) return "kiln_nan()";
  if (std::isinf(v)) return v > 0 ? type + "(kiln_inf())" : type + "(-kiln_inf())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (t == DType::F64) return glsl(d) ? s + "LF" : s;
  return glsl(d) ? s : s + "f";
}

std::string literal(double v, DType t, Dialect d) {
  if (is_floating(t)) return float_literal(v, t, d);
  if (t == DType::Bool) return v != 0 ? "true" : "false";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return compute_type(t, d) + "(" + buf + ")";
}

// Helper functions the generated code may call; GLSL lacks erf and has undefined pow/max edge cases.
const char* kGlslPrelude = R"(float kiln_inf() { return uintBitsToFloat(0x7f800000u); }
float kiln_nan() { return uintBitsToFloat(0x7fc00000u); }
float kiln_erf(float x) {  // Abramowitz-Stegun 7.1.26, |error| < 1.5e-7
  float s = sign(x), a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return s * y;
}
double kiln_erf(double x) { return double(kiln_erf(float(x))); }
float kiln_tanh(float x) { float e = exp(-2.0 * abs(x)); return sign(x) * (1.0 - e) / (1.0 + e); }
double kiln_tanh(double x) { return double(kiln_tanh(float(x))); }
float kiln_pow(float a, float b) {
  if (b == 0.0) return 1.0;
  if (a < 0.0 && b == floor(b)) { float m = pow(-a, b); return mod(b, 2.0) == 0.0 ? m : -m; }
  return pow(a, b);
}
double kiln_pow(double a, double b) { return double(kiln_pow(float(a), float(b))); }
uint kiln_pow(uint a, uint b) { uint r = 1u; while (b > 0u) { if ((b & 1u) != 0u) r *= a; a *= a; b >>= 1u; } return r; }
int kiln_pow(int a, int b) { if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0); int r = 1; while (b > 0) { if ((b & 1) != 0) r *= a; a *= a; b >>= 1; } return r; }
float kiln_max(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : max(a, b); }
float kiln_min(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : min(a, b); }
double kiln_max(double a, double b) { return (isnan(a) || isnan(b)) ? a + b : max(a, b); }
double kiln_min(double a, double b) { return (isnan(a) || isnan(b)) ? a + b : min(a, b); }
int kiln_max(int a, int b) { return max(a, b); }
int kiln_min(int a, int b) { return min(a, b); }
uint kiln_max(uint a, uint b) { return max(a, b); }
uint kiln_min(uint a, uint b) { return min(a, b); }
float kiln_rem(float a, float b, bool c_fmod) { float r = a - b * trunc(a / b); if (!c_fmod && r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b; return r; }
double kiln_rem(double a, double b, bool c_fmod) { double r = a - b * trunc(a / b); if (!c_fmod && r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b; return r; }
int kiln_rem(int a, int b, bool c_fmod) { int r = a - (a / b) * b; if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
uint kiln_rem(uint a, uint b, bool c_fmod) { return a % b; }
)";

const char* kGlslPreludeBf16 = R"(uint16_t kiln_to_bf16(float v) {
  uint u = floatBitsToUint(v);
  if (isnan(v)) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
)";

const char* kGlslPreludeI64 = R"(int64_t kiln_max(int64_t a, int64_t b) { return max(a, b); }
int64_t kiln_min(int64_t a, int64_t b) { return min(a, b); }
int64_t kiln_rem(int64_t a, int64_t b, bool c_fmod) { int64_t r = a - (a / b) * b; if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
int64_t kiln_pow(int64_t a, int64_t b) { if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0); int64_t r = 1; while (b > 0) { if ((b & 1) != 0) r *= a; a *= a; b >>= 1; } return r; }
)";

class Printer {
 public:
  Printer(const Kernel& k, const EmitOptions& o) : k_(k), o_(o), d_(o.dialect) {}

  EmittedKernel run() {
    header();
    line("void main() {");
    if (k_.rank == 0) line("  int gid = 0;");
    index_prologue();
    if (k_.kind == KernelKind::Reduce) reduce_loop();
    for (const Store& s : k_.stores) {
      std::string v = value(s.value);
      DType t = k_.buffers.at(size_t(s.buffer)).dtype;
      line("  b" + std::to_string(s.buffer) + "[gid] = " + store_text(t, v, d_) + ";",
           collect_origins(s.value));
    }
    line("}");
    EmittedKernel out;
    out.source = src_.str();
    out.line_origins = std::move(origins_);
    out.workgroup_size = o_.workgroup_size;
    return out;
  }

 private:
  void line(const std::string& text, const std::vector<int>& origins = {}) {
    std::string full = text;
    if (!origins.empty() && o_.describe_origin) {
      full += "  //";
      for (size_t i = 0; i < origins.size() && i < 4; ++i) full += " " + o_.describe_origin(origins[i]);
      if (origins.size() > 4) full += " (+" + std::to_string(origins.size() - 4) + " more)";
    }
    src_ << full << "\n";
    origins_.push_back(origins);
  }

  bool uses(DType t) const {
    for (const BufferSlot& b : k_.buffers)
      if (b.dtype == t) return true;
    return used_types_.count(t) != 0;
  }

  void scan(const ExprRef& e) {
    if (!scanned_.insert(e.get()).second) return;
    used_types_.insert(e->type);
    for (const ExprRef& a : e->args) scan(a);
  }

  void header() {
    for (const Store& s : k_.stores) scan(s.value);
    if (k_.body) scan(k_.body);
    line("#version 450");
    bool i64 = uses(DType::I64), f64 = uses(DType::F64);
    bool f16 = uses(DType::F16), bf16 = uses(DType::BF16), bytes = uses(DType::U8) || uses(DType::Bool);
    if (i64) line("#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require");
    if (f16 || bf16) line("#extension GL_EXT_shader_16bit_storage : require");
    if (f16) line("#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require");
    if (bf16) line("#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require");
    if (bytes) {
      line("#extension GL_EXT_shader_8bit_storage : require");
      line("#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require");
    }
    line("// kernel " + k_.name, k_.origins());
    line("layout(local_size_x = " + std::to_string(o_.workgroup_size) + ") in;");
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const BufferSlot& b = k_.buffers[i];
      std::string n = std::to_string(i);
      line("layout(std430, binding = " + n + ") " + (b.output ? "writeonly" : "readonly") +
           " buffer B" + n + " { " + storage_type(b.dtype, d_) + " b" + n + "[]; };");
    }
    if (k_.num_params > 0)
      line("layout(push_constant) uniform Params { int p[" + std::to_string(k_.num_params) + "]; } pc;");
    std::istringstream prelude(kGlslPrelude);
    for (std::string l; std::getline(prelude, l);) {
      if (!f64 && l.find("double") != std::string::npos) continue;
      line(l);
    }
    auto add_lines = [&](const char* text) {
      std::istringstream in(text);
      for (std::string l; std::getline(in, l);) line(l);
    };
    if (bf16) add_lines(kGlslPreludeBf16);
    if (i64) add_lines(kGlslPreludeI64);
  }

  void index_prologue() {
    if (k_.rank == 0) {
      line("  if (gl_GlobalInvocationID.x != 0u || gl_GlobalInvocationID.y != 0u) return;");
      return;
    }
    line("  int gid = int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * " +
         std::to_string(o_.workgroup_size) + "u);");
    std::string total = "pc.p[0]";
    for (int d = 1; d < k_.rank; ++d) total += " * pc.p[" + std::to_string(d) + "]";
    line("  if (gid >= " + total + ") return;");
    line("  int rest = gid;");
    for (int d = k_.rank - 1; d >= 0; --d) {
      std::string ds = std::to_string(d);
      if (d == 0) {
        line("  int c0 = rest;");
      } else {
        line("  int c" + ds + " = rest % pc.p[" + ds + "];");
        line("  rest = rest / pc.p[" + ds + "];");
      }
    }
  }

  void reduce_loop() {
    DType at = k_.accumulator_type;
    std::string ct = compute_type(at, d_);
    bool arg = k_.combiner == OpKind::ArgMax || k_.combiner == OpKind::ArgMin;
    DType vt = arg ? k_.body->type : at;
    std::string vct = compute_type(vt, d_);
    std::string init;
    switch (k_.combiner) {
      case OpKind::Sum: init = literal(0, at, d_); break;
      case OpKind::Prod: init = literal(1, at, d_); break;
      default: init = "";  // max/min/arg: start from the first element
    }
    std::string extent = value(k_.extent);
    if (arg) {
      line("  " + vct + " best = " + vct + "(0);");
      line("  " + ct + " acc = " + ct + "(0);");
    } else {
      line("  " + ct + " acc = " + (init.empty() ? ct + "(0)" : init) + ";");
    }
    line("  for (int r = 0; r < " + extent + "; ++r) {");
    indent_ = "    ";
    std::string v = value(k_.body);

    switch (k_.combiner) {
      case OpKind::Sum: line("    acc += " + ct + "(" + v + ");"); break;
      case OpKind::Prod: line("    acc *= " + ct + "(" + v + ");"); break;
      case OpKind::ReduceMax:
        line("    acc = r == 0 ? " + ct + "(" + v + ") : kiln_max(acc, " + ct + "(" + v + "));");
        break;
      case OpKind::ReduceMin:
        line("    acc = r == 0 ? " + ct + "(" + v + ") : kiln_min(acc, " + ct + "(" + v + "));");
        break;
      case OpKind::ArgMax: case OpKind::ArgMin: {
        std::string cmp = k_.combiner == OpKind::ArgMax ? ">" : "<";
        bool fl = is_floating(vt);
        // NaN wins and stays (first NaN), as the reference does.
        std::string better = "(" + v + " " + cmp + " best" + (fl ? " || (isnan(" + v + ") && !isnan(best))" : "") + ")";
        if (fl) better = "(!isnan(best) && " + better + ")";
        line("    if (r == 0 || " + better + ") { best = " + v + "; acc = " + ct + "(r); }");
        break;
      }
      default:
        throw Error("emit: unsupported reduction combiner " + std::string(op_name(k_.combiner)));
    }
    indent_ = "  ";
    // Temporaries made inside the loop are not visible after it.
    for (auto it = names_.begin(); it != names_.end();)
      it = loop_scoped_.count(it->first) ? names_.erase(it) : std::next(it);
    line("  }");
  }

  // Returns an expression string for e, emitting temporaries for Op and Load nodes.
  std::string value(const ExprRef& e) {
    auto it = names_.find(e.get());
    if (it != names_.end()) return it->second;
    std::string text;
    switch (e->kind) {
      case ExprKind::Const: return literal(e->value, e->type, d_);
      case ExprKind::Param: return "pc.p[" + std::to_string(e->index) + "]";
      case ExprKind::Coord: return e->index < 0 ? "gid" : "c" + std::to_string(e->index);
      case ExprKind::ReductionIndex: return "r";
      case ExprKind::Accumulator: return compute_type(e->type, d_) + "(acc)";
      case ExprKind::Load: {
        std::string off = value(e->args[0]);
        text = load_text(e->type, "b" + std::to_string(e->index) + "[" + off + "]", d_);
        break;
      }
      case ExprKind::Op: text = op_text(*e); break;
    }
    std::string name = "v" + std::to_string(next_++);
    line(indent_ + compute_type(e->type, d_) + " " + name + " = " + text + ";", e->origins);
    names_[e.get()] = name;
    if (indent_.size() > 2) loop_scoped_.insert(e.get());
    return name;
  }

  std::string op_text(const Expr& e) {
    std::vector<std::string> a;
    for (const ExprRef& x : e.args) a.push_back(value(x));
    std::string t = compute_type(e.type, d_);
    auto arg_t = [&](size_t i) { return compute_type(e.args.at(i)->type, d_); };
    auto one = [&] { return literal(1, e.type, d_); };
    if (e.type == DType::Bool) {  // bool arithmetic is logic, as in the reference
      switch (e.op) {
        case OpKind::Add: case OpKind::Maximum: return a[0] + " || " + a[1];
        case OpKind::Mul: case OpKind::Minimum: return a[0] + " && " + a[1];
        case OpKind::Sub: return a[0] + " != " + a[1];
        case OpKind::Abs: case OpKind::Relu: case OpKind::Sign: case OpKind::Neg: return a[0];
        default: break;
      }
    }
    if (e.type == DType::U8) {  // no abs/sign for unsigned in GLSL
      if (e.op == OpKind::Abs) return a[0];
      if (e.op == OpKind::Sign) return "(" + a[0] + " > 0u ? 1u : 0u)";
    }
    // Comparisons of bools compare them as 0/1.
    bool bool_args = !e.args.empty() && e.args[0]->type == DType::Bool;
    if (bool_args && (e.op == OpKind::Lt || e.op == OpKind::Le || e.op == OpKind::Gt || e.op == OpKind::Ge))
      for (std::string& x : a) x = "int(" + x + ")";
    // GLSL has no double transcendentals: compute those in float (f64 is then f32-accurate).
    auto call = [&](const char* name, const std::string& x) {
      if (e.type == DType::F64) return std::string("double(") + name + "(float(" + x + ")))";
      return std::string(name) + "(" + x + ")";
    };
    switch (e.op) {
      case OpKind::Neg: return "-" + a[0];
      case OpKind::Abs: return "abs(" + a[0] + ")";
      case OpKind::Exp: return call("exp", a[0]);
      case OpKind::Log: return call("log", a[0]);
      case OpKind::Sqrt: return "sqrt(" + a[0] + ")";
      case OpKind::Rsqrt: return one() + " / sqrt(" + a[0] + ")";
      case OpKind::Sin: return call("sin", a[0]);
      case OpKind::Cos: return call("cos", a[0]);
      case OpKind::Tanh: return "kiln_tanh(" + a[0] + ")";
      case OpKind::Sigmoid: return one() + " / (" + one() + " + " + call("exp", "-" + a[0]) + ")";
      case OpKind::Relu: return a[0] + " > " + literal(0, e.type, d_) + " ? " + a[0] + " : " + literal(0, e.type, d_);
      case OpKind::LeakyRelu:
        return a[0] + " >= " + literal(0, e.type, d_) + " ? " + a[0] + " : " +
               literal(e.attrs.get_float("alpha"), e.type, d_) + " * " + a[0];
      case OpKind::Elu:
        return a[0] + " > " + literal(0, e.type, d_) + " ? " + a[0] + " : " +
               literal(e.attrs.get_float("alpha"), e.type, d_) + " * (" + call("exp", a[0]) + " - " + one() + ")";
      case OpKind::Gelu:
        if (e.attrs.get_string("approximate") == "tanh")
          return literal(0.5, e.type, d_) + " * " + a[0] + " * (" + one() + " + kiln_tanh(" +
                 literal(0.7978845608028654, e.type, d_) + " * (" + a[0] + " + " +
                 literal(0.044715, e.type, d_) + " * " + a[0] + " * " + a[0] + " * " + a[0] + ")))";
        return literal(0.5, e.type, d_) + " * " + a[0] + " * (" + one() + " + kiln_erf(" + a[0] +
               " * " + literal(0.7071067811865476, e.type, d_) + "))";
      case OpKind::Silu: return a[0] + " / (" + one() + " + " + call("exp", "-" + a[0]) + ")";
      case OpKind::Erf: return "kiln_erf(" + a[0] + ")";
      case OpKind::Floor: return is_floating(e.type) ? "floor(" + a[0] + ")" : a[0];
      case OpKind::Ceil: return is_floating(e.type) ? "ceil(" + a[0] + ")" : a[0];
      case OpKind::Round: return is_floating(e.type) ? "roundEven(" + a[0] + ")" : a[0];
      case OpKind::Sign: return is_floating(e.type) ? "sign(" + a[0] + ")" : t + "(sign(" + a[0] + "))";
      case OpKind::Reciprocal: return one() + " / " + a[0];
      case OpKind::LogicalNot: return "!" + a[0];
      case OpKind::Cast:
        if (e.type == DType::Bool) return "(" + a[0] + " != " + arg_t(0) + "(0))";
        if (e.args[0]->type == DType::Bool) return "(" + a[0] + " ? " + one() + " : " + literal(0, e.type, d_) + ")";
        if (is_floating(e.args[0]->type) && e.type == DType::U8)  // saturate like the reference
          return "(isnan(" + a[0] + ") ? 0u : uint(clamp(" + a[0] + ", 0.0, 255.0)))";
        if (is_floating(e.args[0]->type) && e.type == DType::I32)
          return "(isnan(" + a[0] + ") ? 0 : int(clamp(" + a[0] + ", -2147483648.0, 2147483520.0)))";
        return t + "(" + a[0] + ")";
      case OpKind::Clip: {
        double lo = e.attrs.get_float("min"), hi = e.attrs.get_float("max");
        std::string v = a[0];
        if (!std::isinf(lo)) v = "kiln_max(" + v + ", " + literal(lo, e.type, d_) + ")";
        if (!std::isinf(hi)) v = "kiln_min(" + v + ", " + literal(hi, e.type, d_) + ")";
        return is_floating(e.type) ? "(isnan(" + a[0] + ") ? " + a[0] + " : " + v + ")" : v;
      }
      case OpKind::Add: return a[0] + " + " + a[1];
      case OpKind::Sub: return a[0] + " - " + a[1];
      case OpKind::Mul: return a[0] + " * " + a[1];
      case OpKind::Div: return a[0] + " / " + a[1];
      case OpKind::Pow: return "kiln_pow(" + a[0] + ", " + a[1] + ")";
      case OpKind::Maximum: return "kiln_max(" + a[0] + ", " + a[1] + ")";
      case OpKind::Minimum: return "kiln_min(" + a[0] + ", " + a[1] + ")";
      case OpKind::Mod:
        if (e.type == DType::I32 && e.attrs.has("fmod") && e.attrs.get_bool("fmod") &&
            e.args[0]->kind != ExprKind::Load)
          return a[0] + " % " + a[1];  // index math: both operands are non-negative
        return "kiln_rem(" + a[0] + ", " + a[1] + ", " + (e.attrs.get_bool("fmod") ? "true" : "false") + ")";
      case OpKind::Eq: return a[0] + " == " + a[1];
      case OpKind::Ne: return a[0] + " != " + a[1];
      case OpKind::Lt: return a[0] + " < " + a[1];
      case OpKind::Le: return a[0] + " <= " + a[1];
      case OpKind::Gt: return a[0] + " > " + a[1];
      case OpKind::Ge: return a[0] + " >= " + a[1];
      case OpKind::LogicalAnd: return a[0] + " && " + a[1];
      case OpKind::LogicalOr: return a[0] + " || " + a[1];
      case OpKind::LogicalXor: return a[0] + " != " + a[1];
      case OpKind::Where: return a[0] + " ? " + a[1] + " : " + a[2];
      default:
        throw Error("emit: op '" + std::string(op_name(e.op)) + "' has no expression form");
    }
  }

  const Kernel& k_;
  const EmitOptions& o_;
  Dialect d_;
  std::ostringstream src_;
  std::vector<std::vector<int>> origins_;
  std::map<const Expr*, std::string> names_;
  std::set<const Expr*> scanned_, loop_scoped_;
  std::set<DType> used_types_;
  std::string indent_ = "  ";
  int next_ = 0;
};

}  // namespace

EmittedKernel emit(const Kernel& kernel, const EmitOptions& options) {
  if (options.dialect != Dialect::Glsl)
    throw Error("emit: the CUDA dialect is not implemented yet (kernel " + kernel.name + ")");
  return Printer(kernel, options).run();
}

std::array<uint32_t, 3> launch_groups(int64_t elements, int workgroup_size) {
  int64_t groups = (std::max<int64_t>(elements, 1) + workgroup_size - 1) / workgroup_size;
  if (groups <= 65535) return {uint32_t(groups), 1, 1};
  int64_t y = (groups + 65534) / 65535;
  int64_t x = (groups + y - 1) / y;
  return {uint32_t(x), uint32_t(y), 1};
}

}  // namespace kiln::kernel
