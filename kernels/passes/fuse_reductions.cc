// fuse_reductions (order 500): reductions of one variable x with the same axes become one fused_reduce op
// (kernels/fused_reduce.cc) that reads x once. A group is the reduce_sum / reduce_mean / reduce_max / mean ops of one
// block with the same x, the same normalised `dim` (or reduce_all; `mean` is reduce_mean of every axis) and the
// same keep_dim, where a reduction's input is x itself or an elementwise function of it made by ops the group
// absorbs:
//   x * x: elementwise_mul(x, x), elementwise_mul(x, t) or (t, x) with t = assign(x) or scale(x, scale=1, bias=0)
//          (the tuning notes' "identity"), square(x);
//   (x - m)^2: the same square of d = elementwise_sub(x, m) where m = reduce_mean(x, keep_dim=True) is in the group
//          (a variance around the group's mean).
// So the notes' program reduce_sum(x, dim=[1]); reduce_sum(x * identity(x), dim=[1]) becomes one op writing both
// sums, and so does a mean with its mean of squares or its variance, or reduce_max / reduce_sum / reduce_mean of
// the same x. A lone reduction of x * x fuses too (x * x never materialises). The results are bit for bit those of
// the unfused ops (fused_reduce accumulates in their order).
//
// A product, deviation or identity output is absorbed only when it is a removable temporary (pass.h: not fetched,
// persistable or named by another block) whose readers are the group's ops, or readers that the pass can point at x
// instead without changing their meaning:
//   - a reader of t = identity(x) reads x (t == x as values; the rewrite needs no write of x between t's writer
//     and the reader), e.g. elementwise_mul_grad's Y in a training program;
//   - reduce_sum_grad / reduce_mean_grad read their X only for its shape: x * x has x's shape, so X = x.
// Otherwise the product stays and its reduction is one of the product's (it groups with other reductions of it).
// The backward ops stay as they are (they read the same names: the fused op writes every reduction's Out).
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "op_registry.h"
#include "pass.h"

namespace fl {

namespace {

// `mean` is reduce_mean over every axis (Out [1]).
bool IsReduce(const std::string& t) {
  return t == "reduce_sum" || t == "reduce_mean" || t == "reduce_max" || t == "mean";
}

// assign(x) or scale(x) with scale 1 and bias 0: the same values as x (scale's x * 1 + 0 turns -0 into +0, which
// compares equal).
bool IsIdentity(const OpDesc& op) {
  if (op.type() == "assign") return op.Input("X").size() == 1 && op.Output("Out").size() == 1;
  if (op.type() != "scale") return false;
  auto f = [&](const char* a, float d) { return op.HasAttr(a) ? op.Attr<float>(a) : d; };
  return f("scale", 1.0f) == 1.0f && f("bias", 0.0f) == 0.0f;
}

// The grad ops that read `slot` only for its shape.
bool ReadsOnlyShape(const OpDesc& op, const std::string& slot) {
  return slot == "X" && (op.type() == "reduce_sum_grad" || op.type() == "reduce_mean_grad");
}

const std::string& Single(const OpDesc& op, const char* slot, bool input) {
  static const std::string none;
  const auto& args = input ? op.Input(slot) : op.Output(slot);
  return args.size() == 1 ? args[0] : none;
}

// One input rename in one op: op `op` of the block reads `to` instead of `from` in `slot` (all slots when empty).
struct Rename {
  size_t op;
  std::string slot, from, to;
};

struct Candidate {
  size_t op;                       // the reduction
  std::string x;                   // what it reduces (after absorbing the product)
  bool square = false;             // of x * x
  std::string centred;             // of (x - centred)^2 or exp(x - centred): the Out of the group's reduce_mean or
                                   // reduce_max(x, keep_dim=True)
  std::string exp_out;             // exp(x - centred), when the program reads it (fused_reduce's Exp output)
  std::vector<size_t> absorbed;    // the product op and its identity op
  std::vector<std::string> temps;  // their outputs, to remove
  std::vector<Rename> renames;     // readers pointed at x
  std::string reduction;           // fused_reduce's name for it
  std::string key;                 // the group: x, axes, keep_dim
  std::vector<int32_t> dim;        // the reduction's attributes (`mean`: every axis)
  bool keep_dim = false, reduce_all = false;
};

class Fuser {
 public:
  Fuser(ProgramDesc& program, int block, const PassContext& ctx, const VarUses& uses)
      : program_(program), b_(block), block_(*program.Block(block)), ctx_(ctx), uses_(uses) {}

