// SelectedRows operations the runtime itself needs: Fluid's MergeAdd, and the table of ops that accept a
// SelectedRows X by computing on its value (scale, clip, ...: Out = SelectedRows {X's rows, op(X's value)}).
#pragma once
#include <string>

#include "scope.h"

namespace fl {

// Fluid's MergeAdd: the distinct rows of `in`, ascending, each with the sum of its value rows (float32 or
// float64 values; anything else is an error naming `what`).
SelectedRows MergeAdd(const SelectedRows& in, const std::string& what);

// out += the dense form of `sr`: every value row added into its row of `out`, which must have the
// SelectedRows' complete dims and dtype (float32/float64). `what` names the caller and variable for errors.
void AddSelectedRowsTo(const SelectedRows& sr, Tensor* out, const std::string& what);

// Registers `type` as an op whose first input X and first output Out may be SelectedRows: the executor runs its
// kernel on X's value (merged first when `merge_first`: clip of a sum is not the sum of clips) and gives Out
// X's rows and height. Called by the files that register such ops (kernels/selected_rows.cc).
void RegisterSelectedRowsValueOp(const std::string& type, bool merge_first);
// The op's merge_first flag, or null when `type` does not accept SelectedRows that way.
const bool* FindSelectedRowsValueOp(const std::string& type);

}  // namespace fl
