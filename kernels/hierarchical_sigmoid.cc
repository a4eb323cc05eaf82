// hierarchical_sigmoid (layers.hsigmoid): the loss of a label as a path of binary decisions in a tree of
// classes. Row n's label has a path of nodes idx_j with bits b_j (j < its length):
//   default tree (no PathTable): c = label + num_classes, length = floor(log2 c), idx_j = (c >> (j + 1)) - 1,
//     b_j = (c >> j) & 1; W holds num_classes - 1 nodes;
//   custom tree: idx_j = PathTable[n, j] and b_j = PathCode[n, j] until the first negative entry.
// p_j = clip(<X[n], W[idx_j]> + Bias[idx_j], -40, 40) on the path and 0 beyond it (up to the code length L);
// PreOut = softplus(p) [N, L]; Out[n] = sum_j PreOut[n, j] - sum_{j on the path, b_j = 1} p_j.
// As in Fluid, positions beyond a short path add softplus(0) = log 2 each to Out (a constant, no gradient).
#include <algorithm>
#include <cmath>

#include "helpers/same_dims.h"
#include "helpers/zeroed_output.h"
#include "op_context.h"

namespace fl {

namespace {

// The code length L of the default tree: the bit length of num_classes - 1.
int64_t DefaultCodeLength(int64_t num_classes) {
  int64_t bits = 0;
  for (int64_t v = num_classes - 1; v > 0; v >>= 1) ++bits;
  return bits;
}

// The path of one row: nodes and bits.
class Path {
 public:
  Path(const ExecutionContext& ctx, int64_t n, int64_t width) {
    const int64_t* label = ctx.Input("Label").data<int64_t>();
    const int64_t classes = ctx.Attr<int32_t>("num_classes");
    const Tensor* table = ctx.InputOrNull("PathTable");
    if (table) {
      const int64_t* t = table->data<int64_t>() + n * width;
      const int64_t* code = ctx.Input("PathCode").data<int64_t>() + n * width;
      table_ = t;
      code_ = code;
      while (length_ < width && t[length_] >= 0) ++length_;
      return;
    }
    const int64_t l = label[n];
    FL_ENFORCE(l >= 0 && l < classes, ctx.Type(), ": Label '", ctx.InputName("Label"), "' holds ", l, " at row ", n,
               ", out of range [0, ", classes, ") (num_classes)");
    c_ = l + classes;
    for (int64_t v = c_; v > 1; v >>= 1) ++length_;
  }
  int64_t length() const { return length_; }
  int64_t Node(int64_t j) const { return table_ ? table_[j] : (c_ >> (j + 1)) - 1; }
  bool Bit(int64_t j) const { return table_ ? code_[j] != 0 : ((c_ >> j) & 1) != 0; }

