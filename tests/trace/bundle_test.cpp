// Trace bundles: write/read round trip, the schema's version field, provenance completeness on a
// traced nn model, the graph layout's invariants, and the Chrome trace / DOT exports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/frontend/nn/layers.h"
#include "core/frontend/nn/sequential.h"
#include "core/frontend/ops.h"
#include "core/frontend/tracer.h"
#include "core/ir/text.h"
#include "core/support/error.h"
#include "core/trace/bundle.h"
#include "core/trace/export.h"
#include "core/trace/layout.h"
#include "trace/trace_test_model.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using trace::Bundle;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_trace_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every field set, so the round trip exercises the whole schema.
Bundle hand_made_bundle() {
  Bundle b;
  b.kind = "program";
  b.name = "block";
  b.device = "vulkan (llvmpipe)";
  b.passes = {{"input", "graph @g() {\n}\n", 0, {}}, {"cse", "graph @g() {\n}\n", 0.0012, {{"nodes_removed", 3}}}};
  b.graph_inputs = {{0, "x", "f32[s0,4]"}};
  trace::BundleNode n;
  n.id = 5;
  n.op = "relu";
  n.inputs = {0};
  n.outputs = {1};
  n.input_types = {"f32[s0,4]"};
  n.output_types = {"f32[s0,4]"};
  n.origins = {{"/src/model.cpp", 12, "block", "encoder.0", ""}, {"", 0, "", "", "/layer1/Relu"}};
  b.nodes = {n, {6, "constant", {}, {2}, {}, {"f32[]"}, {}, "constant: uploaded once"}};
  b.graph_outputs = {1};
  trace::BundleKernel k;
  k.name = "relu_f32_r2";
  k.origins = {5};
  trace::KernelSource src;
  src.text = "void main() {\n  b1[gid] = max(v0, 0.0);\n}\n";
  src.line_origins = {{}, {5}, {}};
  src.spirv = "; SPIR-V\nOpCapability Shader\n";
  src.groups = {4, 2, 1};
  src.workgroup_size = 128;
  src.program = "relu_f32_r2";
  src.time_us = 0.25;
  k.sources = {src, src};
  k.sources[1].dialect = "cuda";
  k.sources[1].spirv = "// ptx\n";
  k.sources[1].is_template = true;
  k.sources[1].time_us = std::nullopt;
  k.bytes_read = 64;
  k.bytes_written = 64;
  k.flops = 16;
  k.phase = "backward+optimizer";
  k.start_us = 1.5;
  k.time_us = 0.1;  // not exactly representable: the writer must keep every digit
  b.kernels = {k, {"unt", {6}, {}, 0, 0, 0, "forward", std::nullopt, std::nullopt}};
  b.memory = {{{1, "%1 f32[8,4]", 128, 0, 256, 0, 1, true}}, {4096}, 8192, 2048, 4096};
  b.guards = {{"s0 > 10 was false", "/src/model.cpp", 13}};
  b.recompiles = {{"arg 0 dim 0: size was 2, now 3", "", 0}};
  b.graph_breaks = {{"item() on a traced tensor", "/src/model.cpp", 20}};
  b.accuracy = {{0, 1e-7, 2.5e-6, 1e-4, true, "relu_f32_r2", "", 5, {}},
                {1, 0.5, INFINITY, 1e-4, false, "unt", "%1 f32[8,4] element 3: got nan, want 0", 6,
                 {"launch 0 line 2: b1[gid] = max(v0, 0.0);"}}};
  return b;
}

// The reader fills each source's file name, which an in-memory bundle has no use for.
Bundle without_file_names(Bundle b) {
  for (auto& k : b.kernels)
    for (auto& s : k.sources) s.file.clear();
  return b;
}

TEST(TraceBundle, RoundTripKeepsEveryField) {
  Bundle original = hand_made_bundle();
  fs::path dir = fresh_dir("roundtrip");
  trace::write_bundle(dir.string(), original);
  Bundle read = trace::read_bundle(dir.string());
  EXPECT_EQ(read.kernels[0].sources[0].file, "sources/kernel_0.glsl");
  EXPECT_EQ(read.kernels[0].sources[1].file, "sources/kernel_0.1.cu");
  EXPECT_TRUE(fs::exists(dir / "sources/kernel_0.spvasm"));
  EXPECT_EQ(slurp(dir / "sources/kernel_0.glsl"), original.kernels[0].sources[0].text);
  EXPECT_TRUE(without_file_names(read) == original);
  EXPECT_EQ(read.kernels[0].time_us, 0.1);
  EXPECT_FALSE(read.kernels[1].time_us.has_value());
  fs::remove_all(dir);
}

