// Device helpers shared by the kernel files in kernels/cuda/ (include after csrc/cuda/device.h's "cuda/device.h").
//
//   Strided          flat index over `dims` (row-major) -> element offset under arbitrary strides (a transpose, a
//                    slice, a broadcast operand). Up to DDim::kMaxRank dims; passed to kernels by value.
//   BroadcastIndex   Fluid's elementwise axis broadcasting on the device: built on the host from the CPU's
//                    BroadcastPlan (kernels/helpers/broadcast.h, so shapes, axis and errors are the CPU's), it maps
//                    an output flat index to the X and Y offsets.
//   ReduceIndex      a reduction as (kept dims, reduced dims), each with input strides: output o's elements are at
//                    Base(o) + Offset(r) for r in [0, reduce_count). Built from a dims + reduced-axis mask (reduce
//                    ops, the CPU's ReduceLayout) or from a BroadcastPlan operand (elementwise gradients).
//   WarpReduce / BlockReduce   shuffle reductions (sum, max) within a warp / a block.
//   LaunchReduce     the row-wise reduction pattern: out[o] = store(o, combine over r of load(Base(o) + Offset(r))),
//                    one block per output (coalesced when the reduced elements are contiguous and many) or one thread
//                    per output (when they are few, or strided: neighbouring threads then read neighbouring elements).
//
// All index math is int64_t. Functors passed to kernels are structs with a __device__ operator() (no extended
// lambdas: setup.py does not pass --extended-lambda).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cuda/device.h"
#include "ddim.h"

namespace fl {
struct BroadcastPlan;  // kernels/helpers/broadcast.h (include it before calling MakeBroadcastIndex)
namespace cuda {

constexpr int kMaxDims = DDim::kMaxRank;

// ------------------------------------------------------------------ index maps

struct Strided {
  int rank = 0;
  int64_t dims[kMaxDims];
  int64_t strides[kMaxDims];
  // The offset of the row-major flat index i over dims.
  __host__ __device__ int64_t Offset(int64_t i) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = i / dims[d];
      off += (i - q * dims[d]) * strides[d];
      i = q;
    }
    return off;
  }
};

// dims with the given strides (nullptr: contiguous row-major strides of dims).
inline Strided MakeStrided(const std::vector<int64_t>& dims, const std::vector<int64_t>* strides = nullptr) {
  Strided s;
  s.rank = static_cast<int>(dims.size());
  FL_ENFORCE(s.rank <= kMaxDims, "rank ", s.rank, " exceeds ", kMaxDims);
  int64_t st = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    s.dims[d] = dims[d];
    s.strides[d] = strides ? (*strides)[d] : st;
    st *= dims[d];
  }
  return s;
}

// Contiguous row-major strides of dims.
inline std::vector<int64_t> ContiguousStrides(const DDim& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t st = 1;
  for (int d = dims.size() - 1; d >= 0; --d) {
    s[d] = st;
    st *= dims[d];
  }
  return s;
}

struct BroadcastIndex {
  int rank = 0;
  int64_t dims[kMaxDims];
  int64_t xs[kMaxDims], ys[kMaxDims];  // element strides, 0 = broadcast
  __host__ __device__ void Offsets(int64_t i, int64_t* xo, int64_t* yo) const {
    int64_t a = 0, b = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = i / dims[d], r = i - q * dims[d];
      a += r * xs[d];
      b += r * ys[d];
      i = q;
    }
    *xo = a;
    *yo = b;
  }
};

// ------------------------------------------------------------------ reductions

struct ReduceIndex {
  Strided kept;     // over the output elements (row-major in the kept dims' order)
  Strided reduced;  // over the elements combined into one output
  int64_t out_numel = 1, reduce_count = 1;
  bool inner_contiguous = false;  // the innermost reduced dim has input stride 1
  __host__ __device__ int64_t Base(int64_t o) const { return kept.Offset(o); }
  __host__ __device__ int64_t Offset(int64_t r) const { return reduced.Offset(r); }
};

// A reduction of a tensor of `dims` (input strides `strides`) over the axes where mask is true. Size-1 axes are
// dropped and neighbouring axes of one kind that are contiguous in the input merge. The output's elements are in the
// order of the kept axes (what a reduce op's Out holds).
inline ReduceIndex MakeReduceIndex(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                   const std::vector<bool>& mask) {
  std::vector<int64_t> kd, ks, rd, rs;
  int last = -1;  // the kind (0 kept, 1 reduced) of the previous axis kept in the lists
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    std::vector<int64_t>& d = mask[i] ? rd : kd;
    std::vector<int64_t>& s = mask[i] ? rs : ks;
    // An axis right after one of its kind whose stride spans it merges into it (fewer divisions per index).
    if (last == int(mask[i]) && !d.empty() && s.back() == strides[i] * dims[i]) {
      d.back() *= dims[i];
      s.back() = strides[i];
    } else {
      d.push_back(dims[i]);
      s.push_back(strides[i]);
    }
    last = mask[i];
  }
  ReduceIndex ri;
  ri.kept = MakeStrided(kd, &ks);
  ri.reduced = MakeStrided(rd, &rs);
  for (int64_t d : kd) ri.out_numel *= d;
  for (int64_t d : rd) ri.reduce_count *= d;
  ri.inner_contiguous = !rs.empty() && rs.back() == 1;
  return ri;
}
inline ReduceIndex MakeReduceIndex(const DDim& dims, const std::vector<bool>& mask) {
  return MakeReduceIndex(dims.ToVector(), ContiguousStrides(dims), mask);
}

