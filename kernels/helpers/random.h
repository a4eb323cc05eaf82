// Random number sources for uniform_random, gaussian_random and dropout (op-level plumbing: random_op.h).
//
// seed != 0: a fresh std::mt19937 seeded with it on every run, so the same seed gives the same values
// in every run and every process (Fluid's contract for seeded random ops). seed == 0: one process-wide
// engine seeded once from std::random_device, so successive runs differ.
// The [0, 1) and normal transforms are written out here (not std::*_distribution) so values do not
// depend on the standard library's implementation.
#pragma once
#include <cmath>
#include <cstdint>
#include <mutex>
#include <random>

namespace fl {

class ExecutionContext;

// The values uniform_random / gaussian_random write, from their attributes (seed, min/max, mean/std), into host
// memory p[0..n). Defined (for float and double) in kernels/random.cc: the CPU kernel writes Out with it and the CUDA
// kernel (kernels/cuda/fill.cu) copies its result to the device, so both run the same compiled code and a GPU
// startup program initializes parameters bit for bit as a CPU one.
template <typename T>
void UniformRandomValues(const ExecutionContext& ctx, T* p, int64_t n);
template <typename T>
void GaussianRandomValues(const ExecutionContext& ctx, T* p, int64_t n);

inline std::mt19937& GlobalRandomEngine() {
  static std::mt19937 engine = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    return std::mt19937(seq);
  }();
  return engine;
}

inline std::mutex& GlobalRandomMutex() {
  static std::mutex mu;
  return mu;
}

// Calls f(engine) with the engine `seed` selects (see above).
template <typename F>
void WithRandomEngine(int seed, F&& f) {
  if (seed != 0) {
    std::mt19937 engine(static_cast<uint32_t>(seed));
    f(engine);
    return;
  }
  std::lock_guard<std::mutex> lock(GlobalRandomMutex());
  f(GlobalRandomEngine());
}

// Uniform in [0, 1) with the full mantissa of T: 24 bits for float, 53 for double.
template <typename T>
inline T Uniform01(std::mt19937& e);
template <>
inline float Uniform01<float>(std::mt19937& e) {
  return static_cast<float>(e() >> 8) * 0x1p-24f;
}
template <>
inline double Uniform01<double>(std::mt19937& e) {
  uint64_t hi = e() >> 5;  // two sequenced draws: the order must not depend on the compiler
  uint64_t lo = e() >> 6;
  return static_cast<double>((hi << 26) | lo) * 0x1p-53;
}

// p[0..n) = uniform in [lo, hi).
template <typename T>
void FillUniform(std::mt19937& e, T* p, int64_t n, T lo, T hi) {
  const T range = hi - lo;
  for (int64_t i = 0; i < n; ++i) p[i] = lo + Uniform01<T>(e) * range;
}

// p[0..n) = normal(mean, std) by Box-Muller; each pair of uniforms gives two values.
template <typename T>
void FillGaussian(std::mt19937& e, T* p, int64_t n, T mean, T std) {
  constexpr T kTwoPi = static_cast<T>(6.283185307179586476925);
  for (int64_t i = 0; i < n; i += 2) {
    T u1 = T(1) - Uniform01<T>(e);  // (0, 1]: log stays finite
    T u2 = Uniform01<T>(e);
    T r = std * std::sqrt(T(-2) * std::log(u1));
    T theta = kTwoPi * u2;
    p[i] = mean + r * std::cos(theta);
    if (i + 1 < n) p[i + 1] = mean + r * std::sin(theta);
  }
}

}  // namespace fl
