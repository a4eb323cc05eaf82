// reverse: Out = X with the order of its elements flipped along each axis in `axis` (Fluid 1.8 reverse_op).
// layers.rnn(is_reverse=True) runs the time axis backwards with it. The gradient is reverse of Out@GRAD.
//
// The kernel sees X as [outer dims..., dims[last], inner], `last` the innermost reversed axis: every block of
// dims[last] * inner elements is copied from the block at the mirrored outer index, its dims[last] runs of
// `inner` contiguous elements in reverse order.
#include <cstring>

#include "grad_op_maker.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

// The reversed axes of a rank-`rank` tensor as a per-dim mask; InferShape has range-checked `axis`.
std::vector<bool> ReversedMask(const std::vector<int32_t>& axis, int rank) {
  std::vector<bool> flip(rank, false);
  for (int32_t a : axis) flip[a < 0 ? a + rank : a] = true;
  return flip;
}

template <typename T>
void Reverse(const T* x, const DDim& dims, const std::vector<bool>& flip, T* out) {
  const int rank = dims.size();
  int last = rank - 1;  // at least one axis flips
  while (!flip[last]) --last;
  const int64_t inner = dims.Product(last + 1, rank);
  const int64_t runs = dims[last];
  const int64_t block = runs * inner;
  const int64_t outer = dims.Product(0, last);
  if (block == 0 || outer == 0) return;
  ParallelFor(outer, std::max<int64_t>(1, 16384 / block), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      // the source block: o's index over dims[0, last), mirrored along the reversed dims
      int64_t rest = o, src = 0, stride = 1;
      for (int d = last - 1; d >= 0; --d) {
        const int64_t i = rest % dims[d];
        rest /= dims[d];
        src += (flip[d] ? dims[d] - 1 - i : i) * stride;
        stride *= dims[d];
      }
      const T* from = x + src * block;
      T* to = out + o * block;
      if (inner == 1) {
        for (int64_t r = 0; r < runs; ++r) to[r] = from[runs - 1 - r];
      } else {
        for (int64_t r = 0; r < runs; ++r)
          std::memcpy(to + r * inner, from + (runs - 1 - r) * inner, inner * sizeof(T));
      }
    }
  });
}

}  // namespace

FL_REGISTER_OP(reverse, op) {
  op.Doc("Out = X with the order of its elements reversed along each axis in `axis`; Out has X's dims.")
      .Input("X", "the tensor to flip")
      .Output("Out", "X flipped along `axis`")
      .RequiredAttr("axis", std::vector<int32_t>{}, "the axes to flip; negative values count from the end")
      .Range(-DDim::kMaxRank, DDim::kMaxRank - 1)
      .Size(1, DDim::kMaxRank)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const auto& axis = ctx.Attr<std::vector<int32_t>>("axis");
        std::vector<bool> seen(x.size(), false);
        for (int32_t a : axis) {
          FL_ENFORCE(a >= -x.size() && a < x.size(), ctx.Type(), ": axis ", a, " is out of range for ",
                     ctx.Describe("X"), " (rank ", x.size(), ", valid range [", -x.size(), ", ", x.size(), "))");
          const int n = a < 0 ? a + x.size() : a;
          FL_ENFORCE(!seen[n], ctx.Type(), ": axis names dim ", n, " of ", ctx.Describe("X"), " twice");
          seen[n] = true;
        }
        // No LoD: flipping the rows would not flip the sequences (Fluid's reverse does not pass it on either).
        ctx.SetOutput("Out", x, ctx.InputDType("X"));
      })
      .CPUKernel<float, double, int32_t, int64_t, uint8_t, bool>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        Tensor* out = ctx.Output("Out");
        out->Resize(x.dims());
        Reverse<T>(x.data<T>(), x.dims(), ReversedMask(ctx.Attr<std::vector<int32_t>>("axis"), x.rank()),
                   out->mutable_data<T>(ctx.place()));
      })
      .Grad([](GradOpMaker& g) {  // flipping is its own inverse: X@GRAD = reverse(Out@GRAD, axis)
        OpDesc& op = g.NewOp("reverse");
        op.SetInput("X", g.OutputGrad("Out"));
        op.SetOutput("Out", g.InputGrad("X"));
        op.SetAttr("axis", g.Attr<std::vector<int32_t>>("axis"));
      });
}

}  // namespace fl
