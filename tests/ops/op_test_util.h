// Helpers for op tests: naive reference loops live in each test; these compare and build inputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::testing {

// Deterministic values in [lo, hi) for building randomized cases.
inline std::vector<float> uniform_values(size_t n, uint64_t seed, float lo = -2, float hi = 2) {
  std::vector<float> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * float((s >> 40) & 0xffffff) / float(1 << 24);
  }
  return v;
}

// Every element within atol + rtol * |expected|; NaNs must match NaNs.
inline ::testing::AssertionResult all_close(const std::vector<double>& actual,
                                            const std::vector<double>& expected,
                                            double rtol = 1e-5, double atol = 1e-6) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " vs " << expected.size();
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = actual[i], e = expected[i];
    if (std::isnan(e) && std::isnan(a)) continue;
    if (std::isinf(e) && a == e) continue;
    if (!(std::abs(a - e) <= atol + rtol * std::abs(e)))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << a << ", expected " << e << " (rtol " << rtol
             << ", atol " << atol << ")";
  }
  return ::testing::AssertionSuccess();
}

template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

using Dims64 = std::vector<int64_t>;

inline int64_t product(const Dims64& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// fn must throw a kiln::Error whose message contains every one of `parts` (op name, shapes, line).
template <class F>
void expect_error(F fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

}  // namespace kiln::testing
