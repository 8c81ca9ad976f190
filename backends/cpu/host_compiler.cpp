// HostCompiler: finding the compiler, running it on generated translation units, and loading the
// shared objects it writes (through the disk cache).
#include "backends/cpu/host_compiler.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "core/support/disk_cache.h"
#include "core/support/error.h"
#include "core/support/log.h"

#ifndef KILN_HOST_CXX
#define KILN_HOST_CXX "c++"
#endif

namespace kiln::cpu {
namespace fs = std::filesystem;

namespace {

std::atomic<int> g_compiled{0}, g_loaded{0};

// Runs `command` with stderr folded into stdout; returns its exit status and output.
int run_command(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  return pclose(pipe);
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// What -march=native compiles for: the CPU model and the vector extensions the code may use.
std::string host_isa() {
  std::string isa;
#if defined(__x86_64__)
  isa = "x86-64";
#define KILN_ISA_FEATURE(f) \
  if (__builtin_cpu_supports(f)) isa += " " f;
  KILN_ISA_FEATURE("avx2") KILN_ISA_FEATURE("fma")
#ifndef __clang__  // clang 16's builtin does not know this one
  KILN_ISA_FEATURE("f16c")
#endif
  KILN_ISA_FEATURE("avx512f") KILN_ISA_FEATURE("avx512bw") KILN_ISA_FEATURE("avx512vl")
#undef KILN_ISA_FEATURE
#elif defined(__aarch64__)
  isa = "aarch64";
#else
  isa = "generic";
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 || line.rfind("CPU part", 0) == 0) {
      isa += " |" + line.substr(line.find(':') + 1);
      break;
    }
  return isa;
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A private directory for one compile, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "kiln-cpu-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw Error("cpu: cannot create a temporary directory under " + fs::temp_directory_path().string());
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// dlopen needs a file: the bytes go to a private file that is unlinked once mapped.
std::shared_ptr<SharedLibrary> load_bytes(const std::vector<uint8_t>& bytes, const std::string& name) {
  ScratchDir dir;
  fs::path file = dir.path() / "kernels.so";
  {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) throw Error("cpu: cannot write " + file.string() + " to load kernels " + name);
  }
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error("cpu: cannot load the shared object of " + name + ": " + dlerror());
  return std::make_shared<SharedLibrary>(handle);
}

}  // namespace

SharedLibrary::~SharedLibrary() {
  if (handle_) dlclose(handle_);
}

void* SharedLibrary::symbol(const std::string& name) const {
  void* p = dlsym(handle_, name.c_str());
  if (!p) throw Error("cpu: the generated library has no symbol " + name);
  return p;
}

HostCompiler::HostCompiler() {
  const char* env = std::getenv("KILN_CXX");
  std::vector<std::string> candidates;
  if (env && *env) candidates.push_back(env);
  candidates.push_back(KILN_HOST_CXX);
  candidates.push_back("c++");
  for (const std::string& c : candidates) {
    std::string out;
    if (run_command(quoted(c) + " --version", &out) != 0) {
      why_not_ += (why_not_.empty() ? "" : "; ") + ("'" + c + "' does not run");
      if (env && *env && c == env) break;  // asked for by name: no silent substitute
      continue;
    }
    path_ = c;
    version_ = out.substr(0, out.find('\n'));
    available_ = true;
    why_not_.clear();
    break;
  }
  if (!available_) why_not_ = "no C++ compiler at run time (" + why_not_ + "; set KILN_CXX)";
#if defined(__aarch64__)
  const char* arch = "-mcpu=native";
#else
  const char* arch = "-march=native";
#endif
  // No -ffast-math: kernels keep IEEE NaN and infinity semantics (isnan checks, max of NaN), as the
  // reference does. Errno-free math lets sqrt and friends inline and vectorize. -O3: GCC 12's -O2
  // vectorizes only loops that need no remainder loop, and a row of unknown length always does.
  flags_ = {"-std=c++17", "-O3", arch, "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-w"};
  // GCC does not take a kernel's __restrict buffer pointers (locals) as a promise, so it checks at
  // run time that outputs and inputs do not overlap, and gives up vectorizing beyond 10 such checks:
  // an LSTM cell's 5 inputs and 2 outputs already need 11. The checks are a few compares each.
  if (version_.find("clang") == std::string::npos) flags_.push_back("--param=vect-max-version-for-alias-checks=64");
#if defined(__x86_64__)
  libraries_ = {"-lmvec"};  // glibc's vector math, which the translation units declare (cpu_programs.cpp)
#endif
  isa_ = host_isa();
}

const HostCompiler& HostCompiler::instance() {
  static const HostCompiler compiler;
  return compiler;
}

std::string HostCompiler::description() const {
  if (!available_) return why_not_;
  std::string flags;
  for (size_t i = 1; i < 3; ++i) flags += (i > 1 ? " " : "") + flags_[i];
  return version_ + ", " + flags;
}

CompileCounts HostCompiler::counts() { return {g_compiled.load(), g_loaded.load()}; }

std::shared_ptr<SharedLibrary> HostCompiler::load(const std::vector<uint8_t>& bytes, const std::string& name) {
  return load_bytes(bytes, name);
}

const std::string& HostCompiler::cpu_features() {
  static const std::string features = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);)
      if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) {
        std::istringstream words(line.substr(line.find(':') + 1));
        std::string out;
        for (std::string w; words >> w;) out += (out.empty() ? "" : " ") + w;
        return out;
      }
    return std::string();
  }();
  return features;
}

