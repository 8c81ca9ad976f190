// kiln-debug's views over one bundle, linked by one selection (a kernel, a node, a source line).
// Views only read the bundle; the layout comes from core/trace/layout.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/trace/bundle.h"
#include "core/trace/layout.h"

namespace kiln::debugger {

struct Selection {
  int kernel = -1;  // index into Bundle::kernels
  int node = -1;    // bundle node id
  std::string file; // user source file shown in the source view
  int line = 0;     // line to scroll to in the source view (0 = none)
  bool scroll_source = false, scroll_code = false, center_graph = false;
};

class App {
 public:
  App(trace::Bundle bundle, std::string dir);
  // Draws every view for one frame (between ImGui::NewFrame and ImGui::Render).
  void frame();

  void select_kernel(int kernel);
  void select_node(int node_id);
  const Selection& selection() const { return selection_; }

 private:
  void graph_view();
  void kernels_view();
  void source_view();
  void code_view();
  void passes_view();
  void guards_view();
  void memory_view();
  void accuracy_view();
  void timeline_view();
  const std::vector<std::string>& file_lines(const std::string& path);
  int kernel_of(int node_id) const;

  trace::Bundle bundle_;
  std::string dir_;
  trace::GraphLayout layout_;
  Selection selection_;
  std::map<std::string, std::vector<std::string>> files_;  // user sources read from disk; empty = missing
  std::vector<int> kernel_order_;                          // kernels table, sorted
  std::map<int, int> node_kernel_;                         // node id -> kernel index
  // Graph view state.
  float zoom_ = 0.8f;
  float pan_x_ = 0, pan_y_ = 0;
  int phase_filter_ = 0;  // the kernel table's phase: all, forward, backward, optimizer
  char search_[128] = "";
  int search_hit_ = -1;
  int pass_ = 0;
  // Passes view, for pass_: each side's lines and whether the other side lacks them.
  int diff_pass_ = -1;
  std::vector<std::string> before_, after_;
  std::vector<bool> before_only_, after_only_;
};

// Per-kernel colour (stable hue from the index), as ImU32.
unsigned kernel_color(int kernel, float alpha = 1.0f);

}  // namespace kiln::debugger
