// kiln test-onnx: runs ONNX backend-test cases (model.onnx + test_data_set_N/{input,output}_K.pb)
// on each chosen device, interpreted or compiled, and compares with the expected outputs (floats:
// rtol 1e-3, atol 1e-4 as the ONNX backend tests; integers and bools exactly).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/support/error.h"
#include "tools/kiln/cli_util.h"
#ifdef KILN_HAVE_ONNX
#include "backends/backend.h"
#include "core/onnx/onnx_import.h"
#endif

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

const char* kHelp =
    "usage: kiln test-onnx [--backend cpu|ref|vulkan|cuda|all] [--compile] [--mode default|reduce-overhead]\n"
    "                      [--reps N] [--rtol R] [--atol A] [--quiet] DIR...\n"
    "\n"
    "Runs every ONNX backend-test case under each DIR. A case is a directory holding model.onnx\n"
    "and test_data_set_N/input_K.pb, output_K.pb; DIR may be a case or a directory of cases.\n"
    "Prints one line per case and device: `PASS name`, `FAIL name: reason` (with the max abs\n"
    "error) or `UNSUPPORTED name: reason`, then `N passed, N failed, N skipped` (skipped =\n"
    "unsupported). Exit code 1 when any case failed; unsupported cases do not fail the run.\n"
    "Floats compare with |got - want| <= atol + rtol * |want| (defaults 1e-4 and 1e-3; bf16 takes\n"
    "rtol 2^-7 at least, one bf16 rounding step); integers and bools exactly. A u16 test tensor\n"
    "where the model has bf16 is read as bf16 bit patterns. Inputs that decide shapes\n"
    "(Reshape's shape, ...) are fixed to the test's values at import. A model with symbolic dims\n"
    "(dynamic axes) is imported and compiled once, and later data sets reuse it where their sizes\n"
    "fit (the line says `3 data sets, 1 compile`).\n"
    "  --backend   device(s) to run on (default cpu); `all` = cpu and every other device\n"
    "  --compile   run each case compiled (standard pass pipeline, fused kernels, memory plan)\n"
    "              instead of with the node-by-node interpreter\n"
    "  --mode      with --compile: `default`, or `reduce-overhead` (record launches once, replay)\n"
    "  --reps N    after a case passes, time N more runs of its first data set and print the\n"
    "              median ms per run (and, compiled, the compile time)\n"
    "  --quiet     print only failures and the summary\n";

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix, const std::string& ext) {
  std::map<int, fs::path> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() <= prefix.size() + ext.size() ||
        name.substr(name.size() - ext.size()) != ext)
      continue;
    const std::string num = name.substr(prefix.size(), name.size() - prefix.size() - ext.size());
    if (num.find_first_not_of("0123456789") != std::string::npos || num.empty()) continue;
    found[std::stoi(num)] = e.path();
  }
  std::vector<fs::path> out;
  for (auto& [k, p] : found) out.push_back(p);
  return out;
}

// The case's directory name, also for "DIR/case/" and "." (whose filename() is empty or ".").
std::string case_name(const fs::path& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? dir.string() : name;
}

std::vector<fs::path> collect_cases(const std::vector<std::string>& dirs) {
  std::vector<fs::path> cases;
  for (const std::string& d : dirs) {
    fs::path p(d);
    if (fs::exists(p / "model.onnx")) {
      cases.push_back(p);
      continue;
    }
    if (!fs::is_directory(p)) throw Error("'" + d + "' is not a directory");
    std::vector<fs::path> sub;
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) sub.push_back(e.path());
    std::sort(sub.begin(), sub.end());
    if (sub.empty()) throw Error("'" + d + "' holds no test cases (no */model.onnx)");
    cases.insert(cases.end(), sub.begin(), sub.end());
  }
  return cases;
}

#ifdef KILN_HAVE_ONNX
struct Tolerance {
  double rtol = 1e-3, atol = 1e-4;
};

