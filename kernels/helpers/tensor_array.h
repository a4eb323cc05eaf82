// Reading and writing LOD_TENSOR_ARRAY variables (a TensorList in the scope), shared by the array ops
// (tensor_array_read_write.cc, sum over arrays, and the ops that turn LoD tensors into arrays and back).
#pragma once
#include <cstdint>

#include "int_scalar_input.h"
#include "op_context.h"

namespace fl {

// Writes beyond this index are refused: an array grows to index + 1 entries, and a corrupt or runaway index
// (2^40) must raise instead of allocating a vector of that many tensors.
constexpr int64_t kMaxTensorArrayLength = int64_t(1) << 20;

// The array input `slot` reads. A variable that nothing wrote yet is an empty array; one holding anything else
// (a LoDTensor) is an error naming the op, the slot and the variable.
inline const TensorList& InputArray(const ExecutionContext& ctx, const char* slot, int i = 0) {
  static const TensorList kEmpty;
  const Variable* v = ctx.InputVar(slot, i);
  if (const TensorList* a = v->GetTensorList()) return *a;
  FL_ENFORCE(!v->IsInitialized(), ctx.Type(), ": input ", slot, " variable '", ctx.InputName(slot, i), "' holds a ",
             v->KindName(), ", not a LoDTensorArray");
  return kEmpty;
}

// The array output `slot` writes (created empty when nothing wrote the variable yet).
inline TensorList& OutputArray(const ExecutionContext& ctx, const char* slot, int i = 0) {
  Variable* v = ctx.OutputVar(slot, i);
  FL_ENFORCE(!v->IsInitialized() || v->IsTensorList(), ctx.Type(), ": output ", slot, " variable '",
             ctx.OutputName(slot, i), "' holds a ", v->KindName(), ", not a LoDTensorArray");
  return *v->GetMutableTensorList();
}

// The entry index that the 1-element int64 (or int32) tensor `slot` holds, checked to be >= 0.
inline int64_t ArrayIndexInput(const ExecutionContext& ctx, const char* slot = "I") {
  const int64_t i = ReadIntScalarInput(ctx, slot);
  FL_ENFORCE(i >= 0, ctx.Type(), ": index ", slot, " '", ctx.InputName(slot), "' is ", i,
             "; an array index must be >= 0");
  return i;
}

// Build time: the index input is int64 (or int32) and, when its shape is known, holds one element.
inline void CheckArrayIndexInput(InferShapeContext& ctx, const char* slot = "I") {
  CheckIntScalarInputDType(ctx, slot);
  const DDim d = ctx.InputDim(slot);
  if (d.size() > 0 && d.numel() >= 0)
    FL_ENFORCE(d.numel() == 1, ctx.Type(), ": index ", ctx.Describe(slot), " must hold exactly one element");
}

// The array and rank-table ops that move rows with memcpy/memset work on CPU memory: on a CUDA place (a CUDA build;
// they have no CUDA kernels yet) they raise naming the op instead of writing device memory from the host.
inline void CheckCPUPlace(const ExecutionContext& ctx) {
  FL_ENFORCE(ctx.place().is_cpu(), ctx.Type(), " runs on CPUPlace only (fluidlite has no CUDA version of it yet), got ",
             ctx.place().ToString());
}

// Build time: input `slot` is declared a LOD_TENSOR_ARRAY.
inline void CheckArrayInput(InferShapeContext& ctx, const char* slot, int i = 0) {
  const VarKind k = ctx.InputKind(slot, i);
  FL_ENFORCE(k == VarKind::LOD_TENSOR_ARRAY, ctx.Type(), ": ", slot, " '", ctx.InputName(slot, i), "' is a ",
             VarKindName(k), " variable, not a LOD_TENSOR_ARRAY (layers.create_array)");
}

}  // namespace fl
