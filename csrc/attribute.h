// Op attributes. The variant's alternative index equals Fluid's AttrType enum value.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "enforce.h"

namespace fl {

struct BlockRef {  // a sub-block index (AttrType BLOCK)
  int32_t idx = -1;
  bool operator==(const BlockRef& o) const { return idx == o.idx; }
};

enum class AttrType : int {
  INT = 0,
  FLOAT = 1,
  STRING = 2,
  INTS = 3,
  FLOATS = 4,
  STRINGS = 5,
  BOOLEAN = 6,
  BOOLEANS = 7,
  BLOCK = 8,
  LONG = 9,
  BLOCKS = 10,
  LONGS = 11,
};

using Attribute =
    std::variant<int32_t, float, std::string, std::vector<int32_t>, std::vector<float>, std::vector<std::string>, bool,
                 std::vector<bool>, BlockRef, int64_t, std::vector<BlockRef>, std::vector<int64_t>>;

inline AttrType TypeOf(const Attribute& a) { return static_cast<AttrType>(a.index()); }
const char* AttrTypeName(AttrType t);
std::string AttrToString(const Attribute& a);  // Python-like: 1, 0.5, 'abc', [1, 2], True

template <typename T>
const T& AttrCast(const Attribute& a, const std::string& name) {
  const T* v = std::get_if<T>(&a);
  if (!v) {
    Attribute probe = T{};
    FL_THROW("attribute '", name, "' holds ", AttrTypeName(TypeOf(a)), ", expected ", AttrTypeName(TypeOf(probe)));
  }
  return *v;
}

}  // namespace fl
