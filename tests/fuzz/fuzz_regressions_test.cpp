// Every saved fuzz input through its target's body, in the normal build and under the sanitizers:
// the crashes the fuzzers found (tests/fuzz/regressions/TARGET/, each named for what it broke)
// and the seeds (tests/fuzz/corpus/TARGET/ and the files TARGET.list names).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <iterator>

#include "fuzz/fuzz_targets.h"

namespace kiln::fuzz {

void PrintTo(const FuzzTarget& target, std::ostream* out) { *out << target.name; }

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> saved_inputs(const std::string& target) {
  std::vector<fs::path> files;
  for (const char* kind : {"regressions", "corpus"}) {
    const fs::path dir = fs::path(KILN_FUZZ_DIR) / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file()) files.push_back(entry.path());
  }
  // Seeds from Debian's libonnx-testdata are named in TARGET.list, not copied into the tree.
  std::ifstream list(fs::path(KILN_FUZZ_DIR) / "corpus" / (target + ".list"));
  for (std::string line; std::getline(list, line);)
    if (!line.empty()) files.push_back(line);
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzRegressions : public testing::TestWithParam<FuzzTarget> {};

TEST_P(FuzzRegressions, EverySavedInputRunsCleanly) {
  const FuzzTarget& target = GetParam();
  const std::vector<fs::path> files = saved_inputs(target.name);
  ASSERT_FALSE(files.empty()) << "no saved inputs for fuzz target " << target.name;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NO_THROW(target.body(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegressions, testing::ValuesIn(fuzz_targets()),
                         [](const testing::TestParamInfo<FuzzTarget>& info) { return info.param.name; });

}  // namespace
}  // namespace kiln::fuzz
