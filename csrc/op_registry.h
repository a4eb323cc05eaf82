// The op registry: op type -> signature (slots, attrs with defaults and docs), shape inference,
// kernels keyed by (place kind, dtype), and the gradient. Each op file registers itself with
//
//   FL_REGISTER_OP(mul, op) {
//     op.Doc("Out = X @ Y")
//         .Input("X", "left operand").Input("Y", "right operand").Output("Out", "the product")
//         .Attr<int32_t>("x_num_col_dims", 1, "...")
//         .SetInferShape(MulInferShape)
//         .CPUKernel<float, double>(kMul);
//     op.GradOp({"X", "Y", "Out@GRAD"})          // mul_grad reads X, Y and Out@GRAD ...
//         .CPUKernel<float, double>(kMulGrad)    // ... and has a kernel of its own
//         .Grad(BilinearGradGrad);               // its own gradient, for double grad
//   }
//
// and nothing else lists ops: the file is compiled into _core and its static registrar runs at load.
//
// The gradient clause says how the op differentiates, in one of four ways:
//   .Grad(maker)       composed: the maker emits ops of other differentiable types (scale, elementwise_*,
//                      the forward op itself), so gradients of gradients come for free;
//   .GradOp(reads)     a dedicated <type>_grad op reading the listed forward inputs, outputs and output
//                      gradients. Its slots (X@GRAD for every differentiable input X), its attributes (the
//                      forward op's, inherited) and its shape inference (X@GRAD takes X's shape) are derived
//                      from the forward registration by OpRegistry::Finalize; the file gives the kernel;
//   .NoGradient()      the outputs do not depend differentiably on the inputs (comparisons, fill_*_like);
//   nothing            the op has no gradient: backward raises if a gradient must flow through it.
//
// Validation. What an op accepts is declared on its registration too, and checked wherever an op desc can come
// from: when Python builds it (AppendCheckedOp), when a program is read from bytes (ValidateProgram) and when the
// executor prepares it (PreparedOp), so an attribute set later (op._set_attr), a crafted __model__ or a grad op
// appended by hand meets the same checks (ValidateOpDesc, op_builder.h):
//   .Attr<int32_t>("groups", 1, "...").Min(1)        each attribute's valid values: Min/Range (numbers, and each
//   .Attr("strides", ...).Min(1).Size(2)             element of a list), Size (list length), OneOf (strings),
//   .Attr<int32_t>("axis", -1, "...").Axis()         Axis (within the largest rank), DTypeValue;
//   .Check(fn)                                       checks across attributes and slot counts (no shapes).
// These depend on the attributes only and run once per build, parse or prepare, never per run. What depends on
// shapes is the InferShape function's job, which runs at build time and at every run. A generated grad op
// inherits its forward op's attributes, so it inherits their checks, the forward op's Check and -- at build time
// and whenever its input dims change at run time -- its forward op's InferShape, run over its inputs
// (CheckAgainstForward, op_context.h): the forward inputs it reads, and its Out / Out@GRAD reads compared with the
// Out dims the forward op infers, so a grad op whose attributes or inputs disagree fails as its forward op would.
#pragma once
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "attribute.h"
#include "desc.h"
#include "dtype.h"
#include "place.h"

