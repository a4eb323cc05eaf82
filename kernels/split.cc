// split: X cut along `axis` into `num` equal parts or parts of the given `sections`; the gradient is the
// concat of the parts' gradients.
#include "grad_op_maker.h"
#include "helpers/concat_split.h"

namespace fl {

namespace {

// The size of every part along the axis (-1 where unknown at compile time), checked against X.
std::vector<int64_t> SectionSizes(const std::string& op, int64_t dim, int n_out, int num,
                                  const std::vector<int32_t>& sections, const std::string& xdesc, int axis) {
  std::vector<int64_t> sizes;
  if (num > 0) {
    FL_ENFORCE(num == n_out, op, ": num=", num, " but ", n_out, " Out variables were given");
    FL_ENFORCE(dim < 0 || dim % num == 0, op, ": ", xdesc, " dim ", dim, " at axis ", axis,
               " is not divisible by num=", num);
    sizes.assign(num, dim < 0 ? -1 : dim / num);
    return sizes;
  }
  FL_ENFORCE(!sections.empty(), op, ": give either num > 0 or sections");
  FL_ENFORCE(static_cast<int>(sections.size()) == n_out, op, ": ", sections.size(), " sections but ", n_out,
             " Out variables were given");
  int unknown = -1;
  int64_t known = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] == -1) {
      FL_ENFORCE(unknown < 0, op, ": sections ", DDim(std::vector<int64_t>(sections.begin(), sections.end())),
                 " has more than one -1");
      unknown = static_cast<int>(i);
    } else {
      FL_ENFORCE(sections[i] >= 0, op, ": sections has a negative size ", sections[i]);
      known += sections[i];
    }
    sizes.push_back(sections[i]);
  }
  const std::string secs = DDim(sizes).ToString();
  if (dim >= 0) {
    if (unknown >= 0) {
      FL_ENFORCE(known <= dim, op, ": sections ", secs, " exceed ", xdesc, " dim ", dim, " at axis ", axis);
      sizes[unknown] = dim - known;
    } else {
      FL_ENFORCE(known == dim, op, ": sections ", secs, " sum to ", known, " but ", xdesc, " has ", dim, " at axis ",
                 axis);
    }
  }
  return sizes;
}

struct SplitPlan {
  int axis;
  std::vector<int64_t> sizes;
};

SplitPlan Plan(const std::string& op, const DDim& x, int n_out, int axis_attr, int num,
               const std::vector<int32_t>& sections, const std::string& xdesc) {
  SplitPlan p;
  p.axis = NormalizeAxis(axis_attr, x.size(), op, xdesc);
  p.sizes = SectionSizes(op, x[p.axis], n_out, num, sections, xdesc, p.axis);
  return p;
}

template <typename Ctx>
SplitPlan Plan(const Ctx& ctx, const DDim& x, int n_out, const std::string& xdesc) {
  return Plan(ctx.Type(), x, n_out, ctx.template Attr<int32_t>("axis"), ctx.template Attr<int32_t>("num"),
              ctx.template Attr<std::vector<int32_t>>("sections"), xdesc);
}

const auto kSplit = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const std::vector<Tensor*> outs = ctx.MultiOutput("Out");
  const SplitPlan p = Plan(ctx, x.dims(), static_cast<int>(outs.size()), "X");
  std::vector<void*> parts;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i]) {
      parts.push_back(nullptr);
      continue;
    }
    DDim d = x.dims();
    d[p.axis] = p.sizes[i];
    outs[i]->Resize(d);
    parts.push_back(outs[i]->mutable_data<T>(ctx.place()));
  }
  SplitParts(MakeAxisParts(x.dims(), p.axis, p.sizes, sizeof(T)), x.data<T>(), parts);
};

}  // namespace

FL_REGISTER_OP(split, op) {
  op.Doc(
        "Splits X along `axis` into `num` equal parts, or into parts of the sizes in `sections` (one may be "
        "-1: the rest).")
      .Input("X", "the tensor to split")
      .DuplicableOutput("Out", "the parts, in order")
      .Attr<int32_t>("num", 0, "number of equal parts (0: use sections)")
      .Min(0)
      .Attr<std::vector<int32_t>>("sections", {}, "size of each part along the axis")
      .Min(-1)
      .Attr<int32_t>("axis", 0, "the axis to split; negative counts from the end")
      .Axis()
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        const int n = ctx.OutputSize("Out");
        const SplitPlan p = Plan(ctx, x, n, ctx.Describe("X"));
        for (int i = 0; i < n; ++i) {
          DDim d = x;
          d[p.axis] = p.sizes[i];
          ctx.SetOutput("Out", d, ctx.InputDType("X"), i);
          if (p.axis != 0) ctx.ShareLoD("X", "Out", 0, i);  // Fluid: LoD passes on unless the rows are split
        }
      })
      .CPUKernelAnyDType(kSplit)
      .Grad([](GradOpMaker& g) {
        // The parts' gradients joined back (backward fills zeros for a part that got none).
        OpDesc& op = g.NewOp("concat", false);
        op.SetInput("X", g.OutputGrad("Out"));
        op.SetOutput("Out", g.InputGrad("X"));
        op.SetAttr("axis", g.Attr<int32_t>("axis"));
      });
}

}  // namespace fl
