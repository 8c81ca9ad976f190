// Tensor factories: from host data, constants, ranges and seeded random numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/frontend/tensor.h"

namespace kiln {

// A tensor holding a copy of `data` with the given shape (its product must equal data.size()).
Tensor from_bytes(const void* data, DType dtype, const Dims& shape, Device device = Device::cpu(),
                  Loc loc = Loc::current());
template <class T>
Tensor from_vector(const std::vector<T>& data, const Dims& shape, Device device = Device::cpu(),
                   Loc loc = Loc::current()) {
  if constexpr (std::is_same_v<T, bool>) {  // vector<bool> is packed: unpack it
    std::vector<uint8_t> bytes(data.begin(), data.end());
    return from_bytes(bytes.data(), DType::Bool, shape, device, loc);
  } else {
    if (int64_t(data.size()) != numel(shape.get()).hint())
      throw Error("from_vector: " + std::to_string(data.size()) + " values do not fill shape " +
                  shape_str(shape.get()) + " at " + short_location(loc));
    return from_bytes(data.data(), dtype_of<T>::value, shape, device, loc);
  }
}
// 1-d shorthand.
template <class T>
Tensor from_vector(const std::vector<T>& data, Device device = Device::cpu(), Loc loc = Loc::current()) {
  return from_vector(data, Dims{int64_t(data.size())}, device, loc);
}

Tensor full(const Dims& shape, double value, DType dtype = DType::F32, Device device = Device::cpu(),
            Loc loc = Loc::current());
Tensor zeros(const Dims& shape, DType dtype = DType::F32, Device device = Device::cpu(),
             Loc loc = Loc::current());
Tensor ones(const Dims& shape, DType dtype = DType::F32, Device device = Device::cpu(),
            Loc loc = Loc::current());
Tensor zeros(const Dims& shape, Device device, Loc loc = Loc::current());
Tensor ones(const Dims& shape, Device device, Loc loc = Loc::current());
// [start, end) by step, like torch.arange; i64 when all three are integral, else f32.
Tensor arange(double start, double end, double step = 1, Device device = Device::cpu(),
              Loc loc = Loc::current());
Tensor arange(double end, Device device = Device::cpu(), Loc loc = Loc::current());

// Random tensors (f32), drawn on the device by rand_uniform ops. A seed fixes the values: rand's
// are the same on every device, randn's (Box-Muller on two uniform draws, in f32) the same to f32
// rounding. Without a seed they draw from the device's generator (see rand_from), so inside a
// compiled function each call draws new values, the ones the same calls draw eagerly.
Tensor randn(const Dims& shape, Device device = Device::cpu(),
             std::optional<uint64_t> seed = std::nullopt, Loc loc = Loc::current());
Tensor rand(const Dims& shape, Device device = Device::cpu(),
            std::optional<uint64_t> seed = std::nullopt, Loc loc = Loc::current());
// Sets the process seed and every device generator's counter to `seed`.
void manual_seed(uint64_t seed);
// Uniform values in (0, 1) from `generator`, a u64 scalar counter: the stream the counter names
// (an op, rand_uniform), then the counter advances by one in place. Inside a compiled function the
// counter is read at each call and written back, like an optimizer's state.
Tensor rand_from(Tensor& generator, const Dims& shape, Loc loc = Loc::current());

}  // namespace kiln
