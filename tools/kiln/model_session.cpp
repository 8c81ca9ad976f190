// Shared pieces of `kiln run` and `kiln bench`: options, model and input loading, timed runs.
#include "tools/kiln/model_session.h"

#ifdef KILN_HAVE_ONNX

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/frontend/factories.h"
#include "core/onnx/package.h"
#include "core/support/error.h"
#include "tools/kiln/cli_util.h"

namespace kiln::cli {

namespace {

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::vector<Tensor> to_device(const std::vector<Literal>& inputs, Device device) {
  std::vector<Tensor> out;
  for (const Literal& l : inputs) out.push_back(onnx::literal_to_tensor(l, device));
  return out;
}

onnx::ImportedModel read_logged_package(const std::string& path, const std::function<void(const std::string&)>& log) {
  onnx::Package package = onnx::read_package(path);
  size_t kernels = 0;
  if (package.model.artifacts)
    for (const Artifact& a : package.model.artifacts->all()) kernels += a.members.size();
  log("package: written by " + package.kiln + " for " + package.device + ", " + std::to_string(kernels) +
      " compiled kernels");
  return std::move(package.model);
}

}  // namespace

CompileMode parse_compile_mode(const std::string& text) {
  if (text == "default") return CompileMode::Default;
  if (text == "reduce-overhead") return CompileMode::ReduceOverhead;
  if (text == "max-autotune") return CompileMode::MaxAutotune;
  throw Error("--mode must be default, reduce-overhead or max-autotune, got '" + text + "'");
}

const char* compile_mode_name(CompileMode mode) {
  switch (mode) {
    case CompileMode::Default: return "default";
    case CompileMode::ReduceOverhead: return "reduce-overhead";
    case CompileMode::MaxAutotune: return "max-autotune";
  }
  return "?";
}

ProgramOptions program_options(CompileMode mode) {
  ProgramOptions options;
  options.reduce_overhead = mode == CompileMode::ReduceOverhead;
  options.max_autotune = mode == CompileMode::MaxAutotune;
  return options;
}

bool ModelOptions::parse(const std::vector<std::string>& args, size_t& i) {
  const std::string& a = args[i];
  auto value = [&]() -> std::string {
    if (i + 1 >= args.size()) throw Error(a + " needs a value");
    return args[++i];
  };
  if (a == "--backend") {
    backend = value();
  } else if (a == "--mode") {
    mode = parse_compile_mode(value());
  } else if (a == "--input") {
    const std::string v = value();
    const size_t eq = v.find('=');
    if (eq == std::string::npos) throw Error("--input needs name=file.pb, got '" + v + "'");
    input_files.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  } else if (a == "--shape") {
    const std::string v = value();
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
      throw Error("--shape needs input=AxBxC or symbol=N, got '" + v + "'");
    shapes.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  } else if (!a.empty() && a[0] != '-' && model_path.empty()) {
    model_path = a;
  } else {
    return false;
  }
  return true;
}

const char* ModelOptions::help() {
  return "  --backend B        cpu (default), ref, vulkan, vulkan:N, cuda, or all (ref and every other\n"
         "                     available device)\n"
         "  --mode M           how to compile: default, reduce-overhead (record the launches once,\n"
         "                     replay them) or max-autotune (time template tile variants, keep the\n"
         "                     fastest; persisted in the compile cache)\n"
         "  --input N=F.pb     the value of input N from a TensorProto file (repeatable); inputs not\n"
         "                     given get seeded random values (floats in [0, 1), integers 0)\n"
         "  --shape N=AxBxC    the size of input N for its random values, where the model declares\n"
         "                     symbolic dims (dynamic axes); or --shape S=K, the value of symbol S\n"
         "                     (as printed in the input's type, f32[batch,3,224,224]) for every input\n";
}

namespace {

std::vector<int64_t> parse_dims(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims = cli::parse_integers(text, 'x');
  if (dims.empty()) throw Error("--shape " + what + "=" + text + ": sizes are integers joined by x (4x3x224x224)");
  return dims;
}

ShapeChoices shape_choices(const ModelOptions& options, const std::vector<onnx::ModelIO>& inputs) {
  ShapeChoices c;
  for (const auto& [name, text] : options.shapes) {
    bool is_input = false;
    for (const onnx::ModelIO& io : inputs) is_input = is_input || io.name == name;
    if (is_input) {
      c.inputs[name] = parse_dims(text, name);
    } else {
      const std::vector<int64_t> v = parse_dims(text, name);
      if (v.size() != 1)
        throw Error("--shape " + name + "=" + text + ": '" + name +
                    "' is not an input of the model, so it names a symbol and takes one size");
      c.symbols[name] = v[0];
    }
  }
  return c;
}

// The sizes of one input's random values: its static dims, with symbolic ones from `choices`.
std::vector<int64_t> chosen_sizes(const onnx::ModelIO& io, const ShapeChoices& choices) {
  if (auto it = choices.inputs.find(io.name); it != choices.inputs.end()) {
    if (it->second.size() != io.type.rank())
      throw Error("--shape " + io.name + ": the input is " + io.type.str() + ", rank " +
                  std::to_string(io.type.rank()) + ", the shape given has rank " +
                  std::to_string(it->second.size()));
    for (size_t d = 0; d < io.type.rank(); ++d)
      if (io.type.shape[d].is_static() && io.type.shape[d].value() != it->second[d])
        throw Error("--shape " + io.name + ": dim " + std::to_string(d) + " of " + io.type.str() +
                    " is fixed at " + std::to_string(io.type.shape[d].value()));
    return it->second;
  }
  std::vector<int64_t> sizes;
  for (const SymInt& d : io.type.shape) {
    if (d.is_static()) {
      sizes.push_back(d.value());
      continue;
    }
    auto it = choices.symbols.find(d.str());
    if (it == choices.symbols.end())
      throw Error("input '" + io.name + "' has symbolic dims " + io.type.str() + "; give --shape " +
                  io.name + "=AxB..., --shape " + d.str() + "=N, or --input " + io.name + "=file.pb");
    sizes.push_back(it->second);
  }
  return sizes;
}

Literal random_input(const onnx::ModelIO& io, const std::vector<int64_t>& sizes, uint64_t seed) {
  Tensor t = is_floating(io.type.dtype) ? rand(Dims(sizes), Device::cpu(), seed).to(io.type.dtype)
                                        : zeros(Dims(sizes), io.type.dtype);
  return onnx::tensor_to_literal(t);
}

std::string sizes_text(const std::vector<int64_t>& sizes) {
  std::string s;
  for (int64_t d : sizes) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s.empty() ? "scalar" : s;
}

}  // namespace

LoadedModel load_model(const ModelOptions& options,
                       const std::function<void(const std::string&)>& log) {
  if (options.model_path.empty()) throw Error("give MODEL.onnx");
  // A package (kiln export) holds the model as imported then, with its hints and compiled code.
  const bool package = onnx::is_package(options.model_path);
  if (package && !options.input_files.empty())
    throw Error("--input does not apply to a package: its inputs were fixed when it was exported");
  onnx::ImportOptions import_options;
  std::map<std::string, std::string> files;
  for (const auto& [name, file] : options.input_files) {
    import_options.input_values[name] = onnx::read_tensor_file(file);
    files[name] = file;
  }
  LoadedModel loaded{package ? read_logged_package(options.model_path, log)
                             : onnx::import_onnx(options.model_path, import_options),
                     {}, {}, {}};
  loaded.shapes = shape_choices(options, loaded.model.inputs);
  // Symbolic dims take the chosen sizes as hints: the import decides shapes as for those sizes.
  bool symbolic = false;
  for (const onnx::ModelIO& io : loaded.model.inputs) {
    if (package) break;
    if (files.count(io.name) || is_static(io.type.shape)) continue;
    import_options.input_shapes[io.name] = chosen_sizes(io, loaded.shapes);
    symbolic = true;
  }
  if (symbolic) loaded.model = onnx::import_onnx(options.model_path, import_options);
  for (const onnx::ModelIO& io : loaded.model.inputs) {
    auto it = import_options.input_values.find(io.name);
    if (it != import_options.input_values.end()) {
      loaded.inputs.push_back(it->second);
      loaded.input_files.push_back(files[io.name]);
      log("input " + io.name + ": " + io.type.str() + " from file");
      continue;
    }
    const std::vector<int64_t> sizes = chosen_sizes(io, loaded.shapes);
    loaded.inputs.push_back(random_input(io, sizes, loaded.inputs.size()));  // a stream per input
    loaded.input_files.push_back("");
    log("input " + io.name + ": " + io.type.str() + " random" +
        (is_static(io.type.shape) ? "" : ", " + sizes_text(sizes)));
  }
  return loaded;
}

std::vector<Literal> inputs_at_size(const LoadedModel& loaded, const std::string& symbol, int64_t size) {
  std::vector<Literal> inputs;
  for (size_t i = 0; i < loaded.model.inputs.size(); ++i) {
    const onnx::ModelIO& io = loaded.model.inputs[i];
    if (!loaded.input_files[i].empty()) {
      inputs.push_back(loaded.inputs[i]);
      continue;
    }
    std::vector<int64_t> sizes = chosen_sizes(io, loaded.shapes);
    for (size_t d = 0; d < io.type.rank(); ++d)
      if (!io.type.shape[d].is_static() && io.type.shape[d].str() == symbol) sizes[d] = size;
    inputs.push_back(random_input(io, sizes, i));
  }
  return inputs;
}

PreparedRun prepare(const onnx::ImportedModel& model, Device device, bool compiled, CompileMode mode) {
  PreparedRun run;
  run.device = device;
  run.compiled = compiled;
  const auto start = std::chrono::steady_clock::now();
  if (!compiled) {
    run.eager = std::make_unique<onnx::EagerModel>(model, device);
  } else {
    run.program = std::make_unique<onnx::CompiledModel>(model, device, program_options(mode));
  }
  device.backend().synchronize();
  run.prepare_ms = elapsed_ms(start);
  return run;
}

std::vector<Literal> PreparedRun::run(const std::vector<Literal>& inputs) {
  const std::vector<Tensor> in = to_device(inputs, device);
  const std::vector<Tensor> out = program ? program->run(in) : eager->run(in);
  std::vector<Literal> host;
  for (const Tensor& t : out) host.push_back(onnx::tensor_to_literal(t));
  return host;
}

double PreparedRun::time_ms(const std::vector<Literal>& inputs, int warmup, int reps) {
  const std::vector<Tensor> in = to_device(inputs, device);
  auto once = [&] {
    std::vector<Tensor> out = program ? program->run(in) : eager->run(in);
    device.backend().synchronize();
  };
  for (int i = 0; i < warmup; ++i) once();
  std::vector<double> ms;
  for (int i = 0; i < std::max(reps, 1); ++i) {
    const auto start = std::chrono::steady_clock::now();
    once();
    ms.push_back(elapsed_ms(start));
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

const ProgramStats* PreparedRun::stats() const {
  return program ? &program->program().stats() : nullptr;
}

Difference difference(const std::vector<Literal>& got, const std::vector<Literal>& want) {
  Difference d;
  if (got.size() != want.size()) return {NAN, NAN};
  double scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].shape != want[i].shape) return {NAN, NAN};
    for (int64_t k = 0; k < want[i].numel(); ++k) {
      const double g = got[i].element(k), w = want[i].element(k);
      if (std::isnan(g) && std::isnan(w)) continue;
      if (std::isnan(g) != std::isnan(w)) return {NAN, NAN};
      if (std::isinf(w) && g == w) continue;
      d.abs = std::max(d.abs, std::fabs(g - w));
      scale = std::max(scale, std::fabs(w));
    }
  }
  d.rel = scale > 0 ? d.abs / scale : d.abs;
  return d;
}

}  // namespace kiln::cli

#endif  // KILN_HAVE_ONNX
