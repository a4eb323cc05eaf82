// What an op's code sees: InferShapeContext (compile time over VarDescs, run time over tensors, the
// same InferShape function serves both), ExecutionContext for kernels, and GradOpMaker for grad makers.
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "desc.h"
#include "names.h"
#include "op_registry.h"
#include "scope.h"
#include "tensor.h"

namespace fl {

// ------------------------------------------------------------------ shape inference

class InferShapeContext {
 public:
  virtual ~InferShapeContext() = default;
  virtual bool IsRuntime() const = 0;
  virtual const std::string& Type() const = 0;
  virtual const OpInfo& Info() const = 0;
  virtual bool HasInput(const char* slot) const = 0;  // present and non-empty
  virtual bool HasOutput(const char* slot) const = 0;
  // Argument i of the slot is given (not @EMPTY@), and at run time holds a tensor.
  virtual bool HasInputAt(const char* slot, int i) const = 0;
  virtual bool HasOutputAt(const char* slot, int i) const = 0;
  virtual int InputSize(const char* slot) const = 0;
  virtual int OutputSize(const char* slot) const = 0;
  virtual DDim InputDim(const char* slot, int i = 0) const = 0;  // -1 for unknown dims at compile time
  virtual DType InputDType(const char* slot, int i = 0) const = 0;
  // The kind of an input variable (LOD_TENSOR, LOD_TENSOR_ARRAY, SELECTED_ROWS, ...): its desc's at build time, what
  // the variable holds at run time (LOD_TENSOR for one that holds nothing yet).
  virtual VarKind InputKind(const char* slot, int i = 0) const = 0;
  virtual const std::string& InputName(const char* slot, int i = 0) const = 0;
  virtual const std::string& OutputName(const char* slot, int i = 0) const = 0;
  virtual void SetOutputDim(const char* slot, const DDim& dims, int i = 0) = 0;
  virtual void SetOutputDType(const char* slot, DType dtype, int i = 0) = 0;  // compile time only
  virtual void ShareLoD(const char* in_slot, const char* out_slot, int i = 0, int j = 0) = 0;
  // Build time: an input variable's lod_level, and setting an output's, for ops that compute their output's LoD
  // instead of sharing one (lod_reset, sequence ops: Fluid's GetLoDLevel/SetLoDLevel). At run time the tensors
  // carry the LoD itself (the kernel sets it): InputLoDLevel is the input tensor's level count and
  // SetOutputLoDLevel does nothing.
  virtual int InputLoDLevel(const char* slot, int i = 0) const = 0;
  virtual void SetOutputLoDLevel(const char* slot, int level, int i = 0) = 0;
  virtual const Attribute& GetAttr(const std::string& name) const = 0;
  template <typename T>
  const T& Attr(const std::string& name) const {
    return AttrCast<T>(GetAttr(name), name);
  }

