#include "base/log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace cortiq {

namespace {

LogLevel initial_level() {
  const char* env = std::getenv("CORTIQ_LOG");
  LogLevel level = LogLevel::info;
  if (env != nullptr && *env != '\0' && !parse_log_level(env, level)) {
    std::fprintf(stderr, "cortiq: warn: CORTIQ_LOG=%s is not one of debug|info|warn|error|off\n",
                 env);
  }
  return level;
}

std::atomic<LogLevel>& level_storage() {
  static std::atomic<LogLevel> level{initial_level()};
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
    case LogLevel::off:
      break;
  }
  return "";
}

}  // namespace

LogLevel log_level() {
  return level_storage().load(std::memory_order_relaxed);
}

void set_log_level(LogLevel level) {
  level_storage().store(level, std::memory_order_relaxed);
}

bool parse_log_level(const char* name, LogLevel& out) {
  struct Entry {
    const char* name;
    LogLevel level;
  };
  static constexpr Entry kLevels[] = {{"debug", LogLevel::debug}, {"info", LogLevel::info},
                                      {"warn", LogLevel::warn},   {"warning", LogLevel::warn},
                                      {"error", LogLevel::error}, {"off", LogLevel::off}};
  for (const Entry& e : kLevels) {
    if (std::strcmp(name, e.name) == 0) {
      out = e.level;
      return true;
    }
  }
  return false;
}

void log_message(LogLevel level, const char* fmt, ...) {
  if (level < log_level()) return;
  static std::mutex mutex;  // keeps lines from different threads whole
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "cortiq: %s: ", level_name(level));
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  const size_t n = std::strlen(fmt);
  if (n == 0 || fmt[n - 1] != '\n') std::fputc('\n', stderr);
}

}  // namespace cortiq