TEST(TraceBundle, JsonCarriesSchemaVersionTwo) {
  fs::path dir = fresh_dir("version");
  trace::write_bundle(dir.string(), hand_made_bundle());
  nlohmann::json j = nlohmann::json::parse(slurp(dir / "bundle.json"));
  EXPECT_EQ(j.at("version"), 2);
  EXPECT_EQ(trace::kBundleVersion, 2);
  EXPECT_EQ(j.at("kind"), "program");
  for (const char* key : {"passes", "graph", "kernels", "memory", "guards", "recompiles", "graph_breaks", "accuracy"})
    EXPECT_TRUE(j.contains(key)) << key;
  // JSON has no infinity: an infinite error is written as null and read back as infinity.
  EXPECT_TRUE(j.at("accuracy")[1].at("max_rel").is_null());
  fs::remove_all(dir);
}

TEST(TraceBundle, VersionOneBundleStillReads) {
  fs::path dir = fresh_dir("v1");
  trace::write_bundle(dir.string(), hand_made_bundle());
  nlohmann::json j = nlohmann::json::parse(slurp(dir / "bundle.json"));
  j["version"] = 1;
  j.erase("kind");
  for (auto& k : j["kernels"])
    for (auto& src : k["sources"]) {
      src.erase("program");
      src.erase("template");
      src.erase("time_us");
    }
  std::ofstream(dir / "bundle.json") << j.dump();
  Bundle read = trace::read_bundle(dir.string());
  EXPECT_EQ(read.version, 1);
  EXPECT_EQ(read.kind, "per-node");
  EXPECT_FALSE(read.kernels[0].sources[0].time_us.has_value());
  EXPECT_EQ(read.kernels[0].sources[0].text, hand_made_bundle().kernels[0].sources[0].text);
  fs::remove_all(dir);
}

TEST(TraceBundle, ReaderRejectsNewerVersionMissingVersionAndBadJson) {
  fs::path dir = fresh_dir("reject");
  trace::write_bundle(dir.string(), hand_made_bundle());
  nlohmann::json j = nlohmann::json::parse(slurp(dir / "bundle.json"));
  j["version"] = 3;
  std::ofstream(dir / "bundle.json") << j.dump();
  try {
    trace::read_bundle(dir.string());
    FAIL() << "a version 3 bundle was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 3"), std::string::npos) << e.what();
  }
  j.erase("version");
  std::ofstream(dir / "bundle.json") << j.dump();
  EXPECT_THROW(trace::read_bundle(dir.string()), Error);
  std::ofstream(dir / "bundle.json") << "{\"version\": 1, ";
  try {
    trace::read_bundle(dir.string());
    FAIL() << "truncated JSON was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bundle.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(trace::read_bundle((dir / "missing").string()), Error);
  fs::remove_all(dir);
}


