// kiln-debug's timeline: one bar per kernel at its recorded device start and duration.
#include <algorithm>
#include <cstdio>

#include <imgui.h>

#include "debugger/app.h"

namespace kiln::debugger {

void App::timeline_view() {
  ImGui::Begin("Timeline");
  // A kernel without a recorded start follows the previous one (as the Chrome trace export does).
  std::vector<double> start(bundle_.kernels.size(), 0), length(bundle_.kernels.size(), 0);
  double end = 0;
  bool timed = false;
  for (size_t k = 0; k < bundle_.kernels.size(); ++k) {
    const trace::BundleKernel& kk = bundle_.kernels[k];
    start[k] = kk.start_us.value_or(end);
    length[k] = kk.time_us.value_or(0);
    timed = timed || kk.time_us.has_value();
    end = std::max(end, start[k] + length[k]);
  }
  if (!timed) {
    ImGui::TextWrapped("No device timings in this bundle (it was not made from a profiled run of a compiled "
                       "program).");
    ImGui::End();
    return;
  }
  ImGui::Text("%.1f us on %s; click a bar to select its kernel", end, bundle_.device.c_str());
  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImVec2 size = ImGui::GetContentRegionAvail();
  size.x = std::max(size.x, 100.0f);
  size.y = std::max(size.y, 40.0f);
  ImGui::InvisibleButton("timeline", size);
  bool hovered_chart = ImGui::IsItemHovered();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(origin, ImVec2(origin.x + size.x, origin.y + size.y), IM_COL32(30, 30, 34, 255));
  const double scale = size.x / std::max(end, 1e-9);
  const float row = std::min(18.0f, size.y);
  ImVec2 mouse = ImGui::GetIO().MousePos;
  int hovered = -1;
  for (size_t k = 0; k < bundle_.kernels.size(); ++k) {
    // One row: kernels run one after another on one queue; the selected one is outlined.
    ImVec2 a(origin.x + float(start[k] * scale), origin.y + 4);
    ImVec2 c(std::max(a.x + 1.0f, origin.x + float((start[k] + length[k]) * scale)), origin.y + 4 + row);
    bool selected = int(k) == selection_.kernel;
    draw->AddRectFilled(a, c, kernel_color(int(k), selected ? 1.0f : 0.7f));
    if (selected) draw->AddRect(a, c, IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
    if (hovered_chart && mouse.x >= a.x && mouse.x <= c.x && mouse.y >= a.y && mouse.y <= c.y) hovered = int(k);
  }
  if (hovered >= 0) {
    const trace::BundleKernel& kk = bundle_.kernels[size_t(hovered)];
    ImGui::SetTooltip("kernel %d %s\nstart %.1f us, %.1f us, %zu launch(es)", hovered, kk.name.c_str(),
                      start[size_t(hovered)], length[size_t(hovered)], kk.sources.size());
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) select_kernel(hovered);
  }
  ImGui::End();
}

}  // namespace kiln::debugger
