// crop: Out = the box of X starting at offsets (the attribute, or the int32 Offsets input at run time) with
// the shape of Y (when given) or the shape attribute. X@GRAD = Out@GRAD in that box, zeros elsewhere.
#include <algorithm>
#include <string>
#include <vector>

#include "helpers/box.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

std::vector<int64_t> CropOffsets(const ExecutionContext& ctx, int rank) {
  std::vector<int64_t> off(rank, 0);
  if (ctx.HasInput("Offsets")) {
    const Tensor& t = ctx.Input("Offsets");
    FL_ENFORCE(t.dtype() == DType::INT32 && t.numel() == rank, "crop: Offsets '", ctx.InputName("Offsets"),
               "' must be an int32 tensor of ", rank, " values (the rank of X), got ", DTypeName(t.dtype()), " ",
               t.dims());
    const int32_t* d = t.data<int32_t>();
    off.assign(d, d + rank);
  } else {
    const auto& a = ctx.Attr<std::vector<int32_t>>("offsets");
    FL_ENFORCE(a.empty() || static_cast<int>(a.size()) == rank, "crop: offsets has ", a.size(),
               " values but X has rank ", rank);
    std::copy(a.begin(), a.end(), off.begin());
  }
  return off;
}

void CheckBox(const std::string& where, const DDim& x, const DDim& out, const std::vector<int64_t>& off) {
  for (int i = 0; i < x.size(); ++i)
    FL_ENFORCE(off[i] >= 0 && off[i] + out[i] <= x[i], "crop: offset ", off[i], " + size ", out[i], " at dim ", i,
               " is outside X ", where, " (offsets must be >= 0 and offset + size <= X's dim)");
}

}  // namespace

FL_REGISTER_OP(crop, op) {
  op.Doc("Out = X[offsets : offsets + shape] (shape from Y or the shape attribute).")
      .Input("X", "the tensor cropped")
      .DispensableInput("Y", "a tensor whose shape Out takes (instead of the shape attribute)")
      .DispensableInput("Offsets", "int32 [rank]: the offsets at run time (instead of the attribute)")
      .Output("Out", "the box of X")
      .NonDifferentiable({"Y", "Offsets"})
      .Attr<std::vector<int32_t>>("offsets", {}, "the box's start on each axis (empty: zeros)")
      .Attr<std::vector<int32_t>>("shape", {}, "the box's shape (when Y is not given)")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        DDim out;
        if (ctx.HasInput("Y")) {
          out = ctx.InputDim("Y");
          FL_ENFORCE(out.size() == x.size(), "crop: ", ctx.Describe("Y"), " must have the rank of ", ctx.Describe("X"));
        } else {
          const auto& s = ctx.Attr<std::vector<int32_t>>("shape");
          FL_ENFORCE(static_cast<int>(s.size()) == x.size(), "crop: shape has ", s.size(), " values but ",
                     ctx.Describe("X"), " has rank ", x.size());
          out = DDim(std::vector<int64_t>(s.begin(), s.end()));
          for (int i = 0; i < x.size(); ++i)
            FL_ENFORCE(s[i] > 0 || (s[i] == -1 && i == 0), "crop: shape ",
                       DDim(std::vector<int64_t>(s.begin(), s.end())),
                       " must be positive (-1 allowed for the batch dim only)");
          if (out[0] == -1) out[0] = x[0];
        }
        const auto& off = ctx.Attr<std::vector<int32_t>>("offsets");
        FL_ENFORCE(off.empty() || static_cast<int>(off.size()) == x.size(), "crop: offsets has ", off.size(),
                   " values but ", ctx.Describe("X"), " has rank ", x.size());
        if (!ctx.HasInput("Offsets"))
          for (int i = 0; i < x.size(); ++i) {
            const int64_t o = off.empty() ? 0 : off[i];
            FL_ENFORCE(x[i] < 0 || out[i] < 0 || (o >= 0 && o + out[i] <= x[i]), "crop: offset ", o, " + size ", out[i],
                       " at dim ", i, " is outside ", ctx.Describe("X"));
          }
        ctx.SetOutput("Out", out, ctx.InputDType("X"));
      })
      .KernelDTypeFrom("X")
      .CPUKernel<float, double, int32_t, int64_t>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        Tensor* out = ctx.Output("Out");
        if (ctx.HasInput("Y")) out->Resize(ctx.Input("Y").dims());
        const std::vector<int64_t> off = CropOffsets(ctx, x.dims().size());
        CheckBox("'" + ctx.InputName("X") + "' " + x.dims().ToString(), x.dims(), out->dims(), off);
        BoxCopy<false>(out->dims(), x.dims(), off, out->mutable_data<T>(ctx.place()), const_cast<T*>(x.data<T>()));
      });
  op.GradOp({"X", "Y", "Offsets", "Out@GRAD"})
      .Optional({"Y", "Offsets"})
      .Doc("X@GRAD = Out@GRAD in the cropped box, 0 elsewhere.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const Tensor& x = ctx.Input("X");
        const Tensor& dout = ctx.Input("Out@GRAD");
        const std::vector<int64_t> off = CropOffsets(ctx, x.dims().size());
        CheckBox("'" + ctx.InputName("X") + "' " + x.dims().ToString(), x.dims(), dout.dims(), off);
        T* g = ZeroedOutput<T>(dx, x.dims(), ctx.place());
        BoxCopy<true>(dout.dims(), x.dims(), off, const_cast<T*>(dout.data<T>()), g);
      });
}

}  // namespace fl
