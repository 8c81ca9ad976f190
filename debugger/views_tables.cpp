// kiln-debug's table views: kernels (sortable), memory (lifetime chart), guards/recompiles, accuracy.
#include <algorithm>
#include <set>

#include <imgui.h>

#include "debugger/app.h"

namespace kiln::debugger {

namespace {

std::string short_file(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / (1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

// "model.cpp:12,14 [encoder.0]": the distinct user lines a kernel's nodes came from.
std::string source_lines(const trace::Bundle& bundle, const trace::BundleKernel& k) {
  std::set<std::pair<std::string, int>> lines;
  std::set<std::string> imported;
  for (int id : k.origins)
    if (const trace::BundleNode* n = bundle.node(id))
      for (const Origin& o : n->origins) {
        if (!o.imported.empty()) imported.insert(o.imported);
        else lines.insert({short_file(o.file), o.line});
      }
  std::string out, file;
  for (const auto& [f, l] : lines) {
    if (f != file) out += (out.empty() ? "" : " ") + f + ":";
    else out += ",";
    out += std::to_string(l);
    file = f;
  }
  for (const std::string& s : imported) out += (out.empty() ? "" : " ") + s;
  return out;
}

}  // namespace

void App::kernels_view() {
  ImGui::Begin("Kernels");
  double total_us = 0;
  for (const trace::BundleKernel& k : bundle_.kernels) total_us += k.time_us.value_or(0);
  ImGui::Text("%zu kernels on %s; %.1f us timed%s", bundle_.kernels.size(), bundle_.device.c_str(), total_us,
              bundle_.kind == "program" ? "" : " (one kernel per node: not what a compiled program runs)");
  // A training step's kernels by phase (forward, backward, optimizer; bundles without phases show all).
  static const char* const kPhases[] = {"all", "forward", "backward", "optimizer"};
  for (int i = 0; i < 4; ++i) {
    if (i) ImGui::SameLine();
    ImGui::RadioButton(kPhases[i], &phase_filter_, i);
  }
  std::vector<int> shown;
  for (int k : kernel_order_) {
    const std::string& phase = bundle_.kernels[size_t(k)].phase;
    if (phase_filter_ == 0 || phase.empty() || phase.find(kPhases[phase_filter_]) != std::string::npos) shown.push_back(k);
  }
  enum Column { Index, Name, Phase, Time, Bytes, GBps, GFlops, Ops, Lines };
  ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                          ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV;
  if (ImGui::BeginTable("kernels", 9, flags)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("#", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_WidthFixed, 30, Index);
    ImGui::TableSetupColumn("kernel", ImGuiTableColumnFlags_WidthStretch, 0, Name);
    ImGui::TableSetupColumn("phase", ImGuiTableColumnFlags_WidthFixed, 70, Phase);
    ImGui::TableSetupColumn("time us", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending, 60, Time);
    ImGui::TableSetupColumn("bytes", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending, 70, Bytes);
    ImGui::TableSetupColumn("GB/s", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending, 50, GBps);
    ImGui::TableSetupColumn("GFLOP/s", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending, 60, GFlops);
    ImGui::TableSetupColumn("ops", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending, 30, Ops);
    ImGui::TableSetupColumn("source lines", ImGuiTableColumnFlags_WidthStretch, 0, Lines);
    ImGui::TableHeadersRow();
    auto bytes = [&](int k) { return bundle_.kernels[size_t(k)].bytes_read + bundle_.kernels[size_t(k)].bytes_written; };
    auto time = [&](int k) { return bundle_.kernels[size_t(k)].time_us.value_or(-1); };
    auto rate = [&](int k, double amount) { double t = time(k); return t > 0 ? amount / (t * 1e3) : -1; };
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsDirty && specs->SpecsCount > 0) {
      const ImGuiTableColumnSortSpecs& s = specs->Specs[0];
      auto key = [&](int k) -> double {
        const trace::BundleKernel& kk = bundle_.kernels[size_t(k)];
        switch (s.ColumnUserID) {
          case Time: return time(k);
          case Bytes: return double(bytes(k));
          case GBps: return rate(k, double(bytes(k)));
          case GFlops: return rate(k, double(kk.flops));
          case Ops: return double(kk.origins.size());
          case Lines: return double(source_lines(bundle_, kk).size());
          default: return double(k);
        }
      };
      std::stable_sort(kernel_order_.begin(), kernel_order_.end(), [&](int a, int b) {
        if (s.ColumnUserID == Name || s.ColumnUserID == Phase) {
          const trace::BundleKernel &ka = bundle_.kernels[size_t(a)], &kb = bundle_.kernels[size_t(b)];
          int c = s.ColumnUserID == Name ? ka.name.compare(kb.name) : ka.phase.compare(kb.phase);
          return s.SortDirection == ImGuiSortDirection_Ascending ? c < 0 : c > 0;
        }
        return s.SortDirection == ImGuiSortDirection_Ascending ? key(a) < key(b) : key(a) > key(b);
      });
      specs->SpecsDirty = false;
    }
    ImGuiListClipper clipper;
    clipper.Begin(int(shown.size()));
    while (clipper.Step())
      for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
        int k = shown[size_t(row)];
        const trace::BundleKernel& kk = bundle_.kernels[size_t(k)];
        ImGui::TableNextRow();
        ImGui::TableSetColumnIndex(0);
        ImGui::PushStyleColor(ImGuiCol_Text, kernel_color(k));
        char id[16];
        std::snprintf(id, sizeof id, "%d", k);
        if (ImGui::Selectable(id, k == selection_.kernel, ImGuiSelectableFlags_SpanAllColumns)) select_kernel(k);
        ImGui::PopStyleColor();
        ImGui::TableNextColumn(); ImGui::TextUnformatted(kk.name.c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(kk.phase.c_str());
        ImGui::TableNextColumn();
        if (kk.time_us) ImGui::Text("%.1f", *kk.time_us); else ImGui::TextDisabled("-");
        ImGui::TableNextColumn(); ImGui::TextUnformatted(human_bytes(bytes(k)).c_str());
        ImGui::TableNextColumn();
        if (double r = rate(k, double(bytes(k))); r >= 0) ImGui::Text("%.1f", r); else ImGui::TextDisabled("-");
        ImGui::TableNextColumn();
        if (double r = rate(k, double(kk.flops)); r >= 0) ImGui::Text("%.1f", r); else ImGui::TextDisabled("-");
        ImGui::TableNextColumn(); ImGui::Text("%zu", kk.origins.size());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(source_lines(bundle_, kk).c_str());
      }
    ImGui::EndTable();
  }
  ImGui::End();
}

void App::memory_view() {
  ImGui::Begin("Memory");
  const trace::BundleMemory& m = bundle_.memory;
  if (m.buffers.empty()) {
    ImGui::TextWrapped("No memory plan in this bundle (it was made without planning: every value in its own buffer).");
    ImGui::End();
    return;
  }
  ImGui::Text("naive %s, lower bound %s, planned %s, %zu arena(s)", human_bytes(m.naive_bytes).c_str(),
              human_bytes(m.lower_bound_bytes).c_str(), human_bytes(m.planned_bytes).c_str(), m.arena_bytes.size());
  // Lifetime chart: x = kernel index, y = offset in the arenas stacked; one rectangle per buffer.
  int kernels = std::max<int>(1, int(bundle_.kernels.size()));
  std::vector<int64_t> arena_base(m.arena_bytes.size() + 1, 0);
  for (size_t a = 0; a < m.arena_bytes.size(); ++a) arena_base[a + 1] = arena_base[a] + m.arena_bytes[a];
  int64_t total = std::max<int64_t>(1, arena_base.back());
  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImVec2 size = ImGui::GetContentRegionAvail();
  size.y = std::max(60.0f, size.y * 0.6f);
  ImGui::InvisibleButton("chart", size);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(origin, ImVec2(origin.x + size.x, origin.y + size.y), IM_COL32(30, 30, 34, 255));
  auto sx = [&](double k) { return origin.x + float(k / kernels) * size.x; };
  auto sy = [&](double bytes) { return origin.y + size.y - float(bytes / double(total)) * size.y; };
  int hovered = -1;
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const trace::BundleBuffer& b = m.buffers[i];
    int64_t base = arena_base[size_t(std::clamp(b.arena, 0, int(m.arena_bytes.size()) - 1))] + b.offset;
    ImVec2 a(sx(b.first), sy(double(base + b.bytes))), c(sx(b.last + 1), sy(double(base)));
    bool selected = selection_.kernel >= b.first && selection_.kernel <= b.last;
    draw->AddRectFilled(a, c, kernel_color(b.first, selected ? 0.95f : 0.5f));
    draw->AddRect(a, c, IM_COL32(0, 0, 0, 160));
    ImVec2 mouse = ImGui::GetIO().MousePos;
    if (ImGui::IsItemHovered() && mouse.x >= a.x && mouse.x <= c.x && mouse.y >= a.y && mouse.y <= c.y) hovered = int(i);
  }
  // The peak: no plan can use less than the most bytes live at once.
  float peak = sy(double(m.lower_bound_bytes));
  draw->AddLine(ImVec2(origin.x, peak), ImVec2(origin.x + size.x, peak), IM_COL32(255, 80, 80, 255), 1.5f);
  draw->AddText(ImVec2(origin.x + 4, peak - ImGui::GetTextLineHeight()), IM_COL32(255, 120, 120, 255), "peak live");
  if (selection_.kernel >= 0) {
    float x = sx(selection_.kernel + 0.5);
    draw->AddLine(ImVec2(x, origin.y), ImVec2(x, origin.y + size.y), IM_COL32(255, 255, 255, 160));
  }
  if (hovered >= 0) {
    const trace::BundleBuffer& b = m.buffers[size_t(hovered)];
    ImGui::SetTooltip("%s\n%s at arena %d + %lld\nlive kernels %d..%d%s", b.name.c_str(), human_bytes(b.bytes).c_str(),
                      b.arena, static_cast<long long>(b.offset), b.first, b.last, b.in_place ? " (in place)" : "");
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) select_kernel(b.first);
  }
  if (ImGui::BeginTable("buffers", 6, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY)) {
    for (const char* h : {"value", "bytes", "arena", "offset", "first", "last"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(int(m.buffers.size()));
    while (clipper.Step())
      for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
        const trace::BundleBuffer& b = m.buffers[size_t(i)];
        ImGui::TableNextRow();
        ImGui::TableNextColumn(); ImGui::TextUnformatted(b.name.c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(human_bytes(b.bytes).c_str());
        ImGui::TableNextColumn(); ImGui::Text("%d", b.arena);
        ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(b.offset));
        ImGui::TableNextColumn(); ImGui::Text("%d", b.first);
        ImGui::TableNextColumn(); ImGui::Text("%d", b.last);
      }
    ImGui::EndTable();
  }
  ImGui::End();
}

void App::guards_view() {
  ImGui::Begin("Guards");
  auto section = [&](const char* title, const std::vector<trace::BundleNote>& notes) {
    if (!ImGui::CollapsingHeader((std::string(title) + " (" + std::to_string(notes.size()) + ")").c_str(),
                                 ImGuiTreeNodeFlags_DefaultOpen))
      return;
    if (notes.empty()) ImGui::TextDisabled("  none recorded");
    for (size_t i = 0; i < notes.size(); ++i) {
      const trace::BundleNote& n = notes[i];
      ImGui::PushID(title);
      ImGui::PushID(int(i));
      std::string where = n.file.empty() ? "" : short_file(n.file) + ":" + std::to_string(n.line) + "  ";
      if (ImGui::Selectable((where + n.text).c_str(), selection_.file == n.file && selection_.line == n.line) &&
          !n.file.empty()) {
        selection_.file = n.file;
        selection_.line = n.line;
        selection_.scroll_source = true;
      }
      ImGui::PopID();
      ImGui::PopID();
    }
  };
  section("Guards", bundle_.guards);
  section("Recompiles", bundle_.recompiles);
  section("Graph breaks", bundle_.graph_breaks);
  ImGui::End();
}

void App::accuracy_view() {
  ImGui::Begin("Accuracy");
  int first_bad = -1;
  for (size_t i = 0; i < bundle_.accuracy.size() && first_bad < 0; ++i)
    if (!bundle_.accuracy[i].passed) first_bad = int(i);
  if (first_bad >= 0) {
    const trace::AccuracyRow& r = bundle_.accuracy[size_t(first_bad)];
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "first kernel past tolerance: %d %s", r.kernel, r.name.c_str());
    if (!r.worst.empty()) ImGui::TextWrapped("%s", r.worst.c_str());
    for (const std::string& line : r.lines) ImGui::TextDisabled("  %s", line.c_str());
  }
  if (ImGui::BeginTable("accuracy", 6, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY)) {
    for (const char* h : {"kernel", "max abs", "max rel", "tolerance", "ok", "worst"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const trace::AccuracyRow& r : bundle_.accuracy) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      std::string label = std::to_string(r.kernel) + " " +
                          (r.kernel >= 0 && r.kernel < int(bundle_.kernels.size()) ? bundle_.kernels[size_t(r.kernel)].name : "?");
      if (ImGui::Selectable(label.c_str(), r.kernel == selection_.kernel, ImGuiSelectableFlags_SpanAllColumns))
        select_kernel(r.kernel);
      ImGui::TableNextColumn(); ImGui::Text("%.3g", r.max_abs);
      ImGui::TableNextColumn(); ImGui::Text("%.3g", r.max_rel);
      ImGui::TableNextColumn(); ImGui::Text("%.3g", r.tolerance);
      ImGui::TableNextColumn();
      ImGui::TextColored(r.passed ? ImVec4(0.4f, 0.9f, 0.4f, 1) : ImVec4(1, 0.3f, 0.3f, 1), r.passed ? "ok" : "FAIL");
      ImGui::TableNextColumn(); ImGui::TextUnformatted(r.worst.c_str());
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace kiln::debugger
