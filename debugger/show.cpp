// kiln::debug::show: the App and frame loop kiln-debug uses, over an in-memory bundle.
#include "debugger/show.h"

#include "debugger/app.h"
#include "debugger/window.h"

namespace kiln::debug {

int show(const trace::Bundle& bundle, const ShowOptions& options) {
  debugger::App app(bundle, "");  // no bundle directory: sources are read from the bundle itself
  if (options.kernel >= 0) app.select_kernel(options.kernel);
  debugger::WindowOptions window;
  window.width = options.width;
  window.height = options.height;
  window.headless = options.headless;
  window.frames = options.frames;
  window.screenshot = options.screenshot;
  if (options.headless && options.screenshot.empty()) return debugger::run_null(app, window);
  return debugger::run_window(app, window);
}

}  // namespace kiln::debug
