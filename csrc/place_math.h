// The little arithmetic the core itself does on tensors of any place (the recurrent step runner zeroing a step and
// adding up parameter gradients): on the CPU directly, on a GPU through the CUDA runtime (csrc/cuda/place_math.cu).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dtype.h"
#include "place.h"

namespace fl {

// bytes of zeros at dst.
void ZeroBytes(const Place& place, void* dst, size_t bytes);
// dst[i] = srcs[0][i] + srcs[1][i] + ... (in that order, so every place gives the same bits) for float32/float64;
// dst may be one of the sources.
void SumArrays(const Place& place, DType dtype, const std::vector<const void*>& srcs, void* dst, int64_t n);

}  // namespace fl
