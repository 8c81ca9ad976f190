// The one logger: KILN_LOG=debug|info|warn|error (default warn) picks what reaches stderr.
#pragma once

#include <string>

namespace kiln::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };

bool enabled(Level level);
void write(Level level, const std::string& message);

inline void debug(const std::string& m) { write(Level::Debug, m); }
inline void info(const std::string& m) { write(Level::Info, m); }
inline void warn(const std::string& m) { write(Level::Warn, m); }
inline void error(const std::string& m) { write(Level::Error, m); }

}  // namespace kiln::log
