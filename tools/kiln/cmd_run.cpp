// kiln run: imports an ONNX model, runs it on the chosen device(s), eagerly and/or compiled, prints
// each output's first values and one table comparing every run with the cpu reference (the
// cross-backend view: backend, device, error, eager and compiled times, kernels).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/runtime/accuracy.h"
#include "core/runtime/planned_program.h"
#include "core/support/error.h"
#include "core/trace/bundle.h"
#include "core/trace/program_bundle.h"
#include "tools/kiln/cli_util.h"
#include "tools/kiln/model_session.h"

namespace kiln::cli {

namespace {

const char* kHelp =
    "usage: kiln run MODEL.onnx [--backend cpu|ref|vulkan|cuda|all] [--eager|--compile]\n"
    "                [--mode default|reduce-overhead|max-autotune] [--input name=file.pb ...]\n"
    "                [--reps N] [--debug-dir DIR] [--accuracy]\n"
    "\n"
    "Imports MODEL.onnx and runs it on each device, eagerly (one kernel per op, the interpreter)\n"
    "and compiled (pass pipeline, fused kernels, memory plan); --eager or --compile keeps one.\n"
    "Prints every output's type and first values, then one row per device: max abs and max rel\n"
    "error against the cpu reference's eager outputs (rel = max|diff| / max|reference|), eager\n"
    "and compiled ms (median of --reps runs after one warm-up, inputs already on the device) and\n"
    "the compiled program's kernel count. Exit code 1 when a row's rel error is above 1e-3.\n"
    "  --eager, --compile  run only that way (default: both)\n"
    "  --reps N           timed runs per way (default 3)\n"
    "  --debug-dir DIR    write a trace bundle for kiln-debug: the compiled program of the first\n"
    "                     non-cpu device when compiling (fused kernels, generated code, SPIR-V, memory\n"
    "                     plan, device times), else the imported graph\n"
    "  --accuracy         on each non-cpu device, run every compiled kernel (every op, with\n"
    "                     --eager) on inputs from the cpu reference, compare it with the reference\n"
    "                     (rtol 1e-3, atol 1e-4), print one row per kernel and name the first one\n"
    "                     past tolerance with its source lines (in the bundle too); exit code 1\n"
    "                     when one is\n";

constexpr double kRelTolerance = 1e-3;
constexpr double kAccuracyRtol = 1e-3, kAccuracyAtol = 1e-4;

// --debug-dir and --accuracy for one prepared run: the bundle of what ran (a compiled program's
// kernels, else the graph's ops) and the per-kernel (or per-op) comparison with the cpu reference.
// Returns false when a kernel is past tolerance.
bool inspect(PreparedRun& run, const onnx::ImportedModel& model, const std::vector<Literal>& inputs,
             const std::string& name, const std::string& debug_dir, bool accuracy) {
  std::vector<Tensor> in;
  for (const Literal& l : inputs) in.push_back(onnx::literal_to_tensor(l, run.device));
  const bool reference = run.device == Device::cpu();
  auto* planned = run.program ? dynamic_cast<PlannedProgram*>(&run.program->program()) : nullptr;
  trace::Bundle bundle;
  bool ok = true;
  if (planned) {
    const std::vector<DeviceTensor> args = device_tensors(run.program->bind(in));
    std::vector<LaunchTiming> timings;
    planned->run_profiled(args, timings);
    bundle = trace::make_program_bundle(run.program->graph(), *planned, timings, {.name = name});
    if (accuracy) {
      KernelAccuracyReport report = check_kernel_accuracy(*planned, run.program->graph(), args,
                                                          kAccuracyRtol, kAccuracyAtol);
      std::printf("accuracy of %s's compiled kernels vs the cpu reference:\n%s",
                  run.device.name().c_str(), report.str().c_str());
      trace::record_accuracy(bundle, report);
      ok = report.ok();
    }
  } else {
    const Graph& graph = run.program ? run.program->graph() : model.graph;
    trace::MakeBundleOptions options;
    options.name = name;
    bundle = trace::make_bundle(graph, options);
    if (accuracy && !reference) {
      std::vector<Tensor> args = in;
      for (const Tensor& w : model.captured) args.push_back(w.to(run.device));
      AccuracyReport report =
          check_accuracy(model.graph, device_tensors(args), run.device, kAccuracyRtol, kAccuracyAtol);
      std::printf("accuracy of %s's ops vs the cpu reference:\n%s", run.device.name().c_str(),
                  report.str().c_str());
      ok = report.ok();
    }
  }
  if (!debug_dir.empty()) {
    bundle.device = run.device.name();
    if (run.program) trace::record_passes(bundle, run.program->passes());
    trace::write_bundle(debug_dir, bundle);
    std::printf("debug bundle: %s (open it with kiln-debug %s)\n", debug_dir.c_str(), debug_dir.c_str());
  }
  return ok;
}

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

struct Row {
  Device device = Device::cpu();
  std::string description;
  Difference error;
  double eager_ms = -1, compiled_ms = -1;
  int64_t kernels = -1;
  std::string failure;
};

void print_table(const std::vector<Row>& rows) {
  std::printf("\n%-8s %-10s %-32s %10s %10s %10s %11s %8s\n", "backend", "device", "name",
              "max abs", "max rel", "eager ms", "compiled ms", "kernels");
  for (const Row& r : rows) {
    std::string name = r.description.size() > 32 ? r.description.substr(0, 29) + "..." : r.description;
    std::printf("%-8s %-10s %-32s ", backend_kind_name(r.device.kind()), r.device.name().c_str(),
                name.c_str());
    if (!r.failure.empty()) {
      std::printf("failed: %s\n", r.failure.c_str());
      continue;
    }
    auto ms = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f", v);
      return v < 0 ? std::string("-") : std::string(buf);
    };
    std::printf("%10.3g %10.3g %10s %11s %8s%s\n", r.error.abs, r.error.rel, ms(r.eager_ms).c_str(),
                ms(r.compiled_ms).c_str(), r.kernels < 0 ? "-" : std::to_string(r.kernels).c_str(),
                r.error.rel <= kRelTolerance ? "" : "  FAIL");
  }
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  ModelOptions options;
  bool eager = true, compiled = true;
  int reps = 3;
  bool accuracy = false;
  std::string debug_dir;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s%s", kHelp, ModelOptions::help());
      return 0;
    } else if (a == "--eager") {
      compiled = false;
    } else if (a == "--compile") {
      eager = false;
    } else if (a == "--accuracy") {
      accuracy = true;
    } else if (a == "--reps" && i + 1 < args.size()) {
      reps = std::stoi(args[++i]);
    } else if (a == "--debug-dir" && i + 1 < args.size()) {
      debug_dir = args[++i];
    } else if (!options.parse(args, i)) {
      std::fprintf(stderr, "kiln run: unexpected argument '%s'\n\n%s%s", a.c_str(), kHelp,
                   ModelOptions::help());
      return 2;
    }
  }
  if (!eager && !compiled) throw Error("--eager and --compile exclude each other");
  if (options.model_path.empty()) {
    std::fprintf(stderr, "kiln run: give MODEL.onnx\n\n%s%s", kHelp, ModelOptions::help());
    return 2;
  }