  // Whether no op in (from, to) of this block writes `name`.
  bool UnwrittenBetween(const std::string& name, size_t from, size_t to) const {
    for (const auto& w : uses_.Writers(name))
      if (w.block == b_ && static_cast<size_t>(w.op) > from && static_cast<size_t>(w.op) < to) return false;
    return true;
  }

  // The single writer of `name` in this block, before `before`, or -1.
  int OnlyWriter(const std::string& name, size_t before) const {
    const auto& ws = uses_.Writers(name);
    if (ws.size() != 1 || ws[0].block != b_ || static_cast<size_t>(ws[0].op) >= before) return -1;
    return ws[0].op;
  }

  // Whether temporary `name` (written at `writer`) can go: every reader is in `members`, or can read `x` instead
  // (added to `renames`): any reader when `name` is an identity of x, the shape-only slots when it is x * x.
  bool CanAbsorb(const std::string& name, size_t writer, const std::string& x, bool identity,
                 const std::set<size_t>& members, std::vector<Rename>& renames) const {
    if (!IsRemovableTemporary(program_, b_, name, uses_, ctx_)) return false;
    std::set<size_t> seen;
    for (const auto& r : uses_.Readers(name)) {
      if (r.block != b_) return false;
      const size_t i = r.op;
      if (members.count(i) || !seen.insert(i).second) continue;
      if (i < writer || !UnwrittenBetween(x, writer, i)) return false;
      const OpDesc& op = *block_.Op(i);
      for (const auto& [slot, args] : op.inputs()) {
        if (std::find(args.begin(), args.end(), name) == args.end()) continue;
        if (!identity && !ReadsOnlyShape(op, slot)) return false;
        renames.push_back({i, slot, name, x});
      }
    }
    return true;
  }

  // The reduction at `i` as a candidate (its input, absorbed ops, group key), or false.
  bool Analyse(size_t i, Candidate& c, bool allow_centred) const {
    const OpDesc& op = *block_.Op(i);
    const std::string& v = Single(op, "X", true);
    if (v.empty() || Single(op, "Out", false).empty()) return false;
    c.op = i;
    c.x = v;
    if (op.type() != "reduce_max") AbsorbProduct(i, c);  // no max of squares: a max reduces the product as it is
    if (c.square && allow_centred) AbsorbDeviation(i, c);
    if (!c.square && allow_centred && op.type() == "reduce_sum") AbsorbExp(i, c);
    const VarDesc* xv = block_.FindVarRecursive(c.x);
    if (!xv || (xv->dtype() != DType::FP32 && xv->dtype() != DType::FP64)) return false;
    const bool mean = op.type() == "reduce_mean" || op.type() == "mean";
    c.reduction = op.type() == "reduce_max" ? "max"
                                            : std::string(mean ? "mean" : "sum") + (c.square ? "_square" : "") +
                                                  (c.centred.empty() ? ""
                                                   : c.square        ? "_dev"
                                                                     : "_exp_dev");
    // The key: x, the reduced axes (normalised with x's declared rank) or "all", keep_dim.
    const bool all = op.type() == "mean" || (op.HasAttr("reduce_all") && op.Attr<bool>("reduce_all"));
    const bool keep = op.type() != "mean" && op.HasAttr("keep_dim") && op.Attr<bool>("keep_dim");
    c.dim = op.HasAttr("dim") ? op.Attr<std::vector<int32_t>>("dim") : std::vector<int32_t>{0};
    c.keep_dim = keep;
    c.reduce_all = all;
    std::ostringstream key;
    key << c.x << "|" << keep << "|";
    if (all) {
      key << "all";
    } else {
      const int rank = static_cast<int>(xv->shape().size());
      std::set<int> axes;
      for (int d : c.dim) {
        if (d < 0 && rank == 0) return false;  // unknown rank: cannot tell dim=-1 from dim=1
        axes.insert(d < 0 ? d + rank : d);
      }
      for (int a : axes) key << a << ",";
    }
    c.key = key.str();
    return true;
  }

