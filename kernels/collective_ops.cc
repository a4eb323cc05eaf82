// Fluid's collective ops (c_allreduce_*, c_broadcast, c_allgather, c_reducescatter, c_sync_*_stream, barrier) over
// the rings of csrc/comm.h. Kernel-less: they move bytes whatever the dtype (float32, float64, int32, int64 travel).
//
// Beyond Fluid: c_allreduce_* and c_broadcast take any number of X (one contiguous buffer, one collective: what
// Fluid's fuse_all_reduce_ops builds with coalesce_tensor); fluidlite.distributed.collective inserts one per
// gradient bucket. With use_calc_stream=false (the default, as in Fluid) an op queues its collective on the ring's
// comm stream and returns; the outputs hold the result after the next c_sync_comm_stream on that ring (or the end
// of the executor's run). With use_calc_stream=true the op waits, and its outputs hold the result when it returns.
#include <cstring>
#include <sstream>

#include "comm.h"
#include "grad_op_maker.h"
#include "op_context.h"

namespace fl {

namespace {

using comm::Collective;
using comm::ReduceKind;

// "fc_0.w_0@GRAD" or "3 tensors: a, b, c" (at most 4 names), for the GLOG line and errors.
std::string NamesOf(const ExecutionContext& ctx, const char* slot) {
  const int n = ctx.InputSize(slot);
  if (n == 1) return "'" + ctx.InputName(slot) + "'";
  std::ostringstream os;
  os << n << " tensors (";
  for (int i = 0; i < n && i < 4; ++i) os << (i ? ", " : "") << "'" << ctx.InputName(slot, i) << "'";
  if (n > 4) os << ", ...";
  os << ")";
  return os.str();
}

// "X[1] 'fc_0.w_0@GRAD'" (the slot, the index and the variable: for errors).
std::string VarOf(const ExecutionContext& ctx, const char* slot, int i = 0) {
  return std::string(slot) + "[" + std::to_string(i) + "] '" + ctx.InputName(slot, i) + "'";
}

// The dtype every X shares (they travel as one buffer of one MPI datatype).
DType CommonDType(const ExecutionContext& ctx) {
  const DType dt = ctx.Input("X", 0).dtype();
  for (int i = 1; i < ctx.InputSize("X"); ++i) {
    FL_ENFORCE(ctx.Input("X", i).dtype() == dt, ctx.Type(), ": ", VarOf(ctx, "X", i), " has dtype ",
               DTypeName(ctx.Input("X", i).dtype()), ", ", VarOf(ctx, "X", 0), " has ", DTypeName(dt),
               "; the tensors of one collective travel as one buffer of one dtype");
  }
  FL_ENFORCE(dt == DType::FP32 || dt == DType::FP64 || dt == DType::INT32 || dt == DType::INT64, ctx.Type(), ": ",
             VarOf(ctx, "X", 0), " has dtype ", DTypeName(dt), "; collectives carry float32, float64, int32 or int64");
  return dt;
}

std::shared_ptr<comm::Ring> RingOf(const ExecutionContext& ctx) {
  return comm::GetRing(ctx.Attr<int32_t>("ring_id"), ctx.Type().c_str());
}

// Queues `c` (or runs it now with use_calc_stream) on the op's ring.
void Launch(const ExecutionContext& ctx, comm::Ring& ring, std::unique_ptr<Collective> c) {
  c->op_type = ctx.Type().c_str();  // op types are registry strings: they outlive the job
  if (ctx.Attr<bool>("use_calc_stream")) ring.RunNow(std::move(c), ctx.Type().c_str());
  else ring.Enqueue(std::move(c));
}

// Out[i] = op over the ranks of X[i] for every i (allreduce), or root's X[i] (broadcast): the Xs are packed into one
// buffer, and the result is copied into the Outs (sized like their Xs now, written when the collective is done).
void RunPacked(const ExecutionContext& ctx, Collective::Kind kind, ReduceKind reduce) {
  auto ring = RingOf(ctx);
  const int n = ctx.InputSize("X");
  FL_ENFORCE(ctx.OutputSize("Out") == n, ctx.Type(), ": Out lists ", ctx.OutputSize("Out"), " variables, X ", n,
             "; one output per input");
  auto c = std::make_unique<Collective>();
  c->kind = kind;
  c->reduce = reduce;
  c->dtype = CommonDType(ctx);
  c->what = NamesOf(ctx, "X");
  if (kind == Collective::kBroadcast) {
    c->root = ctx.Attr<int32_t>("root");
    FL_ENFORCE(c->root < ring->nranks(), ctx.Type(), ": root ", c->root, " is not a rank of ring ", ring->id(), " (",
               ring->nranks(), " ranks)");
  }
  std::vector<size_t> offsets(n + 1, 0);
  for (int i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + ctx.Input("X", i).nbytes();
  c->count = static_cast<int64_t>(offsets[n] / SizeOf(c->dtype));
  c->send.Resize(offsets[n]);
  const bool sends = kind != Collective::kBroadcast || c->root == ring->rank();
  std::vector<Tensor> outs(n);
  for (int i = 0; i < n; ++i) {
    const Tensor& x = ctx.Input("X", i);
    if (sends && x.nbytes() > 0) std::memcpy(c->send.data() + offsets[i], x.raw_data(), x.nbytes());
    Tensor* out = ctx.Output("Out", i);
    if (out != &x) {
      out->Resize(x.dims());
      out->set_lod(x.lod());
    }
    out->mutable_data(ctx.place(), c->dtype);
    outs[i] = *out;  // shares the buffer the result goes to
  }
  c->finish = [outs = std::move(outs), offsets = std::move(offsets)](Collective& done) mutable {
    for (size_t i = 0; i < outs.size(); ++i) {
      // mutable_data marks the buffer written (its data_version: caches keyed on a parameter's contents see it).
      void* dst = outs[i].mutable_data(outs[i].place(), outs[i].dtype());
      if (outs[i].nbytes() > 0) std::memcpy(dst, done.send.data() + offsets[i], offsets[i + 1] - offsets[i]);
    }
  };
  Launch(ctx, *ring, std::move(c));
}

// c_allgather (Out = the ranks' X stacked along dim 0) and c_reducescatter (Out = rank's slice of dim 0 of the sum).
void RunGatherOrScatter(const ExecutionContext& ctx, Collective::Kind kind) {
  auto ring = RingOf(ctx);
  const int nranks = ctx.Attr<int32_t>("nranks");
  FL_ENFORCE(nranks == ring->nranks(), ctx.Type(), ": attribute nranks = ", nranks, " but ring ", ring->id(), " has ",
             ring->nranks(), " ranks");
  const Tensor& x = ctx.Input("X");
  FL_ENFORCE(x.rank() >= 1, ctx.Type(), ": ", VarOf(ctx, "X"), " must have at least one dimension");
  auto c = std::make_unique<Collective>();
  c->kind = kind;
  c->dtype = CommonDType(ctx);
  c->what = NamesOf(ctx, "X");
  c->send.Resize(x.nbytes());
  if (x.nbytes() > 0) std::memcpy(c->send.data(), x.raw_data(), x.nbytes());
  DDim out_dims = x.dims();
  if (kind == Collective::kAllGather) {
    c->count = x.numel();
    out_dims[0] = x.dims()[0] * nranks;
  } else {
    FL_ENFORCE(x.dims()[0] % nranks == 0, ctx.Type(), ": dim 0 of ", VarOf(ctx, "X"), " must divide evenly among the ",
               nranks, " ranks");
    c->count = x.numel() / nranks;
    out_dims[0] = x.dims()[0] / nranks;
  }
  Tensor* out = ctx.Output("Out");
  out->Resize(out_dims);
  out->mutable_data(ctx.place(), c->dtype);
  c->finish = [dst = *out](Collective& done) mutable {
    void* p = dst.mutable_data(dst.place(), dst.dtype());
    if (!done.recv.empty()) std::memcpy(p, done.recv.data(), std::min(done.recv.size(), dst.nbytes()));
  };
  Launch(ctx, *ring, std::move(c));
}

void InferSameShapes(InferShapeContext& ctx) {
  const int n = ctx.InputSize("X");
  FL_ENFORCE(ctx.OutputSize("Out") == n, ctx.Type(), ": Out lists ", ctx.OutputSize("Out"), " variables, X ", n,
             "; one output per input");
  for (int i = 0; i < n; ++i) ctx.SetOutput("Out", ctx.InputDim("X", i), ctx.InputDType("X", i), i);
}

OpBuilder& DeclareRingAttrs(OpBuilder& op) {
  return op.Attr<int32_t>("ring_id", 0, "the ring (communicator) to use; fleet.init creates ring 0")
      .Min(0)
      .Attr<bool>("use_calc_stream", false,
                  "wait for the collective here (true), or queue it on the ring's comm stream and let "
                  "c_sync_comm_stream wait (false)");
}

void DeclareAllReduce(OpBuilder& op, const char* name, ReduceKind reduce) {
  op.Doc(std::string("Out[i] = the ") + name +
         " over all ranks of X[i], elementwise. Every X travels in one buffer and one MPI call (a gradient bucket).")
      .DuplicableInput("X", "tensors to reduce (one dtype)")
      .DuplicableOutput("Out", "the reduced tensors (usually X itself)")
      .Inplace("Out", "X");
  DeclareRingAttrs(op).SetInferShape(InferSameShapes);
  op.SetRun([reduce](const ExecutionContext& ctx) { RunPacked(ctx, Collective::kAllReduce, reduce); });
}

// X@GRAD = `type` of Out@GRAD on the forward op's ring, waited for (the gradients of the collectives: allgather and
// reducescatter are each other's, allreduce_sum its own); `nranks` copies the forward's nranks attribute.
void CollectiveOfOutputGrad(GradOpMaker& g, const char* type, bool nranks) {
  OpDesc& op = g.NewOp(type, false);
  op.SetInput("X", g.OutputGrad("Out"));
  op.SetOutput("Out", g.InputGrad("X"));
  op.SetAttr("ring_id", Attribute(g.Attr<int32_t>("ring_id")));
  if (nranks) op.SetAttr("nranks", Attribute(g.Attr<int32_t>("nranks")));
  op.SetAttr("use_calc_stream", Attribute(true));
}

// The gradient of a sum over ranks is the sum over ranks of the gradient (model parallelism uses it).
void AllReduceSumGrad(GradOpMaker& g) { CollectiveOfOutputGrad(g, "c_allreduce_sum", false); }

}  // namespace

FL_REGISTER_OP(c_allreduce_sum, op) {
  DeclareAllReduce(op, "sum", ReduceKind::kSum);
  op.Grad(AllReduceSumGrad);
}
FL_REGISTER_OP(c_allreduce_max, op) {
  DeclareAllReduce(op, "max", ReduceKind::kMax);
  op.NoGradient();
}
FL_REGISTER_OP(c_allreduce_min, op) {
  DeclareAllReduce(op, "min", ReduceKind::kMin);
  op.NoGradient();
}
FL_REGISTER_OP(c_allreduce_prod, op) {
  DeclareAllReduce(op, "product", ReduceKind::kProd);
  op.NoGradient();
}

FL_REGISTER_OP(c_broadcast, op) {
  op.Doc("Out[i] = X[i] of rank `root` (parameters from rank 0 at start-up). Every X travels in one buffer.")
      .DuplicableInput("X", "tensors to broadcast (root) or to overwrite (the other ranks); one dtype")
      .DuplicableOutput("Out", "root's tensors (usually X itself)")
      .Inplace("Out", "X")
      .Attr<int32_t>("root", 0, "the rank whose values everyone gets")
      .Min(0);
  DeclareRingAttrs(op).SetInferShape(InferSameShapes);
  op.SetRun([](const ExecutionContext& ctx) { RunPacked(ctx, Collective::kBroadcast, ReduceKind::kSum); });
  op.NoGradient();
}

namespace {

void InferGatherOrScatter(InferShapeContext& ctx, bool gather) {
  DDim d = ctx.InputDim("X");
  const int nranks = ctx.Attr<int32_t>("nranks");
  FL_ENFORCE(d.size() >= 1, ctx.Type(), ": ", ctx.Describe("X"), " must have at least one dimension");
  if (d[0] >= 0) {
    if (gather) {
      d[0] *= nranks;
    } else {
      FL_ENFORCE(d[0] % nranks == 0, ctx.Type(), ": dim 0 of ", ctx.Describe("X"), " (", d[0],
                 ") must divide evenly among nranks = ", nranks);
      d[0] /= nranks;
    }
  }
  ctx.SetOutput("Out", d, ctx.InputDType("X"));
}

}  // namespace

FL_REGISTER_OP(c_allgather, op) {
  op.Doc("Out = every rank's X, in rank order, stacked along dim 0 (Out's dim 0 is nranks x X's).")
      .Input("X", "this rank's part")
      .Output("Out", "all parts")
      .Attr<int32_t>("nranks", 1, "ranks in the ring (checked against it)")
      .Min(1);
  DeclareRingAttrs(op).SetInferShape([](InferShapeContext& ctx) { InferGatherOrScatter(ctx, true); });
  op.SetRun([](const ExecutionContext& ctx) { RunGatherOrScatter(ctx, Collective::kAllGather); });
  // each rank's part of the gathered gradient, summed over ranks
  op.Grad([](GradOpMaker& g) { CollectiveOfOutputGrad(g, "c_reducescatter", true); });
}

FL_REGISTER_OP(c_reducescatter, op) {
  op.Doc("Out = this rank's slice (dim 0 split in nranks equal parts, in rank order) of the sum over ranks of X.")
      .Input("X", "this rank's full tensor")
      .Output("Out", "its slice of the sum")
      .Attr<int32_t>("nranks", 1, "ranks in the ring (checked against it)")
      .Min(1);
  DeclareRingAttrs(op).SetInferShape([](InferShapeContext& ctx) { InferGatherOrScatter(ctx, false); });
  op.SetRun([](const ExecutionContext& ctx) { RunGatherOrScatter(ctx, Collective::kReduceScatter); });
  op.Grad([](GradOpMaker& g) { CollectiveOfOutputGrad(g, "c_allgather", true); });
}

FL_REGISTER_OP(c_sync_comm_stream, op) {
  op.Doc(
        "Waits for the collectives queued on the ring's comm stream; their outputs hold the results after it. "
        "X and Out name the variables it orders (Fluid's slots), and are not read.")
      .OptionalDuplicableInput("X", "the variables the waited-for collectives write")
      .OptionalDuplicableOutput("Out", "the same variables")
      .Inplace("Out", "X")
      .Attr<int32_t>("ring_id", 0, "the ring whose stream to wait for")
      .Min(0)
      .SetInferShape([](InferShapeContext&) {})
      .SetRun([](const ExecutionContext& ctx) { RingOf(ctx)->Sync("c_sync_comm_stream"); })
      .NoGradient();
}

FL_REGISTER_OP(c_sync_calc_stream, op) {
  op.Doc(
        "Fluid orders the calculation stream before a collective with it; on the CPU kernels finish before the "
        "next op starts, so there is nothing to wait for.")
      .OptionalDuplicableInput("X", "the variables it orders")
      .OptionalDuplicableOutput("Out", "the same variables")
      .Inplace("Out", "X")
      .SetInferShape([](InferShapeContext&) {})
      .SetRun([](const ExecutionContext&) {})
      .NoGradient();
}

FL_REGISTER_OP(barrier, op) {
  op.Doc("Returns when every rank of the ring has reached it (after the collectives queued before it).")
      .OptionalDuplicableInput("X", "variables it orders (not read)")
      .OptionalDuplicableOutput("Out", "the same variables")
      .Inplace("Out", "X")
      .Attr<int32_t>("ring_id", 0, "the ring")
      .Min(0)
      .SetInferShape([](InferShapeContext&) {})
      .SetRun([](const ExecutionContext& ctx) {
        auto ring = RingOf(ctx);
        auto c = std::make_unique<Collective>();
        c->kind = Collective::kBarrier;
        c->op_type = "barrier";
        c->what = "ring " + std::to_string(ring->id());
        ring->RunNow(std::move(c), "barrier");
      })
      .NoGradient();
}

}  // namespace fl
