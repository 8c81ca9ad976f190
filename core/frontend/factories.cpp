// Factories build host data and upload it; random numbers come from a counter-based generator so
// results do not depend on the device or thread count.
#include "core/frontend/factories.h"

#include <atomic>
#include <cmath>

namespace kiln {
namespace {

std::vector<int64_t> checked_dims(const Dims& shape, const char* what, const Loc& loc) {
  if (!is_static(shape.get()))
    throw Error(std::string(what) + ": symbolic shape " + shape_str(shape.get()) +
                " needs concrete sizes at " + short_location(loc));
  std::vector<int64_t> dims = shape.values();
  for (int64_t d : dims)
    if (d < 0)
      throw Error(std::string(what) + ": negative size in shape " + shape_str(shape.get()) +
                  " at " + short_location(loc));
  return dims;
}

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1): the i-th number of stream `seed`.
double uniform(uint64_t seed, uint64_t i) {
  uint64_t bits = splitmix64(seed * 0x632be59bd9b4e019ull + splitmix64(i));
  return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

std::atomic<uint64_t> g_seed{0x5eed};

uint64_t next_seed(std::optional<uint64_t> seed) {
  if (seed) return *seed;
  return splitmix64(g_seed.fetch_add(1));
}

}  // namespace

void manual_seed(uint64_t seed) { g_seed = seed; }

Tensor from_bytes(const void* data, DType dtype, const Dims& shape, Device device, Loc loc) {
  std::vector<int64_t> dims = checked_dims(shape, "from_vector", loc);
  size_t bytes = size_t(count(dims)) * dtype_size(dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->type = {dtype, make_shape(dims)};
  impl->device = device;
  impl->buffer = device.backend().alloc(bytes);
  if (bytes) device.backend().upload(*impl->buffer, data, bytes);
  return Tensor(std::move(impl));
}

Tensor full(const Dims& shape, double value, DType dtype, Device device, Loc loc) {
  std::vector<int64_t> dims = checked_dims(shape, "full", loc);
  size_t n = size_t(count(dims));
  std::vector<double> values(n, value);
  std::vector<uint8_t> bytes(n * dtype_size(dtype));
  convert_elements(values.data(), DType::F64, bytes.data(), dtype, n);
  return from_bytes(bytes.data(), dtype, shape, device, loc);
}

Tensor zeros(const Dims& shape, DType dtype, Device device, Loc loc) {
  return full(shape, 0.0, dtype, device, loc);
}
Tensor ones(const Dims& shape, DType dtype, Device device, Loc loc) {
  return full(shape, 1.0, dtype, device, loc);
}
Tensor zeros(const Dims& shape, Device device, Loc loc) { return full(shape, 0.0, DType::F32, device, loc); }
Tensor ones(const Dims& shape, Device device, Loc loc) { return full(shape, 1.0, DType::F32, device, loc); }

Tensor arange(double start, double end, double step, Device device, Loc loc) {
  if (step == 0) throw Error("arange: step must be non-zero at " + short_location(loc));
  double span = std::ceil((end - start) / step);
  int64_t n = span > 0 ? int64_t(span) : 0;
  bool integral = start == std::floor(start) && end == std::floor(end) && step == std::floor(step);
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[size_t(i)] = start + double(i) * step;
  DType dtype = integral ? DType::I64 : DType::F32;
  std::vector<uint8_t> bytes(size_t(n) * dtype_size(dtype));
  convert_elements(values.data(), DType::F64, bytes.data(), dtype, size_t(n));
  return from_bytes(bytes.data(), dtype, Dims{n}, device, loc);
}

Tensor arange(double end, Device device, Loc loc) { return arange(0, end, 1, device, loc); }

Tensor randn(const Dims& shape, Device device, std::optional<uint64_t> seed, Loc loc) {
  std::vector<int64_t> dims = checked_dims(shape, "randn", loc);
  uint64_t s = next_seed(seed);
  size_t n = size_t(count(dims));
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {  // Box-Muller on two numbers of the stream per element
    double u1 = uniform(s, 2 * i), u2 = uniform(s, 2 * i + 1);
    values[i] = float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
  return from_bytes(values.data(), DType::F32, shape, device, loc);
}

Tensor rand(const Dims& shape, Device device, std::optional<uint64_t> seed, Loc loc) {
  std::vector<int64_t> dims = checked_dims(shape, "rand", loc);
  uint64_t s = next_seed(seed);
  size_t n = size_t(count(dims));
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = float(uniform(s, i));
  return from_bytes(values.data(), DType::F32, shape, device, loc);
}

}  // namespace kiln
