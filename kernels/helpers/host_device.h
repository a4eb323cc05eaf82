// FL_HD marks per-element math that both the CPU kernels (g++) and the CUDA kernels (nvcc) call, so the CPU tests
// exercise the formulas the GPU runs. Under g++ it is empty: CPU code is unchanged.
#pragma once

#if defined(__CUDACC__)
#define FL_HD __host__ __device__
#else
#define FL_HD
#endif