// Empty when equal within tolerance, else why not.
std::string compare(const Literal& got, const Literal& want, const Tolerance& tol, double* max_err) {
  if (got.dtype != want.dtype)
    return "dtype " + std::string(dtype_name(got.dtype)) + ", expected " +
           std::string(dtype_name(want.dtype));
  if (got.shape != want.shape)
    return "shape " + shape_str(make_shape(got.shape)) + ", expected " +
           shape_str(make_shape(want.shape));
  const int64_t n = want.numel();
  if (!is_floating(want.dtype)) {
    if (got.bytes == want.bytes) return "";
    const size_t elem = dtype_size(want.dtype);
    for (int64_t i = 0; i < n; ++i)
      if (std::memcmp(&got.bytes[size_t(i) * elem], &want.bytes[size_t(i) * elem], elem))
        return "element " + std::to_string(i) + " is " + std::to_string(got.element(i)) +
               ", expected " + std::to_string(want.element(i)) + " (exact)";
    return "";
  }
  // A bf16 value has 8 significant bits: one rounding step (round-to-nearest-even here, truncation
  // in some exporters' data) is up to 2^-7 of the value.
  const double rtol = want.dtype == DType::BF16 ? std::max(tol.rtol, 1.0 / 128) : tol.rtol;
  int64_t bad = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got.element(i), w = want.element(i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    const double err = std::isnan(g) || std::isnan(w) ? INFINITY : std::fabs(g - w);
    *max_err = std::max(*max_err, err);
    if (!(err <= tol.atol + rtol * std::fabs(w)) && bad < 0) bad = i;
  }
  if (bad < 0) return "";
  char buf[200];
  std::snprintf(buf, sizeof buf, "max abs error %.3g (rtol %g, atol %g; element %lld is %.7g, expected %.7g)",
                *max_err, rtol, tol.atol, (long long)bad, got.element(bad), want.element(bad));
  return buf;
}

enum class Outcome { Pass, Fail, Unsupported };

// Multi-line messages (the importer's list of unsupported items) on one line, `; `-separated.
std::string one_line(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n') {
      out += s[i];
      continue;
    }
    while (i + 1 < s.size() && s[i + 1] == ' ') ++i;
    out += out.empty() || out.back() == ':' ? " " : "; ";
  }
  return out;
}

// How each case runs: on which device, interpreted or compiled, and how many timed runs.
struct RunConfig {
  Device device = Device::cpu();
  bool compile = false;
  ProgramOptions program;
  int reps = 0;
};

struct Timing {
  double prepare_ms = -1;  // compile (or weight upload, eager) of the first data set
  double run_ms = -1;      // median of RunConfig::reps runs; -1 when not timed
  int data_sets = 0;
  int imports = 0;         // imports (and compiles) the data sets needed
};

// Whether the model imported for earlier data sets also serves these inputs: none of its inputs
// was fixed to a value, every dim fits (symbolic dims take any size) and its guards hold.
bool serves(const onnx::ImportedModel& model, size_t graph_inputs,
            const std::map<std::string, Literal>& values) {
  if (model.inputs.size() != graph_inputs) return false;
  std::vector<Tensor> probes;  // empty tensors of the given sizes: the guards read only sizes
  for (const onnx::ModelIO& io : model.inputs) {
    auto it = values.find(io.name);
    if (it == values.end() || it->second.dtype != io.type.dtype ||
        it->second.shape.size() != io.type.rank())
      return false;
    for (size_t d = 0; d < io.type.rank(); ++d)
      if (io.type.shape[d].is_static() && io.type.shape[d].value() != it->second.shape[d]) return false;
    probes.push_back(onnx::literal_to_tensor(it->second));
  }
  try {
    onnx::check_import_guards(model.inputs, model.guards, probes);
  } catch (const Error&) {
    return false;
  }
  return true;
}

