// SymInt: static arithmetic, symbolic printing/parsing, evaluation and guard recording.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "core/ir/symint.h"
#include "core/support/error.h"

namespace kiln {
namespace {

TEST(SymInt, StaticArithmeticStaysStatic) {
  SymInt a = 7, b = 2;
  EXPECT_TRUE((a * b + 1).is_static());
  EXPECT_EQ((a * b + 1).value(), 15);
  EXPECT_EQ((a / b).value(), 3);
  EXPECT_EQ((SymInt(-7) / 2).value(), -4);  // floor division
  EXPECT_EQ((SymInt(-7) % 2).value(), 1);
}

TEST(SymInt, SymbolicExpressionsPrintAndEvaluate) {
  SymInt s0 = SymInt::symbol("s0", 8);
  SymInt e = (s0 + 2) / 2 * 4;
  EXPECT_FALSE(e.is_static());
  EXPECT_EQ(e.str(), "(s0+2)//2*4");
  EXPECT_EQ(e.hint(), 20);
  EXPECT_EQ(e.evaluate({{"s0", 10}}), 24);
  EXPECT_THROW(e.value(), Error);
  EXPECT_THROW(e.evaluate({}), Error);
}

TEST(SymInt, IdentitiesSimplify) {
  SymInt s0 = SymInt::symbol("s0", 3);
  EXPECT_EQ((s0 * 1 + 0).str(), "s0");
  EXPECT_TRUE((s0 * 0).is_static());
  EXPECT_TRUE((s0 - s0).is_static());
}

TEST(SymInt, ParseRoundTrips) {
  for (const char* text : {"s0", "s0*4", "(s0+2)//2*4", "s1-(s0+1)", "max(s0,s1)*2", "s0%3", "12"}) {
    SymInt s = parse_symint(text, {{"s0", 5}, {"s1", 9}});
    EXPECT_EQ(s.str(), text);
  }
  EXPECT_THROW(parse_symint("s0+"), Error);
  EXPECT_THROW(parse_symint("(s0"), Error);
  EXPECT_THROW(parse_symint("s0 $ 2"), Error);
}

struct GuardList : GuardSink {
  std::vector<ShapeGuard> guards;
  void record(const ShapeGuard& g) override { guards.push_back(g); }
};

TEST(SymInt, ComparingSymbolicDimsRecordsGuards) {
  GuardList sink;
  GuardSinkScope scope(&sink);
  SymInt s0 = SymInt::symbol("s0", 16);
  EXPECT_TRUE(s0 > 10);
  EXPECT_FALSE(s0 == 3);
  EXPECT_TRUE(SymInt(4) < 5);  // static: no guard
  EXPECT_TRUE(s0 == s0);       // same expression: no guard
  ASSERT_EQ(sink.guards.size(), 2u);
  EXPECT_EQ(sink.guards[0].op, GuardOp::Gt);
  EXPECT_TRUE(sink.guards[0].result);
  EXPECT_EQ(sink.guards[1].op, GuardOp::Eq);
  EXPECT_FALSE(sink.guards[1].result);
}

// Arithmetic past int64 is a kiln::Error naming the operands, never undefined behaviour, and every
// printable value parses back (the symint fuzz target's first findings).
TEST(SymInt, ArithmeticPastInt64IsAnError) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([] { parse_symint("99999999999999999999"); }),
            "bad symbolic dimension '99999999999999999999': integer 99999999999999999999 is past "
            "int64's range");
  EXPECT_NE(message([] { parse_symint("4611686018427387904*2"); }).find("4611686018427387904 * 2 is past int64's range"),
            std::string::npos);
  const SymInt s0 = SymInt::symbol("s0", INT64_MAX);
  EXPECT_NE(message([&] { (s0 + 1).hint(); }).find("+ 1 is past int64's range"), std::string::npos);
  EXPECT_NE(message([] { parse_symint("(0-9223372036854775807-1)//(0-1)"); }).find("//"), std::string::npos);
  const SymInt lowest = parse_symint("0-9223372036854775807-1");
  EXPECT_EQ(lowest.value(), INT64_MIN);
  EXPECT_EQ(parse_symint(lowest.str()).value(), INT64_MIN);
  EXPECT_EQ(parse_symint("(0-9223372036854775807-1)%3").value(), 1);  // floor mod, no overflow
  EXPECT_EQ(parse_symint("7%(0-1)").value(), 0);
}

}  // namespace
}  // namespace kiln