  // If the reduction's input is x * x made by an op it may absorb, records that in `c`.
  void AbsorbProduct(size_t i, Candidate& c) const {
    const std::string v = c.x;
    const int w = OnlyWriter(v, i);
    if (w < 0) return;
    const OpDesc& prod = *block_.Op(w);
    std::string x;
    int id = -1;  // the identity op absorbed with the product
    std::string t;
    if (prod.type() == "square") {
      x = Single(prod, "X", true);
    } else if (prod.type() == "elementwise_mul") {
      const std::string& a = Single(prod, "X", true);
      const std::string& b = Single(prod, "Y", true);
      if (a.empty() || b.empty()) return;
      if (a == b) {
        x = a;
      } else {
        for (const auto& [other, maybe_t] : {std::pair{a, b}, std::pair{b, a}}) {
          const int k = OnlyWriter(maybe_t, w);
          if (k >= 0 && IsIdentity(*block_.Op(k)) && Single(*block_.Op(k), "X", true) == other &&
              UnwrittenBetween(other, k, w)) {
            x = other;
            id = k;
            t = maybe_t;
            break;
          }
        }
      }
    }
    if (x.empty() || Single(prod, "Out", false) != v || !UnwrittenBetween(x, w, i)) return;
    std::set<size_t> members = {i, static_cast<size_t>(w)};
    std::vector<Rename> renames;
    if (!CanAbsorb(v, w, x, false, members, renames)) return;
    if (id >= 0) {
      members.insert(id);
      if (!CanAbsorb(t, id, x, true, members, renames)) return;
    }
    c.x = x;
    c.square = true;
    c.absorbed = {static_cast<size_t>(w)};
    c.temps = {v};
    if (id >= 0) {
      c.absorbed.push_back(id);
      c.temps.push_back(t);
    }
    c.renames = std::move(renames);
  }

  // If the square's operand is d = elementwise_sub(x, m) with m = reduce_mean(x, keep_dim=True) (a variance), and d
  // can go, records that in `c` (the group must then hold that reduce_mean: FuseOne checks).
  void AbsorbDeviation(size_t i, Candidate& c) const {
    const std::string d = c.x;
    const size_t prod = c.absorbed.front();
    const int s = OnlyWriter(d, prod);
    if (s < 0 || block_.Op(s)->type() != "elementwise_sub" || Single(*block_.Op(s), "Out", false) != d) return;
    const std::string& x = Single(*block_.Op(s), "X", true);
    const std::string& m = Single(*block_.Op(s), "Y", true);
    const int r = m.empty() ? -1 : OnlyWriter(m, s);
    if (x.empty() || r < 0) return;
    const OpDesc& mean = *block_.Op(r);
    if (mean.type() != "reduce_mean" || Single(mean, "X", true) != x || !mean.Attr<bool>("keep_dim") ||
        !UnwrittenBetween(x, r, i))
      return;
    std::set<size_t> members = {i, prod, static_cast<size_t>(s)};
    members.insert(c.absorbed.begin(), c.absorbed.end());
    std::vector<Rename> renames = c.renames;
    for (auto& n : renames) {  // the square's shape-only readers read x (d has x's shape: m broadcasts over it)
      if (n.to != d) continue;
      if (!ReadsOnlyShape(*block_.Op(n.op), n.slot)) return;  // an identity's reader would read d: d stays
      n.to = x;
    }
    if (!CanAbsorb(d, s, x, false, members, renames)) return;
    c.x = x;
    c.centred = m;
    c.absorbed.push_back(s);
    c.temps.push_back(d);
    c.renames = std::move(renames);
  }