namespace fl {

class ExecutionContext;
class InferShapeContext;
class GradOpMaker;
class Scope;
class PreparedOp;

struct SlotSpec {
  std::string name;
  std::string doc;
  bool duplicable = false;   // takes a list of variables
  bool dispensable = false;  // may be absent
  bool no_grad = false;      // an input the op does not differentiate (labels, indices): no X@GRAD
};

// One rule on an attribute's value: returns "" when `value` passes, else what it must be ("an int >= 1").
using AttrCheckFn = std::function<std::string(const Attribute& value)>;

struct AttrSpec {
  std::string name;
  Attribute default_value;
  std::string doc;
  bool required = false;            // no default: the op cannot be built without it
  std::vector<AttrCheckFn> checks;  // its valid values, beyond the type (OpBuilder::Min, Size, OneOf, ...)
  std::string constraint;           // the same in words, for op_proto and docs ("each >= 1; 2 values")
  AttrType type() const { return TypeOf(default_value); }
  // "" or why `value` is not valid for this attribute (its type is checked separately).
  std::string Violation(const Attribute& value) const;
};

class OpCheckContext;
// Checks that span attributes or slot counts (never shapes: those are InferShape's); throws EnforceNotMet.
using OpCheckFn = void (*)(const OpCheckContext&);

using KernelFn = std::function<void(const ExecutionContext&)>;
using InferShapeFn = void (*)(InferShapeContext&);
using GradMakerFn = void (*)(GradOpMaker&);
void MakeDerivedGradOp(GradOpMaker& g);  // the grad maker of every op with a GradOp clause (grad_op_maker.cc)
// Ops without kernels (feed, fetch, recurrent) run through this instead.
using RunFn = std::function<void(const ExecutionContext&)>;
// Picks the dtype of the kernel to run; default: the dtype of the first initialized input tensor.
using KernelDTypeFn = DType (*)(const ExecutionContext&);

enum class GradKind { kNone, kComposed, kGradOp, kNoGradient };
const char* GradKindName(GradKind k);  // "none", "composed", "grad_op", "no_gradient"

struct OpInfo {
  std::string type;
  std::string doc;
  std::vector<SlotSpec> inputs, outputs;
  std::vector<AttrSpec> attrs;
  InferShapeFn infer_shape = nullptr;
  OpCheckFn check = nullptr;  // a grad op: its forward op's
  GradKind grad_kind = GradKind::kNone;
  GradMakerFn grad_maker = nullptr;  // emits the grad ops (kComposed, kGradOp)
  // On a forward op with kGradOp: the type of its grad op. On that grad op: the forward op, what it reads
  // (forward input and output slots, and Out@GRAD for output Out), which of those may be missing, and the
  // read whose shape X@GRAD takes when X itself is not read.
  std::string grad_op;
  const OpInfo* forward = nullptr;
  std::vector<std::string> grad_reads, optional_reads;
  // Reads the grad op accepts (Fluid's grad op has the slot, so Fluid programs load) but its kernel never reads: the
  // derived maker leaves them out, so the forward values are not kept alive for the grad op.
  std::vector<std::string> unread_reads;
  std::vector<std::pair<std::string, std::string>> shape_like;
  // Derived at Finalize for DefaultGradInferShape: (X@GRAD output, the input whose shape it takes).
  std::vector<std::pair<std::string, std::string>> grad_shape_sources;
  // Derived at Finalize for CheckAgainstForward, on a grad op. Per forward input slot: `same` is the grad op's
  // input of that name (-1: it does not read it) and `alt` its ShapeLike read (dims only). Per forward output
  // slot: `same` is the grad op's input of that name and `alt` the one of its gradient (slot@GRAD).
  struct ForwardSlot {
    int same = -1, alt = -1;
  };
  std::vector<ForwardSlot> forward_inputs, forward_outputs;
  // Output slots that may be the same variable as an input slot (Fluid's inplace inference): (out, in).
  // The executor refuses any other alias at prepare time, and a declared one whose shape the op would change.
  std::vector<std::pair<std::string, std::string>> inplace;
  bool AllowsInplace(const std::string& out, const std::string& in) const;
  RunFn run;  // set for kernel-less ops
  KernelDTypeFn kernel_dtype = nullptr;
  std::string kernel_dtype_slot;  // or: prefer the dtype of this input slot (grad ops: their first Out@GRAD)
  std::array<std::array<KernelFn, kNumDTypeSlots>, kNumPlaceKinds> kernels;

  bool differentiable() const { return grad_kind != GradKind::kNone; }
  const SlotSpec* FindInput(const std::string& n) const;
  const SlotSpec* FindOutput(const std::string& n) const;
  const AttrSpec* FindAttr(const std::string& n) const;
  int InputIndex(const char* n) const;
  int OutputIndex(const char* n) const;
  bool HasAnyKernel() const;
  const KernelFn* FindKernel(PlaceKind place, DType dtype) const {
    int d = static_cast<int>(dtype), p = static_cast<int>(place);
    if (d < 0 || d >= kNumDTypeSlots || p < 0 || p >= kNumPlaceKinds) return nullptr;
    const KernelFn& k = kernels[p][d];
    return k ? &k : nullptr;
  }
  std::string KernelListString() const;  // "CPU:float32,float64; CUDA:float32"
};

// What an OpCheckFn sees: one op desc's attributes (declared defaults where the desc has none) and how many
// variables each of its slots lists (0 for an absent slot; -1 for a slot the op does not declare, e.g. a
// forward slot that a grad op running its forward op's check does not read).
class OpCheckContext {
 public:
  OpCheckContext(const OpInfo& info, const OpDesc& desc) : info_(info), desc_(desc) {}
  const std::string& Type() const { return info_.type; }
  const OpDesc& desc() const { return desc_; }
  const Attribute& GetAttr(const std::string& name) const;
  template <typename T>
  const T& Attr(const std::string& name) const {
    return AttrCast<T>(GetAttr(name), name);
  }
  int InputSize(const char* slot) const;
  int OutputSize(const char* slot) const;

