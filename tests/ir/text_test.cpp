// The graph text form: every case of roundtrip.kir parses, verifies and prints back identical;
// the cases cover every op; built graphs survive print -> parse; malformed text fails cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/support/error.h"

namespace kiln {
namespace {

struct KirCase {
  int first_line;     // in roundtrip.kir, for failure messages
  std::string text;   // as written
  std::string canonical;  // without comment lines and blank lines: what the printer must give
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Splits the file at `// -----` lines, MLIR style.
std::vector<KirCase> load_cases() {
  auto path = std::filesystem::path(__FILE__).parent_path() / "roundtrip.kir";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<KirCase> cases(1);
  cases[0].first_line = 1;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (trim(line) == "// -----") {
      cases.push_back({n + 1, "", ""});
      continue;
    }
    cases.back().text += line + "\n";
    if (!trim(line).empty() && trim(line).rfind("//", 0) != 0) cases.back().canonical += line + "\n";
  }
  return cases;
}

TEST(IrText, EveryRoundTripCaseParsesVerifiesAndPrintsBackIdentical) {
  for (const KirCase& c : load_cases()) {
    SCOPED_TRACE("roundtrip.kir case starting at line " + std::to_string(c.first_line));
    std::string name;
    Graph g = parse_graph(c.text, &name);
    std::vector<std::string> problems = verify_graph(g);
    for (const std::string& p : problems) ADD_FAILURE() << p;
    EXPECT_EQ(print_graph(g, name), c.canonical);
  }
}

TEST(IrText, RoundTripCasesCoverEveryOp) {
  std::set<OpKind> seen;
  for (const KirCase& c : load_cases()) {
    Graph g = parse_graph(c.text);
    for (const Node* n : g.nodes()) seen.insert(n->kind);
  }
  std::string missing;
  for (size_t i = 0; i < kOpCount; ++i)
    if (!seen.count(OpKind(i))) missing += " " + std::string(op_name(OpKind(i)));
  EXPECT_TRUE(missing.empty()) << "ops without a case in roundtrip.kir:" << missing;
}

// ---- built graphs: print -> parse gives the same structure

void expect_same_structure(const Graph& a, const Graph& b) {
  std::map<const Value*, size_t> index_a, index_b;  // position in definition order
  auto number = [](const Graph& g, std::map<const Value*, size_t>& idx) {
    for (const Value* v : g.inputs()) idx.emplace(v, idx.size());
    for (const Node* n : g.nodes())
      for (const Value* v : n->outputs) idx.emplace(v, idx.size());
  };
  number(a, index_a);
  number(b, index_b);
  auto same_value = [&](const Value* x, const Value* y) {
    EXPECT_EQ(index_a.at(x), index_b.at(y));
    EXPECT_EQ(x->type.str(), y->type.str());
    EXPECT_EQ(x->name, y->name);
  };
  ASSERT_EQ(a.inputs().size(), b.inputs().size());
  for (size_t i = 0; i < a.inputs().size(); ++i) same_value(a.inputs()[i], b.inputs()[i]);
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  for (size_t k = 0; k < a.num_nodes(); ++k) {
    const Node& x = *a.nodes()[k];
    const Node& y = *b.nodes()[k];
    SCOPED_TRACE("node " + std::to_string(k) + " " + std::string(op_name(x.kind)));
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_TRUE(x.attrs == y.attrs) << print_graph(b);
    EXPECT_EQ(x.provenance.origins, y.provenance.origins);
    ASSERT_EQ(x.inputs.size(), y.inputs.size());
    for (size_t i = 0; i < x.inputs.size(); ++i) same_value(x.inputs[i], y.inputs[i]);
    ASSERT_EQ(x.outputs.size(), y.outputs.size());
    for (size_t i = 0; i < x.outputs.size(); ++i) same_value(x.outputs[i], y.outputs[i]);
  }
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); ++i) same_value(a.outputs()[i], b.outputs()[i]);
}

std::shared_ptr<const Literal> literal(DType dtype, std::vector<int64_t> shape, const void* data) {
  auto lit = std::make_shared<Literal>();
  lit->dtype = dtype;
  lit->shape = std::move(shape);
  lit->bytes.resize(size_t(lit->numel()) * dtype_size(dtype));
  std::memcpy(lit->bytes.data(), data, lit->bytes.size());
  return lit;
}