// ONNX's test data stores bf16 tensors as the uint16 bit patterns (NumPy has no bf16): a u16
// value where the model has a bf16 input or output is read as bf16.
Literal as_declared(Literal value, DType declared) {
  if (declared == DType::BF16 && value.dtype == DType::U16) value.dtype = DType::BF16;
  return value;
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The median time of `reps` runs, each waiting for the device so queued work is counted.
double median_run_ms(int reps, Device device, const std::function<std::vector<Tensor>()>& run) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<Tensor> out = run();
    device.backend().synchronize();
    ms.push_back(elapsed_ms(start));
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

Outcome run_case(const fs::path& dir, const RunConfig& cfg, const Tolerance& tol, std::string* reason,
                 Timing* timing) {
  const Device device = cfg.device;
  const std::string model_path = (dir / "model.onnx").string();
  std::vector<fs::path> sets = numbered(dir, "test_data_set_", "");
  if (sets.empty()) {
    *reason = "no test_data_set_N folders";
    return Outcome::Fail;
  }
  // The model's own verdict first: a model that cannot import explains its odd test data.
  auto unsupported_reason = [&](const std::string& what) {
    *reason = one_line(what);
    if (reason->rfind("onnx import: '", 0) == 0) *reason = reason->substr(reason->find("' ") + 2);
    return Outcome::Unsupported;
  };
  try {
    const std::vector<std::string> names = onnx::graph_input_names(model_path);
    onnx::ImportedModel model;
    std::unique_ptr<onnx::CompiledModel> compiled;
    std::unique_ptr<onnx::EagerModel> eager;
    for (const fs::path& set : sets) {
      std::vector<fs::path> in_files = numbered(set, "input_", ".pb");
      std::vector<fs::path> out_files = numbered(set, "output_", ".pb");
      onnx::ImportOptions options;
      std::map<std::string, Literal> values;
      try {
        for (size_t i = 0; i < in_files.size(); ++i) {
          onnx::NamedLiteral t = onnx::read_named_tensor_file(in_files[i].string());
          std::string name = !t.name.empty() ? t.name : i < names.size() ? names[i] : "";
          values[name] = t.literal;
        }
      } catch (const Error& data_error) {
        try {
          onnx::import_onnx(model_path);
        } catch (const onnx::UnsupportedError& e) {
          return unsupported_reason(e.what());
        } catch (const Error&) {
        }
        if (dynamic_cast<const onnx::UnsupportedError*>(&data_error))
          return unsupported_reason(std::string("test data: ") + data_error.what());
        throw;
      }
      ++timing->data_sets;
      // One import and compile serves every data set whose sizes it covers (dynamic axes).
      if (!(compiled || eager) || !serves(model, names.size(), values)) {
        options.input_values = values;
        try {
          model = onnx::import_onnx(model_path, options);
        } catch (const onnx::UnsupportedError& e) {
          return unsupported_reason(e.what());
        }
        ++timing->imports;
        const auto prepare_start = std::chrono::steady_clock::now();
        compiled.reset();
        eager.reset();
        if (cfg.compile) compiled = std::make_unique<onnx::CompiledModel>(model, device, cfg.program);
        else eager = std::make_unique<onnx::EagerModel>(model, device);
        if (timing->prepare_ms < 0) timing->prepare_ms = elapsed_ms(prepare_start);
      }
      std::vector<Tensor> inputs;
      for (const onnx::ModelIO& io : model.inputs) {
        auto it = values.find(io.name);
        if (it == values.end()) throw Error("no test data for input '" + io.name + "'");
        inputs.push_back(onnx::literal_to_tensor(as_declared(it->second, io.type.dtype), device));
      }
      auto run = [&] { return compiled ? compiled->run(inputs) : eager->run(inputs); };
      std::vector<Tensor> outputs = run();
      if (outputs.size() != out_files.size())
        throw Error("the model gives " + std::to_string(outputs.size()) + " outputs, the test has " +
                    std::to_string(out_files.size()));
      for (size_t i = 0; i < outputs.size(); ++i) {
        double max_err = 0;
        const Literal got = onnx::tensor_to_literal(outputs[i]);
        const Literal want = as_declared(onnx::read_tensor_file(out_files[i].string()), got.dtype);
        std::string why = compare(got, want, tol, &max_err);
        if (!why.empty()) {
          *reason = "output " + std::to_string(i) + " ('" + model.outputs[i].name + "'): " + why;
          if (sets.size() > 1) *reason += " in " + set.filename().string();
          return Outcome::Fail;
        }
      }
      if (cfg.reps > 0 && timing->run_ms < 0) timing->run_ms = median_run_ms(cfg.reps, device, run);
    }
  } catch (const onnx::UnsupportedError& e) {  // e.g. an expected output of an unsupported type
    return unsupported_reason(std::string("test data: ") + e.what());
  } catch (const std::exception& e) {
    *reason = one_line(e.what());
    return Outcome::Fail;
  }
  return Outcome::Pass;
}

std::string timing_text(const Timing& t, bool compiled) {
  std::string sets;
  if (t.data_sets > 1)
    sets = " (" + std::to_string(t.data_sets) + " data sets, " + std::to_string(t.imports) +
           (compiled ? " compile" : " import") + (t.imports > 1 ? "s)" : ")");
  if (t.run_ms < 0) return sets;
  char buf[120];
  std::snprintf(buf, sizeof buf, " (%.3f ms/run; %s %.0f ms)", t.run_ms,
                compiled ? "compile" : "setup", t.prepare_ms);
  return sets + buf;
}
#endif

}  // namespace

