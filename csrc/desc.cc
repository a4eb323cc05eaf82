#include "desc.h"

#include <algorithm>

#include <atomic>
#include <cstring>
#include <sstream>

namespace fl {

const char* VarKindName(VarKind k) {
  switch (k) {
#define FL_VAR_KIND_NAME(name, value) \
  case VarKind::name: return #name;
    FL_FOR_EACH_VAR_KIND(FL_VAR_KIND_NAME)
#undef FL_VAR_KIND_NAME
  }
  return "UNKNOWN";
}

const char* AttrTypeName(AttrType t) {
  static const char* names[] = {"INT",     "FLOAT",    "STRING", "INTS", "FLOATS", "STRINGS",
                                "BOOLEAN", "BOOLEANS", "BLOCK",  "LONG", "BLOCKS", "LONGS"};
  int i = static_cast<int>(t);
  return i >= 0 && i < 12 ? names[i] : "UNKNOWN";
}

namespace {
template <typename T>
void ListToString(std::ostringstream& os, const std::vector<T>& v) {
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) os << ", ";
    if constexpr (std::is_same_v<T, std::string>) os << "'" << v[i] << "'";
    else if constexpr (std::is_same_v<T, bool>) os << (v[i] ? "True" : "False");
    else if constexpr (std::is_same_v<T, BlockRef>) os << "block[" << v[i].idx << "]";
    else os << v[i];
  }
  os << "]";
}
}  // namespace

std::string AttrToString(const Attribute& a) {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) os << "'" << v << "'";
        else if constexpr (std::is_same_v<T, bool>) os << (v ? "True" : "False");
        else if constexpr (std::is_same_v<T, BlockRef>) os << "block[" << v.idx << "]";
        else if constexpr (std::is_arithmetic_v<T>) os << v;
        else ListToString(os, v);
      },
      a);
  return os.str();
}

// ---------------------------------------------------------------- VarDesc / OpDesc

uint64_t DescId::Next() {
  static std::atomic<uint64_t> next{1};  // 0 means "no desc" to Python (BlockDesc.var_id)
  return next.fetch_add(1, std::memory_order_relaxed);
}

void VarDesc::Touch() {
  if (owner_) owner_->Touch();
}

std::string VarDesc::ShapeString() const {
  std::string s = "(";
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape_[i]);
  }
  return s + ")";
}

void OpDesc::Touch() {
  if (owner_) owner_->Touch();
}

namespace {
const std::vector<std::string>& Lookup(const VarNameMap& m, const std::string& slot) {
  static const std::vector<std::string> kEmpty;
  for (auto& kv : m)
    if (kv.first == slot) return kv.second;
  return kEmpty;
}
void Assign(VarNameMap& m, const std::string& slot, std::vector<std::string> args) {
  for (auto& kv : m)
    if (kv.first == slot) {
      kv.second = std::move(args);
      return;
    }
  m.emplace_back(slot, std::move(args));
}
}  // namespace

const std::vector<std::string>& OpDesc::Input(const std::string& slot) const { return Lookup(inputs_, slot); }
const std::vector<std::string>& OpDesc::Output(const std::string& slot) const { return Lookup(outputs_, slot); }
bool OpDesc::HasInput(const std::string& slot) const { return !Lookup(inputs_, slot).empty(); }
bool OpDesc::HasOutput(const std::string& slot) const { return !Lookup(outputs_, slot).empty(); }
void OpDesc::SetInput(const std::string& slot, std::vector<std::string> args) {
  Assign(inputs_, slot, std::move(args));
  Touch();
}
void OpDesc::SetOutput(const std::string& slot, std::vector<std::string> args) {
  Assign(outputs_, slot, std::move(args));
  Touch();
}
std::vector<std::string> OpDesc::InputArgumentNames() const {
  std::vector<std::string> r;
  for (auto& kv : inputs_) r.insert(r.end(), kv.second.begin(), kv.second.end());
  return r;
}
std::vector<std::string> OpDesc::OutputArgumentNames() const {
  std::vector<std::string> r;
  for (auto& kv : outputs_) r.insert(r.end(), kv.second.begin(), kv.second.end());
  return r;
}
void OpDesc::RenameInput(const std::string& from, const std::string& to) {
  for (auto& kv : inputs_)
    for (auto& a : kv.second)
      if (a == from) a = to;
  Touch();
}
void OpDesc::RenameOutput(const std::string& from, const std::string& to) {
  for (auto& kv : outputs_)
    for (auto& a : kv.second)
      if (a == from) a = to;
  Touch();
}

