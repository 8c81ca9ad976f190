// Device selection and the progress line for the kiln CLI.
#include "tools/kiln/cli_util.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/support/error.h"

namespace kiln::cli {

void throw_without_onnx() {
  throw Error("kiln was built without ONNX support; install libprotobuf-dev, protobuf-compiler "
              "and libonnx-dev, then reconfigure");
}

std::vector<Device> parse_backends(const std::string& text) {
  if (text != "all") return {Device::parse(text)};
  std::vector<Device> out = {Device::ref()};
  for (const DeviceEntry& e : available_devices())
    if (e.kind != BackendKind::Ref && e.kind != BackendKind::Null) out.emplace_back(e.kind, e.index);
  return out;
}

std::vector<int64_t> parse_integers(const std::string& text, char separator) {
  std::vector<int64_t> numbers;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(separator, at), text.size());
    const std::string part = text.substr(at, end - at);
    if (part.empty() || part.size() > 18 || part.find_first_not_of("0123456789") != std::string::npos) return {};
    numbers.push_back(std::stoll(part));
    at = end + 1;
  }
  return numbers;
}

Progress::Progress(std::string what, size_t total)
    : what_(std::move(what)), total_(total), enabled_(isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { clear(); }

void Progress::step(const std::string& item) {
  ++done_;
  if (!enabled_) return;
  const int width = 30;
  const int filled = total_ ? int(double(done_) / double(total_) * width) : width;
  std::fprintf(stderr, "\r\033[K%s [%s%s] %zu/%zu %s", what_.c_str(),
               std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), '.').c_str(), done_, total_,
               item.substr(0, 40).c_str());
  std::fflush(stderr);
}

void Progress::clear() {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace kiln::cli
