// Guard checks for compiled entries, with the reason text recompile logs show.
#include "core/frontend/guards.h"

#include <cctype>
#include <cstring>

#include "core/frontend/nn/module.h"

#include "core/ir/provenance.h"

namespace kiln::compile_detail {

namespace {

std::string arg_name(size_t i) { return "arg " + std::to_string(i); }

std::string type_on(const TensorType& type, const Device& device) {
  return type.str() + " on " + device.name();
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Whether `symbol` occurs in `text` as a whole name (s1 is not in s12).
bool mentions(const std::string& text, const std::string& symbol) {
  auto is_name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(symbol); at != std::string::npos; at = text.find(symbol, at + 1)) {
    size_t end = at + symbol.size();
    if ((at == 0 || !is_name_char(text[at - 1])) && (end == text.size() || !is_name_char(text[end])))
      return true;
  }
  return false;
}

const char* bool_text(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string scalar_text(DType kind, int64_t int_value, double float_value) {
  if (kind == DType::Bool) return int_value ? "true" : "false";
  if (kind == DType::I64) return std::to_string(int_value);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", float_value);
  return buf;
}

std::string describe_tensor(const TensorGuard& guard) {
  if (!guard.defined) return "an undefined tensor";
  return TensorType{guard.dtype, guard.dims}.str() + " on " + guard.device.name();
}

std::string describe_decision(const DecisionGuard& d) {
  std::string s = d.guard.lhs.str() + " " + guard_op_text(d.guard.op) + " " + d.guard.rhs.str();
  if (d.guard.where) {
    s += " at " + short_location(*d.guard.where);
  }
  if (!d.scope.empty()) s += " [" + d.scope + "]";
  return s;
}

std::string training_modes(const nn::Module& module) {
  std::string modes = module.is_training() ? "1" : "0";
  for (const auto& [name, child] : module.children()) modes += training_modes(*child);
  return modes;
}

std::optional<std::string> EntryGuards::check(std::span<const ArgView> args,
                                              const std::vector<ModuleTensors>& modules) const {
  // Symbol values of this call, filled as the tensor guards pass.
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgView& a = args[i];
    if (a.kind == ArgKind::Tensor) {
      const TensorGuard& g = tensors[i];
      const Tensor& t = *a.tensor;
      if (t.defined() != g.defined)
        return arg_name(i) + ": was " + describe_tensor(g) + ", now " +
               (t.defined() ? t.type().str() : "an undefined tensor");
      if (!g.defined) continue;
      if (t.dtype() != g.dtype)
        return arg_name(i) + ": dtype was " + std::string(dtype_name(g.dtype)) + ", now " +
               std::string(dtype_name(t.dtype()));
      if (t.device() != g.device)
        return arg_name(i) + ": device was " + g.device.name() + ", now " + t.device().name();
      const Shape& shape = t.shape();
      if (shape.size() != g.dims.size())
        return arg_name(i) + ": rank was " + std::to_string(g.dims.size()) + " " +
               shape_str(g.dims) + ", now " + std::to_string(shape.size()) + " " +
               shape_str(shape);
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t now = shape[d].hint();
        const SymInt& want = g.dims[d];
        if (want.is_static()) {
          if (want.value() != now)
            return arg_name(i) + " dim " + std::to_string(d) + ": size was " +
                   std::to_string(want.value()) + ", now " + std::to_string(now) + " (shape " +
                   shape_str(g.dims) + " -> " + shape_str(shape) + ")";
          continue;
        }
        // Sizes 0 and 1 change broadcasting and emptiness, so they are never symbolic.
        if (now < 2)
          return arg_name(i) + " dim " + std::to_string(d) + " (" + want.str() + "): size " +
                 std::to_string(now) + " is specialized; symbolic dims cover sizes >= 2";
        bindings[want.str()] = now;
      }
    } else if (a.kind == ArgKind::Scalar) {
      const ScalarGuard& g = scalars[i];
      bool same = a.scalar_kind == g.kind &&
                  (is_floating(g.kind) ? same_bits(a.scalar_float, g.float_value)
                                       : a.scalar_int == g.int_value);
      if (!same)
        return arg_name(i) + " (scalar): value was " +
               scalar_text(g.kind, g.int_value, g.float_value) + ", now " +
               scalar_text(a.scalar_kind, a.scalar_int, a.scalar_float);
    } else if (a.kind == ArgKind::Module) {
      if (modules[i].size() != module_sizes[i])
        return arg_name(i) + " (module): has " + std::to_string(modules[i].size()) +
               " parameters and buffers, the trace saw " + std::to_string(module_sizes[i]);
      if (i < module_modes.size() && training_modes(*a.module) != module_modes[i])
        return arg_name(i) + " (module): its training mode changed (train() or eval()) since the trace";
    }
  }