#ifndef KILN_HAVE_ONNX
  throw_without_onnx();
#else
  LoadedModel loaded = load_model(options, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
  });
  const onnx::ImportedModel& model = loaded.model;
  std::printf("model %s: opset %lld, %zu nodes, %zu inputs, %zu weights%s\n",
              options.model_path.c_str(), (long long)model.opset, model.graph.num_nodes(),
              model.inputs.size(), model.captured.size(),
              model.producer.empty() ? "" : (", from " + model.producer).c_str());

  const std::string stem = std::filesystem::path(options.model_path).stem().string();
  const std::vector<Device> devices = parse_backends(options.backend);
  std::vector<Literal> reference;  // the cpu reference's eager outputs
  if (devices.front() != Device::cpu() || !eager)
    reference = prepare(model, Device::cpu(), false, options.mode).run(loaded.inputs);
  std::vector<Row> rows;
  bool bundle_written = false;
  for (const Device& device : devices) {
    Row row;
    row.device = device;
    row.description = device.description();
    try {
      for (bool way : {false, true}) {
        if ((way && !compiled) || (!way && !eager)) continue;
        PreparedRun run = prepare(model, device, way, options.mode);
        std::vector<Literal> out = run.run(loaded.inputs);
        if (reference.empty()) reference = out;
        const Difference d = difference(out, reference);
        row.error.abs = std::max(row.error.abs, d.abs);
        row.error.rel = std::max(row.error.rel, d.rel);
        if (std::isnan(d.abs)) row.error = d;
        (way ? row.compiled_ms : row.eager_ms) = run.time_ms(loaded.inputs, 1, reps);
        std::printf("%s %s (%s)%s: %.2f ms to %s\n", device.name().c_str(),
                    way ? "compiled" : "eager", row.description.c_str(),
                    way ? (std::string(" mode ") + compile_mode_name(options.mode)).c_str() : "",
                    run.prepare_ms, way ? "compile" : "prepare");
        if (run.stats()) row.kernels = run.stats()->kernels;
        for (size_t i = 0; i < out.size(); ++i)
          std::printf("  %s: %s%s %s\n", model.outputs[i].name.c_str(),
                      std::string(dtype_name(out[i].dtype)).c_str(),
                      shape_str(make_shape(out[i].shape)).c_str(), first_values(out[i], 8).c_str());
        // The bundle shows the first device that generates code (cpu when it is the only one).
        const bool bundle_here = !debug_dir.empty() && !bundle_written && (way || !compiled) &&
                                 (device != Device::cpu() || devices.size() == 1);
        if (bundle_here || (accuracy && device != Device::cpu() && (way || !compiled))) {
          if (!inspect(run, model, loaded.inputs, stem, bundle_here ? debug_dir : "", accuracy))
            row.failure = "a kernel is past tolerance (see the accuracy table above)";
          bundle_written = bundle_written || bundle_here;
        }
      }
    } catch (const Error& e) {
      row.failure = e.what();
    }
    rows.push_back(row);
  }
  print_table(rows);
  for (const Row& r : rows)
    if (!r.failure.empty() || !(r.error.rel <= kRelTolerance)) return 1;
  return 0;
#endif
}

}  // namespace kiln::cli
