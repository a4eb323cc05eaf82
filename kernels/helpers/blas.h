// A thin typed wrapper over the scipy-openblas32 CBLAS: row-major GEMM for float and double, one matrix
// or a strided batch. blasint is 32-bit here, so every size, leading dim and batch stride is checked.
#pragma once
#include <cblas.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "enforce.h"
#include "thread_pool.h"

namespace fl {
namespace blas {

inline blasint Int(int64_t v, const char* what) {
  FL_ENFORCE(v >= 0 && v <= std::numeric_limits<blasint>::max(), "BLAS: ", what, " = ", v,
             " does not fit the 32-bit BLAS integer (scipy-openblas32)");
  return static_cast<blasint>(v);
}

inline CBLAS_TRANSPOSE Trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

// One OpenBLAS call on the calling thread (OpenBLAS runs single-threaded under fluidlite: csrc/thread_pool.h).
template <typename T>
void SerialGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

template <>
inline void SerialGemm<float>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  scipy_cblas_sgemm(CblasRowMajor, Trans(ta), Trans(tb), Int(m, "M"), Int(n, "N"), Int(k, "K"), alpha, a,
                    Int(lda, "lda"), b, Int(ldb, "ldb"), beta, c, Int(ldc, "ldc"));
}

template <>
inline void SerialGemm<double>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                               int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  scipy_cblas_dgemm(CblasRowMajor, Trans(ta), Trans(tb), Int(m, "M"), Int(n, "N"), Int(k, "K"), alpha, a,
                    Int(lda, "lda"), b, Int(ldb, "ldb"), beta, c, Int(ldc, "ldc"));
}

// C[M, N] = alpha * op(A) @ op(B) + beta * C, row-major. op(A) is [M, K], op(B) is [K, N]; lda/ldb/ldc
// are the row strides of A, B and C as stored (so A is [M, lda] untransposed, [K, lda] transposed).
// Large products are cut along the longer of M and N into chunks of whole 16-wide blocks that the thread
// pool's threads claim, each chunk one single-threaded OpenBLAS call (kernels/helpers/blas.cc says how
// many). Called from inside a pool job, it runs as one call. Defined for float and double.
template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc);

// A thread's share of a GEMM pays for the hand-off from about this many flops: products under twice this run
// as one call on the caller (the LSTM benchmark's 32 x 512 x 128 cell GEMMs ran their step in 3.0 ms split at
// 1 MFLOP per part, against 3.7-4.1 unsplit and 3.2-3.65 with OpenBLAS's own threads).
constexpr double kMinFlopsPerPart = 1e6;

// Dense C = alpha * op(A) @ op(B) + beta * C with packed operands (ld = the stored row length).
template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS would scale C by beta; an empty contraction gives beta * C.
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == T(0) ? T(0) : beta * c[i];
    return;
  }
  Gemm<T>(ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

// One batch operand: a packed matrix per batch entry, `stride` elements apart (0: the same matrix for
// every entry, i.e. broadcast).
template <typename T>
struct BatchOperand {
  T* data;
  int64_t stride;
};

// For b in [0, batch): C_b = alpha * op(A_b) @ op(B_b) + beta * C_b (all packed, row-major).
// C's stride may be 0: then the products are summed into one C (a gradient of a broadcast operand).
// Folds the batch into one GEMM whenever the memory layout allows it, else calls OpenBLAS's strided
// batch (or loops when a stride overflows 32 bits).
template <typename T>
void GemmBatched(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, T alpha, BatchOperand<const T> a,
                 BatchOperand<const T> b, T beta, BatchOperand<T> c) {
  if (batch == 0 || m == 0 || n == 0) return;
  if (batch == 1) {
    Gemm<T>(ta, tb, m, n, k, alpha, a.data, b.data, beta, c.data);
    return;
  }
  const int64_t mk = m * k, kn = k * n, mn = m * n;
  if (c.stride == mn && b.stride == 0 && !ta && a.stride == mk) {
    // Rows of all A_b are contiguous: one [batch*M, K] @ op(B) GEMM.
    Gemm<T>(false, tb, batch * m, n, k, alpha, a.data, b.data, beta, c.data);
    return;
  }
  if (c.stride == 0 && ta && !tb && a.stride == mk && b.stride == kn) {
    // sum_b A_b^T B_b with A_b [K, M] and B_b [K, N] stacked: one [M, batch*K] @ [batch*K, N] GEMM.
    Gemm<T>(true, false, m, n, batch * k, alpha, a.data, b.data, beta, c.data);
    return;
  }
  if (c.stride == 0) {  // a reduction over the batch that does not fold: accumulate in turn
    for (int64_t i = 0; i < batch; ++i)
      Gemm<T>(ta, tb, m, n, k, alpha, a.data + i * a.stride, b.data + i * b.stride, i == 0 ? beta : T(1), c.data);
    return;
  }
  if (k == 0) {
    for (int64_t i = 0; i < batch; ++i) Gemm<T>(ta, tb, m, n, k, alpha, nullptr, nullptr, beta, c.data + i * c.stride);
    return;
  }
  const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m * n) * static_cast<double>(k);
  if (ThreadPool::Instance().Size() > 1 && flops >= 2 * kMinFlopsPerPart) {
    // Independent products spread over the pool, each one single-threaded OpenBLAS call.
    const double each = flops / static_cast<double>(batch);
    ParallelFor(
        batch, std::max<int64_t>(1, static_cast<int64_t>(kMinFlopsPerPart / each)), [&](int64_t b0, int64_t b1) {
          for (int64_t i = b0; i < b1; ++i)
            Gemm<T>(ta, tb, m, n, k, alpha, a.data + i * a.stride, b.data + i * b.stride, beta, c.data + i * c.stride);
        });
    return;
  }
  constexpr int64_t kMax = std::numeric_limits<blasint>::max();
  if (a.stride <= kMax && b.stride <= kMax && c.stride <= kMax && batch <= kMax && m <= kMax && n <= kMax &&
      k <= kMax) {
    const blasint lda = ta ? m : k, ldb = tb ? k : n;
    if constexpr (std::is_same_v<T, float>)
      scipy_cblas_sgemm_batch_strided(CblasRowMajor, Trans(ta), Trans(tb), m, n, k, alpha, a.data, lda, a.stride,
                                      b.data, ldb, b.stride, beta, c.data, n, c.stride, batch);
    else
      scipy_cblas_dgemm_batch_strided(CblasRowMajor, Trans(ta), Trans(tb), m, n, k, alpha, a.data, lda, a.stride,
                                      b.data, ldb, b.stride, beta, c.data, n, c.stride, batch);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    Gemm<T>(ta, tb, m, n, k, alpha, a.data + i * a.stride, b.data + i * b.stride, beta, c.data + i * c.stride);
}

}  // namespace blas
}  // namespace fl