const Attribute& OpDesc::GetAttr(const std::string& name) const {
  auto it = attrs_.find(name);
  FL_ENFORCE(it != attrs_.end(), "op ", type_, " has no attribute '", name, "'");
  return it->second;
}

std::string OpDesc::CreationSite() const {
  auto it = attrs_.find("op_callstack");
  if (it == attrs_.end()) return "";
  auto* v = std::get_if<std::vector<std::string>>(&it->second);
  return v && !v->empty() ? v->front() : "";
}

// ---------------------------------------------------------------- BlockDesc

void BlockDesc::set_forward_block_idx(int i) {
  forward_block_idx_ = i;
  program_->Touch();
}

BlockDesc* BlockDesc::Parent() const { return parent_idx_ < 0 ? nullptr : program_->Block(parent_idx_); }

VarDesc* BlockDesc::Var(const std::string& name) {
  if (VarDesc* v = FindVar(name)) return v;
  vars_.push_back(std::make_shared<VarDesc>(name));
  VarDesc* v = vars_.back().get();
  v->SetOwner(program_);
  var_index_[name] = v;
  ++vars_version_;
  program_->Touch();
  return v;
}

VarDesc* BlockDesc::FindVar(const std::string& name) const {
  auto it = var_index_.find(name);
  return it == var_index_.end() ? nullptr : it->second;
}

VarDesc* BlockDesc::FindVarRecursive(const std::string& name) const {
  std::vector<const BlockDesc*> frontier{this}, seen;
  for (size_t i = 0; i < frontier.size(); ++i) {
    const BlockDesc* b = frontier[i];
    if (std::find(seen.begin(), seen.end(), b) != seen.end()) continue;
    seen.push_back(b);
    if (VarDesc* v = b->FindVar(name)) return v;
    if (b->forward_block_idx_ >= 0 && b->forward_block_idx_ < static_cast<int>(program_->Size()))
      frontier.push_back(program_->Block(b->forward_block_idx_));
    if (const BlockDesc* parent = b->Parent()) frontier.push_back(parent);
  }
  return nullptr;
}

void BlockDesc::RemoveVar(const std::string& name) {
  auto it = var_index_.find(name);
  if (it == var_index_.end()) return;
  VarDesc* p = it->second;
  var_index_.erase(it);
  for (auto v = vars_.begin(); v != vars_.end(); ++v)
    if (v->get() == p) {
      p->SetOwner(nullptr);  // a Python handle may keep it alive: its edits no longer touch this program
      vars_.erase(v);
      break;
    }
  ++vars_version_;
  program_->Touch();
}

OpDesc* BlockDesc::InsertOp(size_t index) {
  FL_ENFORCE(index <= ops_.size(), "op index ", index, " out of range (block has ", ops_.size(), " ops)");
  auto op = std::make_shared<OpDesc>();
  op->SetOwner(program_);
  OpDesc* p = op.get();
  ops_.insert(ops_.begin() + static_cast<long>(index), std::move(op));
  ++ops_version_;
  program_->Touch();
  return p;
}
OpDesc* BlockDesc::AppendOp() { return InsertOp(ops_.size()); }
OpDesc* BlockDesc::PrependOp() { return InsertOp(0); }

void BlockDesc::RemoveOp(size_t begin, size_t end) {
  FL_ENFORCE(begin <= end && end <= ops_.size(), "bad op range [", begin, ", ", end, ")");
  for (size_t i = begin; i < end; ++i) ops_[i]->SetOwner(nullptr);  // see RemoveVar
  ops_.erase(ops_.begin() + static_cast<long>(begin), ops_.begin() + static_cast<long>(end));
  ++ops_version_;
  program_->Touch();
}

// ---------------------------------------------------------------- ProgramDesc

static std::atomic<uint64_t> g_next_program_uid{1};

ProgramDesc::ProgramDesc() : uid_(g_next_program_uid++) { blocks_.push_back(std::make_unique<BlockDesc>(this, 0, -1)); }

