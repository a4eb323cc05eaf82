// Strict integer parsing for environment variables and flag strings: the whole string must be one
// base-10 integer in [lo, hi]. strtol alone reads "1e20" as 1 and "abc" as 0, and overflows silently.
#pragma once
#include <cerrno>
#include <cstdlib>

namespace fl {

inline bool ParseInt(const char* s, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace fl
