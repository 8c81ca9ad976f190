// The CUDA host emulator (see cuda_host_emulator.h): source rewriting into one translation unit,
// the host compile and dlopen, and the block scheduler that runs threads as ucontext fibers.
#include "support/cuda_host_emulator.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/support/error.h"

#ifndef KILN_HOST_CXX
#define KILN_HOST_CXX "c++"
#endif

namespace kiln::testing {

struct CudaHostEmulator::Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

namespace {

bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

std::string find_cuda_include(const std::string& preferred) {
  std::vector<std::string> dirs;
  if (!preferred.empty()) dirs.push_back(preferred);
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/include");
  dirs.push_back("/usr/local/cuda/include");
  dirs.push_back("/usr/include");
  for (const std::string& d : dirs)
    if (file_exists(d + "/cuda_fp16.h")) return d;
  return "";
}

// Runs a shell command; returns its exit status, stdout and stderr in *output.
int run_command(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw Error("cuda host emulator: cannot run '" + command + "'");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  return pclose(pipe);
}

// One source inside its own namespace, so the typedefs and helpers every standalone kernel repeats
// do not collide: includes move to the top of the file, C linkage goes (entries are reached
// through trampolines), and the macros it defines are undefined after it.
std::string wrap_source(size_t index, const std::string& text, std::set<std::string>& includes) {
  std::istringstream in(text);
  std::ostringstream body;
  std::set<std::string> macros;
  static const std::regex define(R"(^\s*#\s*define\s+(\w+))");
  static const std::regex extern_c(R"(extern\s+"C"\s*)");
  for (std::string line; std::getline(in, line);) {
    std::string trimmed = line.substr(line.find_first_not_of(" \t") == std::string::npos ? line.size()
                                                                                          : line.find_first_not_of(" \t"));
    if (trimmed.rfind("#include", 0) == 0) {
      includes.insert(trimmed);
      body << "\n";  // keep line numbers
      continue;
    }
    std::smatch m;
    if (std::regex_search(line, m, define)) macros.insert(m[1].str());
    body << std::regex_replace(line, extern_c, "") << "\n";
  }
  std::string ns = "kiln_emu_" + std::to_string(index);
  std::string out = "namespace " + ns + " {\n#line 1 \"kiln_emu_src_" + std::to_string(index) + ".cu\"\n" +
                    body.str() + "}  // namespace " + ns + "\n";
  for (const std::string& m : macros) out += "#undef " + m + "\n";
  return out;
}

std::string trampoline_name(size_t index, const std::string& entry) {
  return "kiln_emu_" + std::to_string(index) + "_" + entry;
}

// --- the block scheduler ----------------------------------------------------------------------

constexpr size_t kStackBytes = 64 * 1024;

// Stacks for one block's fibers, kept per OS thread and grown on demand.
struct FiberStacks {
  char* base = nullptr;
  size_t count = 0;
  ~FiberStacks() {
    if (base) munmap(base, count * kStackBytes);
  }
  char* get(size_t n) {
    if (n > count) {
      if (base) munmap(base, count * kStackBytes);
      void* p = mmap(nullptr, n * kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
      if (p == MAP_FAILED) throw Error("cuda host emulator: cannot map stacks for " + std::to_string(n) + " threads");
      base = static_cast<char*>(p);
      count = n;
    }
    return base;
  }
};

struct BlockRun {
  enum class State { Ready, AtBlockBarrier, AtWarpBarrier, Done };
  const CudaHostEmulator::Kernel* kernel = nullptr;
  void** args = nullptr;
  KilnEmuThread** slot = nullptr;
  std::vector<KilnEmuThread> threads;
  std::vector<ucontext_t> contexts;
  std::vector<State> state;
  std::vector<unsigned> wait_mask;
  std::vector<std::array<std::array<unsigned long long, 32>, 2>> slots;  // per warp, two generations
  std::vector<unsigned> warp_generation;
  ucontext_t scheduler;
  int current = -1;
  std::string error;
};

thread_local BlockRun* tl_run = nullptr;

void fiber_main() {
  BlockRun* r = tl_run;
  int i = r->current;
  try {
    r->kernel->fn(r->args);
  } catch (const std::exception& e) {
    r->error = e.what();
  } catch (...) {
    r->error = "unknown exception";
  }
  r->state[size_t(i)] = BlockRun::State::Done;
}  // returns to the scheduler through uc_link

BlockRun& run_of(KilnEmuThread* self, const char* what) {
  if (!self->scheduler)
    throw Error(std::string("cuda host emulator: kernel calls ") + what +
                " but its source was not recognized as synchronizing (no __syncthreads/_sync( in its text)");
  return *static_cast<BlockRun*>(self->scheduler);
}

void hook_syncthreads(KilnEmuThread* self) {
  BlockRun& r = run_of(self, "__syncthreads");
  size_t i = self->linear;
  r.state[i] = BlockRun::State::AtBlockBarrier;
  swapcontext(&r.contexts[i], &r.scheduler);
}

const unsigned long long* hook_warp_exchange(KilnEmuThread* self, unsigned mask, unsigned long long value) {
  BlockRun& r = run_of(self, "a warp shuffle/vote/__syncwarp");
  size_t i = self->linear, w = i / 32;
  unsigned parity = r.warp_generation[w] & 1;
  r.slots[w][parity][self->lane] = value;
  r.state[i] = BlockRun::State::AtWarpBarrier;
  r.wait_mask[i] = mask;
  swapcontext(&r.contexts[i], &r.scheduler);
  return r.slots[w][parity].data();
}

const KilnEmuHooks kHooks = {hook_syncthreads, hook_warp_exchange};

// A fault inside a kernel (the backend's buffers end at an inaccessible page) names the kernel
// before the process dies the way it would have.
thread_local const CudaHostEmulator::Kernel* tl_launching = nullptr;
struct sigaction previous_segv;

void on_fault(int sig, siginfo_t* info, void*) {
  if (const CudaHostEmulator::Kernel* k = tl_launching) {
    char text[512];
    int n = std::snprintf(text, sizeof text,
                          "cuda host emulator: kernel %s (%s) faulted at address %p: an out-of-bounds buffer "
                          "access (each buffer ends at an inaccessible page)\n",
                          k->entry.c_str(), k->name.c_str(), info->si_addr);
    if (n > 0) [[maybe_unused]] auto w = write(2, text, size_t(std::min(n, int(sizeof text) - 1)));
  }
  sigaction(sig, &previous_segv, nullptr);  // returning re-runs the access under the old handler
}

void install_fault_handler() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    return true;
  }();
  (void)installed;
}

// Releases a barrier every live participant reached; false when none could be released.
bool release_barriers(BlockRun& r) {
  using S = BlockRun::State;
  size_t n = r.state.size();
  bool any_block = false, all_block = true;
  for (size_t i = 0; i < n; ++i) {
    if (r.state[i] == S::Done) continue;
    if (r.state[i] == S::AtBlockBarrier) any_block = true;
    else all_block = false;
  }
  if (any_block && all_block) {
    for (S& s : r.state)
      if (s == S::AtBlockBarrier) s = S::Ready;
    return true;
  }
  bool released = false;
  for (size_t w = 0; w * 32 < n; ++w) {
    size_t lo = w * 32, hi = std::min(n, lo + 32);
    unsigned wanted = 0;
    bool waiting = false;
    for (size_t i = lo; i < hi; ++i)
      if (r.state[i] == S::AtWarpBarrier) {
        wanted |= r.wait_mask[i];
        waiting = true;
      }
    if (!waiting) continue;
    bool all_there = true;
    for (size_t i = lo; i < hi; ++i)
      if (((wanted >> (i - lo)) & 1u) && r.state[i] != S::Done && r.state[i] != S::AtWarpBarrier) all_there = false;
    if (!all_there) continue;
    for (size_t i = lo; i < hi; ++i)
      if (r.state[i] == S::AtWarpBarrier) r.state[i] = S::Ready;
    ++r.warp_generation[w];
    released = true;
  }
  return released;
}

std::string describe_states(const BlockRun& r) {
  size_t counts[4] = {};
  for (BlockRun::State s : r.state) ++counts[int(s)];
  return std::to_string(counts[1]) + " thread(s) at __syncthreads, " + std::to_string(counts[2]) +
         " at a warp shuffle/vote, " + std::to_string(counts[3]) + " exited";
}

void run_block_fibers(BlockRun& r, FiberStacks& stacks) {
  using S = BlockRun::State;
  size_t n = r.threads.size();
  char* stack = stacks.get(n);
  for (size_t i = 0; i < n; ++i) {
    getcontext(&r.contexts[i]);
    r.contexts[i].uc_stack.ss_sp = stack + i * kStackBytes;
    r.contexts[i].uc_stack.ss_size = kStackBytes;
    r.contexts[i].uc_link = &r.scheduler;
    makecontext(&r.contexts[i], fiber_main, 0);
    r.state[i] = S::Ready;
  }
  for (auto& w : r.slots) w = {};
  BlockRun* saved = tl_run;
  tl_run = &r;
  while (true) {
    bool resumed = false;
    for (size_t i = 0; i < n; ++i) {
      if (r.state[i] != S::Ready) continue;
      r.current = int(i);
      *r.slot = &r.threads[i];
      swapcontext(&r.scheduler, &r.contexts[i]);
      resumed = true;
      if (!r.error.empty()) {
        tl_run = saved;
        throw Error("cuda host emulator: kernel " + r.kernel->entry + " (" + r.kernel->name + ") thread " +
                    std::to_string(i) + ": " + r.error);
      }
    }
    bool done = true;
    for (S s : r.state) done = done && s == S::Done;
    if (done) break;
    if (!release_barriers(r) && !resumed) {
      tl_run = saved;
      throw Error("cuda host emulator: kernel " + r.kernel->entry + " (" + r.kernel->name +
                  ") deadlocked in block (" + std::to_string(r.threads[0].block_idx.x) + "," +
                  std::to_string(r.threads[0].block_idx.y) + "," + std::to_string(r.threads[0].block_idx.z) +
                  "): " + describe_states(r) + " (a barrier or full-mask shuffle some threads skip)");
    }
  }
  tl_run = saved;
}

}  // namespace