ProgramDesc::ProgramDesc(const ProgramDesc& other) : uid_(g_next_program_uid++) {
  for (auto& b : other.blocks_) {
    auto nb = std::make_unique<BlockDesc>(this, b->idx_, b->parent_idx_);
    nb->forward_block_idx_ = b->forward_block_idx_;
    for (auto& v : b->vars_) {
      auto nv = std::make_shared<VarDesc>(*v);
      nv->SetOwner(this);
      nb->var_index_[nv->name()] = nv.get();
      nb->vars_.push_back(std::move(nv));
    }
    for (auto& o : b->ops_) {
      auto no = std::make_shared<OpDesc>(*o);
      no->SetOwner(this);
      nb->ops_.push_back(std::move(no));
    }
    blocks_.push_back(std::move(nb));
  }
}

BlockDesc* ProgramDesc::Block(size_t i) const {
  FL_ENFORCE(i < blocks_.size(), "block index ", i, " out of range (program has ", blocks_.size(), " blocks)");
  return blocks_[i].get();
}

BlockDesc* ProgramDesc::AppendBlock(const BlockDesc& parent) {
  blocks_.push_back(std::make_unique<BlockDesc>(this, static_cast<int>(blocks_.size()), parent.idx()));
  Touch();
  return blocks_.back().get();
}

std::string ProgramDesc::ToString() const {
  std::ostringstream os;
  for (auto& b : blocks_) {
    os << "{ // block " << b->idx();
    if (b->parent_idx() >= 0) os << ", parent " << b->parent_idx();
    if (b->forward_block_idx() >= 0) os << ", forward block " << b->forward_block_idx();
    os << "\n";
    for (auto& v : b->vars_) {
      os << "    " << (v->persistable() ? "persist var " : "var ") << v->name() << " : " << VarKindName(v->kind());
      if (v->kind() == VarKind::LOD_TENSOR || v->kind() == VarKind::LOD_TENSOR_ARRAY)
        os << ".shape" << v->ShapeString() << ".dtype(" << DTypeName(v->dtype()) << ")";
      if (v->lod_level() > 0) os << ".lod_level(" << v->lod_level() << ")";
      os << "\n";
    }
    if (!b->vars_.empty() && !b->ops_.empty()) os << "\n";
    for (auto& o : b->ops_) {
      auto slots = [&](const VarNameMap& m) {
        std::string s;
        for (size_t i = 0; i < m.size(); ++i) {
          if (i) s += ", ";
          s += m[i].first + "=[";
          for (size_t j = 0; j < m[i].second.size(); ++j) {
            if (j) s += ", ";
            s += "'" + m[i].second[j] + "'";
          }
          s += "]";
        }
        return s;
      };
      os << "    {" << slots(o->outputs()) << "} = " << o->type() << "(inputs={" << slots(o->inputs()) << "}";
      for (auto& kv : o->attrs()) {
        if (kv.first.rfind("op_", 0) == 0) continue;  // bookkeeping attrs (role, callstack) are noise here
        os << ", " << kv.first << " = " << AttrToString(kv.second);
      }
      os << ")\n";
    }
    os << "}\n";
  }
  return os.str();
}

// ---------------------------------------------------------------- serialization
// Little-endian binary: "FLPROG2\n", u32 block count, then per block its header, vars and ops.
// The reader checks every length against the remaining bytes: corrupt input raises, never crashes.
// Version 1 ("FLPROG1\n") lacks the var's need_check_feed byte; it still loads (as false).