  // If the reduction's input is e = exp(d), d = elementwise_sub(x, m), m = reduce_max(x, keep_dim=True) (softmax's
  // denominator written as ops) and d can go, records that in `c`: e goes too if nothing else reads it, else the
  // fused op writes it (its Exp output). The group must hold that reduce_max: FuseOne checks.
  void AbsorbExp(size_t i, Candidate& c) const {
    const std::string e = c.x;
    const int w = OnlyWriter(e, i);
    if (w < 0 || block_.Op(w)->type() != "exp" || Single(*block_.Op(w), "Out", false) != e) return;
    const std::string& d = Single(*block_.Op(w), "X", true);
    const int s = d.empty() ? -1 : OnlyWriter(d, w);
    if (s < 0 || block_.Op(s)->type() != "elementwise_sub" || Single(*block_.Op(s), "Out", false) != d) return;
    const std::string& x = Single(*block_.Op(s), "X", true);
    const std::string& m = Single(*block_.Op(s), "Y", true);
    const int r = m.empty() ? -1 : OnlyWriter(m, s);
    if (x.empty() || r < 0) return;
    const OpDesc& max = *block_.Op(r);
    if (max.type() != "reduce_max" || Single(max, "X", true) != x || !max.Attr<bool>("keep_dim") ||
        !UnwrittenBetween(x, r, i))
      return;
    const std::set<size_t> members = {i, static_cast<size_t>(w), static_cast<size_t>(s)};
    std::vector<Rename> renames;
    if (!CanAbsorb(d, s, x, false, members, renames)) return;
    std::vector<Rename> with_e = renames;
    if (CanAbsorb(e, w, x, false, members, with_e)) {
      renames = std::move(with_e);
      c.temps = {d, e};
    } else {
      c.temps = {d};
      c.exp_out = e;
    }
    c.x = x;
    c.centred = m;
    c.absorbed = {static_cast<size_t>(w), static_cast<size_t>(s)};
    c.renames = std::move(renames);
  }

  // Fuses the first group it can; false when there is none left.
  bool FuseOne(PassResult& result, std::set<std::string>& refused) {
    std::map<std::string, std::vector<Candidate>> groups;
    std::vector<std::string> order;
    std::vector<Candidate> all;
    std::set<std::pair<std::string, std::string>> centres;  // (key, "mean:" or "max:" + Out) of plain reductions
    for (size_t i = 0; i < block_.OpSize(); ++i) {
      if (!IsReduce(block_.Op(i)->type())) continue;
      Candidate c;
      if (!Analyse(i, c, true)) continue;
      if (c.reduction == "mean" || c.reduction == "max")
        centres.insert({c.key, c.reduction + ":" + Single(*block_.Op(i), "Out", false)});
      all.push_back(std::move(c));
    }
    for (auto& c : all) {
      // A variance whose mean, or a sum of exponentials whose max, is not in its group (other axes, no keep_dim)
      // reduces what it reduces without the pass absorbing anything.
      const std::string centre = c.square ? "mean:" : "max:";
      if (!c.centred.empty() && !centres.count({c.key, centre + c.centred})) {
        const size_t i = c.op;
        c = Candidate{};
        if (!Analyse(i, c, false)) continue;
      }
      if (!groups.count(c.key)) order.push_back(c.key);
      groups[c.key].push_back(std::move(c));
    }
    for (const auto& key : order) {
      auto& g = groups[key];
      const bool any_square = std::any_of(g.begin(), g.end(), [](const Candidate& c) { return c.square; });
      if ((g.size() < 2 && !any_square) || refused.count(key)) continue;
      if (Fuse(g, result)) return true;
      refused.insert(key);
    }
    return false;
  }

