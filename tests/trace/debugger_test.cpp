// kiln-debug as a program: headless (ImGui null renderer) frames over every view, exports from the
// command line, a clear error for a missing bundle, and a real OpenGL screenshot under Xvfb.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/ir/text.h"
#include "core/trace/bundle.h"
#include "trace/trace_test_model.h"

#ifdef KILN_DEBUG_EXE
#include <stb/stb_image.h>
#endif

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int status;
  std::string output;
};

CommandResult run(const std::string& command) {
  CommandResult r{-1, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 512> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

#ifdef KILN_DEBUG_EXE
const std::string kExe = KILN_DEBUG_EXE;

fs::path model_bundle(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_debug_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing_model::Traced traced = testing_model::trace_model();
  trace::Bundle b = trace::make_bundle(traced.tracer->graph(), {.name = "model"});
  trace::record_guards(b, traced.tracer->guards());
  trace::write_bundle(dir.string(), b);
  return dir;
}

TEST(KilnDebug, HeadlessNullRendererDrawsEveryViewForFrames) {
  fs::path dir = model_bundle("headless");
  CommandResult r = run(kExe + " --headless --frames 5 " + dir.string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("5 frames"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(KilnDebug, StaysUnder33MsPerFrameOnAThousandNodeGraph) {
  // A 1000-node chain: the size of ViT-B/16's graph. The null renderer times the views' own work.
  std::string text = "graph @big(%0: f32[64,64]) {\n";
  for (int i = 1; i <= 1000; ++i)
    text += "  %" + std::to_string(i) + ": f32[64,64] = " + (i % 2 ? "relu" : "neg") + "(%" + std::to_string(i - 1) + ")\n";
  text += "  return %1000\n}\n";
  trace::Bundle b = trace::make_bundle(parse_graph(text), {.name = "big"});
  fs::path dir = fs::temp_directory_path() / ("kiln_debug_test_big_" + std::to_string(::getpid()));
  trace::write_bundle(dir.string(), b);
  auto start = std::chrono::steady_clock::now();
  CommandResult r = run(kExe + " --headless --frames 60 --kernel 500 " + dir.string());
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 60;
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_LT(ms, 33.0) << "ms per frame, startup included";
  std::printf("kiln-debug headless: %.2f ms/frame on 1000 nodes (startup included)\n", ms);
  fs::remove_all(dir);
}

TEST(KilnDebug, ExportsTraceAndDotFromTheCommandLine) {
  fs::path dir = model_bundle("exports");
  fs::path json = dir / "trace.json", dot = dir / "graph.dot";
  CommandResult r = run(kExe + " --export-trace " + json.string() + " --export-dot " + dot.string() + " " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(json);
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_FALSE(j.at("traceEvents").empty());
  std::ifstream d(dot);
  std::string first;
  std::getline(d, first);
  EXPECT_EQ(first.rfind("digraph", 0), 0u) << first;
  fs::remove_all(dir);
}

TEST(KilnDebug, MissingBundleIsAClearError) {
  CommandResult r = run(kExe + " --headless /nonexistent/kiln_bundle");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("/nonexistent/kiln_bundle/bundle.json"), std::string::npos) << r.output;
  CommandResult bad = run(kExe + " --frobnicate x");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("--frobnicate"), std::string::npos) << bad.output;
}

TEST(KilnDebug, ScreenshotUnderXvfbIsNonBlank) {
  if (run("command -v xvfb-run").status != 0) GTEST_SKIP() << "xvfb-run is not installed (Debian package xvfb)";
  fs::path dir = model_bundle("screenshot");
  fs::path png = dir / "shot.png";
  CommandResult r = run("xvfb-run -a -s '-screen 0 1600x1000x24' " + kExe + " --headless --size 1280x800 --frames 3 --screenshot " +
              png.string() + " " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  int w = 0, h = 0, channels = 0;
  unsigned char* pixels = stbi_load(png.string().c_str(), &w, &h, &channels, 4);
  ASSERT_NE(pixels, nullptr) << "not a PNG: " << png;
  EXPECT_EQ(w, 1280);
  EXPECT_EQ(h, 800);
  // A blank or one-colour frame means nothing rendered; the views draw text, nodes and tables.
  std::set<uint32_t> colours;
  for (int i = 0; i < w * h; ++i) {
    uint32_t c;
    std::memcpy(&c, pixels + 4 * i, 4);
    colours.insert(c);
  }
  stbi_image_free(pixels);
  EXPECT_GT(colours.size(), 50u);
  fs::remove_all(dir);
}
#else
TEST(KilnDebug, SkippedWithoutTheDebugger) {
  GTEST_SKIP() << "kiln-debug was not built (needs libimgui-dev, libglfw3-dev and OpenGL)";
}
#endif

}  // namespace
}  // namespace kiln
