// kiln-debug's frame loops over an App: a window (interactive, or offscreen for a screenshot) and
// a display-less loop with ImGui's null renderer.
#pragma once

#include <string>

#include "debugger/app.h"

namespace kiln::debugger {

struct WindowOptions {
  std::string screenshot;  // render offscreen, write this PNG after `frames` frames, and return
  bool headless = false;   // no visible window (with a screenshot), or no display at all
  int frames = 3;
  int width = 1600, height = 1000;
};

// Every view for options.frames frames with no display; 0 when they drew something.
int run_null(App& app, const WindowOptions& options);
// The window until the user closes it (or the screenshot is written); 0 on success.
int run_window(App& app, const WindowOptions& options);

}  // namespace kiln::debugger
