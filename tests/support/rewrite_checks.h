// Checks of graph rewrites: a graph rewritten by a pass computes what the original computes, on
// every device (the original through the reference interpreter is the oracle; the rewritten graph
// compiles for each device), and a count of a graph's nodes of one op.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/frontend/interpreter.h"
#include "core/frontend/run_program.h"
#include "core/kiln.h"
#include "core/runtime/compile_graph.h"
#include "runtime/runtime_test_util.h"  // parse_checked
#include "support/devices.h"

namespace kiln::testing {

inline int count_ops(const Graph& g, OpKind kind) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->kind == kind;
  return n;
}

// Every output within `relative` x (1 + |expected|) of the interpreter's value for `original`.
inline void expect_rewrite_matches_on_every_device(const Graph& original, const Graph& rewritten,
                                                   const std::vector<Tensor>& inputs, double relative) {
  const std::vector<Tensor> want = interpret(original, inputs);
  for (const Device& device : computing_devices()) {
    SCOPED_TRACE(device.name());
    std::vector<Tensor> on_device;
    for (const Tensor& t : inputs) on_device.push_back(t.to(device));
    Graph g = rewritten.clone();
    std::unique_ptr<DeviceProgram> program = compile_graph(g, device).program;
    const std::vector<Tensor> got = run_program(*program, on_device);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const std::vector<float> a = got[i].to(Device::ref()).to_vector<float>(), b = want[i].to_vector<float>();
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k)
        ASSERT_NEAR(a[k], b[k], relative * (1 + std::abs(b[k]))) << "output " << i << " at " << k;
    }
  }
}

}  // namespace kiln::testing
