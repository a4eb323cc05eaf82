// fuse_elementwise_chains (order 700): every connected group of elementwise ops of one shape -- the activations of
// kernels/unary.cc, elementwise_{add,sub,mul,div,max,min} (Y may broadcast into X by Fluid's axis rule), scale,
// sum over same-shaped inputs, and the gradients that stay elementwise (<activation>_grad, elementwise_{add,sub,
// mul}_grad whose outputs have the output's shape) -- becomes one fused_elementwise op (kernels/fused_elementwise.cc)
// that streams the data once. It works in every block, sub-blocks first (StaticRNN step blocks and their grad
// blocks: where a recurrent cell's ops live). A value the group computes stays an output of the fused op when
// anything else reads it (another op, another block, a fetch) or it is persistable; the others are never written.
// A gradient that needs a reduction over broadcast dims (a bias gradient) ends the group. A split along dim 1 whose
// parts only the group reads is folded in (the parts are read in place, as column views), and plain copies (an
// identity scale, the X@GRAD of elementwise_add_grad) are removed, their readers reading the source (ForwardCopies).
//
// fuse_elewise_add_act (order 600): Fluid's fuse_elewise_add_act_ops, the same machinery restricted to pairs of an
// elementwise_add and an activation (act(add(x, y)) or add(act(x), y)), and the pairs of their gradients.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "../helpers/fused_elementwise.h"
#include "enforce.h"
#include "executor.h"  // CheckNanInf
#include "op_registry.h"
#include "pass.h"