TEST(IrText, BuiltGraphPrintsAndParsesBackWithEqualStructure) {
  Graph g;
  SymInt s0 = SymInt::symbol("s0", 6);
  Value* x = g.add_input({DType::F32, {s0, 4, 8, 8}}, "x");
  Value* w = g.add_input({DType::F32, {8, 4, 3, 3}}, "conv.weight");
  Value* b = g.add_input({DType::F32, {8}});
  Provenance here{{Origin{"/src/model.cpp", 42, "Net::forward", "features.0", ""},
                   Origin{"", 0, "", "", "/layer1/Conv"}}};
  Node* conv = g.add_node(OpKind::Conv, {x, w, b},
                          {{"stride", std::vector<int64_t>{2, 2}},
                           {"padding", std::vector<int64_t>{1, 1, 1, 1}}},
                          here);
  Node* relu = g.add_node(OpKind::Relu, {conv->output()}, {}, Provenance{{Origin{"m.cpp", 7, "", "", ""}}});
  Node* flat = g.add_node(OpKind::Reshape, {relu->output()},
                          {{"shape", std::vector<SymInt>{s0, -1}}});
  Node* split = g.add_node(OpKind::Split, {flat->output()},
                           {{"dim", int64_t(1)}, {"sizes", std::vector<int64_t>{100, 28}}});
  split->output(1)->name = "tail";
  float third[3] = {1.0f / 3, -0.0f, 1e-40f};
  Node* k = g.add_node(OpKind::Constant, {},
                       {{"value", std::shared_ptr<const Literal>(literal(DType::F32, {3}, third))}});
  Node* cast = g.add_node(OpKind::Cast, {k->output()}, {{"dtype", DType::BF16}});
  Node* clip = g.add_node(OpKind::Clip, {split->output(0)}, {{"min", 0.0}});
  g.set_outputs({clip->output(), split->output(1), cast->output()});
  ASSERT_TRUE(verify_graph(g).empty());

  std::string text = print_graph(g, "net");
  std::string name;
  Graph back = parse_graph(text, &name);
  EXPECT_EQ(name, "net");
  expect_same_structure(g, back);
  EXPECT_TRUE(verify_graph(back).empty()) << text;
  EXPECT_EQ(print_graph(back, "net"), text);
  EXPECT_NE(text.find("symbols(s0=6)"), std::string::npos) << text;
  // The symbol's traced value survives, so shape rules decide as they did when tracing.
  EXPECT_EQ(back.inputs()[0]->type.shape[0].hint(), 6);
}

// Every double (by random bit patterns, plus the edge cases) reads back bit for bit.
TEST(IrText, FloatAttributesRoundTripBitExact) {
  std::vector<double> values = {0.0, -0.0, 1.0, 0.1, 1.0 / 3, 1e-320, 5e-324, 1e300, -2.5e-7,
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity()};
  uint64_t s = 12345;
  for (int i = 0; i < 2000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double d;
    std::memcpy(&d, &s, 8);
    if (!std::isnan(d)) values.push_back(d);
  }
  Graph g;
  Value* x = g.add_input({DType::F64, {2}});
  for (double v : values) x = g.add_node(OpKind::LeakyRelu, {x}, {{"alpha", v}})->output();
  g.set_outputs({x});
  Graph back = parse_graph(print_graph(g));
  ASSERT_EQ(back.num_nodes(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    double got = back.nodes()[i]->attrs.get_float("alpha");
    EXPECT_EQ(std::memcmp(&got, &values[i], 8), 0) << "wrote " << values[i] << " read " << got;
  }
}

// Literals of every dtype with random bytes (NaN payloads, subnormals, infinities included)
// read back byte for byte.
TEST(IrText, LiteralsOfEveryDtypeRoundTripByteExact) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    std::vector<uint8_t> bytes(300 * dtype_size(dtype));
    uint64_t s = 99 + uint64_t(dtype);
    for (uint8_t& b : bytes) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      b = uint8_t(s >> 56);
    }
    if (dtype == DType::Bool)
      for (uint8_t& b : bytes) b &= 1;  // a bool holds 0 or 1
    Graph g;
    Node* k = g.add_node(OpKind::Constant, {},
                         {{"value", std::shared_ptr<const Literal>(
                                        literal(dtype, {3, 100}, bytes.data()))}});
    g.set_outputs({k->output()});
    std::string text = print_graph(g);
    Graph back = parse_graph(text);
    const Literal& lit = back.nodes()[0]->attrs.get_tensor("value");
    EXPECT_EQ(lit.dtype, dtype);
    EXPECT_EQ(lit.shape, (std::vector<int64_t>{3, 100}));
    EXPECT_TRUE(lit.bytes == bytes) << text;
    EXPECT_EQ(print_graph(back), text);
  }
}

