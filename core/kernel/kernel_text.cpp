// print_kernel: kernel IR as text, each expression node once, in the order its uses need it.
#include "core/kernel/kernel_text.h"

#include <cstdio>
#include <map>

namespace kiln::kernel {
namespace {

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

class KernelPrinter {
 public:
  explicit KernelPrinter(const std::function<std::string(int)>& describe) : describe_(describe) {}

  std::string operand(const ExprRef& e) {
    if (!e) return "<none>";
    // Leaves print inline: numbering them would only add lines.
    switch (e->kind) {
      case ExprKind::Const:
        return number_text(e->value) + ":" + std::string(dtype_name(e->type));
      case ExprKind::Param:
        return "p" + std::to_string(e->index);
      case ExprKind::Coord:
        return e->index < 0 ? "linear" : "coord" + std::to_string(e->index);
      case ExprKind::ReductionIndex:
        return "r";
      case ExprKind::Accumulator:
        return "acc";
      default:
        break;
    }
    auto it = names_.find(e.get());
    if (it != names_.end()) return it->second;
    std::vector<std::string> args;
    for (const ExprRef& a : e->args) args.push_back(operand(a));
    std::string line;
    if (e->kind == ExprKind::Load) {
      line = "load b" + std::to_string(e->index) + "[" + (args.empty() ? "" : args[0]) + "]";
    } else {
      line = std::string(op_name(e->op));
      for (size_t i = 0; i < args.size(); ++i) line += (i ? ", " : " ") + args[i];
    }
    line += " : " + std::string(dtype_name(e->type));
    std::string name = "e" + std::to_string(names_.size());
    line = "  " + name + " = " + line;
    if (!e->origins.empty()) {
      if (line.size() < 48) line.resize(48, ' ');
      line += "  <-";
      for (size_t i = 0; i < e->origins.size(); ++i)
        line += (i ? ", " : " ") + (describe_ ? describe_(e->origins[i]) : "node " + std::to_string(e->origins[i]));
    }
    lines_ += line + "\n";
    names_.emplace(e.get(), name);
    return name;
  }
  std::string take_lines() { return std::move(lines_); }

 private:
  const std::function<std::string(int)>& describe_;
  std::map<const Expr*, std::string> names_;
  std::string lines_;
};

}  // namespace

std::string print_kernel(const LoweredKernel& lowered, const std::function<std::string(int)>& describe_origin) {
  const Kernel& k = lowered.kernel;
  std::string params;
  for (const SymInt& p : lowered.params) params += (params.empty() ? "" : ", ") + p.str();
  const char* kind = k.kind == KernelKind::Reduce ? "reduce" : k.segments.empty() ? "pointwise" : "horizontal";
  std::string out =
      "kernel " + k.name + " " + kind + "(rank " + std::to_string(k.rank) + ", params [" + params + "])\n";
  for (size_t b = 0; b < k.buffers.size(); ++b)
    out += "  b" + std::to_string(b) + ": " + std::string(dtype_name(k.buffers[b].dtype)) +
           (k.buffers[b].output ? " out" : " in") + "\n";
  KernelPrinter printer(describe_origin);
  std::string tail;
  if (k.kind == KernelKind::Reduce) {
    std::string extent = printer.operand(k.extent);
    std::string body = printer.operand(k.body);
    tail += "  reduce " + std::string(op_name(k.combiner)) + " over r < " + extent + " of " + body +
            " into acc : " + std::string(dtype_name(k.accumulator_type)) + "\n";
    out += printer.take_lines() + tail;
    tail.clear();
  }
  auto print_stores = [&](const std::vector<Store>& stores) {
    for (const Store& s : stores) {
      std::string value = printer.operand(s.value);
      out += printer.take_lines();
      out += "  store b" + std::to_string(s.buffer) + "[linear] = " + value + "\n";
    }
  };
  print_stores(k.stores);
  for (size_t i = 0; i < k.segments.size(); ++i) {
    const Segment& segment = k.segments[i];
    const std::string size = "p" + std::to_string(segment.size);
    const std::string start = "p" + std::to_string(segment.start);
    const std::string range = segment.start < 0 ? "[0, " + size : "[" + start + ", " + start + " + " + size;
    out += "  segment " + std::to_string(i) + " " + range + "):\n";
    print_stores(segment.stores);
  }
  return out;
}

}  // namespace kiln::kernel
