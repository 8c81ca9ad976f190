// Default implementations of the optional backend slots.
#include "backends/backend.h"

#include "core/support/error.h"

namespace kiln {

std::unique_ptr<Program> Backend::compile(const ProgramSource& source) {
  throw Error("compiling " + source.language + " programs is not supported by backend " + name());
}

std::vector<std::unique_ptr<Program>> Backend::compile_all(const std::vector<ProgramSource>& sources) {
  std::vector<std::unique_ptr<Program>> programs;
  for (const ProgramSource& s : sources) programs.push_back(compile(s));
  return programs;
}

std::unique_ptr<Stream> Backend::create_stream() {
  throw Error("streams are not supported by backend " + name());
}

}  // namespace kiln
