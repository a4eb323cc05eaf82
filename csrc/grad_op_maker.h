// Making gradient ops. Given a forward op desc, a grad maker appends the descs of the ops that compute its
// input gradients. Names follow Fluid: x@GRAD; an input gradient nobody needs is @EMPTY@ (backward.py drops
// or keeps it). The makers every kind of op shares live here: the one behind every GradOp clause, and the
// composed gradients of grad ops (so gradients of gradients work).
#pragma once
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "desc.h"
#include "names.h"
#include "op_registry.h"

namespace fl {

class GradOpMaker {
 public:
  // `renames` maps gradient names that already exist in the block (a second backward pass over a program
  // that has one) to fresh names; `temp_prefix` makes the names of intermediate variables unique.
  GradOpMaker(const OpDesc& fwd, const std::set<std::string>& no_grad_set, std::vector<int> grad_blocks = {},
              const std::map<std::string, std::string>* renames = nullptr, std::string temp_prefix = "");

  const OpInfo& Info() const { return info_; }  // the registration of the op being differentiated
  const OpDesc& Forward() const { return fwd_; }
  // Grad blocks that backward built for this op's sub-blocks (in sub-block order).
  const std::vector<int>& GradBlocks() const { return grad_blocks_; }
  const std::vector<std::string>& Input(const std::string& slot) const { return fwd_.Input(slot); }
  const std::vector<std::string>& Output(const std::string& slot) const { return fwd_.Output(slot); }
  // The gradients flowing into the op's outputs (one per argument of the slot; @EMPTY@ stays @EMPTY@).
  std::vector<std::string> OutputGrad(const std::string& slot) const;
  // The gradients to write for the op's inputs: @EMPTY@ where nobody needs one.
  std::vector<std::string> InputGrad(const std::string& slot) const;
  // The gradient of one variable, after renames.
  std::string GradVar(const std::string& var) const;
  template <typename T>
  const T& Attr(const std::string& name) const {
    return fwd_.Attr<T>(name);
  }

  // A new op; the forward attrs are copied unless told otherwise. The reference stays valid.
  OpDesc& NewOp(const std::string& type, bool copy_attrs = true);
  // A fresh variable name for an intermediate result.
  std::string Temp(const std::string& hint);
  // Emits fill_zeros_like(var) into a fresh variable and returns its name.
  std::string ZerosLike(const std::string& var);

  std::vector<OpDesc> TakeOps() { return {ops_.begin(), ops_.end()}; }

 private:
  const OpDesc& fwd_;
  const OpInfo& info_;
  const std::set<std::string>& no_grad_;
  std::vector<int> grad_blocks_;
  const std::map<std::string, std::string>* renames_;
  std::string temp_prefix_;
  int temps_ = 0;
  std::deque<OpDesc> ops_;
};

// The first argument of a list, or "" when the list is empty or @EMPTY@.
std::string FirstArg(const std::vector<std::string>& args);

// Gradients of grad ops, for the forward ops whose gradient is a dedicated kernel:
// - a linear forward op F (reduce_sum, slice, concat, reshape2, ...): F_grad maps Out@GRAD to X@GRAD
//   linearly, so the gradient of its Out@GRAD input is F applied to the incoming X@GRAD@GRAD (zeros for an
//   X@GRAD it did not write); its other inputs only lend shapes and get no gradient.
void LinearGradGrad(GradOpMaker& g);
// - a bilinear forward op Out = F(X, Y) (mul, matmul, elementwise_mul) with F_grad(X, Y, dOut) -> dX, dY:
//   d(dOut) = F(ddX, Y) + F(X, ddY), dX = F_grad(X, ddY, dOut).X@GRAD, dY = F_grad(ddX, Y, dOut).Y@GRAD.
void BilinearGradGrad(GradOpMaker& g);
// - piecewise-constant ops (floor, sign): every differentiable input's gradient is zeros.
void ZeroGrad(GradOpMaker& g);

}  // namespace fl
