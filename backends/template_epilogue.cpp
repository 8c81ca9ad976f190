// A template's epilogue in its own dialect (GLSL or CUDA C): one line per step, each the kernel
// emitter's expression for the op, so a fused template computes exactly what the generic kernel
// would.
#include "backends/template_epilogue.h"

#include "backends/template_util.h"

#include "core/kernel/emit_text.h"
#include "core/kernel/emit_prelude.h"
#include "core/support/error.h"

namespace kiln::templates {
namespace {

constexpr const char* kHook = "// KILN_EPILOGUE\n";

// The result dim an operand may run along: conv's and pooling's channels, a matmul's columns.
std::optional<size_t> channel_dim(OpKind kind, size_t rank) {
  switch (kind) {
    case OpKind::Conv: case OpKind::MaxPool: case OpKind::AvgPool: return rank >= 2 ? std::optional<size_t>(1) : std::nullopt;
    case OpKind::MatMul: case OpKind::Linear: case OpKind::Gemm:
      return rank >= 1 ? std::optional<size_t>(rank - 1) : std::nullopt;
    default: return std::nullopt;
  }
}

// Steps whose result is a float like their input: the epilogue's running value stays a float.
bool keeps_float(OpKind kind) {
  switch (kind) {
    case OpKind::Cast: case OpKind::LogicalNot: case OpKind::Eq: case OpKind::Ne: case OpKind::Lt:
    case OpKind::Le: case OpKind::Gt: case OpKind::Ge: case OpKind::LogicalAnd: case OpKind::LogicalOr:
    case OpKind::LogicalXor: case OpKind::Where:
      return false;
    default:
      return true;
  }
}

// How EPILOGUE reads an operand: its one element, the element of the result's channel, or the
// element at the result's index.
std::optional<std::string> operand_index(const BufferView& operand, const BufferView& result, size_t channel) {
  const std::optional<OperandSpread> spread = operand_spread(operand, result, channel);
  if (!spread || operand.offset != 0) return std::nullopt;  // bound from its buffer's start
  if (*spread == OperandSpread::Full) return "index";
  return *spread == OperandSpread::AlongChannel ? "channel" : "0";
}

}  // namespace

std::optional<TemplateLaunch> plan_template_epilogue(const OpRun& fused, std::span<const EpilogueStep> epilogue,
                                                     const std::function<std::optional<TemplateLaunch>(const OpRun&)>& plan) {
  if (fused.outputs.size() != 1 || fused.outputs[0].dtype != DType::F32) return std::nullopt;
  const BufferView& result = fused.outputs[0];
  const std::optional<size_t> channel = channel_dim(fused.kind, result.dims.size());
  if (!channel) return std::nullopt;
  size_t operands = 0;
  for (const EpilogueStep& step : epilogue) operands += step.operand >= 0;
  const size_t anchor_inputs = fused.inputs.size() - operands;
  std::optional<TemplateLaunch> launch =
      plan(OpRun{fused.kind, fused.attrs, fused.inputs.first(anchor_inputs), fused.outputs, fused.max_autotune});
  const size_t hook = launch ? launch->source.find(kHook) : std::string::npos;
  if (hook == std::string::npos || (launch->language != "glsl" && launch->language != "cuda")) return std::nullopt;
  const bool cuda = launch->language == "cuda";

  // The anchor's output slot follows the epilogue's operands in the fused run.
  for (int& slot : launch->args)
    if (slot >= int(anchor_inputs)) slot += int(operands);
  // GLSL: each operand is a storage buffer after the template's bindings. CUDA: a kernel parameter
  // after the output pointer (KILN_EPILOGUE_PARAMS), passed on to the epilogue function.
  const kernel::Dialect dialect = cuda ? kernel::Dialect::Cuda : kernel::Dialect::Glsl;
  std::string declarations, params, names, body, suffix;
  for (const EpilogueStep& step : epilogue) {
    if (!keeps_float(step.kind)) return std::nullopt;
    std::vector<std::string> args = {"v"};
    if (step.operand >= 0) {
      std::optional<std::string> index = operand_index(fused.inputs[size_t(step.operand)], result, *channel);
      if (!index) return std::nullopt;
      const std::string name = "kiln_operand" + std::to_string(launch->args.size());
      if (cuda) {
        params += ", const float* " + name;
        names += ", " + name;
      } else {
        declarations += "layout(std430, binding = " + std::to_string(launch->args.size()) + ") readonly buffer Buf_" +
                        name + " { float " + name + "[]; };\n";
      }
      launch->args.push_back(step.operand);
      const std::string read = name + "[" + *index + "]";
      args.insert(step.operand_first ? args.begin() : args.end(), read);
    }
    try {
      body += "  v = " +
              kernel::op_expression(step.kind, *step.attrs, DType::F32, std::vector<DType>(args.size(), DType::F32), args,
                                    dialect) +
              ";\n";
    } catch (const Error&) {
      return std::nullopt;  // an op without an expression form
    }
    suffix += "_" + std::string(op_name(step.kind));
  }
  std::string text = declarations;
  if (cuda) text += kernel::prelude_cuda_compat();
  text += kernel::prelude_macros(dialect);
  text += kernel::prelude_common();
  text += std::string(cuda ? "__device__ inline " : "") + "float kiln_epilogue(float v, int index, int channel" + params +
          ") {\n" + body + "  return v;\n}\n";
  text += "#define EPILOGUE(v, index, channel) kiln_epilogue(v, index, channel" + names + ")\n";
  if (cuda) text += "#define KILN_EPILOGUE_PARAMS " + params + "\n";
  launch->source.insert(hook + std::string(kHook).size(), text);
  launch->name += suffix;
  return launch;
}

}  // namespace kiln::templates
