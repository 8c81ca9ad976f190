// Pass tests. Every case of every tests/passes/*.kir file is parsed, run through the passes its
// `// RUN:` line names (by run_pipeline, so the graph is verified after each) and the printed result
// is matched against its CHECK lines, FileCheck style. `// RUN: passes | stage` goes on through
// compile_graph's later stages and checks the text of the last: `fusion` (the kernel schedule),
// `lower` (kernel IR) or `emit` (GLSL), on a device with no templates, or `fusion+templates` and
// `lower+templates` on one whose matmul, linear and softmax have tuned templates (`+epilogues`:
// templates that also take relu, add and mul epilogues). The C++ tests below cover the runner (dumps,
// errors naming the pass) and prove the standard pipeline leaves a traced model's results unchanged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <kiln/kiln.h>

#include "core/frontend/tracer.h"
#include "core/ir/text.h"
#include "core/passes/passes.h"
#include "core/runtime/compile_graph.h"
#include "core/frontend/interpreter.h"
#include "backends/matmul_problem.h"
#include "core/runtime/schedule.h"
#include "core/runtime/standard_passes.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path kPassDir = fs::path(__FILE__).parent_path();

// ---- A small FileCheck: CHECK (in order), CHECK-NEXT (on the next line), CHECK-NOT (absent
// between its neighbours), CHECK-ERROR (the pipeline throws with this text). Patterns are literal
// text with {{regex}} and [[VAR:regex]] / [[VAR]] captures, as in LLVM's FileCheck.

struct Check {
  enum Kind { Plain, Next, Not, Error } kind;
  std::string pattern;
  int line;
};

struct Case {
  std::string file;
  int first_line = 0;
  std::string passes;
  bool has_run = false;
  std::string text;
  std::vector<Check> checks;

  std::string where(int line) const { return file + ":" + std::to_string(line); }
};

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t\r") + 1);
  return s;
}

std::vector<Case> read_cases(const fs::path& path) {
  std::ifstream in(path);
  std::vector<Case> cases(1);
  cases.back().file = path.filename().string();
  cases.back().first_line = 1;
  std::string line;
  const std::vector<std::pair<std::string, Check::Kind>> prefixes = {
      {"// CHECK-NEXT:", Check::Next}, {"// CHECK-NOT:", Check::Not},
      {"// CHECK-ERROR:", Check::Error}, {"// CHECK:", Check::Plain}};
  for (int number = 1; std::getline(in, line); ++number) {
    std::string t = trim(line);
    if (t == "// -----") {
      cases.emplace_back();
      cases.back().file = path.filename().string();
      cases.back().first_line = number + 1;
      continue;
    }
    Case& c = cases.back();
    c.text += line + "\n";
    if (t.rfind("// RUN:", 0) == 0) {
      c.passes = trim(t.substr(7));
      c.has_run = true;
    }
    for (const auto& [prefix, kind] : prefixes)
      if (t.rfind(prefix, 0) == 0) {
        c.checks.push_back({kind, trim(t.substr(prefix.size())), number});
        break;
      }
  }
  return cases;
}

std::string regex_escape(const std::string& s) {
  static const std::string special = R"(\^$.|?*+()[]{})";
  std::string out;
  for (char ch : s) {
    if (special.find(ch) != std::string::npos) out += '\\';
    out += ch;
  }
  return out;
}

// The pattern as a regex; fills `defines` with the capture group of each [[VAR:re]] it defines.
std::string to_regex(const std::string& pattern, const std::map<std::string, std::string>& vars,
                     std::vector<std::string>* defines) {
  std::string re;
  size_t i = 0;
  while (i < pattern.size()) {
    size_t regex_at = pattern.find("{{", i), var_at = pattern.find("[[", i);
    size_t next = std::min(regex_at, var_at);
    re += regex_escape(pattern.substr(i, next - i));
    if (next == std::string::npos) break;
    if (next == regex_at) {
      size_t end = pattern.find("}}", next);
      if (end == std::string::npos) throw Error("unterminated {{ in CHECK pattern: " + pattern);
      re += "(?:" + pattern.substr(next + 2, end - next - 2) + ")";
      i = end + 2;
    } else {
      size_t end = pattern.find("]]", next);
      if (end == std::string::npos) throw Error("unterminated [[ in CHECK pattern: " + pattern);
      std::string body = pattern.substr(next + 2, end - next - 2);
      size_t colon = body.find(':');
      if (colon == std::string::npos) {
        auto it = vars.find(body);
        if (it == vars.end()) throw Error("CHECK variable [[" + body + "]] used before it is defined");
        re += regex_escape(it->second);
      } else {
        defines->push_back(body.substr(0, colon));
        re += "(" + body.substr(colon + 1) + ")";
      }
      i = end + 2;
    }
  }
  return re;
}