 private:
  const int64_t* table_ = nullptr;
  const int64_t* code_ = nullptr;
  int64_t c_ = 0;
  int64_t length_ = 0;
};

// Throws unless the node is a row of W.
void CheckNode(const ExecutionContext& ctx, int64_t node, int64_t n, int64_t nodes) {
  FL_ENFORCE(node >= 0 && node < nodes, ctx.Type(), ": the path of row ", n, " reaches node ", node, ", outside the ",
             nodes, " rows of W '", ctx.InputName("W"), "'");
}

}  // namespace

FL_REGISTER_OP(hierarchical_sigmoid, op) {
  op.Doc("Out = the hierarchical sigmoid loss of Label along its path in the class tree (default or custom).")
      .Input("X", "features [N, D]")
      .Input("W", "node weights [num_nodes, D] (num_classes - 1 nodes in the default tree)")
      .Input("Label", "int64 class per row [N, 1]")
      .DispensableInput("PathTable", "custom tree: int64 nodes of each row's path [N, L], -1 padded")
      .DispensableInput("PathCode", "custom tree: int64 bits of each row's path [N, L]")
      .DispensableInput("Bias", "node biases [num_nodes, 1]")
      .Output("Out", "the loss [N, 1]")
      .Output("PreOut", "softplus of the clipped node logits [N, L], kept for the gradient")
      .DispensableOutput("W_Out", "Fluid's alias of W (parameter-server training): W itself, left unchanged")
      .Inplace("W_Out", "W")
      .NonDifferentiable({"Label", "PathTable", "PathCode"})
      .RequiredAttr<int32_t>("num_classes", 2, "number of classes (default tree) or of nodes (custom tree)")
      .Min(2)
      .Attr<bool>("is_sparse", false, "accepted for Fluid compatibility; the W gradient is dense")
      .Check([](const OpCheckContext& ctx) {
        FL_ENFORCE((ctx.InputSize("PathTable") > 0) == (ctx.InputSize("PathCode") > 0),
                   "hierarchical_sigmoid: PathTable and PathCode must be given together");
        if (ctx.OutputSize("W_Out") > 0) {
          const auto& w = ctx.desc().Input("W");
          const auto& w_out = ctx.desc().Output("W_Out");
          FL_ENFORCE(w.size() == 1 && w_out.size() == 1 && w[0] == w_out[0], "hierarchical_sigmoid: W_Out '",
                     w_out.empty() ? std::string() : w_out[0], "' must be W '", w.empty() ? std::string() : w[0],
                     "' itself (Fluid's alias of the parameter)");
        }
      })
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceRank(ctx, "X", 2, -1, " ([N, D])");
        EnforceRank(ctx, "W", 2, -1, " ([num_nodes, D])");
        const DDim x = ctx.InputDim("X"), w = ctx.InputDim("W"), l = ctx.InputDim("Label");
        FL_ENFORCE(x[1] < 0 || w[1] < 0 || x[1] == w[1], "hierarchical_sigmoid: ", ctx.Describe("W"),
                   " must have the width of ", ctx.Describe("X"));
        ctx.EnforceSameDType("X", "W");
        FL_ENFORCE(l.numel() < 0 || x[0] < 0 || l.numel() == x[0], "hierarchical_sigmoid: ", ctx.Describe("Label"),
                   " must hold one class per row of ", ctx.Describe("X"));
        const DType lt = ctx.InputDType("Label");
        FL_ENFORCE(lt == DType::INT64 || lt == DType::UNDEFINED, "hierarchical_sigmoid: ", ctx.Describe("Label"),
                   " must be int64, got ", DTypeName(lt));
        int64_t width = DefaultCodeLength(ctx.Attr<int32_t>("num_classes"));
        if (ctx.HasInput("PathTable")) {
          EnforceRank(ctx, "PathTable", 2, -1, " ([N, L])");
          EnforceSameDims(ctx, "PathTable", "PathCode");
          const DDim t = ctx.InputDim("PathTable");
          FL_ENFORCE(x[0] < 0 || t[0] < 0 || t[0] == x[0], "hierarchical_sigmoid: ", ctx.Describe("PathTable"),
                     " must have one row per row of ", ctx.Describe("X"));
          for (const char* s : {"PathTable", "PathCode"})
            FL_ENFORCE(ctx.InputDType(s) == DType::INT64 || ctx.InputDType(s) == DType::UNDEFINED,
                       "hierarchical_sigmoid: ", ctx.Describe(s), " must be int64, got ", DTypeName(ctx.InputDType(s)));
          width = t[1];
        } else {
          FL_ENFORCE(
              w[0] < 0 || w[0] >= ctx.Attr<int32_t>("num_classes") - 1, "hierarchical_sigmoid: ", ctx.Describe("W"),
              " must have num_classes - 1 = ", ctx.Attr<int32_t>("num_classes") - 1, " rows for the default tree");
        }
        if (ctx.HasInput("Bias")) {
          const DDim b = ctx.InputDim("Bias");
          FL_ENFORCE(b.numel() < 0 || w[0] < 0 || b.numel() == w[0], "hierarchical_sigmoid: ", ctx.Describe("Bias"),
                     " must hold one value per row of ", ctx.Describe("W"));
          ctx.EnforceSameDType("X", "Bias");
        }
        ctx.SetOutput("Out", DDim{x[0], 1}, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
        ctx.SetOutput("PreOut", DDim{x[0], width}, ctx.InputDType("X"));
        if (ctx.HasOutput("W_Out")) ctx.SetOutput("W_Out", w, ctx.InputDType("W"));
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const Tensor& wt = ctx.Input("W");
        const int64_t rows = xt.dims()[0], dim = xt.dims()[1], nodes = wt.dims()[0];
        Tensor* pre_t = ctx.Output("PreOut");
        const int64_t width = pre_t->dims()[1];
        const T* x = xt.data<T>();
        const T* w = wt.data<T>();
        const T* bias = ctx.HasInput("Bias") ? ctx.Input("Bias").data<T>() : nullptr;
        T* pre = pre_t->mutable_data<T>(ctx.place());
        T* out = ctx.Alloc<T>("Out");
        for (int64_t n = 0; n < rows; ++n) {
          const Path path(ctx, n, width);
          T* p = pre + n * width;
          std::fill(p, p + width, T(0));
          T loss = 0;
          for (int64_t j = 0; j < std::min(path.length(), width); ++j) {
            const int64_t node = path.Node(j);
            CheckNode(ctx, node, n, nodes);
            T s = bias ? bias[node] : T(0);
            for (int64_t k = 0; k < dim; ++k) s += x[n * dim + k] * w[node * dim + k];
            s = std::clamp(s, T(-40), T(40));
            p[j] = s;
            if (path.Bit(j)) loss -= s;
          }
          for (int64_t j = 0; j < width; ++j) {
            p[j] = std::log1p(std::exp(p[j]));
            loss += p[j];
          }
          out[n] = loss;
        }
      });
  op.GradOp({"X", "W", "Label", "PathTable", "PathCode", "Bias", "PreOut", "Out@GRAD"})
      .Optional({"PathTable", "PathCode", "Bias"})
      .Doc(
          "With dp_j = (sigmoid(p_j) - b_j) * Out@GRAD on the path: X@GRAD[n] = sum_j dp_j W[idx_j], "
          "W@GRAD[idx_j] += dp_j X[n], Bias@GRAD[idx_j] += dp_j.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const Tensor& wt = ctx.Input("W");
        const Tensor& pre_t = ctx.Input("PreOut");
        const int64_t rows = xt.dims()[0], dim = xt.dims()[1], nodes = wt.dims()[0], width = pre_t.dims()[1];
        const Tensor& gt = ctx.Input("Out@GRAD");
        FL_ENFORCE(gt.numel() == rows && pre_t.dims()[0] == rows, "hierarchical_sigmoid_grad: Out@GRAD '",
                   ctx.InputName("Out@GRAD"), "' ", gt.dims(), " and PreOut ", pre_t.dims(),
                   " must have one row per row of X ", xt.dims());
        const T* x = xt.data<T>();
        const T* w = wt.data<T>();
        const T* pre = pre_t.data<T>();
        const T* g = gt.data<T>();
        T* dx = ZeroedOutputOrNull<T>(ctx, "X@GRAD");
        T* dw = ZeroedOutputOrNull<T>(ctx, "W@GRAD");
        T* db = ZeroedOutputOrNull<T>(ctx, "Bias@GRAD");
        for (int64_t n = 0; n < rows; ++n) {
          const Path path(ctx, n, width);
          for (int64_t j = 0; j < std::min(path.length(), width); ++j) {
            const int64_t node = path.Node(j);
            CheckNode(ctx, node, n, nodes);
            // sigmoid(p) = 1 - exp(-softplus(p))
            const T dp = (T(1) - std::exp(-pre[n * width + j]) - (path.Bit(j) ? T(1) : T(0))) * g[n];
            if (db) db[node] += dp;
            for (int64_t k = 0; k < dim; ++k) {
              if (dx) dx[n * dim + k] += dp * w[node * dim + k];
              if (dw) dw[node * dim + k] += dp * x[n * dim + k];
            }
          }
        }
      });
}

}  // namespace fl
