// fused_elementwise: a chain of elementwise ops run as one op (emitted by the fuse_elementwise_chains and
// fuse_elewise_add_act passes, kernels/passes/fuse_elementwise_chains.cc). Its `code` attribute is a small program
// over slots (helpers/fused_elementwise.h); the kernel is a precompiled interpreter over tiles: the output is walked
// kTile elements at a time and every instruction runs on the tile (one vectorised loop of the original op's functor)
// before the next tile, so intermediates stay in L1 and only the outputs with consumers are written to memory.
// Inputs have the output's shape, or broadcast into it by Fluid's axis rule (a bias [N] against [M, N], a scalar):
// their tile is gathered from the broadcast plan (helpers/broadcast.h), or are a column block of a 2-D input (a
// split the pass folded in, read in place). Same functors, same order of operations:
// the results equal the unfused ops' bit for bit.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "helpers/broadcast.h"
#include "helpers/elementwise_functors.h"
#include "helpers/fused_elementwise.h"
#include "helpers/unary_functors.h"
#include "op_context.h"

namespace fl {

namespace {

using namespace fused;  // NOLINT: the instruction set

constexpr int64_t kTile = 1024;  // elements per tile (at most): 4 KiB of float per live slot

// The attribute context a unary functor is constructed from: its op's attributes, by name, from the params.
struct ParamContext {
  const std::vector<std::string>* names;
  const float* values;
  template <typename T>
  T Attr(const std::string& name) const {
    for (size_t i = 0; i < names->size(); ++i)
      if ((*names)[i] == name) return static_cast<T>(values[i]);
    FL_THROW("fused_elementwise: no parameter '", name, "'");
  }
};

// The float and bool attributes of a unary op, in declared order: what its params hold.
std::vector<std::string> UnaryParamNames(int fn) {
  std::vector<std::string> names;
  for (const AttrSpec& a : OpRegistry::Instance().Get(kUnaryOps[fn]).attrs)
    if (a.type() == AttrType::FLOAT || a.type() == AttrType::BOOLEAN) names.push_back(a.name);
  return names;
}

struct Instr {
  int kind, fn, dst, a, b, c;
  const float* params;
};

// The decoded program, built once per prepared op (its attributes are fixed).
struct Program {
  bool ready = false;
  int n_in = 0, n_slots = 0;
  std::vector<Instr> code;
  std::vector<float> params;
  std::vector<int> out_slot;  // Out[j] -> slot
  std::vector<int> out_of;    // slot -> Out index or -1
  std::vector<int> buffer;    // slot -> scratch buffer index (temporaries), or -1
  int n_buffers = 0;
  std::vector<int32_t> axes;
  std::vector<int32_t> columns;  // per input: -1, or the first column of its view (a split folded in)
  std::vector<std::vector<std::string>> unary_params;  // per fn used
  int ref = -1;                                        // a full input: the output's dims
};

void Decode(const ExecutionContext& ctx, Program& p) {
  const auto& code = ctx.Attr<std::vector<int32_t>>("code");
  p.params = ctx.Attr<std::vector<float>>("params");
  p.axes = ctx.Attr<std::vector<int32_t>>("axes");
  p.columns = ctx.Attr<std::vector<int32_t>>("column_offsets");
  p.columns.resize(p.axes.size(), -1);
  const auto& outs = ctx.Attr<std::vector<int32_t>>("outputs");
  p.n_in = ctx.InputSize("X");
  const int n = static_cast<int>(code.size()) / kCodeWidth;
  p.n_slots = p.n_in + n;
  p.unary_params.assign(kNumUnaryOps, {});
  for (int k = 0; k < n; ++k) {
    const int32_t* c = &code[k * kCodeWidth];
    p.code.push_back({c[0], c[1], c[2], c[3], c[4], c[5], p.params.data() + k * kParamWidth});
    if ((c[0] == kUnary || c[0] == kUnaryGrad) && p.unary_params[c[1]].empty())
      p.unary_params[c[1]] = UnaryParamNames(c[1]);
  }
  p.out_slot.assign(outs.begin(), outs.end());
  p.out_of.assign(p.n_slots, -1);
  for (size_t j = 0; j < outs.size(); ++j) p.out_of[outs[j]] = static_cast<int>(j);
  // Scratch buffers for the temporaries, reused once a temporary's last reader has run.
  std::vector<int> last_use(p.n_slots, -1);
  for (int k = 0; k < n; ++k)
    for (int s : {p.code[k].a, p.code[k].b, p.code[k].c})
      if (s >= 0) last_use[s] = k;
  p.buffer.assign(p.n_slots, -1);
  std::vector<int> free_list;
  for (int k = 0; k < n; ++k) {
    const int dst = p.code[k].dst;
    if (p.out_of[dst] < 0) {
      if (free_list.empty()) {
        p.buffer[dst] = p.n_buffers++;
      } else {
        p.buffer[dst] = free_list.back();
        free_list.pop_back();
      }
    }
    for (int s : {p.code[k].a, p.code[k].b, p.code[k].c})  // operands whose last reader this is
      if (s >= p.n_in && last_use[s] == k && p.buffer[s] >= 0 &&
          std::find(free_list.begin(), free_list.end(), p.buffer[s]) == free_list.end())
        free_list.push_back(p.buffer[s]);
    if (last_use[dst] < 0 && p.buffer[dst] >= 0) free_list.push_back(p.buffer[dst]);  // never read
  }
  for (int i = 0; i < p.n_in; ++i)
    if (p.axes[i] == kFullInput && p.columns[i] < 0) {
      p.ref = i;
      break;
    }
  p.ready = true;
}

// One input that broadcasts into the output: its plan and, per tile, its values gathered into a buffer.
// Or a column view: the output's [rows, width] taken at column `offset` of an input [rows, stride] (a split's part).
struct Broadcast {
  BroadcastPlan plan;
  int64_t offset = -1, width = 0, stride = 0;
};

template <typename T>
void Gather(const Broadcast& bc, const T* y, int64_t begin, int64_t n, T* out) {
  if (bc.offset >= 0) {  // row pieces of the view
    for (int64_t i = 0; i < n;) {
      const int64_t row = (begin + i) / bc.width, col = (begin + i) % bc.width;
      const int64_t len = std::min(n - i, bc.width - col);
      std::memcpy(out + i, y + row * bc.stride + bc.offset + col, len * sizeof(T));
      i += len;
    }
    return;
  }
  // Runs along the plan's innermost dim (the input's stride there is 0 or 1: a fill or a copy), an odometer over the
  // outer dims: a bias row [N] against [M, N], a channel bias [C] against [N, C, H, W] (runs of H * W), a scalar.
  const BroadcastPlan& p = bc.plan;
  const int r = p.rank;
  int64_t idx[DDim::kMaxRank], rest = begin, off = 0;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rest % p.dims[d];
    rest /= p.dims[d];
    off += idx[d] * p.ys[d];
  }
  const int64_t inner = p.dims[r - 1], step = p.ys[r - 1];
  for (int64_t i = 0; i < n;) {
    const int64_t len = std::min(n - i, inner - idx[r - 1]);
    if (step == 0) std::fill(out + i, out + i + len, y[off]);
    else std::memcpy(out + i, y + off, len * sizeof(T));
    i += len;
    idx[r - 1] += len;
    off += step * len;
    if (idx[r - 1] < inner) continue;
    idx[r - 1] = 0;
    off -= step * inner;
    for (int d = r - 2; d >= 0; --d) {
      off += p.ys[d];
      if (++idx[d] < p.dims[d]) break;
      off -= p.ys[d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

template <typename F, typename T>
void RunUnaryAs(const Instr& in, const std::vector<std::string>& names, const T* __restrict a, const T* __restrict b,
                T* __restrict d, int64_t n) {
  const F f(ParamContext{&names, in.params});
  if (in.kind == kUnary) {
    for (int64_t i = 0; i < n; ++i) d[i] = f.template Fwd<T>(a[i]);
  } else if constexpr (F::kGradFrom != unary_fn::GradFrom::kZero) {
    for (int64_t i = 0; i < n; ++i) d[i] = f.template Grad<T>(a[i], b[i]);
  } else {
    FL_THROW("fused_elementwise: ", kUnaryOps[in.fn], " has no gradient instruction");
  }
}

template <typename T>
void RunUnary(const Instr& in, const std::vector<std::string>& names, const T* a, const T* b, T* d, int64_t n) {
  using Runner = void (*)(const Instr&, const std::vector<std::string>&, const T*, const T*, T*, int64_t);
#define FL_FUSED_RUNNER_(name, Functor) &RunUnaryAs<unary_fn::Functor, T>,
  static constexpr Runner kRunners[] = {FL_FUSED_UNARY_OPS(FL_FUSED_RUNNER_)};
#undef FL_FUSED_RUNNER_
  static_assert(sizeof(kRunners) / sizeof(kRunners[0]) == kNumUnaryOps);
  kRunners[in.fn](in, names, a, b, d, n);
}

template <typename Op, typename T>
void RunBinaryOp(int kind, const T* __restrict a, const T* __restrict b, const T* __restrict c, T* __restrict d,
                 int64_t n) {
  if (kind == kBinary) {
    for (int64_t i = 0; i < n; ++i) d[i] = Op::template Fwd<T>(a[i], b[i]);
  } else if constexpr (!std::is_same_v<Op, binary_fn::DivOp> && !std::is_same_v<Op, binary_fn::MaxOp> &&
                       !std::is_same_v<Op, binary_fn::MinOp>) {
    if (kind == kBinaryDx) {
      for (int64_t i = 0; i < n; ++i) d[i] = Op::template Dx<T>(a[i], b[i], c[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = Op::template Dy<T>(a[i], b[i], c[i]);
    }
  } else {
    FL_THROW("fused_elementwise: ", kBinaryOps[2], " and the ops before it only have gradient instructions");
  }
}

template <typename T>
void RunBinary(const Instr& in, const T* a, const T* b, const T* c, T* d, int64_t n) {
  switch (in.fn) {
    case 0: return RunBinaryOp<binary_fn::AddOp>(in.kind, a, b, c, d, n);
    case 1: return RunBinaryOp<binary_fn::SubOp>(in.kind, a, b, c, d, n);
    case 2: return RunBinaryOp<binary_fn::MulOp>(in.kind, a, b, c, d, n);
    case 3: return RunBinaryOp<binary_fn::DivOp>(in.kind, a, b, c, d, n);
    case 4: return RunBinaryOp<binary_fn::MaxOp>(in.kind, a, b, c, d, n);
    case 5: return RunBinaryOp<binary_fn::MinOp>(in.kind, a, b, c, d, n);
  }
  FL_THROW("fused_elementwise: unknown binary function ", in.fn);
}

template <typename T>
void Kernel(const ExecutionContext& ctx) {
  Program& p = ctx.State<Program>();
  if (!p.ready) Decode(ctx, p);
  const Tensor& ref = ctx.Input("X", p.ref);
  const DDim dims = ref.dims();
  const int64_t numel = ref.numel();
  std::vector<const T*> in(p.n_in, nullptr);
  std::vector<Broadcast> bc(p.n_in);
  std::vector<int> gathered;  // inputs gathered per tile
  for (int i = 0; i < p.n_in; ++i) {
    const Tensor& t = ctx.Input("X", i);
    in[i] = t.data<T>();
    if (p.columns[i] >= 0) {
      bc[i].offset = p.columns[i];
      bc[i].width = dims.size() ? dims[dims.size() - 1] : 1;
      bc[i].stride = t.dims().size() ? t.dims()[t.dims().size() - 1] : 1;
    } else if (p.axes[i] != kFullInput) {
      bc[i].plan =
          MakeBroadcastPlan(dims, t.dims(), p.axes[i], ctx.Type(), ctx.InputName("X", p.ref), ctx.InputName("X", i));
    } else {
      continue;
    }
    gathered.push_back(i);
  }
  std::vector<T*> out(p.out_slot.size());
  for (size_t j = 0; j < out.size(); ++j)
    out[j] = ctx.Output("Out", static_cast<int>(j))->template mutable_data<T>(ctx.place());
  // Broadcast inputs whose values repeat with one period P <= 4 kTile (a bias row [N]: P = N; a channel bias [C]
  // against [N, C, H, W]: P = C H W; a scalar: P = 1) are gathered once: the tiles are a multiple of P long, so every
  // tile sees the same values.
  int64_t tile = kTile, period = -1;
  for (int i : gathered) {
    if (bc[i].offset >= 0) {
      period = 0;  // a column view: gathered per tile
      break;
    }
    const BroadcastPlan& bp = bc[i].plan;
    int k = 0;  // the outer dims the input is broadcast along: its values repeat every P elements
    while (k < bp.rank && bp.ys[k] == 0) ++k;
    int64_t P = 1;
    for (int d = k; d < bp.rank; ++d) P *= bp.dims[d];
    if (period < 0) period = P;
    if (P != period) period = 0;
  }
  const bool shared = period > 0 && period <= 4 * kTile && numel > period;
  if (shared) tile = period * std::max<int64_t>(1, kTile / period);
  const int64_t tiles = (numel + tile - 1) / tile;
  const int n_scratch = p.n_buffers + static_cast<int>(gathered.size());
  std::vector<T> prefilled;
  if (shared) {
    prefilled.resize(static_cast<size_t>(gathered.size() * tile));
    for (size_t g = 0; g < gathered.size(); ++g)
      Gather(bc[gathered[g]], in[gathered[g]], 0, tile, prefilled.data() + g * tile);
  }
  ParallelFor(tiles, std::max<int64_t>(1, kMinParallelElements / tile), [&](int64_t t0, int64_t t1) {
    thread_local std::vector<char> scratch;
    const size_t bytes = static_cast<size_t>(n_scratch) * tile * sizeof(T) + 64;
    if (scratch.size() < bytes) scratch.resize(bytes);
    T* base = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t(63));
    std::vector<T*> slot(p.n_slots);
    std::vector<const T*> cslot(p.n_slots);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t begin = t * tile;
      const int64_t n = std::min(tile, numel - begin);
      for (int i = 0; i < p.n_in; ++i) cslot[i] = in[i] + begin;
      for (size_t g = 0; g < gathered.size(); ++g) {
        if (shared) {
          cslot[gathered[g]] = prefilled.data() + g * tile;
          continue;
        }
        T* buf = base + (p.n_buffers + g) * tile;
        Gather(bc[gathered[g]], in[gathered[g]], begin, n, buf);
        cslot[gathered[g]] = buf;
      }
      for (int s = p.n_in; s < p.n_slots; ++s) {
        slot[s] = p.out_of[s] >= 0 ? out[p.out_of[s]] + begin : base + std::max(p.buffer[s], 0) * tile;
        cslot[s] = slot[s];
      }
      for (const Instr& ins : p.code) {
        const T* a = cslot[ins.a];
        const T* b = ins.b >= 0 ? cslot[ins.b] : a;
        const T* c = ins.c >= 0 ? cslot[ins.c] : a;
        T* d = slot[ins.dst];
        switch (ins.kind) {
          case kUnary:
          case kUnaryGrad: RunUnary<T>(ins, p.unary_params[ins.fn], a, b, d, n); break;
          case kScale: {
            const ScaleFn<T> f(ins.params[0], ins.params[1], ins.params[2] != 0.0f);
            for (int64_t i = 0; i < n; ++i) d[i] = f(a[i]);
            break;
          }
          default: RunBinary<T>(ins, a, b, c, d, n);
        }
      }
    }
  });
}

// Build-time checks of the program (attributes only): every slot read is written first, every output is a slot.
void CheckProgram(const OpCheckContext& ctx) {
  const auto& code = ctx.Attr<std::vector<int32_t>>("code");
  const auto& params = ctx.Attr<std::vector<float>>("params");
  const auto& outs = ctx.Attr<std::vector<int32_t>>("outputs");
  const auto& axes = ctx.Attr<std::vector<int32_t>>("axes");
  const int n_in = ctx.InputSize("X");
  FL_ENFORCE(!code.empty() && code.size() % kCodeWidth == 0, "fused_elementwise: code has ", code.size(),
             " values, expected a positive multiple of ", kCodeWidth);
  const int n = static_cast<int>(code.size()) / kCodeWidth;
  FL_ENFORCE(static_cast<int>(params.size()) == n * kParamWidth, "fused_elementwise: params has ", params.size(),
             " values, expected ", n * kParamWidth, " (", kParamWidth, " per instruction)");
  FL_ENFORCE(static_cast<int>(axes.size()) == n_in, "fused_elementwise: axes has ", axes.size(),
             " values, expected one per input X (", n_in, ")");
  const auto& columns = ctx.Attr<std::vector<int32_t>>("column_offsets");
  FL_ENFORCE(columns.empty() || columns.size() == axes.size(), "fused_elementwise: column_offsets has ", columns.size(),
             " values, expected none or one per input X (", n_in, ")");
  bool has_ref = false;
  for (size_t i = 0; i < axes.size(); ++i)
    has_ref = has_ref || (axes[i] == kFullInput && (columns.empty() || columns[i] < 0));
  FL_ENFORCE(has_ref, "fused_elementwise: no input has the output's shape (all broadcast or column views)");
  for (int k = 0; k < n; ++k) {
    const int32_t* c = &code[k * kCodeWidth];
    const int kind = c[0], fn = c[1];
    FL_ENFORCE(kind >= 0 && kind < kNumKinds, "fused_elementwise: instruction ", k, " has unknown kind ", kind);
    const int n_fn = kind <= kUnaryGrad ? kNumUnaryOps
                     : kind == kScale   ? 1
                     : kind == kBinary  ? kNumBinaryOps
                                        : kNumBinaryGrads;
    FL_ENFORCE(fn >= 0 && fn < n_fn, "fused_elementwise: instruction ", k, " has function ", fn, ", expected [0, ",
               n_fn, ")");
    FL_ENFORCE(c[2] == n_in + k, "fused_elementwise: instruction ", k, " writes slot ", c[2], ", expected ", n_in + k);
    const int needed = kind == kUnary || kind == kScale ? 1 : kind == kBinary || kind == kUnaryGrad ? 2 : 3;
    for (int o = 0; o < 3; ++o) {
      const int s = c[3 + o];
      if (o < needed && (kind < kBinaryDx || o == 2))
        FL_ENFORCE(s >= 0, "fused_elementwise: instruction ", k, " lacks operand ", o);
      FL_ENFORCE(s < n_in + k, "fused_elementwise: instruction ", k, " reads slot ", s,
                 " before it is written (slots below ", n_in + k, " are)");
    }
  }
  FL_ENFORCE(static_cast<int>(outs.size()) == ctx.OutputSize("Out"), "fused_elementwise: outputs has ", outs.size(),
             " slots for ", ctx.OutputSize("Out"), " Out variables");
  for (int32_t s : outs)
    FL_ENFORCE(s >= n_in && s < n_in + n, "fused_elementwise: output slot ", s, " is not an instruction's (", n_in,
               " .. ", n_in + n - 1, ")");
}

void InferFused(InferShapeContext& ctx) {
  const auto& axes = ctx.Attr<std::vector<int32_t>>("axes");
  std::vector<int32_t> columns = ctx.Attr<std::vector<int32_t>>("column_offsets");
  columns.resize(axes.size(), -1);
  int ref = -1;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == kFullInput && columns[i] < 0) {
      ref = static_cast<int>(i);
      break;
    }
  const DDim dims = ctx.InputDim("X", ref);
  const DType dtype = ctx.InputDType("X", ref);
  for (int i = 0; i < ctx.InputSize("X"); ++i) {
    const DDim d = ctx.InputDim("X", i);
    const DType dt = ctx.InputDType("X", i);
    FL_ENFORCE(dt == dtype || dt == DType::UNDEFINED || dtype == DType::UNDEFINED, ctx.Type(), ": X[", i, "] '",
               ctx.InputName("X", i), "' is ", DTypeName(dt), " but X[", ref, "] '", ctx.InputName("X", ref), "' is ",
               DTypeName(dtype));
    if (columns[i] >= 0) {  // [rows, stride] holding the output's [rows, width] at column columns[i]
      const int64_t width = dims.size() ? dims[dims.size() - 1] : 1;
      const bool fits =
          d.size() == 2 && dims.size() == 2 && (!ctx.IsRuntime() || (d[0] == dims[0] && columns[i] + width <= d[1]));
      FL_ENFORCE(fits, ctx.Type(), ": X[", i, "] '", ctx.InputName("X", i), "' ", d, " does not hold columns ",
                 columns[i], " .. ", columns[i] + width - 1, " of the chain's shape ", dims, " (X[", ref, "] '",
                 ctx.InputName("X", ref), "')");
    } else if (axes[i] == kFullInput) {
      bool same = d.size() == dims.size();
      for (int k = 0; same && k < d.size(); ++k)
        same = d[k] == dims[k] || (!ctx.IsRuntime() && (d[k] < 0 || dims[k] < 0));
      FL_ENFORCE(same, ctx.Type(), ": X[", i, "] '", ctx.InputName("X", i), "' has dims ", d, " but X[", ref, "] '",
                 ctx.InputName("X", ref), "' has ", dims, "; inputs of the fused chain must have the same shape");
    } else {
      const DDim out = BroadcastOutDims(dims, d, axes[i], ctx.Type(), ctx.InputName("X", ref), ctx.InputName("X", i));
      FL_ENFORCE(out == dims || !ctx.IsRuntime(), ctx.Type(), ": X[", i, "] '", ctx.InputName("X", i), "' ", d,
                 " broadcasts X[", ref, "] '", ctx.InputName("X", ref), "' ", dims, " to ", out,
                 "; a fused chain's broadcast inputs must fit inside its shape");
    }
  }
  for (int j = 0; j < ctx.OutputSize("Out"); ++j) {
    ctx.SetOutput("Out", dims, dtype, j);
    ctx.ShareLoD("X", "Out", ref, j);
  }
}

}  // namespace

FL_REGISTER_OP(fused_elementwise, op) {
  op.Doc(
        "A chain of elementwise ops (and their gradients) run as one pass over the data, tile by tile: the "
        "program `code` over the inputs X, whose slots `outputs` are written to Out. Emitted by the "
        "fuse_elementwise_chains and fuse_elewise_add_act passes; `fused_ops` names the ops it replaced.")
      .DuplicableInput("X", "the chain's inputs: the output's shape, or broadcast into it by axes[i]")
      .DuplicableOutput("Out", "the chain's values that are read outside it, all of the output's shape")
      .Attr<std::vector<int32_t>>("code", {}, "instructions, 6 ints each: kind, function, dst, a, b, c")
      .Attr<std::vector<float>>("params", {}, "3 floats per instruction: the fused op's attributes")
      .Attr<std::vector<int32_t>>("outputs", {}, "the slot each Out takes")
      .Attr<std::vector<int32_t>>("axes", {}, "per input: -2 (the output's shape) or the broadcast axis")
      .Attr<std::vector<int32_t>>("column_offsets", {},
                                  "per input: -1, or the first column of the output's [rows, width] in a 2-D input "
                                  "[rows, stride] (a split folded in); empty: all -1")
      .Attr<std::vector<std::string>>("fused_ops", {}, "the ops this op replaced, in program order")
      .Check(CheckProgram)
      .SetInferShape(InferFused)
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { Kernel<typename decltype(tag)::type>(ctx); });
}

}  // namespace fl