  for (const CaptureSource& c : captures) {
    if (c.grad_of >= 0) continue;  // read from its parameter, whose gradient is guarded below
    if (c.from_module) {
      const auto& [name, slot] = modules[c.arg][c.index];
      const Tensor& t = *slot;
      if (name != c.name)
        return arg_name(c.arg) + " (module): tensor " + std::to_string(c.index) + " was '" +
               c.name + "', now '" + name + "'";
      if (!t.defined() || t.device() != c.device || t.dtype() != c.type.dtype ||
          t.sizes() != static_dims(c.type.shape))
        return arg_name(c.arg) + " (module): '" + c.name + "' was " + type_on(c.type, c.device) +
               ", now " + (t.defined() ? type_on(t.type(), t.device()) : "undefined");
    } else if (c.owned_elsewhere && c.fixed.impl_ptr().use_count() == 1) {
      // Only the trace still holds it: its owner replaced it (load_state_dict, Module::to) or
      // dropped it, so the trace's copy is stale. Retracing captures the current tensor.
      return "captured tensor '" + c.name + "' (" + type_on(c.type, c.device) +
             ") was replaced or released by its owner (load_state_dict or Module::to on a module "
             "the function reaches without taking it as an argument?)";
    }
  }

  for (size_t k = 0; k < captures.size(); ++k) {
    const CaptureSource& c = captures[k];
    if (c.grad_defined < 0) continue;
    const bool defined_now = capture_tensor(k, modules).impl().grad != nullptr;
    if (defined_now == (c.grad_defined == 1)) continue;
    const std::string which =
        c.from_module ? arg_name(c.arg) + " (module) '" + c.name + "'" : "'" + c.name + "'";
    return "the gradient of " + which + " was " + (c.grad_defined ? "defined" : "undefined") +
           " when compiled, now " + (c.grad_defined ? "undefined" : "defined") +
           "; the step's backward adds to it, as an eager backward does (zero_grad() in the step starts "
           "it from nothing at every call)";
  }

  for (const DecisionGuard& d : decisions) {
    int64_t lhs, rhs;
    try {
      lhs = d.guard.lhs.evaluate(bindings);
      rhs = d.guard.rhs.evaluate(bindings);
    } catch (const Error& e) {
      return "shape decision " + describe_decision(d) + " cannot be evaluated: " + e.what();
    }
    bool now = decide(lhs, d.guard.op, rhs);
    if (now != d.guard.result) {
      std::string values, text = d.guard.lhs.str() + " " + d.guard.rhs.str();
      for (const auto& [name, value] : bindings) {
        if (!mentions(text, name)) continue;
        if (!values.empty()) values += ", ";
        values += name + "=" + std::to_string(value);
      }
      return "shape decision " + describe_decision(d) + " was " + bool_text(d.guard.result) +
             ", now " + bool_text(now) + " (" + values + ")";
    }
  }
  return std::nullopt;
}

std::vector<Tensor> EntryGuards::program_inputs(std::span<const ArgView> args,
                                                const std::vector<ModuleTensors>& modules) const {
  std::vector<Tensor> inputs;
  inputs.reserve(args.size() + captures.size());
  for (const ArgView& a : args)
    if (a.kind == ArgKind::Tensor && a.tensor->defined()) inputs.push_back(*a.tensor);
  for (size_t k = 0; k < captures.size(); ++k) inputs.push_back(capture_tensor(k, modules));
  return inputs;
}

Tensor EntryGuards::capture_tensor(size_t k, const std::vector<ModuleTensors>& modules) const {
  const CaptureSource& c = captures[k];
  if (c.grad_of >= 0) return Tensor(capture_tensor(size_t(c.grad_of), modules).impl().grad);
  return c.from_module ? *modules[c.arg][c.index].second : c.fixed;
}

}  // namespace kiln::compile_detail
