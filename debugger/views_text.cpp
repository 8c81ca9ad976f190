// kiln-debug's text views: the user's source with the selected kernel's lines, the generated code with
// each line's origin, and the IR before/after each pass.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <imgui.h>

#include "debugger/app.h"

namespace kiln::debugger {

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// A text line with a full-width background, for highlighted rows.
void highlighted_line(const std::string& text, ImU32 background) {
  ImVec2 p = ImGui::GetCursorScreenPos();
  float width = std::max(ImGui::GetContentRegionAvail().x, ImGui::CalcTextSize(text.c_str()).x);
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + width, p.y + ImGui::GetTextLineHeight()), background);
  ImGui::TextUnformatted(text.c_str());
}

}  // namespace

const std::vector<std::string>& App::file_lines(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return files_.emplace(path, std::move(lines)).first->second;
}

void App::source_view() {
  ImGui::Begin("Source");
  // The files the selected kernel's nodes came from, and their lines.
  std::set<std::string> kernel_files;
  std::set<std::pair<std::string, int>> kernel_lines;
  if (selection_.kernel >= 0)
    for (int id : bundle_.kernels[size_t(selection_.kernel)].origins)
      if (const trace::BundleNode* n = bundle_.node(id))
        for (const Origin& o : n->origins)
          if (!o.file.empty()) {
            kernel_files.insert(o.file);
            kernel_lines.insert({o.file, o.line});
          }
  if (selection_.file.empty() && !kernel_files.empty()) selection_.file = *kernel_files.begin();
  if (kernel_files.size() > 1 && ImGui::BeginCombo("file", selection_.file.c_str())) {
    for (const std::string& f : kernel_files)
      if (ImGui::Selectable(f.c_str(), f == selection_.file)) selection_.file = f;
    ImGui::EndCombo();
  } else {
    ImGui::TextDisabled("%s", selection_.file.empty() ? "(no source: nodes have no file)" : selection_.file.c_str());
  }
  const std::vector<std::string>& lines = selection_.file.empty() ? file_lines("") : file_lines(selection_.file);
  ImGui::BeginChild("text", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  if (lines.empty() && !selection_.file.empty()) {
    ImGui::TextWrapped("%s is not on this machine; the bundle still names these lines:", selection_.file.c_str());
    for (const auto& [f, l] : kernel_lines) ImGui::BulletText("%s:%d", f.c_str(), l);
  }
  float line_h = ImGui::GetTextLineHeightWithSpacing();
  if (selection_.scroll_source && selection_.line > 0 && !lines.empty()) {
    ImGui::SetScrollY(std::max(0.0f, (float(selection_.line) - 6) * line_h));
    selection_.scroll_source = false;
  }
  ImGuiListClipper clipper;
  clipper.Begin(int(lines.size()));
  char number[16];
  while (clipper.Step())
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      int line = i + 1;
      std::snprintf(number, sizeof number, "%5d  ", line);
      std::string text = number + lines[size_t(i)];
      if (line == selection_.line) highlighted_line(text, IM_COL32(200, 160, 40, 150));
      else if (kernel_lines.count({selection_.file, line})) highlighted_line(text, kernel_color(selection_.kernel, 0.35f));
      else ImGui::TextUnformatted(text.c_str());
    }
  ImGui::EndChild();
  ImGui::End();
}

