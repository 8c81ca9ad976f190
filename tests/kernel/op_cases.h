// The table of op configurations kernel tests run: one row per op configuration (shapes, dtypes,
// attributes, how to draw inputs), and how a case's inputs are drawn and its outputs compared. Shared
// by the lowering test, the CUDA compile test and the emulated CUDA test.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/op.h"
#include "core/frontend/tensor.h"

namespace kiln::kernel::testing {

// How input values are drawn. Each keeps its op inside the domain where reference and GLSL agree.
enum class Gen {
  Normal,    // floats ~N(0,1); ints in [-8, 8]; u8 in [0, 16]; bool 50/50
  Positive,  // (0.1, 4) / [1, 8]: log, sqrt, divisors
  NonNeg,    // [0, 50): casts to u8
  NearOne,   // (0.5, 1.5) / [-2, 2]: products
  Exponent,  // integer-valued [-3, 3] floats, [0, 4] ints: pow exponents
  WithNaN,   // Normal with a NaN and repeated values: argmax/argmin rules
  WithNegInf,  // Normal with -inf rows: logsumexp
  Index,     // integers in [-bound, bound): gather / index_select
  Variance,  // (0.5, 2): running variances
  NonZero,   // Normal without zeros: signed integer divisors
  Wide,      // (-400, 400): casts that must saturate
};

struct Input {
  DType dtype;
  std::vector<int64_t> dims;
  Gen gen = Gen::Normal;
  int64_t bound = 0;  // Gen::Index
};

struct Tolerance {
  double rtol = 0, atol = 0;  // |got - want| <= atol + rtol * |want|; 0/0: bit-exact
};

struct Case {
  std::string name;
  OpKind kind;
  AttrMap attrs;
  std::vector<Input> inputs;
  std::optional<Tolerance> tol;  // default: by output dtype (see default_tolerance)
};

Tolerance default_tolerance(OpKind kind, DType out);
const std::vector<Case>& table();

// Running a case: values drawn as doubles and converted to the input's dtype as the reference
// would; a tensor's elements as bytes; the first element where `got` (named `got_name` in the
// message) and `want` differ beyond `tol`, as a message, or "" when none does.
int64_t numel_of(const std::vector<int64_t>& dims);
std::vector<uint8_t> make_data(const Input& in, std::mt19937& rng);
std::vector<uint8_t> bytes_of(const Tensor& t);
double element(const std::vector<uint8_t>& bytes, DType d, int64_t i);
std::string first_mismatch(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType d,
                           Tolerance tol, const std::string& got_name);

}  // namespace kiln::kernel::testing
