// The C++ compiler the cpu backend runs at compile time: generated kernels become a shared object,
// loaded with dlopen and kept in the disk cache (kind "cpu-so"; key: source, flags, ISA, compiler
// version), so a warm process loads the library and runs no compiler.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

// A loaded shared object; dlclose on destruction.
class SharedLibrary {
 public:
  explicit SharedLibrary(void* handle) : handle_(handle) {}
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  // The address of `name`; throws kiln::Error naming it when the library lacks it.
  void* symbol(const std::string& name) const;

 private:
  void* handle_;
};

struct CompileCounts {
  int compiled = 0;  // translation units the compiler built
  int loaded = 0;    // shared objects loaded from the disk cache
};

class HostCompiler {
 public:
  // Found once per process: KILN_CXX, else the compiler kiln was built with (its path at configure
  // time), else c++ on PATH. Unavailable (why_not() says why) when none of them runs.
  static const HostCompiler& instance();

  bool available() const { return available_; }
  const std::string& why_not() const { return why_not_; }
  // "g++ (Debian 12.2.0-14) 12.2.0, -O2 -march=native", for device names and docs.
  std::string description() const;

  // Builds each translation unit into a shared object (in parallel, one compiler process per unit)
  // or loads it from the disk cache. `names` label the units in errors. Throws kiln::Error with the
  // compiler's output when a unit fails to compile. `bytes`, when given, receives each unit's
  // shared object.
  std::vector<std::shared_ptr<SharedLibrary>> build(const std::vector<std::string>& sources,
                                                    const std::vector<std::string>& names,
                                                    std::vector<std::vector<uint8_t>>* bytes = nullptr) const;
  // Loads a shared object built before (an exported package's); `name` labels it in errors.
  static std::shared_ptr<SharedLibrary> load(const std::vector<uint8_t>& bytes, const std::string& name);

  // The CPU features -march=native may compile for here: the flags /proc/cpuinfo lists
  // ("Features" on arm64), space-separated.
  static const std::string& cpu_features();
  // Those of `needed` (a cpu_features() text) this CPU lacks, space-separated; empty when none.
  static std::string missing_cpu_features(const std::string& needed);
  // What build() has done in this process (tests: the disk cache serves a second process).
  static CompileCounts counts();

 private:
  HostCompiler();
  std::shared_ptr<SharedLibrary> build_one(const std::string& source, const std::string& name,
                                           std::vector<uint8_t>* bytes) const;

  bool available_ = false;
  std::string why_not_;
  std::string path_, version_, isa_;
  std::vector<std::string> flags_, libraries_;
};

}  // namespace kiln::cpu
