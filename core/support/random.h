// kiln's random numbers: counter-based, so element i of a stream is a function of (seed, i) that
// every backend computes alike (the reference kernel, the kernel-IR evaluator, and the generated
// kernels' kiln_uniform in emit_prelude.cpp, which must stay the same arithmetic).
#pragma once

#include <cstdint>

namespace kiln {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i of stream `seed`: (2k + 1) / 2^24 for 23 random bits k, so exact in f32 and in (0, 1).
inline float uniform_f32(uint64_t seed, uint64_t i) {
  const uint64_t bits = splitmix64(seed * 0x632be59bd9b4e019ull + splitmix64(i));
  return float(uint32_t(bits >> 41) * 2u + 1u) * 5.9604644775390625e-8f;
}

// The stream a generator's counter names (rand_uniform with mix=true).
inline uint64_t stream_of_counter(uint64_t counter) { return splitmix64(counter); }

}  // namespace kiln