// Numbers that do not fit their field are refused with the field's name; casting them would be
// undefined behaviour (1e300 into an int).
TEST(TraceBundle, ReaderRefusesNumbersOutsideTheirFieldsRange) {
  fs::path dir = fresh_dir("ranges");
  trace::write_bundle(dir.string(), hand_made_bundle());
  const nlohmann::json good = nlohmann::json::parse(slurp(dir / "bundle.json"));
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& field,
                     const std::string& why) {
    nlohmann::json j = good;
    edit(j);
    std::ofstream(dir / "bundle.json") << j.dump();
    try {
      trace::read_bundle(dir.string());
      ADD_FAILURE() << field << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("field '" + field + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused([](auto& j) { j["kernels"][0]["sources"][0]["workgroup_size"] = 8.9e44; },
          "workgroup_size", "not an integer from");
  refused([](auto& j) { j["kernels"][0]["sources"][0]["groups"] = {1, -1, 1}; }, "groups[1]",
          "to 4294967295");
  refused([](auto& j) { j["kernels"][0]["sources"][0]["groups"] = {1, 1}; }, "groups",
          "has 2 values, not 3");
  refused([](auto& j) { j["graph"]["nodes"][0]["id"] = 1.5; }, "id", "not an integer");
  refused([](auto& j) { j["memory"]["naive_bytes"] = 1e19; }, "naive_bytes", "not an integer");
  refused([](auto& j) { j["kernels"][0]["origins"] = {0, "x"}; }, "origins[1]", "not a number");
  // Integers written as integral floats still read.
  nlohmann::json j = good;
  j["kernels"][0]["sources"][0]["workgroup_size"] = 64.0;
  std::ofstream(dir / "bundle.json") << j.dump();
  EXPECT_EQ(trace::read_bundle(dir.string()).kernels[0].sources[0].workgroup_size, 64);
  fs::remove_all(dir);
}
// Lines that compute a value: SSA temporaries, stores, and the reduction's combine step.
bool computes(const std::string& line) {
  static const std::regex temp(R"(^\s+\w+ v\d+ = )"), store(R"(^\s+b\d+\[gid\] = )"),
      combine(R"(^\s+(acc [+*]?= |if \(r == 0))");
  return std::regex_search(line, temp) || std::regex_search(line, store) || std::regex_search(line, combine);
}

TEST(TraceBundle, TracedModelHasCompleteProvenance) {
  testing_model::Traced traced = testing_model::trace_model();
  Bundle b = trace::make_bundle(traced.tracer->graph(), {.name = "mlp"});
  trace::record_guards(b, traced.tracer->guards());
  ASSERT_GT(b.nodes.size(), 8u);
  std::set<int> node_ids;
  for (const auto& n : b.nodes) node_ids.insert(n.id);

  std::map<int, int> kernels_per_node;
  for (const auto& k : b.kernels)
    for (int id : k.origins) {
      EXPECT_TRUE(node_ids.count(id)) << k.name << " names node %" << id << " that is not in the graph";
      ++kernels_per_node[id];
    }
  for (const auto& n : b.nodes) {
    int count = kernels_per_node.count(n.id) ? kernels_per_node[n.id] : 0;
    if (n.no_kernel.empty()) EXPECT_EQ(count, 1) << "%" << n.id << " " << n.op;
    else EXPECT_EQ(count, 0) << "%" << n.id << " " << n.op << " has no_kernel but a kernel";
    // Every node was traced from this test's model, so each points at the model's file and a real line.
    ASSERT_FALSE(n.origins.empty()) << "%" << n.id << " " << n.op;
    EXPECT_NE(n.origins[0].file.find("trace_test_model.h"), std::string::npos) << n.origins[0].str();
    EXPECT_GT(n.origins[0].line, 0);
  }
  int computing = 0;
  for (const auto& k : b.kernels)
    for (const auto& src : k.sources) {
      std::istringstream in(src.text);
      std::set<int> named;
      int i = 0;
      for (std::string line; std::getline(in, line); ++i) {
        ASSERT_LT(size_t(i), src.line_origins.size()) << k.name;
        for (int id : src.line_origins[size_t(i)]) named.insert(id);
        if (!computes(line)) continue;
        ++computing;
        EXPECT_FALSE(src.line_origins[size_t(i)].empty()) << k.name << " line " << i + 1 << ": " << line;
      }
      for (int id : named) EXPECT_TRUE(node_ids.count(id)) << k.name << " line origin %" << id;
    }
  EXPECT_GT(computing, 20);
  // The model's shape decision is recorded at the line that made it.
  ASSERT_EQ(b.guards.size(), 1u);
  EXPECT_EQ(b.guards[0].line, testing_model::kDecisionLine);
  EXPECT_NE(b.guards[0].text.find("s0"), std::string::npos) << b.guards[0].text;
}

TEST(TraceBundle, MakeBundleCountsBytesAndMatmulFlops) {
  Graph g = parse_graph(
      "graph @g(%0: f32[8,16], %1: f32[16,4]) {\n"
      "  %2: f32[8,4] = matmul(%0, %1)\n"
      "  %3: f32[8,4] = relu(%2)\n"
      "  return %3\n"
      "}\n");
  Bundle b = trace::make_bundle(g);
  ASSERT_EQ(b.kernels.size(), 2u);
  EXPECT_EQ(b.kernels[0].flops, 2 * 8 * 4 * 16);
  EXPECT_EQ(b.kernels[0].bytes_read, (8 * 16 + 16 * 4) * 4);
  EXPECT_EQ(b.kernels[0].bytes_written, 8 * 4 * 4);
  EXPECT_EQ(b.kernels[1].flops, 32);
  ASSERT_EQ(b.passes.size(), 1u);
  EXPECT_EQ(b.passes[0].ir, print_graph(g, "graph"));
}

TEST(TraceLayout, LayersAreLongestPathsAndNodesDoNotOverlap) {
  // A diamond with a long arm: %5 must sit below the longest path through it.
  Graph g = parse_graph(
      "graph @g(%0: f32[4]) {\n"
      "  %1: f32[4] = relu(%0)\n"
      "  %2: f32[4] = neg(%1)\n"
      "  %3: f32[4] = exp(%2)\n"
      "  %4: f32[4] = abs(%0)\n"
      "  %5: f32[4] = add(%3, %4)\n"
      "  return %5\n"
      "}\n");
  Bundle b = trace::make_bundle(g);
  trace::GraphLayout layout = trace::layout_graph(b);
  ASSERT_EQ(layout.nodes.size(), 5u);
  std::vector<int> layers;
  for (const auto& n : layout.nodes) layers.push_back(n.layer);
  EXPECT_EQ(layers, (std::vector<int>{0, 1, 2, 0, 3}));
  EXPECT_EQ(layout.layers, 4);
  EXPECT_EQ(layout.edges.size(), 4u);
  for (const auto& e : layout.edges) EXPECT_LT(layout.nodes[size_t(e.from)].layer, layout.nodes[size_t(e.to)].layer);
  for (size_t i = 0; i < layout.nodes.size(); ++i)
    for (size_t j = i + 1; j < layout.nodes.size(); ++j) {
      const auto &a = layout.nodes[i], &c = layout.nodes[j];
      bool apart = std::abs(a.x - c.x) >= trace::GraphLayout::kNodeWidth || std::abs(a.y - c.y) >= trace::GraphLayout::kNodeHeight;
      EXPECT_TRUE(apart) << "nodes " << i << " and " << j << " overlap";
    }
}

TEST(TraceExport, ChromeTraceParsesWithOneCompleteEventPerKernel) {
  testing_model::Traced traced = testing_model::trace_model();
  Bundle b = trace::make_bundle(traced.tracer->graph());
  for (size_t k = 0; k < b.kernels.size(); ++k) b.kernels[k].time_us = 2.0 + double(k);  // as if profiled
  nlohmann::json j = nlohmann::json::parse(trace::chrome_trace_json(b));
  std::vector<nlohmann::json> events;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "X") events.push_back(e);
  ASSERT_EQ(events.size(), b.kernels.size());
  double end = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    EXPECT_EQ(events[k].at("name"), b.kernels[k].name);
    EXPECT_DOUBLE_EQ(events[k].at("dur").get<double>(), 2.0 + double(k));
    // Untimed starts follow the previous kernel: back to back, in order.
    EXPECT_DOUBLE_EQ(events[k].at("ts").get<double>(), end);
    end += 2.0 + double(k);
    EXPECT_FALSE(events[k].at("args").at("origins").empty());
  }
}

