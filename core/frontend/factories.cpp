// Factories build host data and upload it; random numbers are rand_uniform ops on the device,
// counter-based so results do not depend on the device or thread count.
#include "core/frontend/factories.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "core/frontend/dispatch.h"
#include "core/frontend/in_place.h"
#include "core/frontend/ops.h"
#include "core/support/random.h"

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

std::atomic<uint64_t> g_seed{0x5eed};  // where a device's generator starts (manual_seed)

// The process-wide generators, one u64 counter tensor per device, made on first use from the
// process seed.
struct Generators {
  std::mutex mutex;
  std::map<std::string, Tensor> by_device;
};
Generators& generators() {
  static Generators* all = new Generators;  // outlives every exit handler that reads it
  return *all;
}

// At exit each counter must go before its device closes (backends/registry.cpp closes them from
// exit handlers): this handler is registered after the device opened, so it runs first.
void release_generators() {
  Generators& g = generators();
  std::lock_guard lock(g.mutex);
  g.by_device.clear();
}

}  // namespace

void manual_seed(uint64_t seed) {
  g_seed = seed;
  Generators& g = generators();
  std::lock_guard lock(g.mutex);
  for (auto& entry : g.by_device) {
    Tensor& counter = entry.second;
    assign_in_place(counter, from_bytes(&seed, DType::U64, Dims{}, counter.device()));
  }
}

Tensor rand_from(Tensor& generator, const Dims& shape, Loc loc) {
  if (!generator.defined() || generator.dtype() != DType::U64 || generator.shape().size() != 0)
    throw Error("rand_from at " + short_location(loc) + ": the generator must be a u64 scalar counter" +
                (generator.defined() ? ", got " + generator.type().str() : ""));
  // The increment first: traced, the draw then sits next to its consumers, and fuses with them.
  Tensor next = add(generator, 1.0, loc);
  Tensor draws = run_op1(OpKind::RandUniform, {generator}, {{"shape", shape.get()}, {"mix", true}}, loc);
  assign_in_place(generator, next);
  return draws;
}

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

// Box-Muller on two uniform draws per element, rows 0 and 1 of one [2, shape] draw, in f32.
Tensor randn(const Dims& shape, Device device, std::optional<uint64_t> seed, Loc loc) {
  Shape pairs_shape = {SymInt(2)};
  pairs_shape.insert(pairs_shape.end(), shape.get().begin(), shape.get().end());
  Tensor pairs = rand(pairs_shape, device, seed, loc);
  Tensor u1 = reshape(slice(pairs, 0, 0, 1, 1, loc), shape, loc);
  Tensor u2 = reshape(slice(pairs, 0, 1, 2, 1, loc), shape, loc);
  return mul(sqrt(mul(log(u1, loc), -2.0, loc), loc), cos(mul(u2, 2 * M_PI, loc), loc), loc);
}

Tensor rand(const Dims& shape, Device device, std::optional<uint64_t> seed, Loc loc) {
  for (const SymInt& d : shape.get())
    if (d.is_static() && d.value() < 0)
      throw Error("rand: negative size in shape " + shape_str(shape.get()) + " at " + short_location(loc));
  if (seed) {
    Tensor stream = from_bytes(&*seed, DType::U64, Dims{}, device, loc);
    return run_op1(OpKind::RandUniform, {stream}, {{"shape", shape.get()}, {"mix", false}}, loc);
  }
  Generators& g = generators();
  std::lock_guard lock(g.mutex);
  Tensor& counter = g.by_device[device.name()];
  if (!counter.defined()) {
    const uint64_t start = g_seed.load();
    counter = from_bytes(&start, DType::U64, Dims{}, device, loc);
    std::atexit(release_generators);
  }
  return rand_from(counter, shape, loc);
}

}  // namespace kiln
