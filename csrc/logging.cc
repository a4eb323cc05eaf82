#include "logging.h"

#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <vector>

#include "parse_int.h"

namespace fl {

std::atomic<int> g_vlog_generation{0};
std::atomic<int> g_vlog_max_level{0};

namespace {

struct VmoduleEntry {
  std::string pattern;
  int level;
};

struct VlogConfig {
  std::mutex mu;
  int global_level = 0;
  std::string vmodule_spec;
  std::vector<VmoduleEntry> vmodule;
};

VlogConfig& Config() {
  static VlogConfig* c = new VlogConfig();  // never destroyed: logging may run during exit
  return *c;
}

// glog's SafeFNMatch_: '*' matches any run, '?' one char.
bool GlobMatch(const char* pat, size_t plen, const char* str, size_t slen) {
  size_t p = 0, s = 0;
  while (true) {
    if (p == plen && s == slen) return true;
    if (p == plen) return false;
    if (s == slen) return pat[p] == '*' && GlobMatch(pat + p + 1, plen - p - 1, str + s, slen - s);
    if (pat[p] == str[s] || pat[p] == '?') {
      ++p;
      ++s;
      continue;
    }
    if (pat[p] == '*') {
      if (p + 1 == plen) return true;
      for (size_t i = s; i <= slen; ++i)
        if (GlobMatch(pat + p + 1, plen - p - 1, str + i, slen - i)) return true;
      return false;
    }
    return false;
  }
}

// glog: module = basename up to the first '.', with a trailing "-inl" removed.
std::string ModuleName(const char* file) {
  std::string f(file);
  size_t slash = f.find_last_of('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  size_t dot = f.find('.');
  if (dot != std::string::npos) f = f.substr(0, dot);
  if (f.size() > 4 && f.compare(f.size() - 4, 4, "-inl") == 0) f = f.substr(0, f.size() - 4);
  return f;
}

void Recompute(VlogConfig& c) {
  int mx = c.global_level;
  for (auto& e : c.vmodule) mx = std::max(mx, e.level);
  g_vlog_max_level.store(mx, std::memory_order_relaxed);
  g_vlog_generation.fetch_add(1, std::memory_order_release);
}

long ThreadId() { return static_cast<long>(syscall(SYS_gettid)); }

std::string Basename(const std::string& f) {
  size_t slash = f.find_last_of('/');
  return slash == std::string::npos ? f : f.substr(slash + 1);
}

}  // namespace

int ResolveVlogLevel(const char* file) {
  VlogConfig& c = Config();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.vmodule.empty()) {
    std::string mod = ModuleName(file);
    for (auto& e : c.vmodule)  // first match wins, even if lower than GLOG_v
      if (GlobMatch(e.pattern.data(), e.pattern.size(), mod.data(), mod.size())) return e.level;
  }
  return c.global_level;
}

void SetVlogLevel(int level) {
  VlogConfig& c = Config();
  std::lock_guard<std::mutex> lock(c.mu);
  c.global_level = level;
  Recompute(c);
}

void SetVmodule(const std::string& spec) {
  std::vector<VmoduleEntry> entries;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    FL_ENFORCE(eq != std::string::npos && eq > 0, "GLOG_vmodule entry '", item, "' is not of the form pattern=N");
    long v = 0;
    FL_ENFORCE(ParseInt(item.c_str() + eq + 1, INT_MIN, INT_MAX, &v), "GLOG_vmodule entry '", item,
               "' has a non-integer level");
    entries.push_back({item.substr(0, eq), static_cast<int>(v)});
  }
  VlogConfig& c = Config();
  std::lock_guard<std::mutex> lock(c.mu);
  c.vmodule = std::move(entries);
  c.vmodule_spec = spec;
  Recompute(c);
}

int GetVlogLevel() {
  VlogConfig& c = Config();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.global_level;
}

std::string GetVmodule() {
  VlogConfig& c = Config();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.vmodule_spec;
}

void InitLoggingFromEnv() {
  if (const char* v = std::getenv("GLOG_v")) {
    long lv = 0;
    if (ParseInt(v, INT_MIN, INT_MAX, &lv)) {
      SetVlogLevel(static_cast<int>(lv));
    } else {  // "1e20" was level 1
      std::fprintf(stderr, "fluidlite: ignoring GLOG_v='%s': not an integer\n", v);
    }
  }
  if (const char* m = std::getenv("GLOG_vmodule")) {
    try {
      SetVmodule(m);
    } catch (const EnforceNotMet& e) {
      std::fprintf(stderr, "fluidlite: ignoring GLOG_vmodule: %s\n", e.what());
    }
  }
}

static void WritePrefixed(char severity, const std::string& file, int line, const std::string& msg) {
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm t;
  localtime_r(&tv.tv_sec, &t);
  char prefix[128];
  std::snprintf(prefix, sizeof(prefix), "%c%02d%02d %02d:%02d:%02d.%06ld %5ld %s:%d] ", severity, t.tm_mon + 1,
                t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(tv.tv_usec), ThreadId(),
                Basename(file).c_str(), line);
  std::string out = prefix + msg;
  if (out.empty() || out.back() != '\n') out += '\n';
  static std::mutex* mu = new std::mutex();
  std::lock_guard<std::mutex> lock(*mu);
  fwrite(out.data(), 1, out.size(), stderr);
  fflush(stderr);
}

LogMessage::LogMessage(const char* file, int line, char severity) : file_(file), line_(line), severity_(severity) {}

LogMessage::~LogMessage() { WritePrefixed(severity_, file_, line_, os_.str()); }

void WriteLogLine(char severity, const std::string& file, int line, const std::string& message) {
  WritePrefixed(severity, file, line, message);
}

}  // namespace fl