TEST(TraceExport, DotDeclaresEveryEdgeEndpointAndOneClusterPerKernel) {
  testing_model::Traced traced = testing_model::trace_model();
  Bundle b = trace::make_bundle(traced.tracer->graph());
  std::string dot = trace::graph_dot(b);
  ASSERT_EQ(dot.rfind("digraph ", 0), 0u);
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < dot.size(); ++i) {
    if (dot[i] == '\\') { ++i; continue; }
    if (dot[i] == '"') in_string = !in_string;
    else if (!in_string && dot[i] == '{') ++depth;
    else if (!in_string && dot[i] == '}') --depth;
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  EXPECT_FALSE(in_string);
  std::set<std::string> declared;
  std::regex decl(R"(^\s*(\w+) \[)"), edge(R"(^\s*(\w+) -> (\w+);)");
  std::istringstream in(dot);
  std::vector<std::pair<std::string, std::string>> edges;
  size_t clusters = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, edge)) edges.push_back({m[1], m[2]});
    else if (std::regex_search(line, m, decl) && m[1] != "node") declared.insert(m[1]);
    if (line.find("subgraph cluster_k") != std::string::npos) ++clusters;
  }
  EXPECT_EQ(clusters, b.kernels.size());
  EXPECT_GE(edges.size(), b.nodes.size());
  for (const auto& [from, to] : edges) {
    EXPECT_TRUE(declared.count(from)) << from;
    EXPECT_TRUE(declared.count(to)) << to;
  }
  if (std::system("command -v dot > /dev/null 2>&1") == 0) {
    fs::path file = fresh_dir("dot");
    trace::write_file(file.string(), dot);
    EXPECT_EQ(std::system(("dot -Tsvg -o /dev/null " + file.string()).c_str()), 0);
    fs::remove(file);
  }
}

}  // namespace
}  // namespace kiln
