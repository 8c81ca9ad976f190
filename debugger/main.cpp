// kiln-debug: opens a trace bundle (core/trace/bundle.h) in Dear ImGui views, or exports it.
//   kiln-debug DIR                                   interactive window (GLFW + OpenGL 3)
//   kiln-debug --export-trace t.json --export-dot g.dot DIR   exports only, no window
//   kiln-debug --headless [--frames N] DIR           every view for N frames, no display (null renderer)
//   kiln-debug [--headless] --screenshot out.png DIR renders N frames offscreen (needs X, e.g. xvfb-run)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>


#include "core/support/error.h"
#include "core/trace/bundle.h"
#include "core/trace/export.h"
#include "debugger/app.h"
#include "debugger/window.h"

namespace {

struct Args : kiln::debugger::WindowOptions {
  std::string dir, export_trace, export_dot;
  int kernel = -1;
};

// --help prints to stdout and succeeds; a usage error prints to stderr and exits 2.
int usage(const char* why, int code = 2) {
  std::fprintf(code == 0 ? stdout : stderr,
               "kiln-debug: %s\nusage: kiln-debug [--headless] [--frames N] [--screenshot out.png] [--size WxH]\n"
               "                  [--kernel K] [--export-trace t.json] [--export-dot g.dot] BUNDLE_DIR\n",
               why);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  bool gui = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--headless") args.headless = true;
    else if (a == "--frames" && (v = value())) args.frames = std::max(1, std::atoi(v));
    else if (a == "--screenshot" && (v = value())) args.screenshot = v;
    else if (a == "--kernel" && (v = value())) args.kernel = std::atoi(v);
    else if (a == "--export-trace" && (v = value())) args.export_trace = v, gui = false;
    else if (a == "--export-dot" && (v = value())) args.export_dot = v, gui = false;
    else if (a == "--size" && (v = value())) {
      if (std::sscanf(v, "%dx%d", &args.width, &args.height) != 2 || args.width < 64 || args.height < 64)
        return usage("--size wants WxH, e.g. 1600x1000");
    } else if (a == "-h" || a == "--help") return usage("a debugger for kiln trace bundles", 0);
    else if (!a.empty() && a[0] == '-') return usage(("unknown or incomplete option " + a).c_str());
    else if (args.dir.empty()) args.dir = a;
    else return usage("one bundle directory, please");
  }
  if (args.dir.empty()) return usage("no bundle directory given");
  if (args.headless || !args.screenshot.empty()) gui = true;
  try {
    kiln::trace::Bundle bundle = kiln::trace::read_bundle(args.dir);
    if (!args.export_trace.empty()) kiln::trace::write_file(args.export_trace, kiln::trace::chrome_trace_json(bundle));
    if (!args.export_dot.empty()) kiln::trace::write_file(args.export_dot, kiln::trace::graph_dot(bundle));
    if (!gui) return 0;
    const size_t bundle_kernels = bundle.kernels.size();
    kiln::debugger::App app(std::move(bundle), args.dir);
    if (args.kernel >= int(bundle_kernels))
      return usage(("--kernel " + std::to_string(args.kernel) + ": the bundle has " +
                    std::to_string(bundle_kernels) + " kernels, numbered from 0").c_str());
    if (args.kernel >= 0) app.select_kernel(args.kernel);
    if (args.headless && args.screenshot.empty()) return kiln::debugger::run_null(app, args);
    return kiln::debugger::run_window(app, args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
