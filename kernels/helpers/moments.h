// Shifted first and second sums over a contiguous run, in float lanes added up in double: batch_norm's
// per-channel statistics and the row statistics of layer_norm / group_norm / instance_norm (norm_layers.cc).
#pragma once
#include <cstdint>
#include <cstring>

namespace fl {

// Sums over one contiguous run with d = x - k: s1 += (kGrad ? g : d), s2 += (kGrad ? g : d) * d.
// Written with GCC vector types: left to itself the vectoriser interleaves lanes across iterations here
// (hundreds of shuffles, 2x slower). With `relu_mask` (kGrad only), g is read as relu_mask > 0 ? g : 0 (relu_grad's
// select, taken from relu's output: fused_batch_norm_act_grad), the same values in the same lanes.
template <bool kGrad, typename T, bool kReluMask = false>
inline void RunSums(const T* x, const T* g, int64_t n, T k, double& s1, double& s2, const T* relu_mask = nullptr) {
  typedef T V __attribute__((vector_size(32)));
  constexpr int kW = 32 / sizeof(T);
  V a1[2] = {}, a2[2] = {};
  const V kv = V{} + k;
  const int64_t blocks = n / (2 * kW);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int u = 0; u < 2; ++u) {
      const int64_t off = (b * 2 + u) * kW;
      V xv, gv;
      std::memcpy(&xv, x + off, sizeof(V));
      const V d = xv - kv;
      if constexpr (kGrad) {
        std::memcpy(&gv, g + off, sizeof(V));
        if constexpr (kReluMask) {
          V mv;
          std::memcpy(&mv, relu_mask + off, sizeof(V));
          gv = mv > V{} ? gv : V{};
        }
      } else {
        gv = d;
      }
      a1[u] += gv;
      a2[u] += gv * d;
    }
  }
  double t1 = 0, t2 = 0;
  for (int64_t i = blocks * 2 * kW; i < n; ++i) {
    const T d = x[i] - k;
    const T v = kGrad ? (kReluMask ? (relu_mask[i] > T(0) ? g[i] : T(0)) : g[i]) : d;
    t1 += v;
    t2 += v * d;
  }
  for (int l = 0; l < kW; ++l) t1 += a1[0][l] + a1[1][l], t2 += a2[0][l] + a2[1][l];
  s1 += t1;
  s2 += t2;
}

}  // namespace fl