CudaHostEmulator::CudaHostEmulator(Options options) : options_(std::move(options)) {
  if (options_.cxx.empty()) options_.cxx = KILN_HOST_CXX;
  if (options_.cuda_headers) cuda_include_ = find_cuda_include(options_.cuda_include);
  std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-cuda-emu-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw Error("cuda host emulator: cannot create a directory under " + tmpl);
  work_dir_ = tmpl;
  // Without the toolkit, the prelude's #include <cuda_fp16.h> finds an empty header; kernels that
  // use __half were refused by add().
  if (cuda_include_.empty()) {
    std::filesystem::create_directories(work_dir_ + "/no_cuda");
    std::ofstream(work_dir_ + "/no_cuda/cuda_fp16.h") << "// cuda_fp16.h was not found: no __half here\n";
  }
}

CudaHostEmulator::~CudaHostEmulator() {
  libraries_.clear();
  if (!std::getenv("KILN_CUDA_EMU_KEEP")) {
    std::error_code ec;
    std::filesystem::remove_all(work_dir_, ec);
  }
}

CudaHostEmulator::Stats CudaHostEmulator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

const CudaHostEmulator::Kernel& CudaHostEmulator::add(const std::string& name, const std::string& source,
                                                      const std::string& entry) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = by_text_.emplace(source, sources_.size());
  size_t index = it->second;
  if (inserted) {
    if (source.find("__half") != std::string::npos && cuda_include_.empty()) {
      by_text_.erase(it);
      throw Error("cuda host emulator: kernel " + name +
                  " uses __half, but cuda_fp16.h was not found ($CUDA_HOME/include, /usr/local/cuda/include): "
                  "f16 kernels cannot run without it");
    }
    Source s{name, source, {}, false, ""};
    static const std::regex global(
        R"(__global__\s+void\s+(?:__launch_bounds__\s*\(([^)]*)\)\s*)?(\w+)\s*\()");
    const bool fibers = source.find("__syncthreads") != std::string::npos ||
                        source.find("__syncwarp") != std::string::npos ||
                        source.find("_sync(") != std::string::npos;
    for (auto m = std::sregex_iterator(source.begin(), source.end(), global); m != std::sregex_iterator(); ++m) {
      Kernel k;
      k.name = name;
      k.entry = (*m)[2].str();
      // A number; a macro (templates size blocks with #defines) leaves it to the caller.
      const std::string bound = (*m)[1].str();
      k.launch_bounds = !bound.empty() && std::isdigit(static_cast<unsigned char>(bound[0])) ? unsigned(std::stoul(bound)) : 0;
      k.needs_fibers = fibers;
      k.source = index;
      s.entries.push_back(k.entry);
      kernels_.push_back(k);
      by_entry_[{index, k.entry}] = &kernels_.back();
    }
    if (s.entries.empty()) {
      by_text_.erase(it);
      throw Error("cuda host emulator: kernel " + name + " has no __global__ function");
    }
    sources_.push_back(std::move(s));
  }
  const Source& s = sources_[index];
  const std::string& want = entry.empty() ? s.entries.front() : entry;
  auto k = by_entry_.find({index, want});
  if (k == by_entry_.end())
    throw Error("cuda host emulator: " + name + " has no __global__ function '" + want + "'");
  return *k->second;
}

