// lod_reset: Out = X's data (shared, no copy) with a new LoD, Fluid 1.8's rules in order:
//   Y given and holding a LoD   -> Y's LoD (all its levels; `append` is ignored, as in Fluid);
//   Y given without a LoD       -> Y's values (int32 or int64) as one level of offsets;
//   no Y                        -> the attribute target_lod (offsets);
// a one-level target replaces X's LoD, or with append=true (layers.lod_append) is added below X's levels. Every
// resulting LoD is checked against X's rows (helpers: LoDProblem): an invalid one is an error naming the op, the
// variable and the offsets, never a LoD that would let a later sequence kernel read past X.
// lod_reset_grad: X@GRAD = Out@GRAD's data with X's dims and LoD.
#include <string>
#include <vector>

#include "grad_op_maker.h"
#include "helpers/lod.h"
#include "helpers/rows.h"

namespace fl {

namespace {

// "{0, 2, 5}": one level as LoDString spells it.
std::string OffsetsString(const std::vector<size_t>& offsets) {
  const std::string s = LoDString(LoD{offsets});
  return s.substr(1, s.size() - 2);
}

// Fluid's structure rule for a target level given as offsets: at least 2 of them, from 0, never decreasing.
std::string TargetProblem(const std::vector<int32_t>& target) {
  if (target.size() < 2) return Str("it has ", target.size(), " offset(s); at least 2 are needed");
  if (target[0] != 0) return Str("it starts at ", target[0], ", not 0");
  for (size_t i = 1; i < target.size(); ++i)
    if (target[i] < target[i - 1])
      return Str("it decreases at position ", i, " (", target[i - 1], " then ", target[i], ")");
  return "";
}

// Where the new LoD comes from; spelled out only in an error message.
enum class Source { kYLoD, kYValues, kAttr };
std::string SourceName(const ExecutionContext& ctx, Source s) {
  if (s == Source::kAttr) return "attribute target_lod";
  return Str(s == Source::kYLoD ? "the LoD" : "the values", " of Y '", ctx.InputName("Y"), "'");
}

// The target level from Y's values (Y without a LoD).
void LevelFromY(const ExecutionContext& ctx, const Tensor& y, std::vector<size_t>* level) {
  VisitIndexDType(y.dtype(), Str("lod_reset: Y '", ctx.InputName("Y"), "' ", y.dims()), [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = y.data<I>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      FL_ENFORCE(p[i] >= 0 && (i == 0 || p[i] >= p[i - 1]), "lod_reset: Y '", ctx.InputName("Y"), "' ", y.dims(),
                 " holds the target LoD offsets ", DDim(std::vector<int64_t>(p, p + y.numel())),
                 ", which must start at 0 and never decrease (",
                 i == 0 ? Str("offset 0 is ", p[0]) : Str("position ", i, ": ", p[i - 1], " then ", p[i]), ")");
      level->push_back(static_cast<size_t>(p[i]));
    }
  });
}

const auto kLoDReset = [](const ExecutionContext& ctx, auto) {
  const Tensor& x = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  const Tensor* y = ctx.HasInput("Y") ? &ctx.Input("Y") : nullptr;
  const bool append = ctx.Attr<bool>("append");
  LoD lod;
  Source source = Source::kYLoD;
  if (y && !y->lod().empty()) {
    lod = y->lod();
  } else {
    if (append) lod = x.lod();
    lod.emplace_back();
    std::vector<size_t>& level = lod.back();
    if (y) {
      source = Source::kYValues;
      LevelFromY(ctx, *y, &level);
    } else {
      source = Source::kAttr;
      const auto& target = ctx.Attr<std::vector<int32_t>>("target_lod");
      level.assign(target.begin(), target.end());  // checked non-negative and increasing with the attribute
    }
    FL_ENFORCE(level.size() >= 2, "lod_reset: the target LoD ", OffsetsString(level), " (", SourceName(ctx, source),
               ") must have at least 2 offsets, got ", level.size());
  }
  const std::string problem = LoDProblem(lod, x.rank() ? x.dims()[0] : 0);
  FL_ENFORCE(problem.empty(), "lod_reset: the new LoD ", LoDString(lod), " (from ", SourceName(ctx, source),
             append && source != Source::kYLoD ? Str(", appended to X's ", x.LoDString()) : "", ") does not fit X '",
             ctx.InputName("X"), "' ", x.dims(), ": ", problem);
  if (out != &x) out->ShareDataWith(x);
  out->set_lod(lod);
};

const auto kLoDResetGrad = [](const ExecutionContext& ctx, auto) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& dout = ctx.Input("Out@GRAD");
  FL_ENFORCE(dout.dims() == x.dims(), "lod_reset_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " must have the dims of X '", ctx.InputName("X"), "' ", x.dims());
  dx->ShareDataWith(dout);
  dx->set_lod(x.lod());
};

}  // namespace

