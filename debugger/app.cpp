// kiln-debug: selection, window placement, and the graph view (layout from core/trace/layout.h).
#include "debugger/app.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <imgui.h>

namespace kiln::debugger {

unsigned kernel_color(int kernel, float alpha) {
  if (kernel < 0) return IM_COL32(110, 110, 110, int(alpha * 255));
  // Golden-ratio hue steps keep neighbouring kernels apart.
  float hue = std::fmod(0.13f + 0.618034f * float(kernel), 1.0f), r, g, b;
  ImGui::ColorConvertHSVtoRGB(hue, 0.55f, 0.80f, r, g, b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, b, alpha));
}

App::App(trace::Bundle bundle, std::string dir)
    : bundle_(std::move(bundle)), dir_(std::move(dir)), layout_(trace::layout_graph(bundle_)) {
  for (size_t k = 0; k < bundle_.kernels.size(); ++k) {
    kernel_order_.push_back(int(k));
    for (int id : bundle_.kernels[k].origins) node_kernel_.emplace(id, int(k));
  }
  if (!bundle_.kernels.empty()) select_kernel(0);
}

int App::kernel_of(int node_id) const {
  auto it = node_kernel_.find(node_id);
  return it == node_kernel_.end() ? -1 : it->second;
}

void App::select_kernel(int kernel) {
  // An index past the table selects nothing: the views index the table by the selection.
  if (kernel >= int(bundle_.kernels.size())) kernel = -1;
  selection_.kernel = kernel;
  selection_.scroll_code = true;
  if (kernel < 0) return;
  const trace::BundleKernel& k = bundle_.kernels[size_t(kernel)];
  if (k.origins.empty()) return;
  // The kernel's last origin is the node whose value it stores: the most telling line.
  int node = k.origins.back();
  selection_.node = node;
  if (const trace::BundleNode* n = bundle_.node(node); n && !n->origins.empty()) {
    selection_.file = n->origins.front().file;
    selection_.line = n->origins.front().line;
    selection_.scroll_source = true;
  }
  selection_.center_graph = true;
}

void App::select_node(int node_id) {
  int kernel = kernel_of(node_id);
  if (kernel >= 0 && kernel != selection_.kernel) select_kernel(kernel);
  selection_.node = node_id;
  selection_.scroll_code = true;
  if (const trace::BundleNode* n = bundle_.node(node_id); n && !n->origins.empty()) {
    selection_.file = n->origins.front().file;
    selection_.line = n->origins.front().line;
    selection_.scroll_source = true;
  }
}

namespace {

// Places a window at fractions of the display the first time it appears.
void place(float x, float y, float w, float h) {
  ImVec2 size = ImGui::GetIO().DisplaySize;
  ImGui::SetNextWindowPos(ImVec2(x * size.x, y * size.y), ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(w * size.x, h * size.y), ImGuiCond_FirstUseEver);
}

bool contains_ci(const std::string& hay, const char* needle) {
  if (!*needle) return false;
  auto it = std::search(hay.begin(), hay.end(), needle, needle + std::strlen(needle),
                        [](char a, char b) { return std::tolower(a) == std::tolower(b); });
  return it != hay.end();
}

}  // namespace

void App::frame() {
  place(0.00f, 0.00f, 0.38f, 0.62f); graph_view();
  place(0.38f, 0.00f, 0.62f, 0.22f); kernels_view();
  place(0.38f, 0.22f, 0.62f, 0.08f); timeline_view();
  place(0.38f, 0.30f, 0.31f, 0.32f); source_view();
  place(0.69f, 0.30f, 0.31f, 0.32f); code_view();
  place(0.00f, 0.62f, 0.38f, 0.38f); passes_view();
  place(0.38f, 0.62f, 0.31f, 0.38f); memory_view();
  place(0.69f, 0.62f, 0.31f, 0.38f); guards_view();
  if (!bundle_.accuracy.empty()) {
    place(0.69f, 0.80f, 0.31f, 0.20f);
    accuracy_view();
  }
}

