// Per-thread scratch memory that kernels reuse across calls: large temporaries (an im2col matrix) are
// allocated once and kept, so a training step does not page-fault fresh megabytes on every op.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>

#include "enforce.h"

namespace fl {

constexpr int kScratchSlots = 8;

// A buffer of at least n Ts for this thread; `slot` tells apart buffers one kernel uses at once. The
// contents are undefined and stay valid until the same slot is asked for again on this thread.
template <typename T>
T* Scratch(int slot, size_t n) {
  struct Buffer {
    std::unique_ptr<char, decltype(&std::free)> data{nullptr, &std::free};
    size_t bytes = 0;
  };
  thread_local Buffer buffers[kScratchSlots];
  Buffer& b = buffers[slot];
  const size_t want = (n * sizeof(T) + 63) / 64 * 64;
  if (want > b.bytes) {
    b.data.reset(static_cast<char*>(std::aligned_alloc(64, want)));
    FL_ENFORCE(b.data != nullptr, "out of memory allocating ", want, " bytes of scratch");
    b.bytes = want;
  }
  return reinterpret_cast<T*>(b.data.get());
}

}  // namespace fl