void CudaHostEmulator::compile_batch(const std::vector<size_t>& batch, int part) {
  std::set<std::string> includes;
  std::string bodies, trampolines;
  for (size_t i : batch) {
    bodies += wrap_source(i, sources_[i].text, includes);
    for (const std::string& e : sources_[i].entries)
      trampolines += "#line 100000 \"kiln_emu_src_" + std::to_string(i) + ".cu\"\nextern \"C\" void " +
                     trampoline_name(i, e) + "(void** a) { kiln_emu_invoke(&kiln_emu_" + std::to_string(i) +
                     "::" + e + ", a); }\n";
  }
  std::string text = "#include \"cuda_host_emulator_shim.h\"\n";
  for (const std::string& inc : includes) text += inc + "\n";
  text += "thread_local KilnEmuThread* kiln_emu_self = nullptr;\n"
          "extern \"C\" KilnEmuThread** kiln_emu_self_slot() { return &kiln_emu_self; }\n";
  text += bodies + trampolines;

  static int counter = 0;
  std::string base;
  {
    std::lock_guard lock(mutex_);
    base = work_dir_ + "/lib" + std::to_string(counter++) + "_" + std::to_string(part);
  }
  std::ofstream(base + ".cpp") << text;
  std::string cmd = "\"" + options_.cxx + "\" -std=c++17 " + options_.optimize +
                    " -fPIC -shared -w -fno-strict-aliasing -I\"" KILN_EMU_SHIM_DIR "\"";
  if (!cuda_include_.empty()) cmd += " -DKILN_EMU_HAVE_CUDA_HEADERS -I\"" + cuda_include_ + "\"";
  else cmd += " -I\"" + work_dir_ + "/no_cuda\"";
  cmd += " \"" + base + ".cpp\" -o \"" + base + ".so\"";
  std::string log;
  auto t0 = std::chrono::steady_clock::now();
  int rc = run_command(cmd, &log);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::lock_guard lock(mutex_);
  stats_.compile_seconds += seconds;
  if (rc != 0) {
    // Blame the sources the messages name; the rest stay pending for the next round.
    static const std::regex blamed(R"(kiln_emu_src_(\d+)\.cu:\d+(?::\d+)?: (?:fatal )?error)");
    std::set<size_t> bad;
    for (auto m = std::sregex_iterator(log.begin(), log.end(), blamed); m != std::sregex_iterator(); ++m)
      bad.insert(size_t(std::stoul((*m)[1].str())));
    if (bad.empty()) bad.insert(batch.begin(), batch.end());
    for (size_t i : bad)
      sources_[i].error = "cuda host emulator: " + sources_[i].name + " does not compile on the host (" + base +
                          ".cpp, kept with KILN_CUDA_EMU_KEEP=1):\n" + log.substr(0, 4000);
    return;
  }
  auto lib = std::make_unique<Library>();
  lib->handle = dlopen((base + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) throw Error(std::string("cuda host emulator: dlopen failed: ") + dlerror());
  auto slot = reinterpret_cast<KilnEmuSelfSlotFn>(dlsym(lib->handle, "kiln_emu_self_slot"));
  for (size_t i : batch) {
    for (const std::string& e : sources_[i].entries) {
      Kernel* k = by_entry_.at({i, e});
      k->fn = reinterpret_cast<KilnEmuEntryFn>(dlsym(lib->handle, trampoline_name(i, e).c_str()));
      k->self_slot = slot;
      if (!k->fn) throw Error("cuda host emulator: " + trampoline_name(i, e) + " missing from " + base + ".so");
    }
    sources_[i].built = true;
  }
  ++stats_.libraries;
  stats_.sources += batch.size();
  libraries_.push_back(std::move(lib));
}

void CudaHostEmulator::build() {
  for (int round = 0; round < 3; ++round) {
    std::vector<size_t> pending;
    {
      std::lock_guard lock(mutex_);
      for (size_t i = 0; i < sources_.size(); ++i)
        if (!sources_[i].built && sources_[i].error.empty()) pending.push_back(i);
    }
    if (pending.empty()) return;
    if (pending.size() < 64) {
      compile_batch(pending, 0);
      continue;
    }
    // Two halves on two cores: the compile is the slow part.
    std::vector<size_t> a(pending.begin(), pending.begin() + long(pending.size() / 2));
    std::vector<size_t> b(pending.begin() + long(pending.size() / 2), pending.end());
    std::exception_ptr failure;
    std::thread other([&] {
      try {
        compile_batch(b, 1);
      } catch (...) {
        failure = std::current_exception();
      }
    });
    compile_batch(a, 0);
    other.join();
    if (failure) std::rethrow_exception(failure);
  }
}

void CudaHostEmulator::launch(const Kernel& kernel, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
                              void** args) {
  if (!kernel.fn) build();
  {
    std::lock_guard lock(mutex_);
    if (!kernel.fn)
      throw Error(sources_[kernel.source].error.empty() ? "cuda host emulator: " + kernel.name + " was not built"
                                                        : sources_[kernel.source].error);
    ++stats_.launches;
  }
  const size_t n = size_t(block[0]) * block[1] * block[2];
  if (n == 0 || n > 1024)
    throw Error("cuda host emulator: kernel " + kernel.entry + " launched with " + std::to_string(n) +
                " threads per block (1 to 1024)");
  install_fault_handler();
  KilnEmuThread** slot = kernel.self_slot();
  KilnEmuThread* saved = *slot;
  const Kernel* saved_kernel = tl_launching;
  tl_launching = &kernel;
  KilnEmuDim bdim{block[0], block[1], block[2]}, gdim{grid[0], grid[1], grid[2]};
  auto thread_at = [&](size_t linear, KilnEmuDim b) {
    KilnEmuThread t{};
    t.thread_idx = {unsigned(linear % block[0]), unsigned(linear / block[0] % block[1]),
                    unsigned(linear / (size_t(block[0]) * block[1]))};
    t.block_idx = b;
    t.block_dim = bdim;
    t.grid_dim = gdim;
    t.lane = unsigned(linear % 32);
    t.linear = unsigned(linear);
    t.hooks = &kHooks;
    return t;
  };
  thread_local FiberStacks stacks;
  BlockRun run;
  if (kernel.needs_fibers) {
    run.kernel = &kernel;
    run.args = args;
    run.slot = slot;
    run.threads.resize(n);
    run.contexts.resize(n);
    run.state.resize(n);
    run.wait_mask.resize(n);
    run.slots.resize((n + 31) / 32);
    run.warp_generation.assign((n + 31) / 32, 0);
  }
  try {
    for (uint32_t bz = 0; bz < grid[2]; ++bz)
      for (uint32_t by = 0; by < grid[1]; ++by)
        for (uint32_t bx = 0; bx < grid[0]; ++bx) {
          KilnEmuDim b{bx, by, bz};
          if (kernel.needs_fibers) {
            for (size_t i = 0; i < n; ++i) {
              run.threads[i] = thread_at(i, b);
              run.threads[i].scheduler = &run;
            }
            run_block_fibers(run, stacks);
          } else {
            // Nothing synchronizes: each thread runs to completion in turn.
            for (size_t i = 0; i < n; ++i) {
              KilnEmuThread t = thread_at(i, b);
              *slot = &t;
              kernel.fn(args);
            }
          }
        }
  } catch (...) {
    *slot = saved;
    tl_launching = saved_kernel;
    throw;
  }
  *slot = saved;
  tl_launching = saved_kernel;
}

}  // namespace kiln::testing
