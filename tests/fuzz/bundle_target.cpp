// Fuzz target over kiln-debug's input: a trace bundle, loaded, then every view drawn for a few
// frames with ImGui's null renderer, with each kernel and node selected in turn.
//
// The input packs a bundle folder into one file: bundle.json's text, then each further file as a
// line "@@file NAME" and its contents (tests/fuzz/pack_bundle.sh writes these from real bundles).
#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/support/error.h"
#include "core/trace/bundle.h"
#include "debugger/app.h"
#include "debugger/window.h"
#include "fuzz/fuzz_targets.h"

namespace kiln::fuzz {
namespace {

constexpr std::string_view kFileMarker = "\n@@file ";

// A name the scratch folder may hold: relative, no "..", plain characters.
bool safe_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name.front() == '/' || name.back() == '/' ||
      name.find("..") != std::string::npos)
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '/';
  });
}

// Unpacks the input into a fresh folder; returns its path.
std::string unpack(std::string_view input) {
  const std::filesystem::path dir = std::filesystem::path(scratch_dir()) / "bundle";
  std::filesystem::remove_all(dir);
  size_t marker = input.find(kFileMarker);
  std::string_view json = input.substr(0, marker);
  write_scratch("bundle/bundle.json", reinterpret_cast<const uint8_t*>(json.data()), json.size());
  while (marker != std::string_view::npos) {
    const size_t name_at = marker + kFileMarker.size();
    const size_t name_end = input.find('\n', name_at);
    if (name_end == std::string_view::npos) break;
    const std::string name(input.substr(name_at, name_end - name_at));
    marker = input.find(kFileMarker, name_end);
    const size_t body_size = marker == std::string_view::npos ? std::string_view::npos : marker - name_end - 1;
    const std::string_view body = input.substr(name_end + 1, body_size);
    if (!safe_name(name)) continue;
    try {  // a name taken by a folder already ("sources" after "sources/a") is skipped
      write_scratch("bundle/" + name, reinterpret_cast<const uint8_t*>(body.data()), body.size());
    } catch (const Error&) {
    }
  }
  return dir.string();
}

}  // namespace

int bundle(const uint8_t* data, size_t size) {
  const std::string dir = unpack(std::string_view(reinterpret_cast<const char*>(data), size));
  trace::Bundle loaded;
  try {
    loaded = trace::read_bundle(dir);
  } catch (const Error&) {
    return 0;
  }
  const int kernels = int(loaded.kernels.size());
  std::vector<int> node_ids;
  for (const trace::BundleNode& node : loaded.nodes) node_ids.push_back(node.id);
  try {
    debugger::App app(std::move(loaded), dir);
    debugger::WindowOptions options;
    options.frames = 2;
    debugger::run_null(app, options);
    // A frame after each selection the views can make: kernels, nodes, and ids past both ends.
    options.frames = 1;
    for (int k = -1; k <= std::min(kernels, 8); ++k) {
      app.select_kernel(k);
      debugger::run_null(app, options);
    }
    node_ids.push_back(-7);
    for (size_t i = 0; i < node_ids.size() && i < 9; ++i) {
      app.select_node(node_ids[node_ids.size() - 1 - i]);
      debugger::run_null(app, options);
    }
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace kiln::fuzz
