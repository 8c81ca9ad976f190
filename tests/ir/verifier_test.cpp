// The verifier: a sound graph passes; each kind of defect is reported naming the node and op,
// and every defect of a graph is reported at once.
#include <gtest/gtest.h>

#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/support/error.h"

namespace kiln {
namespace {

const TensorType kF23{DType::F32, {2, 3}};

// Exactly one problem, containing every one of `parts`.
void expect_one_problem(const Graph& g, const std::vector<std::string>& parts) {
  std::vector<std::string> problems = verify_graph(g);
  std::string all;
  for (const std::string& p : problems) all += "\n  " + p;
  ASSERT_EQ(problems.size(), 1u) << all;
  for (const std::string& part : parts)
    EXPECT_NE(problems[0].find(part), std::string::npos) << "missing '" << part << "' in: " << problems[0];
}

TEST(Verifier, SoundGraphHasNoProblems) {
  Graph g;
  Value* x = g.add_input(kF23, "x");
  Value* y = g.add_input({DType::F32, {3}});
  Node* add = g.add_node(OpKind::Add, {x, y});
  Node* split = g.add_node(OpKind::Split, {add->output()},
                           {{"dim", int64_t(1)}, {"sizes", std::vector<int64_t>{1, 2}}});
  g.set_outputs({split->output(0), split->output(1)});
  EXPECT_TRUE(verify_graph(g).empty());
  EXPECT_NO_THROW(verify_graph_or_throw(g));
}

TEST(Verifier, InputFromAnotherGraphIsNotDefined) {
  Graph other;
  Value* foreign = other.add_input(kF23);
  Graph g;
  Node* n = g.add_node_typed(OpKind::Relu, {foreign}, {}, {kF23}, {});
  g.set_outputs({n->output()});
  expect_one_problem(g, {"node 0 'relu'", "input 0", "is not defined in this graph"});
}

TEST(Verifier, InputUsedBeforeItsDefinitionIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* first = g.add_node(OpKind::Relu, {x});
  Node* second = g.add_node(OpKind::Neg, {first->output()});
  first->inputs[0] = second->output();  // a cycle: relu reads what neg defines later
  g.set_outputs({second->output()});
  expect_one_problem(g, {"node 0 'relu'", "is used before it is defined"});
}

TEST(Verifier, ValueDefinedTwiceIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* first = g.add_node(OpKind::Relu, {x});
  Node* second = g.add_node(OpKind::Neg, {x});
  second->outputs[0] = first->output();
  g.set_outputs({first->output()});
  std::vector<std::string> problems = verify_graph(g);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("node 1 'neg': output 0: value %1 is defined more than once"),
            std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("does not record this node as its producer"), std::string::npos)
      << problems[1];
}

TEST(Verifier, MissingDefaultedAttributeIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* n = g.add_node_typed(OpKind::LeakyRelu, {x}, {}, {kF23}, {});
  g.set_outputs({n->output()});
  expect_one_problem(g, {"node 0 'leaky_relu'", "attributes are incomplete", "'alpha'"});
}

TEST(Verifier, MissingRequiredAttributeIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* n = g.add_node_typed(OpKind::Softmax, {x}, {}, {kF23}, {});
  g.set_outputs({n->output()});
  expect_one_problem(g, {"node 0 'softmax'", "required attribute 'dim' is missing"});
}

TEST(Verifier, MistypedAndUnknownAttributesAreReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* a = g.add_node_typed(OpKind::LeakyRelu, {x}, {{"alpha", std::string("big")}}, {kF23}, {});
  Node* b = g.add_node_typed(OpKind::Relu, {x}, {{"inplace", true}}, {kF23}, {});
  g.set_outputs({a->output(), b->output()});
  std::vector<std::string> problems = verify_graph(g);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("node 0 'leaky_relu'"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("attribute 'alpha' must be float, got string"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("node 1 'relu'"), std::string::npos) << problems[1];
  EXPECT_NE(problems[1].find("unknown attribute 'inplace'"), std::string::npos) << problems[1];
}

TEST(Verifier, AttributeInACoercibleButUndeclaredTypeIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* n = g.add_node_typed(OpKind::LeakyRelu, {x}, {{"alpha", int64_t(1)}}, {kF23}, {});
  g.set_outputs({n->output()});
  expect_one_problem(g, {"node 0 'leaky_relu'", "not in their declared types: 'alpha' is int, declared float"});
}

TEST(Verifier, WrittenShapeDifferentFromTheShapeRuleIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* n = g.add_node_typed(OpKind::Relu, {x}, {}, {{DType::F32, {2, 4}}},
                             Provenance{{Origin{"/src/demo.cpp", 12, "run", "block", ""}}});
  g.set_outputs({n->output()});
  expect_one_problem(g, {"node 0 'relu'", "demo.cpp:12", "output 0 (%1) is written f32[2,4]",
                         "the shape rule gives f32[2,3]", "from inputs (f32[2,3])"});
}

TEST(Verifier, WrittenDtypeDifferentFromTheShapeRuleIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* n = g.add_node_typed(OpKind::Lt, {x, x}, {}, {kF23}, {});
  g.set_outputs({n->output()});
  expect_one_problem(g, {"node 0 'lt'", "is written f32[2,3]", "gives bool[2,3]"});
}

TEST(Verifier, SymbolicDimsCompareByExpression) {
  Graph g;
  SymInt s0 = SymInt::symbol("s0", 4), s1 = SymInt::symbol("s1", 4);
  Value* x = g.add_input({DType::F32, {s0, 3}});
  Node* n = g.add_node_typed(OpKind::Relu, {x}, {}, {{DType::F32, {s1, 3}}}, {});
  g.set_outputs({n->output()});
  // Equal hints are no proof: s1 is a different dim than s0.
  expect_one_problem(g, {"node 0 'relu'", "written f32[s1,3]", "gives f32[s0,3]"});
}

TEST(Verifier, WrongOutputCountIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* n = g.add_node_typed(OpKind::Split, {x},
                             {{"dim", int64_t(1)}, {"sizes", std::vector<int64_t>{1, 2}}},
                             {{DType::F32, {2, 1}}}, {});
  g.set_outputs({n->output()});
  expect_one_problem(g, {"node 0 'split'", "has 1 outputs (f32[2,1])",
                         "the op gives 2 (f32[2,1], f32[2,2])"});
}

TEST(Verifier, WrongArityIsReported) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* n = g.add_node_typed(OpKind::Add, {x}, {}, {kF23}, {});
  Node* m = g.add_node_typed(OpKind::Conv, {x, x, x, x}, {{"groups", int64_t(1)}}, {kF23}, {});
  g.set_outputs({n->output(), m->output()});
  std::vector<std::string> problems = verify_graph(g);
  ASSERT_EQ(problems.size(), 3u);  // conv also lacks stride/padding/dilation
  EXPECT_NE(problems[0].find("node 0 'add': takes 2 inputs, got 1"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("node 1 'conv': takes 2..3 inputs, got 4"), std::string::npos)
      << problems[1];
}

TEST(Verifier, InputsTheShapeRuleRejectsAreReported) {
  Graph g;
  Value* a = g.add_input(kF23);
  Value* b = g.add_input({DType::F32, {4}});
  Node* n = g.add_node_typed(OpKind::Add, {a, b}, {}, {kF23}, {});
  g.set_outputs({n->output()});
  expect_one_problem(g, {"node 0 'add'", "the shape rule rejects it", "f32[2,3]", "f32[4]",
                         "cannot be broadcast"});
}

TEST(Verifier, UndefinedAndNullGraphOutputsAreReported) {
  Graph other;
  Value* foreign = other.add_input(kF23);
  Graph g;
  Value* x = g.add_input(kF23);
  g.set_outputs({x, foreign, nullptr});
  std::vector<std::string> problems = verify_graph(g);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("graph output 1: value %0 is not defined in this graph"),
            std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("graph output 2 is null"), std::string::npos) << problems[1];
}

TEST(Verifier, ThrowingFormListsEveryProblem) {
  Graph g;
  Value* x = g.add_input(kF23);
  Node* a = g.add_node_typed(OpKind::Relu, {x}, {}, {{DType::F32, {9}}}, {});
  Node* b = g.add_node_typed(OpKind::Elu, {a->output()}, {}, {{DType::F32, {9}}}, {});
  g.set_outputs({b->output()});
  try {
    verify_graph_or_throw(g);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("graph is not valid (2 problems)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node 0 'relu'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node 1 'elu'"), std::string::npos) << msg;
  }
}