int cmd_test_onnx(const std::vector<std::string>& args) {
  std::string backend = "cpu";
  bool quiet = false;
  bool compile = false;
  std::string mode;
  int reps = 0;
  std::vector<std::string> dirs;
#ifdef KILN_HAVE_ONNX
  Tolerance tol;
#endif
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
    } else if (a.rfind("--backend=", 0) == 0) {
      backend = a.substr(10);
#ifdef KILN_HAVE_ONNX
    } else if (a == "--rtol") {
      tol.rtol = std::stod(value());
    } else if (a == "--atol") {
      tol.atol = std::stod(value());
#endif
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--compile") {
      compile = true;
    } else if (a == "--mode") {
      mode = value();
    } else if (a.rfind("--mode=", 0) == 0) {
      mode = a.substr(7);
    } else if (a == "--reps") {
      reps = std::stoi(value());
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln test-onnx: unknown option '%s'\n\n%s", a.c_str(), kHelp);
      return 2;
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "kiln test-onnx: give at least one DIR\n\n%s", kHelp);
    return 2;
  }
  if (!mode.empty() && mode != "default" && mode != "reduce-overhead") {
    std::fprintf(stderr, "kiln test-onnx: --mode takes default or reduce-overhead, not '%s'\n",
                 mode.c_str());
    return 2;
  }
  if (!mode.empty() && !compile) {
    std::fprintf(stderr, "kiln test-onnx: --mode applies to compiled runs; add --compile\n");
    return 2;
  }
  if (reps < 0) {
    std::fprintf(stderr, "kiln test-onnx: --reps must be >= 0\n");
    return 2;
  }
#ifndef KILN_HAVE_ONNX
  (void)quiet, (void)compile, (void)reps;
  throw_without_onnx();
#else
  const std::vector<Device> devices = parse_backends(backend);
  const std::vector<fs::path> cases = collect_cases(dirs);
  size_t passed = 0, failed = 0, skipped = 0;
  for (const Device& device : devices) {
    size_t p = 0, f = 0, s = 0;
    const std::string suffix = devices.size() > 1 ? " [" + device.name() + "]" : "";
    Progress progress("test-onnx " + device.name(), cases.size());
    const auto start = std::chrono::steady_clock::now();
    for (const fs::path& dir : cases) {
      const std::string name = case_name(dir);
      progress.step(name);
      std::string reason;
      RunConfig cfg;
      cfg.device = device;
      cfg.compile = compile;
      cfg.program.reduce_overhead = mode == "reduce-overhead";
      cfg.reps = reps;
      Timing timing;
      const Outcome o = run_case(dir, cfg, tol, &reason, &timing);
      progress.clear();
      if (o == Outcome::Pass) {
        ++p;
        if (!quiet)
          std::printf("PASS %s%s%s\n", name.c_str(), suffix.c_str(),
                      timing_text(timing, compile).c_str());
      } else if (o == Outcome::Fail) {
        ++f;
        std::printf("FAIL %s%s: %s\n", name.c_str(), suffix.c_str(), reason.c_str());
      } else {
        ++s;
        if (!quiet) std::printf("UNSUPPORTED %s%s: %s\n", name.c_str(), suffix.c_str(), reason.c_str());
      }
      std::fflush(stdout);
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%s: %zu passed, %zu failed, %zu skipped in %.1f s\n",
                 device.name().c_str(), p, f, s, secs);
    passed += p, failed += f, skipped += s;
  }
  std::printf("%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
#endif
}

}  // namespace kiln::cli