namespace fl {

namespace {

using namespace fused;  // NOLINT: the instruction set

constexpr const char* kEmpty = "@EMPTY@";

// One instruction over variable names: dst = kind/fn(srcs).
struct NamedInstr {
  int kind, fn;
  std::string dst;
  std::string src[3];
  float params[kParamWidth] = {0, 0, 0};
};

// What one fusible op computes, as instructions, and the shape it works on.
struct Node {
  std::vector<int64_t> dims;
  DType dtype = DType::UNDEFINED;
  std::vector<NamedInstr> code;
  std::map<std::string, int32_t> broadcast;  // inputs read broadcast: name -> axis
  bool is_add = false, is_act = false;       // for fuse_elewise_add_act
};

const VarDesc* FindVar(const BlockDesc& block, const std::string& name) {
  return name.empty() || name == kEmpty ? nullptr : block.FindVarRecursive(name);
}

// A float or bool attribute of `op` as a float (its registered default when the desc does not set it).
float FloatParam(const OpDesc& op, const AttrSpec& spec) {
  const Attribute& a = op.HasAttr(spec.name) ? op.GetAttr(spec.name) : spec.default_value;
  if (auto* f = std::get_if<float>(&a)) return *f;
  if (auto* b = std::get_if<bool>(&a)) return *b ? 1.0f : 0.0f;
  return 0.0f;
}

bool UnaryParams(const OpDesc& op, const std::string& unary_type, float* params) {
  int k = 0;
  for (const AttrSpec& spec : OpRegistry::Instance().Get(unary_type).attrs) {
    if (spec.type() != AttrType::FLOAT && spec.type() != AttrType::BOOLEAN) continue;
    if (k == kParamWidth) return false;
    params[k++] = FloatParam(op, spec);
  }
  return true;
}

const std::string& One(const OpDesc& op, const char* slot, bool input) {
  static const std::string none;
  const auto& args = input ? op.Input(slot) : op.Output(slot);
  return args.size() == 1 && args[0] != kEmpty ? args[0] : none;
}

// The node of a fusible op, or false. Shapes come from the VarDescs: inputs of the op's shape must have the same
// dims (an unknown -1 dim matches the same -1), a broadcast operand only in a forward binary op's Y.
bool Analyze(const BlockDesc& block, const OpDesc& op, Node* node) {
  const std::string& type = op.type();
  auto var = [&](const std::string& n) { return FindVar(block, n); };
  auto same = [&](const std::string& n) {
    const VarDesc* v = var(n);
    return v && v->kind() == VarKind::LOD_TENSOR && v->shape() == node->dims && v->dtype() == node->dtype;
  };
  auto start = [&](const std::string& shaped_like) {
    const VarDesc* v = var(shaped_like);
    if (!v || v->kind() != VarKind::LOD_TENSOR || v->shape().empty()) return false;
    if (v->dtype() != DType::FP32 && v->dtype() != DType::FP64) return false;
    node->dims = v->shape();
    node->dtype = v->dtype();
    return true;
  };
  if (op.HasAttr("sub_block")) return false;
  if (int fn = UnaryIndex(type); fn >= 0) {
    const std::string &x = One(op, "X", true), &out = One(op, "Out", false);
    if (x.empty() || out.empty() || !start(out) || !same(x)) return false;
    NamedInstr in{kUnary, fn, out, {x, "", ""}};
    if (!UnaryParams(op, type, in.params)) return false;
    node->code.push_back(in);
    node->is_act = true;
    return true;
  }
  if (type.size() > 5 && type.compare(type.size() - 5, 5, "_grad") == 0) {
    const std::string fwd = type.substr(0, type.size() - 5);
    if (int fn = UnaryIndex(fwd); fn >= 0) {
      const std::string& g = One(op, "Out@GRAD", true);
      const std::string& dx = One(op, "X@GRAD", false);
      const std::string& v = op.HasInput("Out") ? One(op, "Out", true) : One(op, "X", true);
      if (g.empty() || dx.empty() || v.empty() || !start(dx) || !same(g) || !same(v)) return false;
      NamedInstr in{kUnaryGrad, fn, dx, {v, g, ""}};
      if (!UnaryParams(op, fwd, in.params)) return false;
      node->code.push_back(in);
      node->is_act = true;
      return true;
    }
    if (int fn = BinaryIndex(fwd); fn >= 0 && fn < kNumBinaryGrads) {
      const std::string &x = One(op, "X", true), &y = One(op, "Y", true), &g = One(op, "Out@GRAD", true);
      const std::string &dx = One(op, "X@GRAD", false), &dy = One(op, "Y@GRAD", false);
      if (x.empty() || y.empty() || g.empty() || (dx.empty() && dy.empty()) || !start(g)) return false;
      // Every gradient it writes has the output's shape (no reduction); so do X and Y, or Y broadcasts.
      if (!same(x)) return false;
      if (!dy.empty() && !same(y)) return false;
      if (!same(y)) {
        const VarDesc* yv = var(y);
        if (!yv || yv->kind() != VarKind::LOD_TENSOR || yv->dtype() != node->dtype) return false;
        node->broadcast[y] = op.HasAttr("axis") ? op.Attr<int32_t>("axis") : -1;
      }
      if (!dx.empty()) {
        if (!same(dx)) return false;
        node->code.push_back(
            {kBinaryDx,
             fn,
             dx,
             {BinaryGradReads(fn, true, true) ? x : "", BinaryGradReads(fn, true, false) ? y : "", g}});
      }
      if (!dy.empty()) {
        if (!same(dy)) return false;
        node->code.push_back(
            {kBinaryDy,
             fn,
             dy,
             {BinaryGradReads(fn, false, true) ? x : "", BinaryGradReads(fn, false, false) ? y : "", g}});
      }
      if (node->broadcast.count(y) && !BinaryGradReads(fn, true, false)) node->broadcast.erase(y);
      node->is_add = fn == 0;
      return true;
    }
    return false;
  }
  if (int fn = BinaryIndex(type); fn >= 0) {
    const std::string &x = One(op, "X", true), &y = One(op, "Y", true), &out = One(op, "Out", false);
    if (x.empty() || y.empty() || out.empty() || !start(out) || !same(x)) return false;
    if (!same(y)) {  // Y broadcasts into X: Y's dims must be known (the plan is made at run time)
      const VarDesc* yv = var(y);
      if (!yv || yv->kind() != VarKind::LOD_TENSOR || yv->dtype() != node->dtype || yv->shape().empty()) return false;
      for (int64_t d : yv->shape())
        if (d < 0) return false;
      node->broadcast[y] = op.HasAttr("axis") ? op.Attr<int32_t>("axis") : -1;
    }
    node->code.push_back({kBinary, fn, out, {x, y, ""}});
    node->is_add = fn == 0;
    return true;
  }
  if (type == "scale") {
    const std::string &x = One(op, "X", true), &out = One(op, "Out", false);
    if (x.empty() || out.empty() || !start(out) || !same(x)) return false;
    NamedInstr in{kScale, 0, out, {x, "", ""}};
    in.params[0] = op.HasAttr("scale") ? op.Attr<float>("scale") : 1.0f;
    in.params[1] = op.HasAttr("bias") ? op.Attr<float>("bias") : 0.0f;
    in.params[2] = !op.HasAttr("bias_after_scale") || op.Attr<bool>("bias_after_scale") ? 1.0f : 0.0f;
    node->code.push_back(in);
    return true;
  }
  if (type == "sum") {
    const auto& xs = op.Input("X");
    const std::string& out = One(op, "Out", false);
    if (xs.size() < 2 || out.empty() || !start(out)) return false;
    for (auto& x : xs)
      if (x == kEmpty || !same(x)) return false;
    // sum adds left to right ((x0 + x1) + x2 ...): the same chain of adds.
    std::string acc = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) {
      const std::string dst = i + 1 == xs.size() ? out : out + "@fused_sum_" + std::to_string(i);
      node->code.push_back({kBinary, 0, dst, {acc, xs[i], ""}});
      acc = dst;
    }
    return true;
  }
  return false;
}

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int Find(int i) { return parent[i] == i ? i : parent[i] = Find(parent[i]); }
  void Union(int a, int b) { parent[Find(a)] = Find(b); }
};