// Empty when every check holds, else what failed and where.
std::string file_check(const Case& c, const std::string& output) {
  std::map<std::string, std::string> vars;
  std::vector<const Check*> pending_not;
  size_t pos = 0;
  auto absent = [&](size_t from, size_t to) -> std::string {
    for (const Check* n : pending_not) {
      std::vector<std::string> defines;
      std::regex re(to_regex(n->pattern, vars, &defines));
      std::string span = output.substr(from, to - from);
      std::smatch m;
      if (std::regex_search(span, m, re))
        return c.where(n->line) + ": CHECK-NOT: '" + n->pattern + "' found: '" + m.str() + "'";
    }
    pending_not.clear();
    return "";
  };
  for (const Check& check : c.checks) {
    if (check.kind == Check::Error) continue;
    if (check.kind == Check::Not) {
      pending_not.push_back(&check);
      continue;
    }
    std::vector<std::string> defines;
    std::regex re(to_regex(check.pattern, vars, &defines));
    size_t from = pos, to = output.size();
    if (check.kind == Check::Next) {
      size_t eol = output.find('\n', pos);
      from = eol == std::string::npos ? output.size() : eol + 1;
      size_t next_eol = output.find('\n', from);
      to = next_eol == std::string::npos ? output.size() : next_eol;
    }
    std::string span = output.substr(from, to - from);
    std::smatch m;
    if (!std::regex_search(span, m, re))
      return c.where(check.line) + ": " + (check.kind == Check::Next ? "CHECK-NEXT" : "CHECK") +
             ": '" + check.pattern + "' not found" +
             (check.kind == Check::Next ? " on the next line" : " after the previous match");
    size_t start = from + size_t(m.position(0)), end = start + size_t(m.length(0));
    if (std::string err = absent(pos, start); !err.empty()) return err;
    for (size_t k = 0; k < defines.size(); ++k) vars[defines[k]] = m[k + 1].str();
    pos = end;
  }
  return absent(pos, output.size());
}

// A device that compiles GLSL and runs nothing, with templates for matmul, linear and softmax:
// what fusion sees on a backend with tuned kernels.
class TemplateBackend : public Backend {
 public:
  TemplateBackend(bool templates, bool epilogues) : templates_(templates), epilogues_(epilogues) {}
  BackendKind kind() const override { return BackendKind::Null; }
  std::string name() const override { return templates_ ? "test (templates)" : "test"; }
  DeviceCaps caps() const override { return {}; }
  bool supports(OpKind, DType) const override { return true; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override { return std::make_unique<Buffer>(bytes); }
  void upload(Buffer&, const void*, size_t, size_t) override {}
  void download(const Buffer&, void*, size_t, size_t) override {}
  void execute(const OpRun&) override {}
  std::optional<kernel::CodegenTarget> codegen() const override { return kernel::CodegenTarget{}; }
  bool has_template(OpKind kind) const override {
    return templates_ && (kind == OpKind::MatMul || kind == OpKind::Linear || kind == OpKind::Softmax);
  }
  // Its matmul reads strided operands where the real matmul templates do (decode_matmul).
  std::optional<TemplateLaunch> plan_template(const OpRun& run) override {
    if (!has_template(run.kind)) return std::nullopt;
    if (run.kind == OpKind::MatMul && !decode_matmul(run)) return std::nullopt;
    return TemplateLaunch{std::string(op_name(run.kind)) + "_template", "", "glsl", {}, {}, {1, 1, 1}};
  }
  // With epilogues: a template takes relu, add and mul steps (any operand), as a stand-in for what a
  // backend fuses, so the cases check the chain rules fusion applies before it asks.
  std::optional<TemplateLaunch> plan_fused_template(const OpRun& run, std::span<const EpilogueStep> epilogue) override {
    if (!epilogues_) return std::nullopt;
    for (const EpilogueStep& step : epilogue)
      if (step.kind != OpKind::Relu && step.kind != OpKind::Add && step.kind != OpKind::Mul) return std::nullopt;
    return plan_template(run);
  }

 private:
  bool templates_, epilogues_;
};

// The text of `stage` ("fusion", "lower", "emit", optionally "+templates" or "+epilogues") for an
// optimized graph.
std::string stage_text(const Graph& graph, std::string stage) {
  bool templates = false, epilogues = false;
  for (const std::string suffix : {"+templates", "+epilogues"})
    if (stage.size() > suffix.size() && stage.ends_with(suffix)) {
      stage.resize(stage.size() - suffix.size());
      templates = true;
      epilogues = suffix == "+epilogues";
    }
  TemplateBackend backend(templates, epilogues);
  KernelSchedule schedule = schedule_kernels(graph, backend);
  if (stage == "fusion") return print_schedule(schedule);
  LoweredProgram program = lower_schedule(graph, schedule);
  if (stage == "lower") return print_lowered_program(program);
  emit_program(program, *backend.codegen());
  if (stage == "emit") return print_sources(program);
  throw Error("unknown stage '" + stage + "' in a RUN line; stages: fusion, lower, emit");
}

// "cse,dce | fusion" -> {"cse,dce", "fusion"}.
std::pair<std::string, std::string> split_run(const std::string& run) {
  size_t bar = run.find('|');
  if (bar == std::string::npos) return {run, ""};
  return {trim(run.substr(0, bar)), trim(run.substr(bar + 1))};
}

// Runs one case; returns a failure message or "".
std::string run_case(const Case& c) {
  std::string expected_error;
  for (const Check& check : c.checks)
    if (check.kind == Check::Error) expected_error = check.pattern;
  std::string output;
  try {
    Graph graph = parse_graph(c.text);
    auto [passes, stage] = split_run(c.passes);
    run_pipeline(graph, parse_pass_list(passes));
    output = stage.empty() ? print_graph(graph) : stage_text(graph, stage);
  } catch (const Error& e) {
    if (!expected_error.empty() && std::string(e.what()).find(expected_error) != std::string::npos)
      return "";
    return c.where(c.first_line) + ": unexpected error: " + e.what();
  }
  if (!expected_error.empty())
    return c.where(c.first_line) + ": expected an error containing '" + expected_error +
           "', the passes succeeded with:\n" + output;
  std::string failure = file_check(c, output);
  return failure.empty() ? "" : failure + "\n--- output ---\n" + output;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kPassDir))
    if (entry.path().extension() == ".kir") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files)
    for (Case& c : read_cases(f))
      if (c.has_run) cases.push_back(std::move(c));
  return cases;
}

