// kiln bench: eager vs compiled time of an ONNX model on each chosen device, with compile time,
// kernel count and the memory plan's naive / lower-bound / planned bytes; a table or --json.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/support/error.h"
#include "tools/kiln/cli_util.h"
#include "tools/kiln/model_session.h"

namespace kiln::cli {

namespace {

const char* kHelp =
    "usage: kiln bench MODEL.onnx [--backend cpu|ref|vulkan|cuda|all]\n"
    "                  [--mode default|reduce-overhead|max-autotune] [--reps N] [--warmup N]\n"
    "                  [--input name=file.pb ...] [--shape name=AxB|symbol=N ...]\n"
    "                  [--sizes [symbol=]1,8,32] [--json] [--compile-only]\n"
    "\n"
    "Times MODEL.onnx on each device eagerly (the interpreter, one kernel per op) and compiled\n"
    "(pass pipeline, fused kernels, memory plan): median ms of --reps runs (default 10) after\n"
    "--warmup runs (default 2), inputs already on the device, each run waiting for the device.\n"
    "Also prints the compile time (the first compile in this process: kernels already in the\n"
    "disk cache, KILN_CACHE_DIR, compile faster), kernels per run, the intermediates' memory\n"
    "(naive: one buffer each; lower bound: peak live bytes for this kernel order; planned: the\n"
    "arena) and the max abs difference between compiled and eager outputs. A device whose compiled\n"
    "run is more than 5% slower than its eager one gets a line saying so (a compiled program must\n"
    "never be slower).\n"
    "  --json            one JSON object per device, in an array, instead of the table\n"
    "  --compile-only    only compile (and run once): compile time, kernels and memory; for\n"
    "                    cold vs warm compile times, run it twice with the same KILN_CACHE_DIR\n"
    "  --sizes S=1,8,32  for a model with symbolic dims: compile once per device, then time eager\n"
    "                    and compiled runs at each value of symbol S (default: the first input's\n"
    "                    first symbolic dim, as batch), one row per size\n";

struct SizeResult {
  int64_t size = 0;
  double eager_ms = NAN, compiled_ms = NAN, max_abs_diff = NAN;
};

struct Result {
  Device device = Device::cpu();
  std::string description;
  double eager_ms = NAN, compiled_ms = NAN, compile_ms = 0, max_abs_diff = NAN;  // NaN: not measured
  ProgramStats stats;
  std::vector<SizeResult> sizes;  // --sizes: one compile, timed at each size
  std::string failure;
};

// --sizes [symbol=]1,8,32
std::pair<std::string, std::vector<int64_t>> parse_sizes(const std::string& text) {
  const size_t eq = text.find('=');
  const std::string symbol = eq == std::string::npos ? "" : text.substr(0, eq);
  const std::vector<int64_t> sizes = parse_integers(text.substr(eq == std::string::npos ? 0 : eq + 1), ',');
  if (sizes.empty() || *std::min_element(sizes.begin(), sizes.end()) < 1)
    throw Error("--sizes takes [symbol=]N,N,... with sizes >= 1, got '" + text + "'");
  return {symbol, sizes};
}

// The first symbolic dim of the model's inputs (batch, for most exports).
std::string first_symbol(const std::string& model_path) {
  for (const onnx::ModelIO& io : onnx::import_onnx(model_path).inputs)
    for (const SymInt& d : io.type.shape)
      if (!d.is_static()) return d.str();
  throw Error("--sizes: " + model_path + " has no symbolic dims (export it with dynamic axes)");
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Compiled slower than eager by more than this factor is flagged: run-to-run noise on a shared
// machine stays within it. A compiled program must never be slower than eager.
constexpr double kSlowerThanEager = 1.05;

bool slower_than_eager(const Result& r) { return r.failure.empty() && r.compiled_ms > r.eager_ms * kSlowerThanEager; }

void print_json(const std::string& model, CompileMode mode, const std::vector<Result>& results) {
  std::printf("[\n");
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::printf("  {\"model\": %s, \"backend\": %s, \"device\": %s, \"name\": %s, \"mode\": %s",
                json_string(model).c_str(), json_string(backend_kind_name(r.device.kind())).c_str(),
                json_string(r.device.name()).c_str(), json_string(r.description).c_str(),
                json_string(compile_mode_name(mode)).c_str());
    if (!r.failure.empty()) {
      std::printf(", \"error\": %s", json_string(r.failure).c_str());
    } else {
      std::printf(", \"eager_ms\": %s, \"compiled_ms\": %s, \"speedup\": %s, \"compile_ms\": %s, "
                  "\"kernels\": %lld, \"nodes\": %lld, \"naive_bytes\": %lld, "
                  "\"lower_bound_bytes\": %lld, \"planned_bytes\": %lld, \"max_abs_diff\": %s, "
                  "\"slower_than_eager\": %s",
                  json_number(r.eager_ms).c_str(), json_number(r.compiled_ms).c_str(),
                  json_number(r.eager_ms / r.compiled_ms).c_str(), json_number(r.compile_ms).c_str(),
                  (long long)r.stats.kernels, (long long)r.stats.nodes,
                  (long long)r.stats.naive_bytes, (long long)r.stats.lower_bound_bytes,
                  (long long)r.stats.planned_bytes, json_number(r.max_abs_diff).c_str(),
                  slower_than_eager(r) ? "true" : "false");
    }
    if (!r.sizes.empty() && r.failure.empty()) {
      std::printf(", \"sizes\": [");
      for (size_t k = 0; k < r.sizes.size(); ++k)
        std::printf("%s{\"size\": %lld, \"eager_ms\": %s, \"compiled_ms\": %s, \"max_abs_diff\": %s}",
                    k ? ", " : "", (long long)r.sizes[k].size, json_number(r.sizes[k].eager_ms).c_str(),
                    json_number(r.sizes[k].compiled_ms).c_str(), json_number(r.sizes[k].max_abs_diff).c_str());
      std::printf("]");
    }
    std::printf("}%s\n", i + 1 < results.size() ? "," : "");
  }
  std::printf("]\n");
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", double(bytes) / (1 << 20));
  return buf;
}

void print_table(const std::vector<Result>& results) {
  std::printf("%-10s %-28s %9s %9s %7s %10s %7s %10s %10s %10s %9s\n", "device", "name", "eager ms",
              "compiled", "ratio", "compile ms", "kernels", "naive MiB", "bound MiB", "plan MiB",
              "max diff");
  for (const Result& r : results) {
    std::string name = r.description.size() > 28 ? r.description.substr(0, 25) + "..." : r.description;
    std::printf("%-10s %-28s ", r.device.name().c_str(), name.c_str());
    if (!r.failure.empty()) {
      std::printf("failed: %s\n", r.failure.c_str());
      continue;
    }
    std::printf("%9.2f %9.2f %7.2f %10.0f %7lld %10s %10s %10s %9.2g\n", r.eager_ms, r.compiled_ms,
                r.eager_ms / r.compiled_ms, r.compile_ms, (long long)r.stats.kernels,
                mib(r.stats.naive_bytes).c_str(), mib(r.stats.lower_bound_bytes).c_str(),
                mib(r.stats.planned_bytes).c_str(), r.max_abs_diff);
  }
  for (const Result& r : results)
    if (slower_than_eager(r))
      std::printf("%s: compiled is SLOWER than eager (%.2f ms vs %.2f ms, ratio %.2f < %.2f)\n", r.device.name().c_str(),
                  r.compiled_ms, r.eager_ms, r.eager_ms / r.compiled_ms, 1 / kSlowerThanEager);
}

void print_sizes_table(const std::string& symbol, const std::vector<Result>& results) {
  std::printf("\nat each %s, one compile per device:\n", symbol.c_str());
  std::printf("%-10s %8s %9s %11s %7s %12s %9s\n", "device", symbol.c_str(), "eager ms", "compiled ms",
              "ratio", "ms per item", "max diff");
  for (const Result& r : results)
    for (const SizeResult& s : r.sizes)
      std::printf("%-10s %8lld %9.3f %11.3f %7.2f %12.4f %9.2g\n", r.device.name().c_str(),
                  (long long)s.size, s.eager_ms, s.compiled_ms, s.eager_ms / s.compiled_ms,
                  s.compiled_ms / double(s.size), s.max_abs_diff);
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  ModelOptions options;
  int reps = 10, warmup = 2;
  bool json = false, compile_only = false;
  std::string sizes_text;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s%s", kHelp, ModelOptions::help());
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--compile-only") {
      compile_only = true;
    } else if (a == "--sizes" && i + 1 < args.size()) {
      sizes_text = args[++i];
    } else if (a == "--reps" && i + 1 < args.size()) {
      reps = std::stoi(args[++i]);
    } else if (a == "--warmup" && i + 1 < args.size()) {
      warmup = std::stoi(args[++i]);
    } else if (!options.parse(args, i)) {
      std::fprintf(stderr, "kiln bench: unexpected argument '%s'\n\n%s%s", a.c_str(), kHelp,
                   ModelOptions::help());
      return 2;
    }
  }
  if (options.model_path.empty()) {
    std::fprintf(stderr, "kiln bench: give MODEL.onnx\n\n%s%s", kHelp, ModelOptions::help());
    return 2;
  }
#ifndef KILN_HAVE_ONNX
  throw_without_onnx();
#else
  auto [symbol, sizes] = sizes_text.empty() ? std::pair<std::string, std::vector<int64_t>>{}
                                             : parse_sizes(sizes_text);
  if (!sizes.empty()) {
    if (compile_only) throw Error("--sizes times runs; it does not go with --compile-only");
    if (symbol.empty()) symbol = first_symbol(options.model_path);
    options.shapes.emplace_back(symbol, std::to_string(sizes[0]));  // the first size is the hint
  }
  LoadedModel loaded = load_model(options, [&](const std::string& line) {
    if (!json) std::printf("%s\n", line.c_str());
  });
  const std::vector<Device> devices = parse_backends(options.backend);
  Progress progress("bench", devices.size() * (2 + sizes.size()));
  std::vector<Result> results;
  for (const Device& device : devices) {
    Result r;
    r.device = device;
    r.description = device.description();
    try {
      progress.step(device.name() + " compile");
      PreparedRun compiled = prepare(loaded.model, device, true, options.mode);
      r.compile_ms = compiled.prepare_ms;
      const std::vector<Literal> compiled_out = compiled.run(loaded.inputs);
      if (!compile_only) {
        progress.step(device.name() + " eager");
        PreparedRun eager = prepare(loaded.model, device, false, options.mode);
        r.max_abs_diff = difference(compiled_out, eager.run(loaded.inputs)).abs;
        r.eager_ms = eager.time_ms(loaded.inputs, warmup, reps);
        r.compiled_ms = compiled.time_ms(loaded.inputs, warmup, reps);
        for (int64_t size : sizes) {  // the same eager model and compiled program at every size
          progress.step(device.name() + " " + symbol + "=" + std::to_string(size));
          const std::vector<Literal> inputs = inputs_at_size(loaded, symbol, size);
          SizeResult s;
          s.size = size;
          s.max_abs_diff = difference(compiled.run(inputs), eager.run(inputs)).abs;
          s.eager_ms = eager.time_ms(inputs, warmup, reps);
          s.compiled_ms = compiled.time_ms(inputs, warmup, reps);
          r.sizes.push_back(s);
        }
      }
      r.stats = *compiled.stats();  // after the runs: the plan for these shapes
    } catch (const Error& e) {
      r.failure = e.what();
    }
    results.push_back(r);
  }
  progress.clear();
  if (json) {
    print_json(options.model_path, options.mode, results);
  } else {
    std::printf("model %s, mode %s, median of %d runs after %d warm-up\n", options.model_path.c_str(),
                compile_mode_name(options.mode), reps, warmup);
    print_table(results);
    if (!sizes.empty()) print_sizes_table(symbol, results);
  }
  for (const Result& r : results)
    if (!r.failure.empty()) return 1;
  return 0;
#endif
}

}  // namespace kiln::cli