void App::graph_view() {
  ImGui::Begin("Graph");
  ImGui::Text("%zu nodes, %zu kernels", bundle_.nodes.size(), bundle_.kernels.size());
  ImGui::SameLine();
  ImGui::SetNextItemWidth(180);
  bool searched = ImGui::InputTextWithHint("##search", "search name / op / file", search_, sizeof search_,
                                           ImGuiInputTextFlags_EnterReturnsTrue);
  // Matches by op, %id, file:line, function or scope.
  std::vector<int> hits;
  if (search_[0]) {
    for (size_t i = 0; i < bundle_.nodes.size(); ++i) {
      const trace::BundleNode& n = bundle_.nodes[i];
      bool hit = contains_ci(n.op, search_) || contains_ci("%" + std::to_string(n.id), search_);
      for (const Origin& o : n.origins)
        hit = hit || contains_ci(o.file + ":" + std::to_string(o.line), search_) ||
              contains_ci(o.function, search_) || contains_ci(o.scope, search_) || contains_ci(o.imported, search_);
      if (hit) hits.push_back(int(i));
    }
    ImGui::SameLine();
    ImGui::Text("%zu found", hits.size());
    ImGui::SameLine();
    if ((ImGui::SmallButton("next") || searched) && !hits.empty()) {
      search_hit_ = (search_hit_ + 1) % int(hits.size());
      select_node(bundle_.nodes[size_t(hits[size_t(search_hit_)])].id);
    }
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(100);
  ImGui::SliderFloat("zoom", &zoom_, 0.1f, 2.0f, "%.2f");

  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImVec2 avail = ImGui::GetContentRegionAvail();
  if (avail.x < 50 || avail.y < 50) { ImGui::End(); return; }
  ImGui::InvisibleButton("canvas", avail, ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  bool hovered = ImGui::IsItemHovered();
  ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Right)) {
    pan_x_ += io.MouseDelta.x;
    pan_y_ += io.MouseDelta.y;
  }
  if (hovered && io.MouseWheel != 0) {
    float before = zoom_;
    zoom_ = std::clamp(zoom_ * (io.MouseWheel > 0 ? 1.15f : 1 / 1.15f), 0.1f, 2.0f);
    // Zoom about the mouse.
    float mx = io.MousePos.x - origin.x, my = io.MousePos.y - origin.y;
    pan_x_ = mx - (mx - pan_x_) * zoom_ / before;
    pan_y_ = my - (my - pan_y_) * zoom_ / before;
  }
  if (selection_.center_graph) {
    selection_.center_graph = false;
    auto it = layout_.index_of.find(selection_.node);
    if (it != layout_.index_of.end()) {
      const trace::LayoutNode& ln = layout_.nodes[size_t(it->second)];
      pan_x_ = avail.x / 2 - (ln.x + trace::GraphLayout::kNodeWidth / 2) * zoom_;
      pan_y_ = avail.y / 2 - (ln.y + trace::GraphLayout::kNodeHeight / 2) * zoom_;
    }
  }

  ImDrawList* draw = ImGui::GetWindowDrawList();
  ImVec2 clip_max(origin.x + avail.x, origin.y + avail.y);
  draw->PushClipRect(origin, clip_max, true);
  draw->AddRectFilled(origin, clip_max, IM_COL32(30, 30, 34, 255));
  auto to_screen = [&](float x, float y) { return ImVec2(origin.x + pan_x_ + x * zoom_, origin.y + pan_y_ + y * zoom_); };
  const float w = trace::GraphLayout::kNodeWidth, h = trace::GraphLayout::kNodeHeight;
  auto visible = [&](ImVec2 a, ImVec2 b) {
    return std::max(a.x, b.x) >= origin.x && std::min(a.x, b.x) <= clip_max.x && std::max(a.y, b.y) >= origin.y &&
           std::min(a.y, b.y) <= clip_max.y;
  };
  // Only what is on screen is drawn, so large graphs (~1000 nodes) stay interactive.
  for (const trace::LayoutEdge& e : layout_.edges) {
    const trace::LayoutNode& a = layout_.nodes[size_t(e.from)];
    const trace::LayoutNode& b = layout_.nodes[size_t(e.to)];
    ImVec2 p0 = to_screen(a.x + w / 2, a.y + h), p1 = to_screen(b.x + w / 2, b.y);
    if (!visible(p0, p1)) continue;
    float dy = (p1.y - p0.y) * 0.5f;
    draw->AddBezierCubic(p0, ImVec2(p0.x, p0.y + dy), ImVec2(p1.x, p1.y - dy), p1, IM_COL32(160, 160, 170, 140), 1.0f);
  }
  int hovered_node = -1;
  for (size_t i = 0; i < layout_.nodes.size(); ++i) {
    const trace::LayoutNode& ln = layout_.nodes[i];
    ImVec2 a = to_screen(ln.x, ln.y), b = to_screen(ln.x + w, ln.y + h);
    if (!visible(a, b)) continue;
    const trace::BundleNode& n = bundle_.nodes[i];
    int kernel = kernel_of(n.id);
    bool in_kernel = kernel >= 0 && kernel == selection_.kernel;
    draw->AddRectFilled(a, b, kernel_color(kernel, in_kernel || selection_.kernel < 0 ? 1.0f : 0.45f), 4 * zoom_);
    if (n.id == selection_.node) draw->AddRect(a, b, IM_COL32(255, 255, 255, 255), 4 * zoom_, 0, 3);
    else if (in_kernel) draw->AddRect(a, b, IM_COL32(230, 230, 230, 200), 4 * zoom_, 0, 1.5f);
    if (std::find(hits.begin(), hits.end(), int(i)) != hits.end())
      draw->AddRect(ImVec2(a.x - 3, a.y - 3), ImVec2(b.x + 3, b.y + 3), IM_COL32(255, 220, 0, 255), 4 * zoom_, 0, 2);
    if (zoom_ >= 0.45f) {
      std::string label = "%" + std::to_string(n.id) + " " + n.op;
      draw->AddText(ImVec2(a.x + 4, a.y + 2), IM_COL32(10, 10, 10, 255), label.c_str());
      if (zoom_ >= 0.7f && !n.origins.empty()) {
        const Origin& o = n.origins.front();
        std::string where = o.imported.empty() ? o.file.substr(o.file.find_last_of('/') + 1) + ":" + std::to_string(o.line)
                                               : o.imported;
        draw->AddText(ImVec2(a.x + 4, a.y + 2 + ImGui::GetTextLineHeight()), IM_COL32(30, 30, 30, 255), where.c_str());
      }
    }
    if (hovered && io.MousePos.x >= a.x && io.MousePos.x <= b.x && io.MousePos.y >= a.y && io.MousePos.y <= b.y)
      hovered_node = int(i);
  }
  draw->PopClipRect();
  if (hovered_node >= 0) {
    const trace::BundleNode& n = bundle_.nodes[size_t(hovered_node)];
    ImGui::BeginTooltip();
    ImGui::Text("%%%d %s -> %s", n.id, n.op.c_str(), n.output_types.empty() ? "" : n.output_types.front().c_str());
    for (const Origin& o : n.origins) ImGui::TextUnformatted(o.str().c_str());
    int kernel = kernel_of(n.id);
    if (kernel >= 0) ImGui::Text("kernel %d: %s", kernel, bundle_.kernels[size_t(kernel)].name.c_str());
    else if (!n.no_kernel.empty()) ImGui::Text("no kernel: %s", n.no_kernel.c_str());
    ImGui::EndTooltip();
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) select_node(n.id);
  }
  ImGui::End();
}

}  // namespace kiln::debugger