namespace {

constexpr char kMagic[] = "FLPROG2\n";
constexpr char kMagicV1[] = "FLPROG1\n";

class Writer {
 public:
  template <typename T>
  void Pod(T v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void Str(const std::string& s) {
    Pod<uint32_t>(static_cast<uint32_t>(s.size()));
    buf_ += s;
  }
  std::string Take() { return std::move(buf_); }
  void Raw(const char* p, size_t n) { buf_.append(p, n); }

 private:
  std::string buf_;
};

// Names and string attrs become Python str: reject bytes that could not be decoded there.
bool ValidUtf8(const char* p, size_t n) {
  const auto* s = reinterpret_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

class Reader {
 public:
  explicit Reader(const std::string& b) : b_(b) {}
  template <typename T>
  T Pod() {
    Need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string Str() {
    uint32_t n = Pod<uint32_t>();
    Need(n);
    FL_ENFORCE(ValidUtf8(b_.data() + pos_, n), "corrupt program bytes: string at offset ", pos_, " is not valid UTF-8");
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint32_t Count(size_t min_item_bytes) {
    uint32_t n = Pod<uint32_t>();
    FL_ENFORCE(static_cast<uint64_t>(n) * min_item_bytes <= b_.size() - pos_, "corrupt program bytes: count ", n,
               " at offset ", pos_, " exceeds the remaining data");
    return n;
  }
  bool Accept(const char* magic, size_t n) {  // consumes `magic` if the data continues with it
    if (b_.size() - pos_ < n || std::memcmp(b_.data() + pos_, magic, n) != 0) return false;
    pos_ += n;
    return true;
  }
  void Expect(const char* magic, size_t n) {
    Need(n);
    FL_ENFORCE(std::memcmp(b_.data() + pos_, magic, n) == 0, "not a fluidlite program (bad magic header)");
    pos_ += n;
  }
  bool AtEnd() const { return pos_ == b_.size(); }

 private:
  void Need(size_t n) {
    FL_ENFORCE(n <= b_.size() - pos_, "corrupt program bytes: truncated at offset ", pos_, " (need ", n,
               " more bytes, ", b_.size() - pos_, " left)");
  }
  const std::string& b_;
  size_t pos_ = 0;
};

template <typename T>
void WriteList(Writer& w, const std::vector<T>& v) {
  w.Pod<uint32_t>(static_cast<uint32_t>(v.size()));
  for (const auto& x : v) {
    if constexpr (std::is_same_v<T, std::string>) w.Str(x);
    else if constexpr (std::is_same_v<T, bool>) w.Pod<uint8_t>(x ? 1 : 0);
    else if constexpr (std::is_same_v<T, BlockRef>) w.Pod<int32_t>(x.idx);
    else w.Pod<T>(x);
  }
}

template <typename T>
std::vector<T> ReadList(Reader& r) {
  std::vector<T> v;
  uint32_t n = r.Count(1);
  v.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, std::string>) v.push_back(r.Str());
    else if constexpr (std::is_same_v<T, bool>) v.push_back(r.Pod<uint8_t>() != 0);
    else if constexpr (std::is_same_v<T, BlockRef>) v.push_back(BlockRef{r.Pod<int32_t>()});
    else v.push_back(r.Pod<T>());
  }
  return v;
}

void WriteAttr(Writer& w, const Attribute& a) {
  w.Pod<uint8_t>(static_cast<uint8_t>(a.index()));
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) w.Str(v);
        else if constexpr (std::is_same_v<T, bool>) w.Pod<uint8_t>(v ? 1 : 0);
        else if constexpr (std::is_same_v<T, BlockRef>) w.Pod<int32_t>(v.idx);
        else if constexpr (std::is_arithmetic_v<T>) w.Pod<T>(v);
        else WriteList(w, v);
      },
      a);
}

Attribute ReadAttr(Reader& r) {
  switch (static_cast<AttrType>(r.Pod<uint8_t>())) {
    case AttrType::INT: return r.Pod<int32_t>();
    case AttrType::FLOAT: return r.Pod<float>();
    case AttrType::STRING: return r.Str();
    case AttrType::INTS: return ReadList<int32_t>(r);
    case AttrType::FLOATS: return ReadList<float>(r);
    case AttrType::STRINGS: return ReadList<std::string>(r);
    case AttrType::BOOLEAN: return r.Pod<uint8_t>() != 0;
    case AttrType::BOOLEANS: return ReadList<bool>(r);
    case AttrType::BLOCK: return BlockRef{r.Pod<int32_t>()};
    case AttrType::LONG: return r.Pod<int64_t>();
    case AttrType::BLOCKS: return ReadList<BlockRef>(r);
    case AttrType::LONGS: return ReadList<int64_t>(r);
  }
  FL_THROW("corrupt program bytes: unknown attribute type");
}

void WriteSlots(Writer& w, const VarNameMap& m) {
  w.Pod<uint32_t>(static_cast<uint32_t>(m.size()));
  for (auto& kv : m) {
    w.Str(kv.first);
    WriteList(w, kv.second);
  }
}

}  // namespace

