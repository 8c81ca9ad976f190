// Shared pieces of the kiln CLI: argument helpers, device selection, the terminal progress line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/device.h"

namespace kiln::cli {

// "cpu", "vulkan", "vulkan:1", "cuda", "all" -> devices. `all` lists every available device
// (cpu first); a named device that is not available throws kiln::Error saying why.
std::vector<Device> parse_backends(const std::string& text);

// What a command that reads models says in a kiln built without ONNX support.
[[noreturn]] void throw_without_onnx();

// "4x3x224" split at 'x', or "1,8,32" at ',': the numbers, or an empty list when a part is empty
// or not a plain non-negative integer (the caller says what it expected).
std::vector<int64_t> parse_integers(const std::string& text, char separator);

// A one-line progress indicator on stderr, drawn only when stderr is a terminal.
class Progress {
 public:
  Progress(std::string what, size_t total);
  ~Progress();
  void step(const std::string& item);  // call before working on item i
  void clear();

 private:
  std::string what_;
  size_t total_, done_ = 0;
  bool enabled_;
};

// Subcommands: return the process exit code.
int cmd_test_onnx(const std::vector<std::string>& args);
int cmd_run(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_devices(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);

}  // namespace kiln::cli