TEST(PassFiles, EveryKirCaseMatchesItsChecks) {
  std::vector<Case> cases = all_cases();
  ASSERT_GE(cases.size(), 20u) << "expected the .kir cases next to " << __FILE__;
  for (const Case& c : cases) {
    EXPECT_FALSE(c.checks.empty()) << c.where(c.first_line) << ": a case without CHECK lines";
    std::string failure = run_case(c);
    EXPECT_TRUE(failure.empty()) << failure;
  }
}

TEST(PassFiles, EveryRegisteredPassHasCasesOfItsOwn) {
  std::map<std::string, int> runs;
  for (const Case& c : all_cases())
    for (const Pass& p : parse_pass_list(split_run(c.passes).first)) ++runs[p.name];
  for (const Pass& p : registered_passes()) EXPECT_GE(runs[p.name], 3) << p.name;
}

// The matcher itself: a CHECK-NOT between two matches, variables, and failures that must fail.
TEST(PassFiles, FileCheckMatcherRejectsWhatItShould) {
  Case c;
  c.file = "inline";
  const std::string out = "a %1 = add(%0)\nb %2 = mul(%1)\nc end\n";
  c.checks = {{Check::Plain, "[[X:%[0-9]+]] = add", 1}, {Check::Not, "sub", 2},
              {Check::Next, "mul([[X]])", 3}, {Check::Plain, "end", 4}};
  EXPECT_EQ(file_check(c, out), "");
  c.checks[1].pattern = "mul";  // present between the neighbours... but CHECK-NEXT is on that line
  EXPECT_EQ(file_check(c, out), "");
  c.checks[1].pattern = "b %2";
  EXPECT_NE(file_check(c, out), "");
  c.checks = {{Check::Plain, "mul", 1}, {Check::Plain, "add", 2}};  // out of order
  EXPECT_NE(file_check(c, out), "");
  c.checks = {{Check::Plain, "a", 1}, {Check::Next, "end", 2}};  // not on the next line
  EXPECT_NE(file_check(c, out), "");
}

// ---- The runner.

