// Logger implementation: level from KILN_LOG, read once.
#include "core/support/log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace kiln::log {
namespace {

Level threshold() {
  static const Level level = [] {
    const char* env = std::getenv("KILN_LOG");
    std::string_view v = env ? env : "";
    if (v == "debug") return Level::Debug;
    if (v == "info") return Level::Info;
    if (v == "error") return Level::Error;
    return Level::Warn;
  }();
  return level;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warn: return "warn";
    case Level::Error: return "error";
  }
  return "?";
}

}  // namespace

bool enabled(Level level) { return level >= threshold(); }

void write(Level level, const std::string& message) {
  if (!enabled(level)) return;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "kiln %s: %s\n", level_name(level), message.c_str());
}

}  // namespace kiln::log
