// Error handling: every check in the C++ core throws EnforceNotMet, which the bindings translate into
// fluidlite.core.EnforceNotMet (a Python exception). Nothing in the core aborts or segfaults on bad input.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace fl {

class EnforceNotMet : public std::runtime_error {
 public:
  explicit EnforceNotMet(const std::string& msg) : std::runtime_error(msg) {}
};

// A fed value that does not fit its fluid.data declaration (Fluid raises ValueError there): the bindings
// translate it into fluidlite.core.FeedError, a subclass of both EnforceNotMet and ValueError.
class FeedError : public EnforceNotMet {
 public:
  using EnforceNotMet::EnforceNotMet;
};

namespace detail {
inline void StrAppend(std::ostringstream&) {}
template <typename T, typename... Rest>
void StrAppend(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  StrAppend(os, rest...);
}
}  // namespace detail

// Concatenates anything streamable. Only used on error and logging paths.
template <typename... Args>
std::string Str(const Args&... args) {
  std::ostringstream os;
  detail::StrAppend(os, args...);
  return os.str();
}

}  // namespace fl

#define FL_ENFORCE(cond, ...)                                                            \
  do {                                                                                   \
    if (__builtin_expect(!(cond), 0)) throw ::fl::EnforceNotMet(::fl::Str(__VA_ARGS__)); \
  } while (0)

#define FL_THROW(...) throw ::fl::EnforceNotMet(::fl::Str(__VA_ARGS__))