std::string ProgramDesc::Serialize() const {
  Writer w;
  w.Raw(kMagic, sizeof(kMagic) - 1);
  w.Pod<uint32_t>(static_cast<uint32_t>(blocks_.size()));
  for (auto& b : blocks_) {
    w.Pod<int32_t>(b->idx_);
    w.Pod<int32_t>(b->parent_idx_);
    w.Pod<int32_t>(b->forward_block_idx_);
    w.Pod<uint32_t>(static_cast<uint32_t>(b->vars_.size()));
    for (auto& v : b->vars_) {
      w.Str(v->name());
      w.Pod<int32_t>(static_cast<int32_t>(v->kind()));
      w.Pod<int32_t>(static_cast<int32_t>(v->dtype()));
      WriteList(w, v->shape());
      w.Pod<uint8_t>(v->persistable());
      w.Pod<int32_t>(v->lod_level());
      w.Pod<uint8_t>(v->is_data());
      w.Pod<uint8_t>(v->need_check_feed());
    }
    w.Pod<uint32_t>(static_cast<uint32_t>(b->ops_.size()));
    for (auto& o : b->ops_) {
      w.Str(o->type());
      WriteSlots(w, o->inputs());
      WriteSlots(w, o->outputs());
      w.Pod<uint32_t>(static_cast<uint32_t>(o->attrs().size()));
      for (auto& kv : o->attrs()) {
        w.Str(kv.first);
        WriteAttr(w, kv.second);
      }
    }
  }
  return w.Take();
}

std::unique_ptr<ProgramDesc> ProgramDesc::Deserialize(const std::string& bytes) {
  Reader r(bytes);
  const bool v1 = r.Accept(kMagicV1, sizeof(kMagicV1) - 1);
  if (!v1) r.Expect(kMagic, sizeof(kMagic) - 1);
  auto p = std::make_unique<ProgramDesc>();
  p->blocks_.clear();
  uint32_t nblocks = r.Count(12);
  FL_ENFORCE(nblocks >= 1, "corrupt program bytes: a program has at least one block");
  for (uint32_t bi = 0; bi < nblocks; ++bi) {
    int32_t idx = r.Pod<int32_t>(), parent = r.Pod<int32_t>(), fwd = r.Pod<int32_t>();
    FL_ENFORCE(idx == static_cast<int32_t>(bi) && parent < idx && parent >= -1, "corrupt program bytes: block ", bi,
               " has index ", idx, " and parent ", parent);
    auto b = std::make_unique<BlockDesc>(p.get(), idx, parent);
    b->forward_block_idx_ = fwd;
    uint32_t nvars = r.Count(4);
    for (uint32_t i = 0; i < nvars; ++i) {
      auto v = std::make_shared<VarDesc>(r.Str());
      v->kind_ = static_cast<VarKind>(r.Pod<int32_t>());
      v->dtype_ = static_cast<DType>(r.Pod<int32_t>());
      v->shape_ = ReadList<int64_t>(r);
      v->persistable_ = r.Pod<uint8_t>() != 0;
      v->lod_level_ = r.Pod<int32_t>();
      v->is_data_ = r.Pod<uint8_t>() != 0;
      if (!v1) v->need_check_feed_ = r.Pod<uint8_t>() != 0;
      v->SetOwner(p.get());
      b->var_index_[v->name()] = v.get();
      b->vars_.push_back(std::move(v));
    }
    uint32_t nops = r.Count(4);
    for (uint32_t i = 0; i < nops; ++i) {
      auto o = std::make_shared<OpDesc>(r.Str());
      for (int side = 0; side < 2; ++side) {
        uint32_t nslots = r.Count(4);
        for (uint32_t s = 0; s < nslots; ++s) {
          std::string slot = r.Str();
          auto args = ReadList<std::string>(r);
          if (side == 0) o->inputs_.emplace_back(slot, std::move(args));
          else o->outputs_.emplace_back(slot, std::move(args));
        }
      }
      uint32_t nattrs = r.Count(5);
      for (uint32_t a = 0; a < nattrs; ++a) {
        std::string name = r.Str();
        o->attrs_[name] = ReadAttr(r);
      }
      o->SetOwner(p.get());
      b->ops_.push_back(std::move(o));
    }
    p->blocks_.push_back(std::move(b));
  }
  FL_ENFORCE(r.AtEnd(), "corrupt program bytes: trailing data after the last block");
  return p;
}

}  // namespace fl
