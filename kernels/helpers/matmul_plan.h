// matmul's shapes (kernels/matmul.cc and kernels/cuda/matmul.cu): each operand as a batch of matrices, the batch
// broadcast and Fluid's 1-D rules, checked.
#pragma once
#include <string>

#include "op_context.h"

namespace fl {
namespace matmul {

// One operand seen as a batch of matrices: a 1-D X is [1, K], a 1-D Y is [K, 1]; rank > 2 is a batch.
// rows/cols are as stored; op() swaps them when transposed.
struct MatDesc {
  DDim batch_dims;  // empty for a single matrix
  int64_t rows = 0, cols = 0;
  bool trans = false;
  int64_t batch() const { return batch_dims.numel(); }  // -1 if unknown
  int64_t op_rows() const { return trans ? cols : rows; }
  int64_t op_cols() const { return trans ? rows : cols; }
};

inline MatDesc Describe(const DDim& d, bool is_x, bool trans) {
  MatDesc m;
  m.trans = trans;
  if (d.size() == 1) {
    m.rows = is_x ? 1 : d[0];
    m.cols = is_x ? d[0] : 1;
  } else {
    m.rows = d[d.size() - 2];
    m.cols = d[d.size() - 1];
    m.batch_dims = DDim(d.data(), d.size() - 2);
  }
  return m;
}

struct MatmulPlan {
  MatDesc x, y;
  DDim batch_dims;  // of Out
  DDim out;
};

// Shapes of a matmul, checked. Dims may be -1 at compile time; only known dims are compared.
inline MatmulPlan Plan(const DDim& xd, const DDim& yd, bool tx, bool ty, const std::string& type,
                       const std::string& xdesc, const std::string& ydesc) {
  FL_ENFORCE(xd.size() >= 1 && yd.size() >= 1, type, ": ", xdesc, " and ", ydesc, " must have rank >= 1");
  MatmulPlan p{Describe(xd, true, tx), Describe(yd, false, ty), {}, {}};
  const int64_t kx = p.x.op_cols(), ky = p.y.op_rows();
  FL_ENFORCE(kx < 0 || ky < 0 || kx == ky, type, ": ", xdesc, " (transpose_X=", tx ? "true" : "false", ") and ", ydesc,
             " (transpose_Y=", ty ? "true" : "false", ") have incompatible inner dims ", kx, " and ", ky);
  const DDim& bx = p.x.batch_dims;
  const DDim& by = p.y.batch_dims;
  if (bx.size() > 0 && by.size() > 0) {
    bool ok = bx.size() == by.size();
    for (int i = 0; ok && i < bx.size(); ++i) ok = bx[i] < 0 || by[i] < 0 || bx[i] == by[i];
    FL_ENFORCE(ok, type, ": ", xdesc, " and ", ydesc, " have different batch dims ", bx, " and ", by,
               " (batch dims must match, or one operand must be a matrix or vector)");
    for (int i = 0; i < bx.size(); ++i) p.batch_dims.push_back(bx[i] >= 0 ? bx[i] : by[i]);
  } else {
    p.batch_dims = bx.size() > 0 ? bx : by;
  }
  // Fluid drops a 1-D X's row dim and a 1-D Y's column dim when they are 1 (i.e. not transposed away).
  p.out = p.batch_dims;
  if (xd.size() > 1 || p.x.op_rows() != 1) p.out.push_back(p.x.op_rows());
  if (yd.size() > 1 || p.y.op_cols() != 1) p.out.push_back(p.y.op_cols());
  if (p.out.size() == 0) p.out.push_back(1);
  return p;
}

inline MatmulPlan Plan(const InferShapeContext& ctx) {
  return Plan(ctx.InputDim("X"), ctx.InputDim("Y"), ctx.Attr<bool>("transpose_X"), ctx.Attr<bool>("transpose_Y"),
              ctx.Type(), ctx.Describe("X"), ctx.Describe("Y"));
}

inline MatmulPlan Plan(const ExecutionContext& ctx, const Tensor& x, const Tensor& y) {
  return Plan(x.dims(), y.dims(), ctx.Attr<bool>("transpose_X"), ctx.Attr<bool>("transpose_Y"), ctx.Type(),
              Str("X '", ctx.InputName("X"), "' ", x.dims()), Str("Y '", ctx.InputName("Y"), "' ", y.dims()));
}

}  // namespace matmul
}  // namespace fl