TEST(IrText, StringsWithEveryByteRoundTrip) {
  std::string all;
  for (int c = 1; c < 256; ++c) all += char(c);
  all += '\0';
  Graph g;
  Value* x = g.add_input({DType::F32, {1}}, all);
  Node* n = g.add_node(OpKind::Gelu, {x}, {{"approximate", all}},
                       Provenance{{Origin{all, 3, all, all, all}}});
  g.set_outputs({n->output()});
  std::string text = print_graph(g);
  EXPECT_EQ(text[text.find('\n') - 1], '{');  // escaped: no raw newline before the body
  Graph back = parse_graph(text);
  EXPECT_EQ(back.inputs()[0]->name, all);
  EXPECT_EQ(back.nodes()[0]->attrs.get_string("approximate"), all);
  EXPECT_EQ(back.nodes()[0]->provenance.origins, n->provenance.origins);
}

TEST(IrText, SparseOrNamedValueIdsAreRenumberedDensely) {
  Graph g = parse_graph(
      "graph @g(%x: f32[2], %7: f32[2]) {\n"
      "  %sum: f32[2] = add(%x, %7)\n"
      "  %100: f32[2] = neg(%sum)\n"
      "  return %100, %x\n"
      "}\n");
  EXPECT_EQ(print_graph(g, "g"),
            "graph @g(%0: f32[2], %1: f32[2]) {\n"
            "  %2: f32[2] = add(%0, %1)\n"
            "  %3: f32[2] = neg(%2)\n"
            "  return %3, %0\n"
            "}\n");
}

TEST(IrText, EmptyListsAndStaticSymsTakeTheOpsDeclaredType) {
  Graph g = parse_graph(
      "graph @g(%0: f32[2,3]) {\n"
      "  %1: f32[3,2] = reshape(%0) {shape=[3,2]}\n"
      "  %2: f32[] = sum(%1) {dims=[], keepdim=false}\n"
      "  return %2\n"
      "}\n");
  EXPECT_EQ(attr_type(g.nodes()[0]->attrs.get("shape")), AttrType::Syms);
  EXPECT_EQ(attr_type(g.nodes()[1]->attrs.get("dims")), AttrType::Ints);
  EXPECT_TRUE(verify_graph(g).empty());
}

