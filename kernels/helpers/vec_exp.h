// exp written as plain arithmetic (range reduction + polynomial + exponent bits) so loops that call it
// vectorise at -O3 without -ffast-math; std::exp is an opaque libm call that keeps a loop scalar.
// float: ~1 ulp (Cephes expf polynomial); double: degree-13 Taylor on |r| <= ln2/2, a few ulp.
// Overflow clamps to the largest finite power range, underflow gives 0, NaN propagates.
#pragma once
#include <cstdint>
#include <cstring>

#include "host_device.h"

namespace fl {

FL_HD inline float VecExp(float x) {
#ifdef __CUDA_ARCH__
  return ::expf(x);
#else
  constexpr float kHi = 88.0f, kLo = -87.3365478515625f;
  const float xc = x > kHi ? kHi : (x < kLo ? kLo : x);
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (xc * 1.44269504088896341f + kShift) - kShift;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * z + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const float v = p * scale;
  return x < kLo ? 0.0f : v;
#endif
}

FL_HD inline double VecExp(double x) {
#ifdef __CUDA_ARCH__
  return ::exp(x);
#else
  constexpr double kHi = 709.0, kLo = -708.0;
  const double xc = x > kHi ? kHi : (x < kLo ? kLo : x);
  constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52
  const double n = (xc * 1.4426950408889634 + kShift) - kShift;
  double r = xc - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  // Taylor series to r^13 / 13!: the remainder is below 1e-17 for |r| <= ln2/2.
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const int64_t bits = (static_cast<int64_t>(n) + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const double v = p * scale;
  return x < kLo ? 0.0 : v;
#endif
}

}  // namespace fl
