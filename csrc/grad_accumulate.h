// Accumulating a gradient into its running total. StaticRNN's recurrent_grad adds every step's parameter gradient
// into the outer one; done naively each step writes a fresh [K, N] tensor that the runner then reads again and adds
// (three passes over it). Instead the runner lends the step's gradient variable the running total's buffer and asks
// the op that writes it to add into it (mul_grad: a GEMM with beta = 1): one pass. The runner asks only when that
// op is the gradient's one writer in the step block and honours the request (SupportsAccumulate), and checks that it
// did (AccumulateScope::consumed), so no other op can overwrite a running total.
#pragma once
#include <string>
#include <vector>

namespace fl {

class Tensor;

// For the ops run on this thread while it lives: the tensors (each sharing a running total's buffer) whose writer
// should add into them.
class AccumulateScope {
 public:
  explicit AccumulateScope(std::vector<const Tensor*> targets);
  ~AccumulateScope();
  AccumulateScope(const AccumulateScope&) = delete;
  AccumulateScope& operator=(const AccumulateScope&) = delete;
  bool consumed(size_t i) const { return targets_[i] == nullptr; }

 private:
  friend bool AccumulateInto(const Tensor* out);
  std::vector<const Tensor*> targets_;
  AccumulateScope* outer_;
};

// Called by a kernel that supports accumulation before it writes `out`: true (once per request) when it must add
// into out's current contents instead of overwriting them.
bool AccumulateInto(const Tensor* out);

// Whether ops of `type` honour AccumulateInto for their output slot `slot`.
bool SupportsAccumulate(const std::string& type, const std::string& slot);

}  // namespace fl
