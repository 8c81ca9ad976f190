// kiln run: imports an ONNX model, runs it on the chosen device(s) and prints each output's type
// and first values; with several devices, also the max abs difference from the first (cpu).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/frontend/factories.h"
#include "core/support/error.h"
#include "core/trace/bundle.h"
#include "tools/kiln/cli_util.h"
#ifdef KILN_HAVE_ONNX
#include "core/onnx/onnx_import.h"
#endif

namespace kiln::cli {

namespace {

const char* kHelp =
    "usage: kiln run MODEL.onnx [--backend cpu|vulkan|cuda|all] [--input name=file.pb ...]\n"
    "                [--debug-dir DIR]\n"
    "\n"
    "Imports MODEL.onnx, runs it with the graph interpreter and prints every output's type and\n"
    "first values. Inputs come from TensorProto files (--input, repeatable); inputs not given\n"
    "are filled with seeded random values (floats in [0, 1), integers 0) when their shape is\n"
    "static. With several devices (--backend all) each output's max abs difference from the\n"
    "first device (cpu) is printed too. --debug-dir writes a trace bundle of the imported graph\n"
    "(one kernel per node, each line of generated code tagged with its ONNX node) for kiln-debug.\n";

#ifdef KILN_HAVE_ONNX
std::string first_values(const Literal& lit, int64_t count) {
  std::string s;
  for (int64_t i = 0; i < std::min(count, lit.numel()); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", lit.element(i));
    s += buf;
  }
  if (lit.numel() > count) s += ", ...";
  return "[" + s + "]";
}
#endif

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  std::string backend = "cpu", model_path, debug_dir;
  std::vector<std::pair<std::string, std::string>> input_files;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Error(a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (a == "--backend") {
      backend = value();
    } else if (a == "--debug-dir") {
      debug_dir = value();
    } else if (a == "--input") {
      const std::string v = value();
      const size_t eq = v.find('=');
      if (eq == std::string::npos) throw Error("--input needs name=file.pb, got '" + v + "'");
      input_files.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln run: unknown option '%s'\n\n%s", a.c_str(), kHelp);
      return 2;
    } else if (model_path.empty()) {
      model_path = a;
    } else {
      std::fprintf(stderr, "kiln run: one model at a time\n\n%s", kHelp);
      return 2;
    }
  }
  if (model_path.empty()) {
    std::fprintf(stderr, "kiln run: give MODEL.onnx\n\n%s", kHelp);
    return 2;
  }
#ifndef KILN_HAVE_ONNX
  throw Error("kiln was built without ONNX support; install libprotobuf-dev, protobuf-compiler "
              "and libonnx-dev, then reconfigure");
#else
  onnx::ImportOptions options;
  for (const auto& [name, file] : input_files)
    options.input_values[name] = onnx::read_tensor_file(file);
  const onnx::ImportedModel model = onnx::import_onnx(model_path, options);
  std::printf("model %s: opset %lld, %zu nodes, %zu inputs, %zu weights%s\n", model_path.c_str(),
              (long long)model.opset, model.graph.num_nodes(), model.inputs.size(),
              model.captured.size(), model.producer.empty() ? "" : (", from " + model.producer).c_str());
  if (!debug_dir.empty()) {
    trace::MakeBundleOptions bundle_options;
    bundle_options.name = std::filesystem::path(model_path).stem().string();
    trace::write_bundle(debug_dir, trace::make_bundle(model.graph, bundle_options));
    std::printf("debug bundle: %s (open it with kiln-debug %s)\n", debug_dir.c_str(), debug_dir.c_str());
  }
  std::vector<Literal> inputs;
  for (const onnx::ModelIO& io : model.inputs) {
    auto it = options.input_values.find(io.name);
    if (it != options.input_values.end()) {
      inputs.push_back(it->second);
      std::printf("input %s: %s from file\n", io.name.c_str(), io.type.str().c_str());
      continue;
    }
    if (!is_static(io.type.shape))
      throw Error("input '" + io.name + "' has symbolic dims " + io.type.str() +
                  "; give it with --input " + io.name + "=file.pb");
    const uint64_t seed = inputs.size();  // a different stream per input
    Tensor t = is_floating(io.type.dtype) ? rand(Dims(io.type.shape), Device::cpu(), seed).to(io.type.dtype)
                                          : zeros(Dims(io.type.shape), io.type.dtype);
    inputs.push_back(onnx::tensor_to_literal(t));
    std::printf("input %s: %s random\n", io.name.c_str(), io.type.str().c_str());
  }
  std::vector<Literal> reference;
  for (const Device& device : parse_backends(backend)) {
    std::vector<Tensor> in;
    for (const Literal& l : inputs) in.push_back(onnx::literal_to_tensor(l, device));
    const auto start = std::chrono::steady_clock::now();
    std::vector<Tensor> out = onnx::run_model(model, in, device);
    std::vector<Literal> host;
    for (const Tensor& t : out) host.push_back(onnx::tensor_to_literal(t));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s (%s): %.2f ms\n", device.name().c_str(), device.description().c_str(), ms);
    for (size_t i = 0; i < host.size(); ++i) {
      std::printf("  %s: %s%s %s", model.outputs[i].name.c_str(),
                  std::string(dtype_name(host[i].dtype)).c_str(),
                  shape_str(make_shape(host[i].shape)).c_str(), first_values(host[i], 8).c_str());
      if (!reference.empty() && reference[i].numel() == host[i].numel()) {
        double err = 0;
        for (int64_t k = 0; k < host[i].numel(); ++k)
          err = std::max(err, std::fabs(host[i].element(k) - reference[i].element(k)));
        std::printf("  max abs diff vs cpu %.3g", err);
      }
      std::printf("\n");
    }
    if (reference.empty()) reference = host;
  }
  return 0;
#endif
}

}  // namespace kiln::cli
