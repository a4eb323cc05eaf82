// A `shape` attribute (INTS or LONGS) turned into dims, rejecting negative sizes with the op's name.
#pragma once
#include <string>
#include <vector>

#include "ddim.h"
#include "enforce.h"

namespace fl {

template <typename I>
DDim DimsFromShapeAttr(const std::vector<I>& shape, const std::string& op) {
  DDim d;
  for (I s : shape) {
    FL_ENFORCE(s >= 0, op, ": attribute shape ", DDim(std::vector<int64_t>(shape.begin(), shape.end())),
               " has a negative dim");
    d.push_back(static_cast<int64_t>(s));
  }
  return d;
}

}  // namespace fl
