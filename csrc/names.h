// Reserved variable names and op roles, Fluid's values. Python reads them from here (core.names(),
// core.op_roles()): they are written down once.
#pragma once
#include <string>

namespace fl {

constexpr const char* kGradSuffix = "@GRAD";       // x@GRAD is the gradient of x
constexpr const char* kEmptyVarName = "@EMPTY@";   // an argument nobody needs (a gradient in no_grad_set)
constexpr const char* kRenameMarker = "@RENAME@";  // x@GRAD@RENAME@k: one of several writes summed into x@GRAD
constexpr const char* kTempVarName = "@TEMP@";

inline std::string GradName(const std::string& n) { return n + kGradSuffix; }
inline bool IsGradName(const std::string& n) { return n.find(kGradSuffix) != std::string::npos; }
// "x@GRAD@RENAME@1" -> "x": Fluid cuts at the first @GRAD.
inline std::string StripGradSuffix(const std::string& n) {
  const size_t pos = n.find(kGradSuffix);
  return pos == std::string::npos ? n : n.substr(0, pos);
}

// Slot names: "Out@GRAD" -> "Out", "X@GRAD@GRAD" -> "X@GRAD" (the trailing suffix); "" if there is none.
inline std::string SlotOfGrad(const std::string& slot) {
  const size_t n = std::char_traits<char>::length(kGradSuffix);
  return slot.size() > n && slot.compare(slot.size() - n, n, kGradSuffix) == 0 ? slot.substr(0, slot.size() - n) : "";
}

// The op_role attribute (a bit set): which pass appended the op.
enum class OpRole : int {
  kForward = 0x0000,
  kBackward = 0x0001,
  kOptimize = 0x0002,
  kRPC = 0x0004,
  kDist = 0x0008,
  kLRSched = 0x0010,
  kLoss = 0x0100,
};

#define FL_FOR_EACH_OP_ROLE(_) \
  _(Forward, kForward)         \
  _(Backward, kBackward)       \
  _(Optimize, kOptimize)       \
  _(RPC, kRPC)                 \
  _(Dist, kDist)               \
  _(LRSched, kLRSched)         \
  _(Loss, kLoss)

}  // namespace fl
