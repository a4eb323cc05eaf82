// GLOG-compatible verbose logging: FL_VLOG(n) << ... prints
//   Immdd hh:mm:ss.uuuuuu  TTTTT file:line] message
// to stderr when n <= the level for this file's module (GLOG_v, GLOG_vmodule, or set at run time).
// A disabled FL_VLOG costs two relaxed loads and a compare; the message is never formatted.
#pragma once
#include <atomic>
#include <sstream>
#include <string>

#include "enforce.h"

namespace fl {

// Per call site cache of the resolved level; re-resolved when the configuration generation changes.
struct VlogSite {
  std::atomic<int> generation{-1};
  std::atomic<int> level{0};
};

extern std::atomic<int> g_vlog_generation;
extern std::atomic<int> g_vlog_max_level;  // max over GLOG_v and all vmodule levels: fast reject

int ResolveVlogLevel(const char* file);    // level for the module of `file` (glog rules)
void SetVlogLevel(int level);              // like GLOG_v
void SetVmodule(const std::string& spec);  // like GLOG_vmodule: "pat=N,pat2=M"
int GetVlogLevel();
std::string GetVmodule();
void InitLoggingFromEnv();  // reads GLOG_v / GLOG_vmodule

inline bool VlogIsOn(VlogSite& site, const char* file, int n) {
  if (n > g_vlog_max_level.load(std::memory_order_relaxed)) return false;
  int gen = g_vlog_generation.load(std::memory_order_acquire);
  if (site.generation.load(std::memory_order_relaxed) != gen) {
    site.level.store(ResolveVlogLevel(file), std::memory_order_relaxed);
    site.generation.store(gen, std::memory_order_relaxed);
  }
  return n <= site.level.load(std::memory_order_relaxed);
}

// Formats one glog line and writes it to stderr in a single write when destroyed.
class LogMessage {
 public:
  LogMessage(const char* file, int line, char severity = 'I');
  ~LogMessage();
  std::ostream& stream() { return os_; }

 private:
  std::ostringstream os_;
  const char* file_;
  int line_;
  char severity_;
};

// Writes `message` as one glog line with the given file and line (used by the Python layer).
void WriteLogLine(char severity, const std::string& file, int line, const std::string& message);

}  // namespace fl

#define FL_VLOG_IS_ON(n)                     \
  ::fl::VlogIsOn(                            \
      *[]() {                                \
        static ::fl::VlogSite fl_vlog_site_; \
        return &fl_vlog_site_;               \
      }(),                                   \
      __FILE__, (n))

#define FL_VLOG(n)         \
  if (!FL_VLOG_IS_ON(n)) { \
  } else ::fl::LogMessage(__FILE__, __LINE__).stream()

#define FL_LOG_WARNING ::fl::LogMessage(__FILE__, __LINE__, 'W').stream()