void App::code_view() {
  ImGui::Begin("Generated code");
  if (selection_.kernel < 0) {
    ImGui::TextDisabled("select a kernel");
    ImGui::End();
    return;
  }
  const trace::BundleKernel& k = bundle_.kernels[size_t(selection_.kernel)];
  ImGui::Text("kernel %d %s: %zu launch(es)", selection_.kernel, k.name.c_str(), k.sources.size());
  if (ImGui::BeginTabBar("launches")) {
    for (size_t s = 0; s < k.sources.size(); ++s) {
      const trace::KernelSource& src = k.sources[s];
      std::string tab = src.dialect + " " + std::to_string(s);
      if (ImGui::BeginTabItem(tab.c_str())) {
        char time[32] = "";
        if (src.time_us) std::snprintf(time, sizeof time, ", %.1f us", *src.time_us);
        ImGui::TextDisabled("%s, groups %u x %u x %u of %d%s%s", src.file.c_str(), src.groups[0], src.groups[1],
                            src.groups[2], src.workgroup_size, src.is_template ? " (the backend's template)" : "", time);
        std::vector<std::string> lines = split_lines(src.text);
        ImGui::BeginChild("code", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
        int first_hit = -1;
        for (size_t i = 0; i < lines.size(); ++i) {
          const std::vector<int> none;
          const std::vector<int>& origins = i < src.line_origins.size() ? src.line_origins[i] : none;
          bool selected = std::find(origins.begin(), origins.end(), selection_.node) != origins.end();
          // The header comment names every origin; scroll to the first statement instead.
          if (selected && first_hit < 0 && lines[i].find("//") != lines[i].find_first_not_of(' ')) first_hit = int(i);
          ImGui::PushID(int(i));
          if (selected) highlighted_line(lines[i], IM_COL32(200, 160, 40, 150));
          else if (!origins.empty()) highlighted_line(lines[i], kernel_color(selection_.kernel, 0.18f));
          else ImGui::TextUnformatted(lines[i].c_str());
          if (!origins.empty() && ImGui::IsItemHovered()) {
            ImGui::BeginTooltip();
            for (int id : origins)
              if (const trace::BundleNode* n = bundle_.node(id))
                ImGui::Text("%%%d %s  %s", id, n->op.c_str(), n->origins.empty() ? "" : n->origins.front().str().c_str());
            ImGui::EndTooltip();
            // Clicking a line selects the node it computes, which moves the source view to its line.
            if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) select_node(origins.back());
          }
          ImGui::PopID();
        }
        if (selection_.scroll_code && first_hit >= 0) {
          ImGui::SetScrollY(std::max(0.0f, float(first_hit - 4) * ImGui::GetTextLineHeightWithSpacing()));
          selection_.scroll_code = false;
        }
        ImGui::EndChild();
        ImGui::EndTabItem();
      }
      if (!src.spirv.empty() && ImGui::BeginTabItem((std::string(src.dialect == "cuda" ? "PTX " : "SPIR-V ") + std::to_string(s)).c_str())) {
        ImGui::BeginChild("spirv", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
        ImGui::TextUnformatted(src.spirv.c_str());
        ImGui::EndChild();
        ImGui::EndTabItem();
      }
    }
    ImGui::EndTabBar();
  }
  ImGui::End();
}

void App::passes_view() {
  ImGui::Begin("Passes");
  if (bundle_.passes.empty()) {
    ImGui::TextDisabled("no pass records in this bundle");
    ImGui::End();
    return;
  }
  pass_ = std::clamp(pass_, 0, int(bundle_.passes.size()) - 1);
  ImGui::BeginChild("list", ImVec2(150, 0), true);
  for (size_t i = 0; i < bundle_.passes.size(); ++i) {
    const trace::BundlePass& p = bundle_.passes[i];
    char label[160];
    std::snprintf(label, sizeof label, "%zu %s##%zu", i, p.name.c_str(), i);
    if (ImGui::Selectable(label, int(i) == pass_)) pass_ = int(i);
    if (ImGui::IsItemHovered() && (!p.stats.empty() || p.seconds > 0)) {
      ImGui::BeginTooltip();
      ImGui::Text("%.3f ms", p.seconds * 1e3);
      for (const auto& [key, value] : p.stats) ImGui::Text("%s: %lld", key.c_str(), static_cast<long long>(value));
      ImGui::EndTooltip();
    }
  }
  ImGui::EndChild();
  ImGui::SameLine();
  // Before = the previous pass's output; lines only in one side are tinted. Diffed once per selection.
  if (diff_pass_ != pass_) {
    diff_pass_ = pass_;
    before_ = pass_ > 0 ? split_lines(bundle_.passes[size_t(pass_ - 1)].ir) : std::vector<std::string>{};
    after_ = split_lines(bundle_.passes[size_t(pass_)].ir);
    std::multiset<std::string> before_set(before_.begin(), before_.end()), after_set(after_.begin(), after_.end());
    before_only_.assign(before_.size(), false);
    after_only_.assign(after_.size(), false);
    for (size_t i = 0; i < before_.size(); ++i) before_only_[i] = !after_set.count(before_[i]);
    for (size_t i = 0; i < after_.size(); ++i) after_only_[i] = pass_ > 0 && !before_set.count(after_[i]);
  }
  float half = (ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ItemSpacing.x) / 2;
  auto column = [&](const char* id, const std::vector<std::string>& lines, const std::vector<bool>& only, ImU32 tint) {
    ImGui::BeginChild(id, ImVec2(half, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
    ImGuiListClipper clipper;
    clipper.Begin(int(lines.size()));
    while (clipper.Step())
      for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
        if (only[size_t(i)]) highlighted_line(lines[size_t(i)], tint);
        else ImGui::TextUnformatted(lines[size_t(i)].c_str());
      }
    ImGui::EndChild();
  };
  column("before", before_, before_only_, IM_COL32(160, 50, 50, 120));
  ImGui::SameLine();
  column("after", after_, after_only_, IM_COL32(50, 140, 60, 120));
  ImGui::End();
}

}  // namespace kiln::debugger
