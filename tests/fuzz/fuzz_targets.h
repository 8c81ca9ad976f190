// The fuzz targets' bodies: each takes one input's bytes and returns 0, and must neither crash, leak,
// hang nor throw anything but kiln::Error (which it catches). The libFuzzer programs
// (tools/fuzz.sh) and the regression test (fuzz_regressions_test.cpp, every input in
// tests/fuzz/regressions/ and the seeds under tests/fuzz/corpus/) call the same functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::fuzz {

using FuzzBody = int (*)(const uint8_t* data, size_t size);

int onnx_import(const uint8_t* data, size_t size);   // ModelProto bytes: import, then run on ref
int tensor_proto(const uint8_t* data, size_t size);  // TensorProto bytes: read as a literal
int ir_text(const uint8_t* data, size_t size);       // graph text: parse, verify, print, parse, print
int symint(const uint8_t* data, size_t size);        // SymInt text: parse, print, parse, evaluate
int bundle(const uint8_t* data, size_t size);        // a packed bundle: load, draw kiln-debug's views

struct FuzzTarget {
  std::string name;  // tools/fuzz.sh's TARGET, and the folder of its inputs
  FuzzBody body;
};
// Every target this build has (bundle only where kiln-debug is built).
const std::vector<FuzzTarget>& fuzz_targets();

// A private scratch folder for the process (removed at exit), for the targets whose APIs read files.
const std::string& scratch_dir();
// Writes `size` bytes to scratch_dir()/name and returns the path.
std::string write_scratch(const std::string& name, const uint8_t* data, size_t size);

}  // namespace kiln::fuzz