const char* kSmallGraph = R"(graph @g(%0: f32[4] "x") {
  %1: f32[] = constant() {value=dense<f32[]>[1.0]} loc("m.cpp":1)
  %2: f32[4] = mul(%0, %1) loc("m.cpp":2)
  %3: f32[4] = relu(%2) loc("m.cpp":3)
  %4: f32[4] = relu(%2) loc("m.cpp":4)
  %5: f32[4] = add(%3, %4) loc("m.cpp":5)
  return %5
})";

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln_pass_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir / "nested";  // the runner creates missing parents
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PassPipeline, DumpDirGetsTheInputAndOneParsableFilePerPass) {
  fs::path dir = fresh_dir("dump");
  Graph graph = parse_graph(kSmallGraph);
  PipelineOptions options;
  options.dump_dir = dir.string();
  options.keep_ir = true;
  std::vector<PassRecord> records = run_pipeline(graph, standard_pipeline(), options);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path().filename());
  std::sort(files.begin(), files.end());
  std::vector<std::string> want = {"00-input.kir"};
  for (size_t i = 0; i < records.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "%02zu-%s.kir", i + 1, records[i].name.c_str());
    want.push_back(name);
  }
  EXPECT_EQ(files, want);
  EXPECT_EQ(read_text(dir / "00-input.kir").find("// kiln IR before"), 0u);
  for (size_t i = 0; i < records.size(); ++i) {
    std::string text = read_text(dir / want[i + 1]);
    EXPECT_NE(text.find("'" + records[i].name + "'"), std::string::npos) << text;
    // The dump (header comment included) parses back to exactly the recorded IR.
    EXPECT_EQ(print_graph(parse_graph(text)), records[i].ir_after) << want[i + 1];
  }
  EXPECT_EQ(records.back().ir_after, print_graph(graph));
  fs::remove_all(dir.parent_path());
}

// compile_graph dumps every stage after the graph passes, numbered on from them, and each file is
// the stage's text for the optimized graph (schedule, kernel IR, source, memory plan).
TEST(CompileGraph, DumpDirGetsEveryStageAfterTheGraphPasses) {
  fs::path dir = fresh_dir("stages");
  Graph graph = parse_graph(kSmallGraph);
  CompileGraphOptions options;
  options.pipeline.dump_dir = dir.string();
  CompiledGraph compiled = compile_graph(graph, Device(BackendKind::Null, 0), options);
  const size_t n = compiled.passes.size();
  // A backend that generates code gets expand-ops, winograd and conv-as-matmul first and
  // channels-last last.
  ASSERT_EQ(n, standard_pipeline().size() + 4);
  EXPECT_EQ(compiled.passes.front().name, "expand-ops");
  EXPECT_EQ(compiled.passes[1].name, "winograd");
  EXPECT_EQ(compiled.passes[2].name, "conv-as-matmul");
  EXPECT_EQ(compiled.passes.back().name, "channels-last");
  auto numbered = [](size_t i, const std::string& rest) {
    char prefix[8];
    std::snprintf(prefix, sizeof prefix, "%02zu-", i);
    return prefix + rest;
  };
  std::string fusion = read_text(dir / numbered(n + 1, "fusion.txt"));
  std::string lower = read_text(dir / numbered(n + 2, "lower.txt"));
  std::string horizontal = read_text(dir / numbered(n + 3, "horizontal.txt"));
  std::string emit = read_text(dir / numbered(n + 4, "emit.glsl"));
  std::string memory = read_text(dir / numbered(n + 5, "memory-plan.txt"));
  // After the passes: the two relus are one (cse), mul by 1 is gone (simplify): relu and add fuse.
  EXPECT_NE(fusion.find("kernel 0 pointwise [%3 relu, %5 add] reads %0 writes %5"), std::string::npos) << fusion;
  EXPECT_EQ(fusion.find("kernel 1"), std::string::npos) << fusion;
  EXPECT_NE(lower.find("kernel fused_relu_add_f32_r1 pointwise(rank 1, params [4])"), std::string::npos) << lower;
  EXPECT_EQ(horizontal, "// kiln horizontal\nno horizontal kernels\n");  // one kernel: nothing to merge
  EXPECT_NE(emit.find("#version 450"), std::string::npos) << emit;
  EXPECT_NE(memory.find("(0 arenas"), std::string::npos) << memory;  // nothing intermediate left
  EXPECT_EQ(compiled.program->stats().kernels, 1);
  fs::remove_all(dir.parent_path());
}