 private:
  const OpInfo& info_;
  const OpDesc& desc_;
};

// Builder used inside FL_REGISTER_OP bodies.
class OpBuilder {
 public:
  explicit OpBuilder(OpInfo* info) : info_(info) {}
  OpBuilder& Doc(const std::string& d) {
    info_->doc = d;
    return *this;
  }
  OpBuilder& Input(const std::string& name, const std::string& doc) {
    return AddSlot(info_->inputs, name, doc, false, false);
  }
  OpBuilder& DuplicableInput(const std::string& name, const std::string& doc) {
    return AddSlot(info_->inputs, name, doc, true, false);
  }
  OpBuilder& DispensableInput(const std::string& name, const std::string& doc) {
    return AddSlot(info_->inputs, name, doc, false, true);
  }
  // A list of variables that may be empty.
  OpBuilder& OptionalDuplicableInput(const std::string& name, const std::string& doc) {
    return AddSlot(info_->inputs, name, doc, true, true);
  }
  OpBuilder& OptionalDuplicableOutput(const std::string& name, const std::string& doc) {
    return AddSlot(info_->outputs, name, doc, true, true);
  }
  OpBuilder& Output(const std::string& name, const std::string& doc) {
    return AddSlot(info_->outputs, name, doc, false, false);
  }
  OpBuilder& DuplicableOutput(const std::string& name, const std::string& doc) {
    return AddSlot(info_->outputs, name, doc, true, false);
  }
  OpBuilder& DispensableOutput(const std::string& name, const std::string& doc) {
    return AddSlot(info_->outputs, name, doc, false, true);
  }

  template <typename T>
  OpBuilder& Attr(const std::string& name, T default_value, const std::string& doc) {
    info_->attrs.push_back(AttrSpec{name, Attribute(default_value), doc, false});
    return *this;
  }
  OpBuilder& Attr(const std::string& name, const char* default_value, const std::string& doc) {
    return Attr<std::string>(name, std::string(default_value), doc);
  }
  // An attribute the caller must set (its type is that of `type_example`).
  template <typename T>
  OpBuilder& RequiredAttr(const std::string& name, T type_example, const std::string& doc) {
    info_->attrs.push_back(AttrSpec{name, Attribute(type_example), doc, true});
    return *this;
  }

  // Rules on the value of the attribute declared last (they add up): every number (an INT, LONG or FLOAT, or
  // each element of an INTS, LONGS or FLOATS list) in [lo, hi] (NaN never passes); a list's length in
  // [lo, hi]; a STRING among `values`; an axis or each of a list of axes in [-kMaxRank, kMaxRank - 1] (the
  // rank is checked by InferShape), at most kMaxRank of them; a VarType dtype value (or -1 where allowed).
  OpBuilder& Min(double lo);
  OpBuilder& Range(double lo, double hi);
  OpBuilder& Size(size_t n) { return Size(n, n); }
  OpBuilder& Size(size_t lo, size_t hi);
  OpBuilder& OneOf(std::vector<std::string> values);
  OpBuilder& Axis();
  OpBuilder& DTypeValue(bool allow_unset = false);
  // Any other rule: `text` describes it, `fn` returns "" or what the value must be.
  OpBuilder& Constrain(const std::string& text, AttrCheckFn fn);
  OpBuilder& Check(OpCheckFn f) {
    info_->check = f;
    return *this;
  }

  OpBuilder& SetInferShape(InferShapeFn f) {
    info_->infer_shape = f;
    return *this;
  }
  // Inputs the op does not differentiate: its grad op has no X@GRAD output for them.
  OpBuilder& NonDifferentiable(std::initializer_list<const char*> inputs);

