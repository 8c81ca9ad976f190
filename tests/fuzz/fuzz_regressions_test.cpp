// Every saved fuzz input through its target's body, in the normal build and under the sanitizers:
// the crashes the fuzzers found (tests/fuzz/regressions/TARGET/, each named for what it broke)
// and the seeds (tests/fuzz/corpus/TARGET/ and the files TARGET.list names). Binary inputs (ONNX
// protobufs) are kept as hex text, NAME.hex (`xxd -p`), so the tree holds no binary files and a
// diff shows what changed; the bytes are exact, as a crash can depend on any of them.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <iterator>
#include <stdexcept>

#include "fuzz/fuzz_targets.h"

namespace kiln::fuzz {

void PrintTo(const FuzzTarget& target, std::ostream* out) { *out << target.name; }

namespace {

namespace fs = std::filesystem;

// The input's bytes: a .hex file's hex digits decoded (whitespace between them ignored), any other
// file as it is.
std::string input_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.extension() != ".hex") return text;
  std::string bytes, digits;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (!std::isxdigit(static_cast<unsigned char>(c)))
      throw std::runtime_error(file.string() + ": '" + std::string(1, c) + "' is not a hex digit");
    digits += c;
    if (digits.size() == 2) {
      bytes += char(std::stoi(digits, nullptr, 16));
      digits.clear();
    }
  }
  if (!digits.empty()) throw std::runtime_error(file.string() + ": an odd number of hex digits");
  return bytes;
}

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
    const std::string bytes = input_bytes(file);
    EXPECT_NO_THROW(target.body(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegressions, testing::ValuesIn(fuzz_targets()),
                         [](const testing::TestParamInfo<FuzzTarget>& info) { return info.param.name; });

}  // namespace
}  // namespace kiln::fuzz