FL_REGISTER_OP(lod_reset, op) {
  op.Doc(
        "Out = X's data with a new LoD: Y's LoD if Y has one, else Y's values as one level of offsets, else the "
        "attribute target_lod (offsets). append=true adds that one level below X's LoD instead of replacing it "
        "(layers.lod_append). The new LoD must fit X's rows.")
      .Input("X", "the tensor whose data Out takes (a Tensor or LoDTensor)")
      .DispensableInput("Y", "the target LoD: a LoDTensor (its LoD), or an int32/int64 tensor of offsets")
      .Output("Out", "X's data with the target LoD")
      .NonDifferentiable({"Y"})
      .Attr<std::vector<int32_t>>("target_lod", {}, "the target level as offsets, used when Y is not given")
      .Constrain("empty, or at least 2 offsets from 0, never decreasing",
                 [](const Attribute& a) {
                   const auto& v = std::get<std::vector<int32_t>>(a);
                   return v.empty() || TargetProblem(v).empty() ? "" : "level-0 offsets from 0, never decreasing";
                 })
      .Attr<bool>("append", false, "add the target level below X's LoD instead of replacing X's LoD")
      .KernelDTypeFrom("X")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const bool append = ctx.Attr<bool>("append");
        // (The grad op runs this over its own reads, which never include Y: the rule is the forward op's.)
        if (!ctx.HasInput("Y") && ctx.Type() == "lod_reset") {
          const auto& target = ctx.Attr<std::vector<int32_t>>("target_lod");
          FL_ENFORCE(!target.empty(), "lod_reset: Out '", ctx.OutputName("Out"),
                     "': If Input(Y) is not provided, the output's LoD should be specified by attribute "
                     "'target_lod'. But the size of 'target_lod' is 0.");
          FL_ENFORCE(x.size() == 0 || x[0] < 0 || target.back() == x[0], "lod_reset: attribute target_lod ",
                     DDim(std::vector<int64_t>(target.begin(), target.end())), " must end at the ", x[0], " rows of ",
                     ctx.Describe("X"));
        }
        ctx.SetOutput("Out", x, ctx.InputDType("X"));
        // Fluid's lod_level: Y's (at least 1) when Y is given, X's + 1 when appending, else 1. A Y without
        // LoD with append adds a level to X's, as the kernel does (Fluid's build time says 1 there).
        int level = 1;
        if (ctx.HasInput("Y") && (ctx.InputLoDLevel("Y") > 0 || !append)) level = std::max(ctx.InputLoDLevel("Y"), 1);
        else if (append) level = ctx.InputLoDLevel("X") + 1;
        ctx.SetOutputLoDLevel("Out", level);
      })
      .CPUKernel<float, double, int32_t, int64_t>(kLoDReset);
  op.GradOp({"X", "Out@GRAD"})
      .Doc("Gradient of lod_reset: X@GRAD = Out@GRAD's data (shared) with X's dims and LoD.")
      .Grad(LinearGradGrad)
      .CPUKernel<float, double, int32_t, int64_t>(kLoDResetGrad);
}

}  // namespace fl
