// gather_tree: the full beams of a batched beam search (Fluid's gather_tree_op, used by BeamSearchDecoder's
// finalize). Ids and Parents are [T, B, beam]: step t's chosen id of each beam and the beam of step t - 1 it
// extends. Each beam is traced back from the last step: Out[T-1][b][k] = Ids[T-1][b][k] with p = Parents[T-1][b][k],
// then for t = T-2 .. 0, Out[t][b][k] = Ids[t][b][p] and p = Parents[t][b][p]. Parents[0] is never followed. A
// parent outside [0, beam) is an error naming the step, batch entry, beam and value. No gradient (ids).
#include <algorithm>

#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

void GatherTreeInferShape(InferShapeContext& ctx) {
  const DDim ids = ctx.InputDim("Ids");
  const DDim parents = ctx.InputDim("Parents");
  FL_ENFORCE(ids.size() == 3, "gather_tree: ", ctx.Describe("Ids"), " must be [max_time, batch_size, beam_size]");
  bool same = parents.size() == 3;
  for (int i = 0; same && i < 3; ++i) same = ids[i] < 0 || parents[i] < 0 || ids[i] == parents[i];
  FL_ENFORCE(same, "gather_tree: ", ctx.Describe("Parents"), " must have the shape of ", ctx.Describe("Ids"));
  const DType dt = ctx.InputDType("Ids");
  FL_ENFORCE(dt == DType::INT32 || dt == DType::INT64 || dt == DType::UNDEFINED, "gather_tree: ", ctx.Describe("Ids"),
             " must be int32 or int64, got ", DTypeName(dt));
  ctx.EnforceSameDType("Ids", "Parents");
  ctx.SetOutput("Out", ids, dt);
}

const auto kGatherTree = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& ids_t = ctx.Input("Ids");
  const T* ids = ids_t.data<T>();
  const T* parents = ctx.Input("Parents").data<T>();
  T* out = ctx.Alloc<T>("Out");
  const int64_t steps = ids_t.dims()[0], batch = ids_t.dims()[1], beam = ids_t.dims()[2];
  const int64_t step_size = batch * beam;
  if (steps == 0) return;
  // Batch entries are independent; each costs steps * beam reads.
  const int64_t grain = std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, steps * beam));
  ParallelFor(batch, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      for (int64_t k = 0; k < beam; ++k) {
        int64_t t = steps - 1, at = k;  // the beam followed at step t
        for (;; --t) {
          const int64_t i = t * step_size + b * beam + at;
          out[t * step_size + b * beam + k] = ids[i];
          if (t == 0) break;
          const T parent = parents[i];
          FL_ENFORCE(parent >= 0 && parent < beam, "gather_tree: Parents '", ctx.InputName("Parents"), "' ",
                     ids_t.dims(), " at [", t, ", ", b, ", ", at, "] is ", static_cast<int64_t>(parent),
                     ", outside [0, ", beam, ") (the beams of step ", t - 1, ")");
          at = static_cast<int64_t>(parent);
        }
      }
    }
  });
};

}  // namespace

FL_REGISTER_OP(gather_tree, op) {
  op.Doc(
        "Out = the full beams traced back from the last step through Parents: Out[t][b][k] is the id at step t "
        "of the beam that ends in beam k of the last step.")
      .Input("Ids", "int32/int64 [max_time, batch_size, beam_size]: the id each beam chose at each step")
      .Input("Parents", "Ids' dtype and shape: the beam of the previous step each beam extends")
      .Output("Out", "[max_time, batch_size, beam_size]: the ids of each final beam, step by step")
      .SetInferShape(GatherTreeInferShape)
      .KernelDTypeFrom("Ids")
      .CPUKernel<int32_t, int64_t>(kGatherTree)
      .NoGradient();
}

}  // namespace fl
