// kiln::debug::show: kiln-debug's views on a compiled function, in the calling process (the
// kiln_debug_ui library). Returns when the window is closed.
#pragma once

#include <string>

#include "core/frontend/compile.h"
#include "core/trace/bundle.h"

namespace kiln::debug {

struct ShowOptions {
  int width = 1600, height = 1000;
  bool headless = false;   // no display: the views run `frames` frames on ImGui's null renderer
  int frames = 3;          // with headless or screenshot
  std::string screenshot;  // render offscreen, write this PNG and return
  int kernel = -1;         // select this kernel first
};

// 0 when the window ran (or the headless frames drew); kiln::Error when no display can be opened.
int show(const trace::Bundle& bundle, const ShowOptions& options = {});

// The most recent compile of `fn` (Compiled::bundle): its fused kernels, generated code, source
// lines, memory plan, passes and guards.
template <class Sig>
int show(const Compiled<Sig>& fn, const ShowOptions& options = {}) {
  return show(fn.bundle(), options);
}

}  // namespace kiln::debug
