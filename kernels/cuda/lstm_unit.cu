// lstm_unit and lstm_unit_grad on the GPU: one thread per cell element, the per-element math shared with the CPU
// kernel through kernels/helpers/lstm_unit_cell.h. X is [N, 4D] in gate order (i, f, o, g); a missing H@GRAD or
// C@GRAD reads as zeros, and an output gradient nobody wants is not written.
#include "../helpers/lstm_unit_cell.h"
#include "nn_common.cuh"

namespace fl {
namespace {

template <typename T>
__global__ void LstmUnitForward(int64_t n, const T* x, const T* cp, T fb, int64_t d, T* c, T* h) {
  FL_CUDA_LOOP(i, n) {
    const T* xr = x + (i / d) * 4 * d + i % d;
    const T cv = lstm_unit::CellC(xr[0], xr[d], xr[3 * d], cp[i], fb);
    c[i] = cv;
    h[i] = lstm_unit::CellH(xr[2 * d], cv);
  }
}

template <typename T>
__global__ void LstmUnitBackward(int64_t n, const T* x, const T* cp, const T* dh, const T* dc, T fb, int64_t d, T* dx,
                                 T* dcp) {
  FL_CUDA_LOOP(i, n) {
    const int64_t off = (i / d) * 4 * d + i % d;
    const T* xr = x + off;
    const lstm_unit::CellGrad<T> g =
        lstm_unit::CellBackward(xr[0], xr[d], xr[2 * d], xr[3 * d], cp[i], dh ? dh[i] : T(0), dc ? dc[i] : T(0), fb);
    if (dx) {
      T* dr = dx + off;
      dr[0] = g.dxi;
      dr[d] = g.dxf;
      dr[2 * d] = g.dxo;
      dr[3 * d] = g.dxg;
    }
    if (dcp) dcp[i] = g.dcp;
  }
}

const auto kLstmUnit = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& xt = ctx.Input("X");
  const Tensor& cpt = ctx.Input("C_prev");
  const int64_t n = cpt.dims()[0], d = cpt.dims()[1];
  const T fb = static_cast<T>(ctx.Attr<float>("forget_bias"));
  T* c = ctx.Alloc<T>("C");
  T* h = ctx.Alloc<T>("H");
  cuda::Launch(ctx, n * d, LstmUnitForward<T>, xt.data<T>(), cpt.data<T>(), fb, d, c, h);
};

const auto kLstmUnitGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  Tensor* dxt = ctx.OutputOrNull("X@GRAD");
  Tensor* dcpt = ctx.OutputOrNull("C_prev@GRAD");
  if (!dxt && !dcpt) return;
  const lstm_unit::GradInputs in(ctx);
  const Tensor &xt = in.xt, &cpt = in.cpt;
  const int64_t n = in.n, d = in.d;
  const T fb = static_cast<T>(in.forget_bias);
  const Tensor *dht = in.dht, *dct = in.dct;
  T* dx = nullptr;
  T* dcp = nullptr;
  if (dxt) {
    dxt->Resize(xt.dims());
    dx = dxt->mutable_data<T>(ctx.place());
  }
  if (dcpt) {
    dcpt->Resize(cpt.dims());
    dcp = dcpt->mutable_data<T>(ctx.place());
  }
  cuda::Launch(ctx, n * d, LstmUnitBackward<T>, xt.data<T>(), cpt.data<T>(), dht ? dht->data<T>() : nullptr,
               dct ? dct->data<T>() : nullptr, fb, d, dx, dcp);
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(lstm_unit) { ops.Kernel<float, double>(kLstmUnit); }
FL_REGISTER_CUDA_KERNELS(lstm_unit_grad) { ops.Kernel<float, double>(kLstmUnitGrad); }

}  // namespace fl