  // Sets dims and dtype of an output in one call.
  void SetOutput(const char* slot, const DDim& dims, DType dtype, int i = 0) {
    SetOutputDim(slot, dims, i);
    SetOutputDType(slot, dtype, i);
  }
  // "X 'fc_0.tmp_0' [-1, 32]" for error messages.
  std::string Describe(const char* slot, int i = 0) const;
  // Throws unless inputs a and b have the same dtype (ops whose kernels take one T for both): caught when
  // the op is built, not first at run time. An undefined dtype (not known yet) passes.
  void EnforceSameDType(const char* a, const char* b) const;
};

// On a generated grad op (info.forward set): runs the forward op's InferShape over the grad op's inputs -- the
// forward inputs it reads (or their ShapeLike reads, for dims), and as the forward outputs' dims those of its
// reads of them and of their gradients -- so the attributes it inherited are checked against its inputs as the
// forward op checks them, and an Out@GRAD whose dims differ from the Out the forward op would compute is an
// error. Returns false when the forward InferShape needs a forward input the grad op does not read (the checks
// before that point ran; a PreparedOp then stops calling it, as the answer depends on the op's slots only).
// Called before the grad op's own InferShape at build time, and at run time whenever the grad op's input dims
// differ from those it last passed with (its attributes are fixed for the life of a PreparedOp).
bool CheckAgainstForward(InferShapeContext& grad_ctx);

// Out takes X's dims, dtype and LoD: the rule of every unary elementwise op.
void SameShapeAsInput(InferShapeContext& ctx, const char* in = "X", const char* out = "Out");
inline void InferSameShapeAsX(InferShapeContext& ctx) { SameShapeAsInput(ctx); }

// ------------------------------------------------------------------ execution

// A prepared op: its info, its attributes in declaration order (defaults filled in), and for one scope
// the resolved variables of each slot. Built once by the executor and reused for every run.
class PreparedOp {
 public:
  PreparedOp(const OpInfo* info, const OpDesc* desc);
  void Bind(Scope& scope);  // resolve every argument name to its Variable in `scope` (or a parent)
  void Run(const Place& place);
  // "CPUPlace Op(abs), inputs:{X[x:float[2, 3]({})]}, outputs:{...}." — Fluid's DebugStringEx.
  std::string DebugString(const Place& place) const;
  // The op log lines of Fluid's OperatorBase::Run: DebugString at VLOG(4) before the op runs, at VLOG(3) after.
  // Written from operator.cc (as Fluid's come from operator.cc), so GLOG_vmodule=operator=N selects them; the
  // executor calls it only when some module logs at level 3 or more.
  void LogRun(const Place& place, bool after) const;
  // Interned profiler args: "\"inputs\":\"X[2, 3]\",\"outputs\":\"Out[6, 3]({{0, 2, 6}})\"" (a tensor's LoD when it
  // has one, long levels abbreviated). Rebuilt only when a shape or a LoD changed since the last call, so profiling
  // a steady-state run costs a dims (and LoD) comparison per argument.
  // Also in the args: `"input_vars":{"X":["x"]},"output_vars":{...}` (the slots' variables), `"site":"file:line"`
  // (where the user created the op, when known) and `"block":b,"index":i` (the op's place in its program).
  const char* ProfileArgs();
  // The name of the argument whose tensor holds address `p`, or "" (attributing a copy to its variables).
  std::string ArgumentHolding(const void* p) const;
  // The op's place in the user's program for the profiler's args (index -1: an op the executor added). Ops of
  // sub-blocks find theirs in the program on first use.
  void SetPosition(int block, int index) {
    block_index_ = block;
    op_index_ = index;
    position_found_ = true;
  }

  const OpInfo* info() const { return info_; }
  const OpDesc* desc() const { return desc_; }
  const std::vector<std::vector<Variable*>>& outputs() const { return outs_; }  // parallel to info()->outputs
  Scope* scope() const { return scope_; }