TEST(PassPipeline, KilnDumpIrEnvironmentVariableIsUsedWhenNoDirIsGiven) {
  fs::path dir = fresh_dir("env");
  ::setenv("KILN_DUMP_IR", dir.string().c_str(), 1);
  Graph graph = parse_graph(kSmallGraph);
  std::vector<PassRecord> records = run_pipeline(graph, parse_pass_list("simplify,dce"));
  ::unsetenv("KILN_DUMP_IR");
  EXPECT_TRUE(fs::exists(dir / "00-input.kir"));
  EXPECT_TRUE(fs::exists(dir / "01-simplify.kir"));
  EXPECT_TRUE(fs::exists(dir / "02-dce.kir"));
  EXPECT_TRUE(records[0].ir_after.empty()) << "keep_ir is off";
  fs::remove_all(dir.parent_path());
}

TEST(PassPipeline, RecordsCarryEachPassesStatistics) {
  Graph graph = parse_graph(kSmallGraph);
  std::vector<PassRecord> r = run_pipeline(graph, parse_pass_list("simplify,cse,dce"));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].stats.counters.at("mul_one"), 1);
  EXPECT_EQ(r[1].stats.counters.at("nodes_merged"), 1);
  EXPECT_EQ(r[2].stats.counters.at("nodes_removed"), 3);  // mul, the second relu, the constant
  EXPECT_EQ(graph.num_nodes(), 2u);
}

TEST(PassPipeline, PassThatBreaksTheGraphIsNamedInTheError) {
  Graph graph = parse_graph(kSmallGraph);
  Pass breaker{"break-types", "sets a wrong result type", [](Graph& g) {
                 g.nodes().back()->outputs[0]->type = {DType::F32, make_shape({5})};
                 return PassStats{};
               }};
  try {
    run_pipeline(graph, {cse_pass(), breaker});
    FAIL() << "expected a verifier error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("pass 2/2 'break-types' left an invalid graph"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[5]"), std::string::npos) << msg;
  }
}

TEST(PassPipeline, PassThatThrowsIsNamedInTheError) {
  Graph graph = parse_graph(kSmallGraph);
  Pass thrower{"explode", "throws", [](Graph&) -> PassStats { throw Error("boom"); }};
  try {
    run_pipeline(graph, {thrower});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "pass 1/1 'explode' failed: boom");
  }
}

TEST(PassPipeline, UnknownPassNameListsTheKnownOnes) {
  try {
    parse_pass_list("cse, frobnicate");
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown pass 'frobnicate'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("fold-constants"), std::string::npos) << msg;
  }
}

TEST(PassPipeline, StandardPipelineListsItsPassesInOrder) {
  std::vector<std::string> names;
  for (const Pass& p : standard_pipeline()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"infer-shapes", "fold-constants", "simplify", "cse",
                                             "raise-patterns", "dce"}));
}

// ---- The standard pipeline on a traced model: same results before and after, fewer nodes.

TEST(PassPipeline, StandardPipelineKeepsTracedLinearReluResultsBitExact) {
  nn::Linear linear(8, 4, true, Device::cpu(), 7);
  auto model = [&](const Tensor& x) {
    Tensor h = relu(relu(linear(x)));            // relu(relu) -> relu
    Tensor a = h * 1.0 + 0.0;                    // both identities
    Tensor b = reshape(reshape(h, {-1}), {x.shape(0), 4});  // a no-op view chain
    Tensor scale = full({4}, 2.0) * 0.5;         // eager: captured as an input, not folded
    return a + b * scale;
  };
  Tracer tracer(Device::cpu());
  {
    TracingScope scope(tracer);
    Tensor x = tracer.input({DType::F32, {SymInt::symbol("s0", 3), 8}}, "x");
    tracer.set_outputs({model(x)});
  }
  Graph optimized = tracer.graph().clone();
  std::vector<PassRecord> records = run_pipeline(optimized, standard_pipeline());
  EXPECT_LT(optimized.num_nodes(), tracer.graph().num_nodes()) << print_graph(optimized);
  std::string text = print_graph(optimized);
  EXPECT_EQ(text.find("reshape"), std::string::npos) << text;
  for (int64_t batch : {3, 5}) {
    std::vector<Tensor> inputs = {randn({batch, 8}, Device::cpu(), 100 + batch)};
    for (const auto& [value, tensor] : tracer.captured()) inputs.push_back(tensor);
    std::vector<float> before = interpret(tracer.graph(), inputs).at(0).to_vector<float>();
    std::vector<float> after = interpret(optimized, inputs).at(0).to_vector<float>();
    // Tolerance 0: every rewrite is an exact identity and the same cpu kernels run.
    EXPECT_EQ(before, after) << "batch " << batch;
    EXPECT_EQ(before, model(inputs[0]).to_vector<float>()) << "eager oracle, batch " << batch;
  }
}

}  // namespace
}  // namespace kiln