std::vector<std::string> FusedOpTypes(const BlockDesc& block, const std::vector<size_t>& members) {
  std::vector<std::string> types;
  for (size_t m : members) types.push_back(block.Op(m)->type());
  return types;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// Builds the fused op for `members` (ascending indices of block `b`) and puts it in their place. Returns false
// (changing nothing) when the group cannot be one op: an output that is also an input, or an order the move
// would change (ReplaceOps).
// The parts of a split along dim 1 of a 2-D input with known part widths: (part, first column) each.
bool SplitColumns(const BlockDesc& block, const OpDesc& op, std::vector<std::pair<std::string, int32_t>>* parts) {
  const std::string& x = One(op, "X", true);
  const VarDesc* xv = FindVar(block, x);
  if (x.empty() || !xv || xv->kind() != VarKind::LOD_TENSOR || xv->shape().size() != 2) return false;
  const int32_t axis = op.HasAttr("axis") ? op.Attr<int32_t>("axis") : 0;
  if (axis != 1 && axis != -1) return false;
  int32_t col = 0;
  for (const std::string& part : op.Output("Out")) {
    const VarDesc* v = FindVar(block, part);
    if (!v || v->shape().size() != 2 || v->shape()[1] <= 0) return false;
    parts->emplace_back(part, col);
    col += static_cast<int32_t>(v->shape()[1]);
  }
  return xv->shape()[1] < 0 || xv->shape()[1] == col;
}

// Builds the fused op for `members` (ascending indices of block `b`) and puts it in their place. A split whose parts
// only the group reads is folded in: its parts become column views of its input. Returns false (changing nothing)
// when the group cannot be one op: an output that is also an input, or an order the move would change (ReplaceOps).
bool FuseGroup(ProgramDesc& program, int b, std::vector<size_t> members, const std::vector<Node>& nodes,
               const VarUses& uses, const PassContext& ctx, PassResult& result) {
  BlockDesc& block = *program.Block(b);
  std::unordered_set<size_t> is_member(members.begin(), members.end());
  std::vector<NamedInstr> code;
  for (size_t m : members)
    for (const NamedInstr& in : nodes[m].code) code.push_back(in);
  std::unordered_set<std::string> produced;
  for (auto& in : code) produced.insert(in.dst);
  std::map<std::string, std::pair<std::string, int32_t>> views;  // split part -> (split input, first column)
  std::vector<std::string> internal;
  for (auto& in : code)
    for (auto& s : in.src) {
      const auto& writers = uses.Writers(s);
      if (s.empty() || produced.count(s) || views.count(s) || writers.size() != 1 || writers[0].block != b) continue;
      const size_t si = static_cast<size_t>(writers[0].op);
      std::vector<std::pair<std::string, int32_t>> parts;
      if (block.Op(si)->type() != "split" || !SplitColumns(block, *block.Op(si), &parts)) continue;
      bool only_ours = true;
      for (auto& [part, col] : parts) {
        only_ours = only_ours && IsRemovableTemporary(program, b, part, uses, ctx) && uses.Writers(part).size() == 1;
        for (const VarUses::Use& u : uses.Readers(part))
          only_ours = only_ours && u.block == b && is_member.count(static_cast<size_t>(u.op));
      }
      if (!only_ours) continue;
      for (auto& [part, col] : parts) {
        views[part] = {One(*block.Op(si), "X", true), col};
        internal.push_back(part);
      }
      members.insert(std::upper_bound(members.begin(), members.end(), si), si);
    }
  std::vector<std::string> inputs;  // slot order
  std::vector<int32_t> axes, columns;
  std::unordered_map<std::string, int> slot;  // input or instruction slot of each name, in program order
  std::unordered_set<std::string> written;
  for (size_t k = 0; k < code.size(); ++k) {
    for (auto& s : code[k].src) {
      if (s.empty() || slot.count(s) || written.count(s)) continue;  // an input seen, or an earlier result
      if (produced.count(s)) return false;  // read before the group writes it (an op in place): not one op
      slot[s] = static_cast<int>(inputs.size());
      auto view = views.find(s);
      inputs.push_back(view == views.end() ? s : view->second.first);
      columns.push_back(view == views.end() ? -1 : view->second.second);
      int32_t axis = kFullInput;
      for (size_t m : members)
        if (auto it = nodes[m].broadcast.find(s); it != nodes[m].broadcast.end()) axis = it->second;
      axes.push_back(axis);
    }
    written.insert(code[k].dst);
  }
  bool has_ref = false;
  for (size_t i = 0; i < axes.size(); ++i) has_ref = has_ref || (axes[i] == kFullInput && columns[i] < 0);
  if (!has_ref) return false;
  const int n_in = static_cast<int>(inputs.size());
  std::vector<int32_t> flat;
  std::vector<float> params;
  for (size_t k = 0; k < code.size(); ++k) {
    const NamedInstr& in = code[k];
    if (slot.count(in.dst)) return false;  // written after being read as an input: not one op
    slot[in.dst] = n_in + static_cast<int>(k);
    flat.insert(flat.end(), {in.kind, in.fn, n_in + static_cast<int32_t>(k)});
    for (auto& s : in.src) flat.push_back(s.empty() ? -1 : slot.at(s));
    params.insert(params.end(), in.params, in.params + kParamWidth);
  }
  // Outputs: what anything outside the group reads, and what may not go unwritten.
  std::vector<std::string> outs;
  std::vector<int32_t> out_slots;
  for (auto& in : code) {
    if (in.dst.find("@fused_sum_") != std::string::npos) continue;
    bool outside = !IsRemovableTemporary(program, b, in.dst, uses, ctx);
    for (const VarUses::Use& u : uses.Readers(in.dst))
      if (u.block != b || !is_member.count(static_cast<size_t>(u.op))) outside = true;
    if (outside) {
      outs.push_back(in.dst);
      out_slots.push_back(slot.at(in.dst));
    } else {
      internal.push_back(in.dst);
    }
  }
  if (outs.empty()) return false;
  OpDesc fused("fused_elementwise");
  fused.SetInput("X", inputs);
  fused.SetOutput("Out", outs);
  fused.SetAttr("code", flat);
  fused.SetAttr("params", params);
  fused.SetAttr("outputs", out_slots);
  fused.SetAttr("axes", axes);
  if (!views.empty()) fused.SetAttr("column_offsets", columns);
  const std::vector<std::string> types = FusedOpTypes(block, members);
  fused.SetAttr("fused_ops", types);
  if (!ReplaceOps(block, members, fused)) return false;
  RemoveUnusedVars(program, b, internal);
  ++result.changes;
  result.details.push_back(Str("block ", b, ": ", members.size(), " ops [", Join(types, ", "),
                               "] -> fused_elementwise (", n_in, " inputs, ", outs.size(),
                               " outputs: ", Join(outs, ", "), ")"));
  return true;
}

// The groups of block `b`: components of the producer -> consumer graph over fusible ops of one shape and dtype.
// With `pairs`, only an elementwise_add and an activation (or their gradients) joined pairwise.
std::vector<std::vector<size_t>> Groups(const ProgramDesc& program, int b, const std::vector<Node>& nodes,
                                        const std::vector<bool>& fusible, const VarUses& uses, bool pairs) {
  const BlockDesc& block = *program.Block(b);
  const size_t n = block.OpSize();
  UnionFind uf(n);
  std::vector<int> size(n, 1);
  for (size_t j = 0; j < n; ++j) {
    if (!fusible[j]) continue;
    for (auto& in : nodes[j].code)
      for (auto& s : in.src) {
        if (s.empty()) continue;
        const auto& writers = uses.Writers(s);
        if (writers.size() != 1 || writers[0].block != b) continue;
        const size_t i = static_cast<size_t>(writers[0].op);
        if (i >= j || !fusible[i] || nodes[i].dims != nodes[j].dims || nodes[i].dtype != nodes[j].dtype) continue;
        if (pairs) {
          const int ri = uf.Find(static_cast<int>(i)), rj = uf.Find(static_cast<int>(j));
          if (ri == rj || size[ri] != 1 || size[rj] != 1) continue;
          if (!((nodes[i].is_add && nodes[j].is_act) || (nodes[i].is_act && nodes[j].is_add))) continue;
          uf.Union(ri, rj);
          size[uf.Find(ri)] = 2;
        } else {
          uf.Union(static_cast<int>(i), static_cast<int>(j));
        }
      }
  }
  std::map<int, std::vector<size_t>> by_root;
  for (size_t i = 0; i < n; ++i)
    if (fusible[i]) by_root[uf.Find(static_cast<int>(i))].push_back(i);
  std::vector<std::vector<size_t>> groups;
  for (auto& [root, members] : by_root)
    if (members.size() >= 2) groups.push_back(members);
  return groups;
}

// Copies whose readers can read the source instead: scale(X, scale=1, bias=0) (backward makes two for every sum of
// two, as fc on a list has) and the X@GRAD of elementwise_add_grad / elementwise_sub_grad when X has the output's
// shape (dOut itself; the op keeps computing Y@GRAD). The copy goes when it is a temporary of the block that only the
// block's later ops read, and its source is written by nothing but an earlier op of the same block.
bool IsIdentityCopy(const BlockDesc& block, const OpDesc& op, std::string* src, std::string* dst) {
  if (op.type() == "scale") {
    if ((op.HasAttr("scale") && op.Attr<float>("scale") != 1.0f) ||
        (op.HasAttr("bias") && op.Attr<float>("bias") != 0.0f))
      return false;
    *src = One(op, "X", true);
    *dst = One(op, "Out", false);
  } else if (op.type() == "elementwise_add_grad" || op.type() == "elementwise_sub_grad") {
    const VarDesc* x = FindVar(block, One(op, "X", true));
    const VarDesc* g = FindVar(block, One(op, "Out@GRAD", true));
    if (!x || !g || x->shape() != g->shape()) return false;
    *src = One(op, "Out@GRAD", true);
    *dst = One(op, "X@GRAD", false);
  } else {
    return false;
  }
  const VarDesc *sv = FindVar(block, *src), *dv = FindVar(block, *dst);
  return sv && dv && *src != *dst && sv->shape() == dv->shape() && sv->dtype() == dv->dtype() &&
         sv->kind() == VarKind::LOD_TENSOR;
}

void ForwardCopies(ProgramDesc& program, const PassContext& ctx, PassResult& result) {
  for (int b = 0; b < static_cast<int>(program.Size()); ++b) {
    for (bool again = true; again;) {
      again = false;
      const VarUses uses(program);
      BlockDesc& block = *program.Block(b);
      for (size_t i = 0; i < block.OpSize() && !again; ++i) {
        OpDesc& op = *block.Op(i);
        std::string x, out;
        if (!IsIdentityCopy(block, op, &x, &out)) continue;
        if (!IsRemovableTemporary(program, b, out, uses, ctx) || uses.Writers(out).size() != 1) continue;
        const auto& xw = uses.Writers(x);
        if (xw.size() > 1 || (xw.size() == 1 && (xw[0].block != b || static_cast<size_t>(xw[0].op) > i))) continue;
        bool later = true;
        for (const VarUses::Use& u : uses.Readers(out)) later = later && u.block == b && static_cast<size_t>(u.op) > i;
        if (!later) continue;
        for (const VarUses::Use& u : uses.Readers(out)) block.Op(static_cast<size_t>(u.op))->RenameInput(out, x);
        const std::string type = op.type();
        if (type == "scale" || One(op, "Y@GRAD", false).empty()) block.RemoveOp(i, i + 1);
        else op.SetOutput("X@GRAD", {});
        RemoveUnusedVars(program, b, {out});
        ++result.changes;
        result.details.push_back(
            Str("block ", b, ": ", type, "'s copy '", out, "' of '", x, "' removed, its readers ", "read '", x, "'"));
        again = true;
      }
    }
  }
}

void FuseBlocks(ProgramDesc& program, const PassContext& ctx, PassResult& result, bool pairs) {
  std::unordered_set<const OpDesc*> refused;                         // ops of groups that could not become one op
  for (int b = static_cast<int>(program.Size()) - 1; b >= 0; --b) {  // sub-blocks first: grad blocks read forward
    for (bool again = true; again;) {
      again = false;
      const VarUses uses(program);
      const BlockDesc& block = *program.Block(b);
      const size_t n = block.OpSize();
      std::vector<Node> nodes(n);
      std::vector<bool> fusible(n, false);
      for (size_t i = 0; i < n; ++i) {
        const OpDesc* op = block.Op(i);
        if (refused.count(op) || !Analyze(block, *op, &nodes[i])) continue;
        if (pairs && !nodes[i].is_add && !nodes[i].is_act) continue;
        bool single_writer = true;  // each value it writes has no other writer (loop-carried or aggregated names)
        for (auto& in : nodes[i].code)
          if (in.dst.find("@fused_sum_") == std::string::npos && uses.Writers(in.dst).size() != 1)
            single_writer = false;
        fusible[i] = single_writer;
      }
      for (auto& members : Groups(program, b, nodes, fusible, uses, pairs)) {
        // The longest prefix that can move into one op (an op in between may read a value of the group); when
        // none can, its first op is left out and the block analysed again.
        bool fused = false;
        for (size_t len = members.size(); len >= 2 && !fused; --len)
          fused = FuseGroup(program, b, std::vector<size_t>(members.begin(), members.begin() + len), nodes, uses, ctx,
                            result);
        if (!fused) refused.insert(block.Op(members[0]));
        again = true;  // indices changed, or the refused op splits the group: analyse the block again
        break;
      }
    }
  }
}

// FLAGS_check_nan_inf names the op whose output is not finite, and the value: a fused op would leave the intermediate
// unwritten and name itself, so programs prepared with the check on are not fused.
bool SkippedForNanCheck(PassResult& result) {
  if (!CheckNanInf()) return false;
  result.details.push_back("skipped: FLAGS_check_nan_inf is on (it names the op that made a NaN or Inf)");
  return true;
}

}  // namespace

FL_REGISTER_PASS(fuse_elementwise_chains, 700,
                 "connected elementwise / activation / scale / sum ops of one shape (and their elementwise "
                 "gradients) -> one fused_elementwise op that streams the data once",
                 [](ProgramDesc& program, const PassContext& ctx, PassResult& result) {
                   if (SkippedForNanCheck(result)) return;
                   ForwardCopies(program, ctx, result);
                   FuseBlocks(program, ctx, result, false);
                 });

FL_REGISTER_PASS(fuse_elewise_add_act, 600,
                 "elementwise_add + activation pairs (and their gradient pairs) -> fused_elementwise "
                 "(Fluid's fuse_elewise_add_act_ops)",
                 [](ProgramDesc& program, const PassContext& ctx, PassResult& result) {
                   if (SkippedForNanCheck(result)) return;
                   FuseBlocks(program, ctx, result, true);
                 });

}  // namespace fl
