// Levelled logging to stderr. The level comes from CORTIQ_LOG
// (debug|info|warn|error, default info) and can be changed at run time.
#pragma once

namespace cortiq {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
// Parses "debug"/"info"/"warn"/"warning"/"error"/"off"; false if unknown.
bool parse_log_level(const char* name, LogLevel& out);

void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace cortiq

// The macros skip formatting the arguments when the level is filtered out.
#define CORTIQ_LOG_AT(level, ...)                                                    \
  do {                                                                               \
    if ((level) >= ::cortiq::log_level()) ::cortiq::log_message(level, __VA_ARGS__); \
  } while (0)
#define LOG_DEBUG(...) CORTIQ_LOG_AT(::cortiq::LogLevel::debug, __VA_ARGS__)
#define LOG_INFO(...) CORTIQ_LOG_AT(::cortiq::LogLevel::info, __VA_ARGS__)
#define LOG_WARN(...) CORTIQ_LOG_AT(::cortiq::LogLevel::warn, __VA_ARGS__)
#define LOG_ERROR(...) CORTIQ_LOG_AT(::cortiq::LogLevel::error, __VA_ARGS__)