TEST(Verifier, JudgesParsedTextAsWritten) {
  Graph g = parse_graph(
      "graph @g(%0: f32[2,3], %1: f32[3,4]) {\n"
      "  %2: f32[2,5] = matmul(%0, %1) loc(\"model.cpp\":8)\n"
      "  %3: f32[2,5] = softmax(%2)\n"
      "  return %3\n"
      "}\n");
  std::vector<std::string> problems = verify_graph(g);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("node 0 'matmul' at model.cpp:8"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("written f32[2,5], the shape rule gives f32[2,4]"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("node 1 'softmax'"), std::string::npos) << problems[1];
  EXPECT_NE(problems[1].find("'dim'"), std::string::npos) << problems[1];
}


// A while_loop's subgraphs are judged with it: a body that changes a carried value's type, a cond
// that returns no bool, and a defect inside a subgraph are each reported on the loop's node.
const char* kLoop = R"(graph @g(%0: f32[3]) {
  %1: f32[3] = while_loop(%0) {body=graph @body(%0: f32[3]) {
      %1: f32[3] = neg(%0)
      return BODY
    }, carried=1, cond=graph @cond(%0: f32[3]) {
      %1: f32[] = sum(%0) {dims=[], keepdim=false}
      %2: bool[] = gt(%1, %1)
      return COND
    }}
  return %1
})";

Graph loop_graph(const std::string& body_result, const std::string& cond_result, const std::string& neg_type = "f32[3]") {
  std::string text = kLoop;
  text.replace(text.find("BODY"), 4, body_result);
  text.replace(text.find("COND"), 4, cond_result);
  text.replace(text.find("f32[3] = neg"), 6, neg_type);
  return parse_graph(text);
}

TEST(Verifier, WhileLoopSubgraphsAreJudgedWithTheLoop) {
  EXPECT_TRUE(verify_graph(loop_graph("%1", "%2")).empty());
  expect_one_problem(loop_graph("%1", "%1"), {"'while_loop'", "the cond subgraph must return one one-element bool"});
  // The mistyped neg inside the body, and the body's result that follows from it.
  const std::vector<std::string> problems = verify_graph(loop_graph("%1", "%2", "f32[4]"));
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("'while_loop': in subgraph 'body': node 0 'neg'"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("the shape rule gives f32[3]"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("the body subgraph returns (f32[4])"), std::string::npos) << problems[1];
}

}  // namespace
}  // namespace kiln