  // The gradient clause (see the top of this file).
  OpBuilder& Grad(GradMakerFn composed);
  OpBuilder& NoGradient();
  OpBuilder GradOp(std::vector<std::string> reads);
  // On a GradOp builder: reads that may be missing (an output nobody used), and the read whose shape X@GRAD
  // takes when the grad op does not read X.
  OpBuilder& Optional(std::vector<std::string> reads);
  // On a GradOp builder: reads accepted but not passed (OpInfo::unread_reads), e.g. an input Fluid's grad op lists
  // whose values the kernel does not need.
  OpBuilder& AcceptsUnread(std::vector<std::string> reads);
  OpBuilder& ShapeLike(const std::string& input, const std::string& read);
  // ParamOut may be Param itself: the kernel reads each element of `in` before writing that of `out`.
  OpBuilder& Inplace(const std::string& out, const std::string& in) {
    info_->inplace.emplace_back(out, in);
    return *this;
  }
  OpBuilder& SetRun(RunFn f) {
    info_->run = std::move(f);
    return *this;
  }
  OpBuilder& KernelDTypeFrom(const std::string& slot) {
    info_->kernel_dtype_slot = slot;
    return *this;
  }
  OpBuilder& SetKernelDType(KernelDTypeFn f) {
    info_->kernel_dtype = f;
    return *this;
  }

  // Registers f(ctx, TypeTag<T>{}) for each T on `place`.
  template <typename... Ts, typename F>
  OpBuilder& Kernel(PlaceKind place, F f) {
    (AddKernel<Ts>(place, f), ...);
    return *this;
  }
  template <typename... Ts, typename F>
  OpBuilder& CPUKernel(F f) {
    return Kernel<Ts...>(PlaceKind::CPU, f);
  }
  // f for every dtype kernels compute on (FL_FOR_EACH_DTYPE but float16): copies, views, casts.
  template <typename F>
  OpBuilder& KernelAnyDType(PlaceKind place, F f) {
#define FL_ANY_DTYPE_KERNEL(name, v, type, fluid_name, cpp_name, format) \
  if constexpr (!std::is_same_v<type, Float16>) AddKernel<type>(place, f);
    FL_FOR_EACH_DTYPE(FL_ANY_DTYPE_KERNEL)
#undef FL_ANY_DTYPE_KERNEL
    return *this;
  }
  template <typename F>
  OpBuilder& CPUKernelAnyDType(F f) {
    return KernelAnyDType(PlaceKind::CPU, f);
  }

 private:
  template <typename T, typename F>
  void AddKernel(PlaceKind place, F f) {
    info_->kernels[static_cast<int>(place)][static_cast<int>(DTypeOf<T>::value)] = [f](const ExecutionContext& ctx) {
      f(ctx, TypeTag<T>{});
    };
  }
  OpBuilder& AddSlot(std::vector<SlotSpec>& v, const std::string& n, const std::string& d, bool dup, bool disp) {
    v.push_back(SlotSpec{n, d, dup, disp});
    return *this;
  }
  OpInfo* info_;
};

class OpRegistry {
 public:
  static OpRegistry& Instance();
  OpInfo* GetOrCreate(const std::string& type);  // registration (any order: CUDA files add kernels)
  // Derives every generated grad op's slots, attributes, shape inference and kernel dtype from its forward
  // op, and checks the registrations. Called once when the module loads, after all static registrars ran.
  void Finalize();
  const OpInfo* Find(const std::string& type) const;
  const OpInfo& Get(const std::string& type) const;  // throws "unknown op type"
  std::vector<std::string> Types() const;

 private:
  std::map<std::string, std::unique_ptr<OpInfo>> ops_;
  bool finalized_ = false;
};

// Attributes every op accepts (Fluid's OpProtoAndCheckerMaker adds them to all ops).
const std::vector<AttrSpec>& CommonAttrs();

// Shape inference of a generated grad op: X@GRAD[i] takes the dims, dtype and LoD of X[i] (or of its
// ShapeLike read).
void DefaultGradInferShape(InferShapeContext& ctx);

struct OpRegistrar {
  OpRegistrar(const char* type, void (*body)(OpBuilder&)) {
    OpBuilder b(OpRegistry::Instance().GetOrCreate(type));
    body(b);
  }
};

// Adds a kernel for an already (or later) registered op, e.g. from a .cu file.
struct KernelRegistrar {
  KernelRegistrar(const char* type, PlaceKind place, DType dtype, KernelFn fn) {
    OpRegistry::Instance().GetOrCreate(type)->kernels[static_cast<int>(place)][static_cast<int>(dtype)] = std::move(fn);
  }
};

}  // namespace fl

#define FL_REGISTER_OP(type, builder)                                             \
  static void fl_register_op_##type(::fl::OpBuilder& builder);                    \
  static ::fl::OpRegistrar fl_op_registrar_##type(#type, &fl_register_op_##type); \
  static void fl_register_op_##type(::fl::OpBuilder& builder)
