// A thin typed wrapper over the scipy-openblas32 CBLAS: row-major GEMM for float and double, one matrix
// or a strided batch. blasint is 32-bit here, so every size, leading dim and batch stride is checked.
#pragma once
#include <cblas.h>

#include <cstdint>
#include <limits>
#include <mutex>
#include <type_traits>

#include "enforce.h"

namespace fl {
namespace blas {

inline blasint Int(int64_t v, const char* what) {
  FL_ENFORCE(v >= 0 && v <= std::numeric_limits<blasint>::max(), "BLAS: ", what, " = ", v,
             " does not fit the 32-bit BLAS integer (scipy-openblas32)");
  return static_cast<blasint>(v);
}

// While one of these lives, OpenBLAS runs every call on its caller's thread. Kernels that split work
// across the thread pool themselves (conv2d over images) use it so that each pool thread makes
// single-threaded GEMM calls: OpenBLAS's own threads would fight the pool for the same cores, and its
// split of a small GEMM (16 x 144 x 1024) costs more than it saves. Nested and concurrent scopes share
// one count; the last to leave restores the thread count the first one found.
class SingleThreadedScope {
 public:
  SingleThreadedScope() {
    std::lock_guard<std::mutex> l(Mu());
    if (Depth()++ == 0) {
      Saved() = scipy_openblas_get_num_threads();
      if (Saved() > 1) scipy_openblas_set_num_threads(1);
    }
  }
  ~SingleThreadedScope() {
    std::lock_guard<std::mutex> l(Mu());
    if (--Depth() == 0 && Saved() > 1) scipy_openblas_set_num_threads(Saved());
  }
  SingleThreadedScope(const SingleThreadedScope&) = delete;
  SingleThreadedScope& operator=(const SingleThreadedScope&) = delete;

 private:
  static std::mutex& Mu() {
    static std::mutex mu;
    return mu;
  }
  static int& Depth() {
    static int depth = 0;
    return depth;
  }
  static int& Saved() {
    static int saved = 1;
    return saved;
  }
};

inline CBLAS_TRANSPOSE Trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

// C[M, N] = alpha * op(A) @ op(B) + beta * C, row-major. op(A) is [M, K], op(B) is [K, N]; lda/ldb/ldc
// are the row strides of A, B and C as stored (so A is [M, lda] untransposed, [K, lda] transposed).
template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

template <>
inline void Gemm<float>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  scipy_cblas_sgemm(CblasRowMajor, Trans(ta), Trans(tb), Int(m, "M"), Int(n, "N"), Int(k, "K"), alpha, a,
                    Int(lda, "lda"), b, Int(ldb, "ldb"), beta, c, Int(ldc, "ldc"));
}

template <>
inline void Gemm<double>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                         int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  scipy_cblas_dgemm(CblasRowMajor, Trans(ta), Trans(tb), Int(m, "M"), Int(n, "N"), Int(k, "K"), alpha, a,
                    Int(lda, "lda"), b, Int(ldb, "ldb"), beta, c, Int(ldc, "ldc"));
}

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
void GemmBatched(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, T alpha,
                 BatchOperand<const T> a, BatchOperand<const T> b, T beta, BatchOperand<T> c) {
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