 private:
  friend class ExecutionContext;
  friend class RuntimeInferShapeContext;
  // Whether any input's dims (an absent or uninitialized tensor counts as [-1]) differ from `dims`; and
  // storing them there.
  bool InputDimsChanged(const std::vector<DDim>& dims) const;
  void RecordInputDims(std::vector<DDim>& dims) const;
  const OpInfo* info_;
  const OpDesc* desc_;
  std::vector<const Attribute*> attrs_;             // parallel to info_->attrs
  std::vector<std::vector<Variable*>> ins_, outs_;  // parallel to info_->inputs / outputs
  Scope* scope_ = nullptr;
  const KernelFn* kernel_ = nullptr;
  DType kernel_dtype_ = DType::UNDEFINED;
  Place kernel_place_;
  std::vector<DDim> profiled_dims_;
  std::vector<uint64_t> profiled_lods_;  // their Tensor::lod_version()s, parallel to profiled_dims_
  const char* profile_args_ = nullptr;
  void FindPosition();
  bool position_found_ = false;
  int block_index_ = -1, op_index_ = -1;
  const char* detail_names_[2] = {nullptr, nullptr};  // "<type>/infer_shape", "<type>/compute" (OpDetail)
  std::shared_ptr<void> state_;  // per-op state kept across runs (e.g. recurrent's prepared step block)
  bool check_forward_;           // a grad op whose forward InferShape can run over its inputs (CheckAgainstForward)
  std::vector<DDim> forward_checked_dims_;  // the input dims it last passed with: rerun only when they change
  // Declared in-place pairs bound to one variable: Run checks that the op keeps the variable's shape.
  struct InplaceAlias {
    Variable* var;
    const std::string* out_slot;
    const std::string* in_slot;
    const std::string* name;
    DDim before;  // its dims before InferShape, in Run
  };
  std::vector<InplaceAlias> inplace_;
  void CheckAliases();  // at Bind: an undeclared output == input alias raises
  // A backward op's outputs x@GRAD (and x@GRAD@RENAME@k) paired with x: after the kernel, a gradient the op left
  // without LoD takes x's when it has x's rows. Composed gradients (a transpose2 or concat standing in for a grad
  // op) and grads shaped like a saved intermediate follow their own op's LoD rule otherwise.
  std::vector<std::pair<Variable*, const Variable*>> grad_lod_;
  void ShareForwardLoDWithGrads() const;
  // Where the kernel runs for a requested place: a GPU program runs an op without a CUDA kernel (or with the
  // force_cpu attribute set) on the CPU kernel, as Fluid does.
  Place KernelPlaceFor(const Place& place, DType dt) const;
  Place requested_place_;
  bool force_cpu_ = false;
  // Fluid's data transform: an input whose tensor lives on another place than the kernel's is copied into a
  // variable of this op's own (one per input, reused across runs) and the kernel reads the copy. The copy is
  // recorded and logged with cause `place_transform`, that variable and this op.
  struct Transfer {
    size_t slot, index;
    Variable* original;
    std::shared_ptr<Variable> copy;
  };
  std::vector<Transfer> transfers_;
  size_t TransferInputs(const Place& kernel_place);  // swaps the copies in; returns how many
  void RestoreInputs(size_t n);
};

class ExecutionContext {
 public:
  ExecutionContext(const PreparedOp& op, const Place& place) : op_(op), place_(place) {}

  const Place& place() const { return place_; }
  const OpDesc& desc() const { return *op_.desc_; }
  const std::string& Type() const { return op_.info_->type; }
  Scope& scope() const { return *op_.scope_; }

  bool HasInput(const char* slot) const;
  bool HasOutput(const char* slot) const;
  int InputSize(const char* slot) const { return static_cast<int>(InVars(slot).size()); }
  int OutputSize(const char* slot) const { return static_cast<int>(OutVars(slot).size()); }
  // The tensor of an input; throws (naming op, slot and variable) if it was never written.
  const Tensor& Input(const char* slot, int i = 0) const;
  // null if absent or uninitialized; throws if it holds a SelectedRows (read those with InputRowsOrNull).
  const Tensor* InputOrNull(const char* slot, int i = 0) const;
  // The SelectedRows of an input (a sparse gradient), or null if it holds anything else or nothing.
  const SelectedRows* InputRowsOrNull(const char* slot, int i = 0) const;
  std::vector<const Tensor*> MultiInput(const char* slot) const;
  Tensor* Output(const char* slot, int i = 0) const;
  Tensor* OutputOrNull(const char* slot, int i = 0) const;  // null if the slot is absent
  std::vector<Tensor*> MultiOutput(const char* slot) const;
  // The variable of slot[i]; throws if it is absent or @EMPTY@ (never null).
  Variable* InputVar(const char* slot, int i = 0) const;
  Variable* OutputVar(const char* slot, int i = 0) const;
  const std::string& InputName(const char* slot, int i = 0) const;
  const std::string& OutputName(const char* slot, int i = 0) const;

  template <typename T>
  const T& Attr(const char* name) const {
    return AttrCast<T>(GetAttr(name), name);
  }
  const Attribute& GetAttr(const char* name) const;

  // State this op keeps across runs (created on first use). Lives as long as the prepared op.
  template <typename T>
  T& State() const {
    auto& st = const_cast<PreparedOp&>(op_).state_;
    if (!st) st = std::make_shared<T>();
    return *static_cast<T*>(st.get());
  }

  // Allocates an output with the dims shape inference gave it.
  template <typename T>
  T* Alloc(const char* slot, int i = 0) const {
    return Output(slot, i)->mutable_data<T>(place_);
  }

 private:
  const std::vector<Variable*>& InVars(const char* slot) const;
  const std::vector<Variable*>& OutVars(const char* slot) const;
  const PreparedOp& op_;
  Place place_;
};

}  // namespace fl
