// The fuzz targets' scratch folder: one per process under $TMPDIR, removed at exit.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/support/error.h"
#include "fuzz/fuzz_targets.h"

namespace kiln::fuzz {
namespace {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) throw Error("fuzz: cannot create a scratch folder from " + pattern);
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::filesystem::path path = std::filesystem::path(scratch_dir()) / name;
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) throw Error("fuzz: cannot create " + path.parent_path().string() + ": " + error.message());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  if (!out) throw Error("fuzz: cannot write " + path.string());
  return path.string();
}

}  // namespace kiln::fuzz
