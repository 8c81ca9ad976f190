// Shared pieces of `kiln run` and `kiln bench`: options, model and input loading, timed runs.
#include "tools/kiln/model_session.h"

#ifdef KILN_HAVE_ONNX

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/frontend/factories.h"
#include "core/support/error.h"

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
         "                     given get seeded random values (floats in [0, 1), integers 0) when\n"
         "                     their shape is static\n";
}

LoadedModel load_model(const ModelOptions& options,
                       const std::function<void(const std::string&)>& log) {
  if (options.model_path.empty()) throw Error("give MODEL.onnx");
  onnx::ImportOptions import_options;
  for (const auto& [name, file] : options.input_files)
    import_options.input_values[name] = onnx::read_tensor_file(file);
  LoadedModel loaded{onnx::import_onnx(options.model_path, import_options), {}};
  for (const onnx::ModelIO& io : loaded.model.inputs) {
    auto it = import_options.input_values.find(io.name);
    if (it != import_options.input_values.end()) {
      loaded.inputs.push_back(it->second);
      log("input " + io.name + ": " + io.type.str() + " from file");
      continue;
    }
    if (!is_static(io.type.shape))
      throw Error("input '" + io.name + "' has symbolic dims " + io.type.str() +
                  "; give it with --input " + io.name + "=file.pb");
    const uint64_t seed = loaded.inputs.size();  // a different stream per input
    Tensor t = is_floating(io.type.dtype)
                   ? rand(Dims(io.type.shape), Device::cpu(), seed).to(io.type.dtype)
                   : zeros(Dims(io.type.shape), io.type.dtype);
    loaded.inputs.push_back(onnx::tensor_to_literal(t));
    log("input " + io.name + ": " + io.type.str() + " random");
  }
  return loaded;
}

PreparedRun prepare(const onnx::ImportedModel& model, Device device, bool compiled, CompileMode mode) {
  PreparedRun run;
  run.device = device;
  run.compiled = compiled;
  const auto start = std::chrono::steady_clock::now();
  if (!compiled) {
    run.eager = std::make_unique<onnx::EagerModel>(model, device);
  } else {
    ProgramOptions options;
    options.reduce_overhead = mode == CompileMode::ReduceOverhead;
    options.max_autotune = mode == CompileMode::MaxAutotune;
    run.program = std::make_unique<onnx::CompiledModel>(model, device, options);
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