std::string HostCompiler::missing_cpu_features(const std::string& needed) {
  std::istringstream have_words(cpu_features()), needed_words(needed);
  std::set<std::string> have;
  for (std::string w; have_words >> w;) have.insert(w);
  std::string missing;
  for (std::string w; needed_words >> w;)
    if (!have.count(w)) missing += (missing.empty() ? "" : " ") + w;
  return missing;
}

std::shared_ptr<SharedLibrary> HostCompiler::build_one(const std::string& source, const std::string& name,
                                                       std::vector<uint8_t>* bytes) const {
  if (!available_) throw Error("cpu: cannot compile kernels " + name + ": " + why_not_);
  std::string flag_text;
  for (const std::string& f : flags_) flag_text += f + " ";
  std::string library_text;
  for (const std::string& l : libraries_) library_text += " " + l;
  const std::string key = version_ + "\n" + flag_text + library_text + "\n" + isa_ + "\n" + source;
  const DiskCache cache = DiskCache::from_env();
  if (std::optional<std::vector<uint8_t>> hit = cache.load("cpu-so", key)) {
    ++g_loaded;
    if (bytes) *bytes = *hit;
    return load_bytes(*hit, name);
  }
  ScratchDir dir;
  fs::path src = dir.path() / "kernels.cpp", lib = dir.path() / "kernels.so";
  {
    std::ofstream out(src, std::ios::binary);
    out << source;
    if (!out) throw Error("cpu: cannot write " + src.string());
  }
  std::string output;
  int status = run_command(
      quoted(path_) + " " + flag_text + "-o " + quoted(lib.string()) + " " + quoted(src.string()) + library_text, &output);
  if (status != 0)
    throw Error("cpu: compiling kernels " + name + " with " + path_ + " failed (status " + std::to_string(status) +
                "):\n" + output.substr(0, 4000));
  ++g_compiled;
  std::vector<uint8_t> built = read_file(lib);
  cache.store("cpu-so", key, built);
  if (bytes) *bytes = std::move(built);
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error("cpu: cannot load the shared object of " + name + ": " + dlerror());
  return std::make_shared<SharedLibrary>(handle);
}

std::vector<std::shared_ptr<SharedLibrary>> HostCompiler::build(const std::vector<std::string>& sources,
                                                                const std::vector<std::string>& names,
                                                                std::vector<std::vector<uint8_t>>* bytes) const {
  std::vector<std::shared_ptr<SharedLibrary>> libraries(sources.size());
  if (bytes) bytes->assign(sources.size(), {});
  std::vector<std::string> errors(sources.size());
  std::vector<std::thread> workers;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto job = [&, i] {
      try {
        libraries[i] = build_one(sources[i], names[i], bytes ? &(*bytes)[i] : nullptr);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    };
    if (sources.size() == 1) job();
    else workers.emplace_back(job);
  }
  for (std::thread& t : workers) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) throw Error(e);
  return libraries;
}

}  // namespace kiln::cpu