#ifdef __CUDACC__
struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

// Combines v over the 32 lanes of the warp; every lane gets the result.
template <typename T, typename Op>
__device__ T WarpReduce(T v, Op op) {
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Combines v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result. All threads
// of the block must call it (it synchronizes); `init` is op's identity. Safe to call repeatedly in one kernel.
template <typename T, typename Op>
__device__ T BlockReduce(T v, Op op, T init) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = WarpReduce(v, op);
  __syncthreads();  // a previous call's readers are done with `partial`
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : init;
  return WarpReduce(v, op);
}
template <typename T>
__device__ T BlockSum(T v) {
  return BlockReduce(v, SumOp{}, T(0));
}
template <typename T>
__device__ T BlockMax(T v) {
  T lowest;
  if constexpr (std::numeric_limits<T>::has_infinity) lowest = -std::numeric_limits<T>::infinity();
  else lowest = std::numeric_limits<T>::lowest();
  return BlockReduce(v, MaxOp{}, lowest);
}

namespace detail {
template <typename T, typename Load, typename Op, typename Store>
__global__ void ReduceThreadPerOutput(int64_t n, ReduceIndex ri, T init, Load load, Op op, Store store) {
  FL_CUDA_LOOP(o, n) {
    const int64_t base = ri.Base(o);
    T acc = init;
    for (int64_t r = 0; r < ri.reduce_count; ++r) acc = op(acc, load(base + ri.Offset(r)));
    store(o, acc);
  }
}
template <typename T, typename Load, typename Op, typename Store>
__global__ void ReduceBlockPerOutput(int64_t n, ReduceIndex ri, T init, Load load, Op op, Store store) {
  for (int64_t o = blockIdx.x; o < n; o += gridDim.x) {
    const int64_t base = ri.Base(o);
    T acc = init;
    for (int64_t r = threadIdx.x; r < ri.reduce_count; r += blockDim.x) acc = op(acc, load(base + ri.Offset(r)));
    acc = BlockReduce(acc, op, init);
    if (threadIdx.x == 0) store(o, acc);
  }
}
}  // namespace detail

// For every output o of ri: store(o, op-combination of load(offset) over its elements, starting from init).
// load: __device__ T operator()(int64_t input_offset) const; store: __device__ void operator()(int64_t o, T) const.
// An output with no elements (reduce_count 0) stores init.
template <typename T, typename Load, typename Op, typename Store>
void LaunchReduce(const ExecutionContext& ctx, const ReduceIndex& ri, T init, Load load, Op op, Store store) {
  if (ri.out_numel <= 0) return;
  const int device = ctx.place().device;
  const bool per_block =
      ri.reduce_count >= 128 && (ri.inner_contiguous || ri.out_numel <= 4 * MultiprocessorCount(device));
  if (per_block) {
    const int64_t blocks = std::min<int64_t>(ri.out_numel, int64_t(MultiprocessorCount(device)) * 32);
    detail::ReduceBlockPerOutput<<<static_cast<int>(blocks), kThreads, 0, Stream(device)>>>(ri.out_numel, ri, init,
                                                                                            load, op, store);
    CheckLaunch(ctx.Type().c_str());
  } else {
    Launch(ctx, ri.out_numel, detail::ReduceThreadPerOutput<T, Load, Op, Store>, ri, init, load, op, store);
  }
}
#endif  // __CUDACC__

}  // namespace cuda
}  // namespace fl

// BroadcastPlan -> BroadcastIndex (after kernels/helpers/broadcast.h), and the reduction of a gradient over the
// dims an operand was broadcast along: kept = the operand's own dims, the input is the output's flat index (feed
// it to a BroadcastIndex to find the X and Y elements), so load(flat_out) reads dOut[flat_out].
namespace fl {
namespace cuda {
template <typename Plan>
BroadcastIndex MakeBroadcastIndex(const Plan& p) {
  BroadcastIndex b;
  b.rank = p.rank;
  for (int d = 0; d < p.rank; ++d) {
    b.dims[d] = p.dims[d];
    b.xs[d] = p.xs[d];
    b.ys[d] = p.ys[d];
  }
  return b;
}
// `x_side`: reduce onto X (else Y). Output o of the result is the operand's flat element o.
template <typename Plan>
ReduceIndex MakeBroadcastGradIndex(const Plan& p, bool x_side) {
  std::vector<int64_t> dims(p.dims, p.dims + p.rank), strides(p.rank);
  std::vector<bool> mask(p.rank);
  int64_t st = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    strides[d] = st;
    st *= p.dims[d];
    mask[d] = (x_side ? p.xs[d] : p.ys[d]) == 0;
  }
  return MakeReduceIndex(dims, strides, mask);
}
}  // namespace cuda
}  // namespace fl
