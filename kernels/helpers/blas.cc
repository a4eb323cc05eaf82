// blas::Gemm's split across the thread pool (out of line: its tuning does not rebuild every kernel).
#include "blas.h"

namespace fl {
namespace blas {

// A chunk is at least this many flops (half a thread's minimum share) and whole 16-wide blocks of the split
// dimension, and a GEMM is cut into at most kChunksPerThread chunks per thread (fewer if the pool's setting,
// FLUIDLITE_POOL_CHUNKS, is lower). Two, not the pool's four: every chunk is one more OpenBLAS call (about 2 us
// of set-up each), which also costs when the pool has backed off and runs the same chunks on the caller alone.
// Measured on the LSTM bench's mul_grad GEMMs (32 x 256 x 512 and kin), chunks all on the caller against one
// call at one thread: 1.02-1.04x at 1 chunk per thread, 0.97-1.04x at 2, 0.97-1.08x at 4; under load the
// extra chunks showed no gain beyond the noise (docs/architecture.md, "The thread pool under load").
constexpr double kMinFlopsPerChunk = kMinFlopsPerPart / 2;
constexpr int64_t kChunksPerThread = 2;
constexpr int64_t kBlock = 16;

template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  ThreadPool& pool = ThreadPool::Instance();
  if (pool.Size() >= 2 && flops >= 2 * kMinFlopsPerPart) {
    const bool by_rows = m >= n;
    const int64_t len = by_rows ? m : n, blocks = (len + kBlock - 1) / kBlock;
    const int chunks = pool.Chunks(
        std::min<int64_t>({blocks, static_cast<int64_t>(flops / kMinFlopsPerChunk), kChunksPerThread * pool.Size()}));
    if (chunks >= 2) {
      const std::function<void(int)> job = [&](int p) {
        const int64_t lo = blocks * p / chunks * kBlock, hi = std::min(len, blocks * (p + 1) / chunks * kBlock);
        if (by_rows)
          SerialGemm<T>(ta, tb, hi - lo, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc, ldc);
        else SerialGemm<T>(ta, tb, m, hi - lo, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
      };
      pool.Run(chunks, job);
      return;
    }
  }
  SerialGemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template void Gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
template void Gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                           int64_t, double, double*, int64_t);

}  // namespace blas
}  // namespace fl
