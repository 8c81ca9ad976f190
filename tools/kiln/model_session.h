// What `kiln run` and `kiln bench` share: their common options, reading a model and its inputs, and
// running it on one device eagerly or compiled, timed.
#pragma once

#ifdef KILN_HAVE_ONNX

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/onnx/onnx_import.h"
#include "core/runtime/program.h"

namespace kiln::cli {

enum class CompileMode { Default, ReduceOverhead, MaxAutotune };
CompileMode parse_compile_mode(const std::string& text);  // "default", "reduce-overhead", ...
const char* compile_mode_name(CompileMode mode);
ProgramOptions program_options(CompileMode mode);  // reduce_overhead or max_autotune set by the mode

// Options both commands take. parse() consumes the ones it knows at args[i] (advancing i past a
// value) and returns false for anything else.
struct ModelOptions {
  std::string model_path;
  std::string backend = "cpu";
  CompileMode mode = CompileMode::Default;
  std::vector<std::pair<std::string, std::string>> input_files;  // name, file.pb
  std::vector<std::pair<std::string, std::string>> shapes;       // --shape name=4x3x224x224 | sym=4

  bool parse(const std::vector<std::string>& args, size_t& i);
  static const char* help();  // the lines describing these options
};

// Sizes for inputs with symbolic dims: a whole input's shape, or one symbol's value.
struct ShapeChoices {
  std::map<std::string, std::vector<int64_t>> inputs;  // --shape input_0=4x3x224x224
  std::map<std::string, int64_t> symbols;              // --shape batch=4
};

// The model and one set of host inputs: from --input files, else seeded random values (floats in
// [0, 1), integers 0) of the input's static shape or the one --shape gives. The model is imported
// with those sizes as its symbols' hints. `log` receives one line per input.
struct LoadedModel {
  onnx::ImportedModel model;
  std::vector<Literal> inputs;  // bind model.inputs in order
  ShapeChoices shapes;
  std::vector<std::string> input_files;  // by input: the file its value came from, or ""
};
LoadedModel load_model(const ModelOptions& options, const std::function<void(const std::string&)>& log);

// The loaded model's inputs with `symbol` set to `size`: file inputs as read, the others seeded
// random values of their sizes (kiln bench --sizes).
std::vector<Literal> inputs_at_size(const LoadedModel& loaded, const std::string& symbol, int64_t size);

// The model ready to run on one device, eagerly (the interpreter) or compiled (pass pipeline,
// fused kernels, memory plan), with the time the preparation took.
struct PreparedRun {
  Device device = Device::cpu();
  bool compiled = false;
  double prepare_ms = 0;  // weight upload (eager) or compile (pass pipeline, kernels, plan)
  std::unique_ptr<onnx::EagerModel> eager;
  std::unique_ptr<onnx::CompiledModel> program;

  std::vector<Literal> run(const std::vector<Literal>& inputs);  // waits for the device
  // The median wall time of `reps` runs after `warmup` untimed ones, in ms.
  double time_ms(const std::vector<Literal>& inputs, int warmup, int reps);
  const ProgramStats* stats() const;  // compiled only
};
PreparedRun prepare(const onnx::ImportedModel& model, Device device, bool compiled, CompileMode mode);

// Max |got - want| and max |got - want| / max|want| over every output (NaN when shapes differ or a
// value is NaN where the other is not).
struct Difference {
  double abs = 0, rel = 0;
};
Difference difference(const std::vector<Literal>& got, const std::vector<Literal>& want);

}  // namespace kiln::cli

#endif  // KILN_HAVE_ONNX
