// The instruction set of the fused elementwise op (kernels/fused_elementwise.cc), shared with the pass that emits
// it (kernels/passes/fuse_elementwise_chains.cc). Every instruction is one existing op's per-element functor
// (helpers/unary_functors.h, helpers/elementwise_functors.h), so a fused chain computes what the ops it replaced
// computed, bit for bit.
//
// Encoding, in the op's attributes:
//   code    INTS, kCodeWidth per instruction: [kind, fn, dst, a, b, c]. Slots 0 .. n_inputs-1 are the inputs X[i];
//           instruction k writes slot n_inputs + k (each slot is written once). Unused operands are -1.
//   params  FLOATS, kParamWidth per instruction: the op's float/bool attributes in their declared order (bools as
//           0/1), or scale's (scale, bias, bias_after_scale).
//   outputs INTS: the slot each Out[j] takes.
//   axes    INTS, one per input: kFullInput (the output's shape) or the Fluid `axis` Y broadcasts with.
//   fused_ops STRINGS: the types of the ops it replaced, in program order (the profiler shows them).
#pragma once
#include <cstdint>
#include <string>

namespace fl {
namespace fused {

enum Kind : int32_t {
  kUnary = 0,      // dst = F.Fwd(a)                         fn: index in FL_FUSED_UNARY_OPS
  kUnaryGrad = 1,  // dst = F.Grad(a = X or Out, b = dOut)   fn: as kUnary (rows with a gradient)
  kBinary = 2,     // dst = Op::Fwd(a, b)                    fn: index in kBinaryOps
  kBinaryDx = 3,   // dst = Op::Dx(a = x, b = y, c = dOut)   fn: index in kBinaryOps (add, sub, mul)
  kBinaryDy = 4,   // dst = Op::Dy(a = x, b = y, c = dOut)
  kScale = 5,      // dst = ScaleFn(params)(a)
  kNumKinds = 6,
};

constexpr int kCodeWidth = 6;
constexpr int kParamWidth = 3;
constexpr int32_t kFullInput = -2;  // axes[i]: the input has the output's shape

// The unary ops an instruction can run: X(op type, functor in fl::unary_fn). Their attributes become the params.
// clang-format off
#define FL_FUSED_UNARY_OPS(X) \
  X(relu, Relu) X(sigmoid, Sigmoid) X(tanh, Tanh) X(exp, Exp) X(log, Log) X(sqrt, Sqrt) X(square, Square) \
  X(abs, Abs) X(floor, Floor) X(ceil, Ceil) X(sign, Sign) X(round, Round) X(leaky_relu, LeakyRelu) \
  X(relu6, Relu6) X(clip, Clip) X(gelu, Gelu) X(elu, Elu) X(selu, Selu) X(swish, Swish) \
  X(hard_swish, HardSwish) X(hard_sigmoid, HardSigmoid) X(softplus, Softplus) X(softsign, Softsign) \
  X(rsqrt, Rsqrt) X(reciprocal, Reciprocal) X(sin, Sin) X(cos, Cos) X(pow, Pow)
// clang-format on

#define FL_FUSED_NAME_(name, Functor) #name,
inline constexpr const char* kUnaryOps[] = {FL_FUSED_UNARY_OPS(FL_FUSED_NAME_)};
#undef FL_FUSED_NAME_
constexpr int kNumUnaryOps = sizeof(kUnaryOps) / sizeof(kUnaryOps[0]);

// Binary ops, with their gradients for the first three (kBinaryDx / kBinaryDy).
inline constexpr const char* kBinaryOps[] = {"elementwise_add", "elementwise_sub", "elementwise_mul",
                                             "elementwise_div", "elementwise_max", "elementwise_min"};
constexpr int kNumBinaryOps = sizeof(kBinaryOps) / sizeof(kBinaryOps[0]);
constexpr int kNumBinaryGrads = 3;
// Whether Op::Dx / Op::Dy read x and y (add and sub only pass dOut through): the pass lists only what is read.
inline bool BinaryGradReads(int fn, bool dx, bool operand_x) {
  if (fn != 2) return false;           // add, sub
  return dx ? !operand_x : operand_x;  // mul: dX = dOut * y, dY = dOut * x
}

inline int UnaryIndex(const std::string& type) {
  for (int i = 0; i < kNumUnaryOps; ++i)
    if (type == kUnaryOps[i]) return i;
  return -1;
}

inline int BinaryIndex(const std::string& type) {
  for (int i = 0; i < kNumBinaryOps; ++i)
    if (type == kBinaryOps[i]) return i;
  return -1;
}

}  // namespace fused
}  // namespace fl
