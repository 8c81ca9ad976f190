// kiln::Error and the source locations every message points at.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace kiln {

using Loc = std::source_location;

// Every user-facing failure is a kiln::Error: what went wrong, where (op, shapes, file:line) and,
// where known, how to fix it.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Reading a traced tensor's data (item/to_vector): a graph cannot hold the value, so the trace
// stops there. kiln::compile catches it to run the function eagerly, or reports it (fullgraph).
class GraphBreak : public Error {
 public:
  GraphBreak(const std::string& message, const Loc& where) : Error(message), where(where) {}
  Loc where;
};

// A device ran out of memory (its heap, or the limit kiln was given): as torch.cuda.OutOfMemoryError,
// a caller may free tensors and try again.
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& message) : Error(message) {}
};

// A device stopped responding (a GPU reset, a driver crash: VK_ERROR_DEVICE_LOST) while it ran
// `what` says; it stays lost, and every later use of it raises this again.
class DeviceLostError : public Error {
 public:
  explicit DeviceLostError(const std::string& message, std::string last_launch = {})
      : Error(message), last_launch_(std::move(last_launch)) {}
  // The program launched last before the loss (the kernel most likely running), or "".
  const std::string& last_launch() const { return last_launch_; }

 private:
  std::string last_launch_;
};

// "file.cpp:12" with the directory stripped, as users read it in messages.
std::string short_location(const Loc& loc);
std::string short_path(const std::string& path);

}  // namespace kiln
