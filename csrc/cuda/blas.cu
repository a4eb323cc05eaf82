// cuBLAS, opened with dlopen at first use, so the module links only the CUDA runtime and imports where cuBLAS is
// missing (a GPU op that needs it then raises, saying where it looked). Searched: $FLUIDLITE_CUBLAS (a path), the
// library directories Python registered (fluidlite/_cuda_libs.py: the nvidia-cublas wheel's), then the loader's own
// path (a libcublas torch or CuPy already loaded is found by its soname). One handle per device, on its stream.
// FP32 products use FP32 math (no TF32), as the CPU kernels and PyTorch's default do.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "logging.h"

namespace fl {
namespace cuda {

namespace {

// cuBLAS's ABI, declared here rather than taken from cublas_v2.h (the wheel ships no headers for the toolkit).
using Handle = void*;
using Status = int;
enum Op : int { kOpN = 0, kOpT = 1 };

struct Blas {
  Status (*create)(Handle*) = nullptr;
  Status (*set_stream)(Handle, cudaStream_t) = nullptr;
  Status (*sgemm)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*,
                  float*, int) = nullptr;
  Status (*dgemm)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int, const double*,
                  double*, int) = nullptr;
  Status (*sgemm_batched)(Handle, int, int, int, int, int, const float*, const float*, int, long long, const float*,
                          int, long long, const float*, float*, int, long long, int) = nullptr;
  Status (*dgemm_batched)(Handle, int, int, int, int, int, const double*, const double*, int, long long, const double*,
                          int, long long, const double*, double*, int, long long, int) = nullptr;
  std::string where;  // the path loaded, or why nothing was
  bool ok = false;
};

std::vector<std::string>& LibraryDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

template <typename F>
bool Resolve(void* lib, const char* name, F*& fn) {
  fn = reinterpret_cast<F*>(dlsym(lib, name));
  return fn != nullptr;
}

Blas& TheBlas() {
  static Blas* blas = [] {
    auto* b = new Blas();
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("FLUIDLITE_CUBLAS")) candidates.push_back(env);
    for (const std::string& d : LibraryDirs()) candidates.push_back(d + "/libcublas.so.13");
    candidates.push_back("libcublas.so.13");
    candidates.push_back("libcublas.so");
    std::string tried;
    for (const std::string& c : candidates) {
      void* lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!lib) {
        tried += (tried.empty() ? "" : ", ") + c;
        continue;
      }
      bool ok = Resolve(lib, "cublasCreate_v2", b->create) && Resolve(lib, "cublasSetStream_v2", b->set_stream) &&
                Resolve(lib, "cublasSgemm_v2", b->sgemm) && Resolve(lib, "cublasDgemm_v2", b->dgemm) &&
                Resolve(lib, "cublasSgemmStridedBatched", b->sgemm_batched) &&
                Resolve(lib, "cublasDgemmStridedBatched", b->dgemm_batched);
      if (!ok) {
        tried += (tried.empty() ? "" : ", ") + c + " (lacks the gemm symbols)";
        continue;
      }
      char path[4096] = {0};
      b->where = dlinfo(lib, RTLD_DI_ORIGIN, path) == 0 ? std::string(path) + " (" + c + ")" : c;
      b->ok = true;
      FL_VLOG(1) << "cuBLAS loaded from " << b->where;
      break;
    }
    if (!b->ok)
      b->where = "cuBLAS was not found (tried " + tried +
                 "); pip install nvidia-cublas (fluidlite[cuda]) or set FLUIDLITE_CUBLAS=/path/to/libcublas.so.13";
    return b;
  }();
  return *blas;
}

Handle HandleFor(int device) {
  Blas& b = TheBlas();
  FL_ENFORCE(b.ok, b.where);
  static std::mutex mu;
  static std::vector<Handle> handles;
  std::lock_guard<std::mutex> l(mu);
  if (static_cast<int>(handles.size()) <= device) handles.resize(device + 1, nullptr);
  if (!handles[device]) {
    SetDevice(device);
    Handle h = nullptr;
    Status s = b.create(&h);
    FL_ENFORCE(s == 0, "cublasCreate failed with status ", s, " on CUDAPlace(", device, ")");
    s = b.set_stream(h, Stream(device));
    FL_ENFORCE(s == 0, "cublasSetStream failed with status ", s);
    handles[device] = h;
  }
  SetDevice(device);
  return handles[device];
}

int Int(int64_t v, const char* what) {
  FL_ENFORCE(v >= 0 && v <= INT32_MAX, "cuBLAS gemm: ", what, " ", v, " does not fit in 32 bits");
  return static_cast<int>(v);
}

void Check(Status s, const char* call) { FL_ENFORCE(s == 0, call, " failed with cuBLAS status ", s); }

}  // namespace

std::string BlasLibrary() { return TheBlas().where; }

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands and m with n.
template <>
void Gemm<float>(int device, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  Check(TheBlas().sgemm(HandleFor(device), tb ? kOpT : kOpN, ta ? kOpT : kOpN, Int(n, "n"), Int(m, "m"), Int(k, "k"),
                        &alpha, b, Int(ldb, "ldb"), a, Int(lda, "lda"), &beta, c, Int(ldc, "ldc")),
        "cublasSgemm");
}

template <>
void Gemm<double>(int device, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  Check(TheBlas().dgemm(HandleFor(device), tb ? kOpT : kOpN, ta ? kOpT : kOpN, Int(n, "n"), Int(m, "m"), Int(k, "k"),
                        &alpha, b, Int(ldb, "ldb"), a, Int(lda, "lda"), &beta, c, Int(ldc, "ldc")),
        "cublasDgemm");
}

template <>
void GemmStridedBatched<float>(int device, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                               const float* a, int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb,
                               float beta, float* c, int64_t ldc, int64_t sc, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  Check(TheBlas().sgemm_batched(HandleFor(device), tb ? kOpT : kOpN, ta ? kOpT : kOpN, Int(n, "n"), Int(m, "m"),
                                Int(k, "k"), &alpha, b, Int(ldb, "ldb"), sb, a, Int(lda, "lda"), sa, &beta, c,
                                Int(ldc, "ldc"), sc, Int(batch, "batch")),
        "cublasSgemmStridedBatched");
}

template <>
void GemmStridedBatched<double>(int device, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                                const double* a, int64_t lda, int64_t sa, const double* b, int64_t ldb, int64_t sb,
                                double beta, double* c, int64_t ldc, int64_t sc, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  Check(TheBlas().dgemm_batched(HandleFor(device), tb ? kOpT : kOpN, ta ? kOpT : kOpN, Int(n, "n"), Int(m, "m"),
                                Int(k, "k"), &alpha, b, Int(ldb, "ldb"), sb, a, Int(lda, "lda"), sa, &beta, c,
                                Int(ldc, "ldc"), sc, Int(batch, "batch")),
        "cublasDgemmStridedBatched");
}

void AddLibraryDir(const std::string& dir) { LibraryDirs().push_back(dir); }

}  // namespace cuda
}  // namespace fl