 private:
  bool Fuse(std::vector<Candidate>& g, PassResult& result) {
    // An absorbed op shared by two candidates (reduce_sum(p) and reduce_mean(p) of one p = x * x) is absorbed once.
    std::vector<size_t> members;
    std::vector<std::string> temps;
    for (auto& c : g) {
      members.push_back(c.op);
      members.insert(members.end(), c.absorbed.begin(), c.absorbed.end());
      temps.insert(temps.end(), c.temps.begin(), c.temps.end());
    }
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    std::sort(temps.begin(), temps.end());
    temps.erase(std::unique(temps.begin(), temps.end()), temps.end());
    OpDesc fused("fused_reduce");
    fused.SetInput("X", {g.front().x});
    std::vector<std::string> outs, reductions, fused_ops;
    for (auto& c : g) {
      outs.push_back(Single(*block_.Op(c.op), "Out", false));
      reductions.push_back(c.reduction);
      // An Out that is x (in place) or another reduction's Out cannot be one of fused_reduce's outputs.
      if (outs.back() == c.x || std::count(outs.begin(), outs.end(), outs.back()) > 1) return false;
    }
    for (size_t m : members) fused_ops.push_back(block_.Op(m)->type());
    fused.SetOutput("Out", outs);
    std::vector<std::string> exps;
    for (auto& c : g)
      if (!c.exp_out.empty()) exps.push_back(c.exp_out);
    if (exps.size() > 1) return false;  // one Exp output
    if (!exps.empty()) fused.SetOutput("Exp", exps);
    fused.SetAttr("dim", g.front().dim);
    fused.SetAttr("keep_dim", g.front().keep_dim);
    fused.SetAttr("reduce_all", g.front().reduce_all);
    fused.SetAttr("reductions", reductions);
    fused.SetAttr("fused_ops", fused_ops);
    // Renames first (they keep the program's meaning on their own), then the replacement.
    for (auto& c : g)
      for (auto& n : c.renames) {
        OpDesc* op = block_.Op(n.op);
        std::vector<std::string> args = op->Input(n.slot);
        std::replace(args.begin(), args.end(), n.from, n.to);
        op->SetInput(n.slot, args);
      }
    if (!ReplaceOps(block_, members, fused)) {
      if (!Hoist(members)) return false;
      const bool replaced = ReplaceOps(block_, members, fused);
      FL_ENFORCE(replaced, "fuse_reductions: ops ", members.front(), "..", members.back(), " of block ", b_,
                 " are contiguous but could not be replaced");
    }
    RemoveUnusedVars(program_, b_, temps);
    std::ostringstream d;
    d << "block " << b_ << ": " << members.size() << " ops (";
    for (size_t k = 0; k < fused_ops.size(); ++k) d << (k ? ", " : "") << fused_ops[k];
    d << ") over " << g.front().x << " -> fused_reduce(";
    for (size_t k = 0; k < outs.size(); ++k) d << (k ? ", " : "") << outs[k] << " = " << reductions[k];
    d << ")";
    result.details.push_back(d.str());
    ++result.changes;
    return true;
  }

  // ReplaceOps puts the fused op at the last member; when an op between reads what an earlier member writes (a
  // variance's mean * mean after the mean), it can go at the first member instead if every op between lets the
  // later members move up past it: it reads and writes none of their outputs and writes none of their inputs.
  // Then the members are moved up to follow the first (`members` becomes contiguous) and true is returned.
  bool Hoist(std::vector<size_t>& members) {
    const std::set<size_t> is_member(members.begin(), members.end());
    for (size_t n = members.front() + 1; n < members.back(); ++n) {
      if (is_member.count(n)) continue;
      const OpDesc& op = *block_.Op(n);
      if (op.HasAttr("sub_block") || op.HasAttr("sub_blocks")) return false;
      const auto reads = op.InputArgumentNames(), writes = op.OutputArgumentNames();
      auto touches = [](const std::vector<std::string>& names, const std::vector<std::string>& of) {
        return std::any_of(names.begin(), names.end(),
                           [&](const std::string& v) { return std::find(of.begin(), of.end(), v) != of.end(); });
      };
      for (size_t m : members) {
        if (m < n) continue;
        const auto m_out = block_.Op(m)->OutputArgumentNames(), m_in = block_.Op(m)->InputArgumentNames();
        if (touches(reads, m_out) || touches(writes, m_out) || touches(writes, m_in)) return false;
      }
    }
    std::vector<OpDesc> moved;
    for (size_t k = 1; k < members.size(); ++k) moved.push_back(*block_.Op(members[k]));
    for (size_t k = members.size() - 1; k >= 1; --k) block_.RemoveOp(members[k], members[k] + 1);
    for (size_t k = 0; k < moved.size(); ++k) {
      *block_.InsertOp(members.front() + 1 + k) = moved[k];
      members[k + 1] = members.front() + 1 + k;
    }
    return true;
  }

  ProgramDesc& program_;
  int b_;
  BlockDesc& block_;
  const PassContext& ctx_;
  const VarUses& uses_;
};

void FuseReductions(ProgramDesc& program, const PassContext& ctx, PassResult& result) {
  VarUses uses(program);  // rebuilt after every rewrite only
  for (size_t b = 0; b < program.Size(); ++b) {
    std::set<std::string> refused;
    for (;;) {
      Fuser f(program, static_cast<int>(b), ctx, uses);
      if (!f.FuseOne(result, refused)) break;
      uses = VarUses(program);
    }
  }
}

}  // namespace

FL_REGISTER_PASS(fuse_reductions, 500,
                 "reduce_sum/mean/max of one x (or of x * x) with the same axes -> one fused_reduce reading x once",
                 FuseReductions);

}  // namespace fl
