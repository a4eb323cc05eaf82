// The program IR: ProgramDesc > BlockDesc > {VarDesc, OpDesc}. This is the single source of truth;
// the Python Program/Block/Variable/Operator objects wrap these. Every mutation bumps the owning
// program's version, which is how the executor knows a prepared block is stale.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attribute.h"
#include "ddim.h"
#include "dtype.h"

namespace fl {

class ProgramDesc;
class BlockDesc;

// A process-unique number naming one desc object, never reused (unlike its address, which a later desc
// may get once this one is freed). A copy is a new object and gets a new id. Python keys its cached
// wrapper objects by it, so a removed or replaced desc is never mistaken for a live one.
class DescId {
 public:
  DescId() : value_(Next()) {}
  DescId(const DescId&) : value_(Next()) {}
  DescId& operator=(const DescId&) { return *this; }  // an assigned-to desc keeps its identity
  uint64_t value() const { return value_; }

 private:
  static uint64_t Next();
  uint64_t value_;
};

// Variable kinds (Fluid's VarType values; together with the dtypes of dtype.h they make Fluid's VarType).
#define FL_FOR_EACH_VAR_KIND(_) \
  _(LOD_TENSOR, 7)              \
  _(SELECTED_ROWS, 8)           \
  _(FEED_MINIBATCH, 9)          \
  _(FETCH_LIST, 10)             \
  _(STEP_SCOPES, 11)            \
  _(LOD_RANK_TABLE, 12)         \
  _(LOD_TENSOR_ARRAY, 13)       \
  _(RAW, 17)

enum class VarKind : int {
#define FL_VAR_KIND_ENUM(name, value) name = value,
  FL_FOR_EACH_VAR_KIND(FL_VAR_KIND_ENUM)
#undef FL_VAR_KIND_ENUM
};
const char* VarKindName(VarKind k);

// VarDesc and OpDesc are shared: a block holds its own, and a Python handle shares ownership (pybind's
// shared_ptr holder, found through enable_shared_from_this), so a handle to a removed desc keeps it
// alive instead of dangling. A removed desc is detached from its program (owner null).
class VarDesc : public std::enable_shared_from_this<VarDesc> {
 public:
  explicit VarDesc(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  VarKind kind() const { return kind_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  bool persistable() const { return persistable_; }
  int lod_level() const { return lod_level_; }
  bool is_data() const { return is_data_; }  // declared by layers.data: must be fed
  // Declared by fluid.data: the executor checks a fed value's shape and dtype against the declaration.
  bool need_check_feed() const { return need_check_feed_; }
  uint64_t id() const { return id_.value(); }

  void set_kind(VarKind k) {
    kind_ = k;
    Touch();
  }
  void set_dtype(DType t) {
    dtype_ = t;
    Touch();
  }
  void set_shape(std::vector<int64_t> s) {
    shape_ = std::move(s);
    Touch();
  }
  void set_persistable(bool p) {
    persistable_ = p;
    Touch();
  }
  void set_lod_level(int l) {
    lod_level_ = l;
    Touch();
  }
  void set_is_data(bool d) {
    is_data_ = d;
    Touch();
  }
  void set_need_check_feed(bool c) {
    need_check_feed_ = c;
    Touch();
  }

  void SetOwner(ProgramDesc* p) { owner_ = p; }
  std::string ShapeString() const;  // "(-1, 13)"

 private:
  friend class ProgramDesc;
  void Touch();
  std::string name_;
  VarKind kind_ = VarKind::LOD_TENSOR;
  DType dtype_ = DType::FP32;
  std::vector<int64_t> shape_;
  bool persistable_ = false;
  int lod_level_ = 0;
  bool is_data_ = false;
  bool need_check_feed_ = false;
  ProgramDesc* owner_ = nullptr;
  DescId id_;
};

using VarNameMap = std::vector<std::pair<std::string, std::vector<std::string>>>;  // slot -> args, ordered

class OpDesc : public std::enable_shared_from_this<OpDesc> {
 public:
  OpDesc() = default;
  explicit OpDesc(std::string type) : type_(std::move(type)) {}

  const std::string& type() const { return type_; }
  uint64_t id() const { return id_.value(); }
  void set_type(const std::string& t) {
    type_ = t;
    Touch();
  }
  const VarNameMap& inputs() const { return inputs_; }
  const VarNameMap& outputs() const { return outputs_; }
  // Arguments of a slot; empty if the slot is absent.
  const std::vector<std::string>& Input(const std::string& slot) const;
  const std::vector<std::string>& Output(const std::string& slot) const;
  bool HasInput(const std::string& slot) const;
  bool HasOutput(const std::string& slot) const;
  void SetInput(const std::string& slot, std::vector<std::string> args);
  void SetOutput(const std::string& slot, std::vector<std::string> args);
  std::vector<std::string> InputArgumentNames() const;
  std::vector<std::string> OutputArgumentNames() const;
  void RenameInput(const std::string& from, const std::string& to);
  void RenameOutput(const std::string& from, const std::string& to);

  const std::map<std::string, Attribute>& attrs() const { return attrs_; }
  bool HasAttr(const std::string& name) const { return attrs_.count(name) != 0; }
  const Attribute& GetAttr(const std::string& name) const;
  template <typename T>
  const T& Attr(const std::string& name) const {
    return AttrCast<T>(GetAttr(name), name);
  }
  void SetAttr(const std::string& name, Attribute v) {
    attrs_[name] = std::move(v);
    Touch();
  }
  void RemoveAttr(const std::string& name) {
    attrs_.erase(name);
    Touch();
  }

  // "file.py:12" of the user's line that created this op (from the op_callstack attr), or "".
  std::string CreationSite() const;

  void SetOwner(ProgramDesc* p) { owner_ = p; }
  ProgramDesc* program() const { return owner_; }  // null for a free-standing desc

 private:
  friend class ProgramDesc;
  void Touch();
  std::string type_;
  VarNameMap inputs_, outputs_;
  std::map<std::string, Attribute> attrs_;
  ProgramDesc* owner_ = nullptr;
  DescId id_;
};

class BlockDesc {
 public:
  BlockDesc(ProgramDesc* program, int idx, int parent_idx) : program_(program), idx_(idx), parent_idx_(parent_idx) {}
  BlockDesc(const BlockDesc&) = delete;
  BlockDesc& operator=(const BlockDesc&) = delete;

  int idx() const { return idx_; }
  int parent_idx() const { return parent_idx_; }
  int forward_block_idx() const { return forward_block_idx_; }
  void set_forward_block_idx(int i);
  ProgramDesc* program() const { return program_; }
  BlockDesc* Parent() const;

  // Var(name) finds locally or creates; FindVar is local only; FindVarRecursive searches breadth-first
  // through the forward block (for a grad block) and the parents, as Fluid does.
  VarDesc* Var(const std::string& name);
  VarDesc* FindVar(const std::string& name) const;
  VarDesc* FindVarRecursive(const std::string& name) const;
  bool HasVar(const std::string& name) const { return FindVar(name) != nullptr; }
  void RemoveVar(const std::string& name);
  const std::vector<std::shared_ptr<VarDesc>>& AllVars() const { return vars_; }  // creation order

  OpDesc* AppendOp();
  OpDesc* PrependOp();
  OpDesc* InsertOp(size_t index);
  void RemoveOp(size_t begin, size_t end);
  size_t OpSize() const { return ops_.size(); }
  OpDesc* Op(size_t i) const { return ops_.at(i).get(); }
  const std::vector<std::shared_ptr<OpDesc>>& AllOps() const { return ops_; }

  // Bumped when a variable is added or removed / when an op is inserted or removed (not on edits of a
  // var or op): Python rebuilds its Block.vars / Block.ops views only when these change.
  uint64_t vars_version() const { return vars_version_; }
  uint64_t ops_version() const { return ops_version_; }

 private:
  friend class ProgramDesc;
  ProgramDesc* program_;
  int idx_;
  int parent_idx_;
  int forward_block_idx_ = -1;
  std::vector<std::shared_ptr<VarDesc>> vars_;
  std::map<std::string, VarDesc*> var_index_;
  std::vector<std::shared_ptr<OpDesc>> ops_;
  uint64_t vars_version_ = 0;
  uint64_t ops_version_ = 0;
};

class ProgramDesc {
 public:
  ProgramDesc();
  ProgramDesc(const ProgramDesc& other);  // deep copy
  ProgramDesc& operator=(const ProgramDesc&) = delete;

  BlockDesc* Block(size_t i) const;
  size_t Size() const { return blocks_.size(); }
  BlockDesc* AppendBlock(const BlockDesc& parent);

  // Monotonic counter bumped by every mutation of any block, var or op.
  uint64_t version() const { return version_; }
  void Touch() { ++version_; }
  // Unique id of this desc object, stable for its lifetime (for executor caches).
  uint64_t uid() const { return uid_; }

  std::string Serialize() const;
  static std::unique_ptr<ProgramDesc> Deserialize(const std::string& bytes);
  std::string ToString() const;  // readable dump (Python's print(program))

 private:
  std::vector<std::unique_ptr<BlockDesc>> blocks_;
  uint64_t version_ = 0;
  uint64_t uid_;
};

}  // namespace fl