TEST(IrText, ParserKeepsWrittenTypesForTheVerifierToJudge) {
  Graph g = parse_graph("graph @g(%0: f32[2,3]) {\n  %1: i32[9] = relu(%0)\n  return %1\n}\n");
  EXPECT_EQ(g.nodes()[0]->output()->type.str(), "i32[9]");
  std::vector<std::string> problems = verify_graph(g);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("'relu'"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("i32[9]"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("f32[2,3]"), std::string::npos) << problems[0];
}

// ---- malformed text

void expect_parse_error(const std::string& text, const std::string& position,
                        const std::string& what) {
  SCOPED_TRACE(text);
  try {
    parse_graph(text);
    ADD_FAILURE() << "parsed without error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(" " + position + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(IrText, ParseErrorsGiveLineColumnAndWhatWasExpected) {
  const std::string head = "graph @g(%0: f32[2,3]) {\n";
  expect_parse_error(head + "  %1: f32[2,3] = frobnicate(%0)\n  return %1\n}\n", "2:18",
                     "unknown op 'frobnicate'");
  expect_parse_error(head + "  %1: f32[2,3] = relu(%5)\n  return %1\n}\n", "2:23",
                     "unknown value %5");
  expect_parse_error(head + "  %1: f32[2,3] = relu(%1)\n  return %1\n}\n", "2:23",
                     "unknown value %1");
  expect_parse_error(head + "  %0: f32[2,3] = relu(%0)\n  return %0\n}\n", "2:3",
                     "value %0 is already defined");
  expect_parse_error("graph @g(%0: f32[2], %0: f32[2]) {\n  return\n}\n", "1:22",
                     "value %0 is already defined");
  expect_parse_error(head + "  %1: f33[2,3] = relu(%0)\n  return %1\n}\n", "2:7", "expected a dtype");
  expect_parse_error(head + "  %1: f32[2,-3] = relu(%0)\n  return %1\n}\n", "2:13",
                     "expected a dimension >= 0");
  expect_parse_error(head + "  %1: f32[2,1-6] = relu(%0)\n  return %1\n}\n", "2:13",
                     "expected a dimension >= 0, '1-6' is -5");  // found by the ir_text fuzz target
  expect_parse_error(head + "  %1: f32[2,s0+] = relu(%0)\n  return %1\n}\n", "2:13",
                     "expected a dimension");
  expect_parse_error(head + "  %1: f32[2,3 = relu(%0)\n  return %1\n}\n", "2:25", "expected ']'");
  expect_parse_error(head + "  %1: f32 [2,3] = relu(%0)\n  return %1\n}\n", "2:11",
                     "expected '[' right after the dtype");
  expect_parse_error(head + "  %1, %2: f32[2,3] = relu(%0)\n  return %1\n}\n", "2:20",
                     "expected ','");
  expect_parse_error(head + "  %1: f32[2,3] = leaky_relu(%0) {alpha=0.1, alpha=0.2}\n  return %1\n}\n",
                     "2:45", "attribute 'alpha' is given twice");
  expect_parse_error(head + "  %1: f32[2,3] = leaky_relu(%0) {alpha=}\n  return %1\n}\n", "2:40",
                     "expected an attribute value");
  expect_parse_error(head + "  %1: f32[2,3] = leaky_relu(%0) {alpha=99999999999999999999}\n  return %1\n}\n",
                     "2:40", "expected an integer within i64 range");
  expect_parse_error(head + "  %1: f32[2,3] = gelu(%0) {approximate=\"a\\qb\"}\n  return %1\n}\n",
                     "2:42", "expected an escape");
  expect_parse_error(head + "  %1: f32[2,3] = gelu(%0) {approximate=\"open\n  return %1\n}\n",
                     "2:40", "unterminated string");
  expect_parse_error("graph @g() {\n  %0: f32[2] = constant() {value=dense<f32[2]>[1.0]}\n  return %0\n}\n",
                     "2:47", "expected 2 values");
  expect_parse_error("graph @g() {\n  %0: u8[1] = constant() {value=dense<u8[1]>[256]}\n  return %0\n}\n",
                     "2:46", "expected an integer in the range");
  expect_parse_error("graph @g() {\n  %0: f16[1] = constant() {value=dense<f16[1]>[0x10000]}\n  return %0\n}\n",
                     "2:48", "expected hex bits");
  expect_parse_error(head + "  %1: f32[2,3] = relu(%0) loc(\"a.cpp\":x)\n  return %1\n}\n", "2:39",
                     "expected a line number");
  expect_parse_error(head + "  %1: f32[2,3] = relu(%0) loc()\n  return %1\n}\n", "2:31",
                     "expected an origin");
  expect_parse_error(head + "  return %0\n}\ntrailing\n", "4:1", "expected end of input");
  expect_parse_error(head + "  return %0\n", "3:1", "expected '}'");
  expect_parse_error("graph @g(%0: f32[s0]) symbols(s0=4, s0=5) {\n  return\n}\n", "1:37",
                     "symbol 's0' is given twice");
  expect_parse_error("grph @g() {\n  return\n}\n", "1:1", "expected 'graph'");
}

// Every prefix of every case is malformed: each must throw kiln::Error, never crash or hang.
TEST(IrText, TruncatedTextAlwaysThrowsKilnError) {
  for (const KirCase& c : load_cases()) {
    const std::string& full = c.canonical;
    size_t end = full.rfind('}');
    for (size_t n = 0; n < end; ++n) {
      try {
        parse_graph(full.substr(0, n));
        ADD_FAILURE() << "prefix of " << n << " bytes parsed:\n" << full.substr(0, n);
      } catch (const Error&) {
      }
    }
  }
}

// Random byte edits either parse or throw kiln::Error; anything else (a crash, another exception
// type) fails the test.
TEST(IrText, RandomlyMutatedTextParsesOrThrowsKilnError) {
  const std::string chars = "%@[](){},:=\"\\-+*/.0129aefinsx \n";
  uint64_t s = 7;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return size_t(s >> 33);
  };
  for (const KirCase& c : load_cases()) {
    for (int trial = 0; trial < 300; ++trial) {
      std::string text = c.canonical;
      for (int edits = 1 + int(next() % 3); edits > 0; --edits) {
        size_t at = next() % text.size();
        switch (next() % 3) {
          case 0: text[at] = chars[next() % chars.size()]; break;
          case 1: text.erase(at, 1 + next() % 4); break;
          default: text.insert(at, 1, chars[next() % chars.size()]); break;
        }
      }
      try {
        Graph g = parse_graph(text);
        verify_graph(g);  // the verifier must cope with whatever parsed
        print_graph(g);
      } catch (const Error&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << "non-kiln exception " << e.what() << " for:\n" << text;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
