// Writing and reading kiln packages: a header, named sections, and a checksum of everything before
// it. Numbers are little-endian; a string is its u32 length, then its bytes.
#include "core/onnx/package.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/support/artifacts.h"
#include "core/support/disk_cache.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

static_assert(std::endian::native == std::endian::little, "kiln packages are written little-endian");

namespace kiln::onnx {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'K', 'G', '\0'};
constexpr size_t kChecksumBytes = 8;

class Writer {
 public:
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void string(std::string_view s) {
    u32(uint32_t(s.size()));
    raw(s.data(), s.size());
  }
  void bytes(const std::vector<uint8_t>& b) {
    u64(b.size());
    raw(b.data(), b.size());
  }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  // A section: its name, then its contents' size and the contents.
  void section(std::string_view name, const std::string& contents) {
    string(name);
    u64(contents.size());
    out_ += contents;
  }
  std::string& text() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}
  bool done() const { return pos_ == data_.size(); }
  uint32_t u32() { return number<uint32_t>(); }
  uint64_t u64() { return number<uint64_t>(); }
  std::string string() { return std::string(take(u32())); }
  std::vector<uint8_t> bytes() {
    std::string_view b = take(u64());
    return std::vector<uint8_t>(b.begin(), b.end());
  }
  std::string_view take(uint64_t n) {
    if (n > data_.size() - pos_)
      throw Error(what_ + ": ends inside a field of " + std::to_string(n) + " bytes at offset " + std::to_string(pos_));
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }

 private:
  template <class T>
  T number() {
    T v;
    std::memcpy(&v, take(sizeof v).data(), sizeof v);
    return v;
  }
  std::string_view data_;
  size_t pos_ = 0;
  std::string what_;
};

// One line per field; a tab or newline inside a field becomes a space.
std::string field(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n') c = ' ';
  return s;
}

std::string model_section(const ImportedModel& model) {
  std::string out = "opset\t" + std::to_string(model.opset) + "\nproducer\t" + field(model.producer) + "\n";
  for (const ModelIO& io : model.inputs) out += "input\t" + field(io.name) + "\n";
  for (const ModelIO& io : model.outputs) out += "output\t" + field(io.name) + "\n";
  return out;
}

std::string guards_section(const std::vector<ImportGuard>& guards) {
  std::string out;
  for (const ImportGuard& g : guards)
    out += std::string(g.guard.result ? "1" : "0") + "\t" + guard_op_text(g.guard.op) + "\t" + g.guard.lhs.str() +
           "\t" + g.guard.rhs.str() + "\t" + field(g.node) + "\n";
  return out;
}

std::string weights_section(const std::vector<Tensor>& captured) {
  Writer w;
  w.u32(uint32_t(captured.size()));
  for (const Tensor& t : captured) {
    const Literal literal = tensor_to_literal(t);
    w.string(dtype_name(literal.dtype));
    w.u32(uint32_t(literal.shape.size()));
    for (int64_t d : literal.shape) w.u64(uint64_t(d));
    w.bytes(literal.bytes);
  }
  return w.text();
}

std::string artifact_section(const Artifact& a) {
  Writer w;
  w.string(a.kind);
  w.string(a.target);
  w.u32(uint32_t(a.members.size()));
  for (const std::string& m : a.members) w.string(m);
  w.bytes(a.bytes);
  return w.text();
}

std::vector<std::vector<std::string>> lines_of(std::string_view text) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    size_t start = 0;
    for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
      fields.push_back(line.substr(start, tab - start));
    fields.push_back(line.substr(start));
    lines.push_back(std::move(fields));
  }
  return lines;
}

GuardOp parse_guard_op(const std::string& text, const std::string& what) {
  for (GuardOp op : {GuardOp::Eq, GuardOp::Ne, GuardOp::Lt, GuardOp::Le, GuardOp::Gt, GuardOp::Ge})
    if (text == guard_op_text(op)) return op;
  throw Error(what + ": section 'guards' has an unknown comparison '" + text + "'");
}

void read_model_section(std::string_view text, const std::string& what, ImportedModel& model) {
  const std::vector<Value*> ins = model.graph.inputs(), outs = model.graph.outputs();
  for (const std::vector<std::string>& f : lines_of(text)) {
    if (f.size() != 2) throw Error(what + ": section 'model' has a line of " + std::to_string(f.size()) + " fields");
    if (f[0] == "opset") model.opset = std::stoll(f[1]);
    else if (f[0] == "producer") model.producer = f[1];
    else if (f[0] == "input" && model.inputs.size() < ins.size())
      model.inputs.push_back({f[1], ins[model.inputs.size()]->type});
    else if (f[0] == "output" && model.outputs.size() < outs.size())
      model.outputs.push_back({f[1], outs[model.outputs.size()]->type});
    else throw Error(what + ": section 'model' has an unexpected '" + f[0] + "' line");
  }
}

void read_guards_section(std::string_view text, const std::string& what, ImportedModel& model) {
  for (const std::vector<std::string>& f : lines_of(text)) {
    if (f.size() != 5) throw Error(what + ": section 'guards' has a line of " + std::to_string(f.size()) + " fields");
    ShapeGuard g{parse_symint(f[2]), parse_guard_op(f[1], what), parse_symint(f[3]), f[0] == "1", std::nullopt};
    model.guards.push_back({g, f[4]});
  }
}

void read_weights_section(std::string_view data, const std::string& what, ImportedModel& model) {
  Reader r(data, what + ", section 'weights'");
  const uint32_t count = r.u32();
  for (uint32_t i = 0; i < count; ++i) {
    Literal literal;
    const std::string dtype = r.string();
    if (!parse_dtype(dtype, &literal.dtype))
      throw Error(what + ": weight " + std::to_string(i) + " has an unknown type '" + dtype + "'");
    const uint32_t rank = r.u32();
    if (rank > 64) throw Error(what + ": weight " + std::to_string(i) + " has rank " + std::to_string(rank));
    for (uint32_t d = 0; d < rank; ++d) literal.shape.push_back(int64_t(r.u64()));
    literal.bytes = r.bytes();
    uint64_t expect = dtype_size(literal.dtype);
    bool overflow = false;
    for (int64_t d : literal.shape) overflow |= d < 0 || __builtin_mul_overflow(expect, uint64_t(d), &expect);
    if (overflow || expect != literal.bytes.size())
      throw Error(what + ": weight " + std::to_string(i) + " has " + std::to_string(literal.bytes.size()) +
                  " bytes for " + std::to_string(expect));
    model.captured.push_back(literal_to_tensor(literal));
  }
}

Artifact read_artifact_section(std::string_view data, const std::string& what) {
  Reader r(data, what + ", section 'artifact'");
  Artifact a;
  a.kind = r.string();
  a.target = r.string();
  const uint32_t members = r.u32();
  for (uint32_t i = 0; i < members; ++i) a.members.push_back(r.string());
  a.bytes = r.bytes();
  return a;
}

std::string read_file(const std::string& path, size_t limit = SIZE_MAX) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("kiln package '" + path + "': cannot open it");
  std::string data;
  data.resize(limit == SIZE_MAX ? size_t(std::filesystem::file_size(path)) : limit);
  in.read(data.data(), std::streamsize(data.size()));
  data.resize(size_t(in.gcount()));
  return data;
}

}  // namespace

PackageSummary export_package(const ImportedModel& model, Device device, const std::string& path,
                              const ProgramOptions& options) {
  ArtifactSet recorded;
  {
    ArtifactScope scope(&recorded, model.artifacts.get());
    CompiledModel compiled(model, device, options);
  }
  Writer w;
  w.raw(kMagic, sizeof kMagic);
  w.u32(kPackageFormat);
  w.section("kiln", std::string("kiln ") + KILN_VERSION);
  w.section("device", device.name());
  w.section("graph", print_graph(model.graph));
  w.section("model", model_section(model));
  w.section("guards", guards_section(model.guards));
  w.section("weights", weights_section(model.captured));
  PackageSummary summary;
  summary.weights = model.captured.size();
  for (const Artifact& a : recorded.all()) {
    w.section("artifact", artifact_section(a));
    ++summary.artifacts;
    summary.kernels += a.members.size();
  }
  w.u64(stable_hash(w.text()));
  summary.bytes = w.text().size();

  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(w.text().data(), std::streamsize(w.text().size()));
    if (!out) throw Error("kiln export: cannot write " + temp);
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) throw Error("kiln export: cannot move " + temp + " to " + path + ": " + ec.message());
  return summary;
}

bool is_package(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  const std::string head = read_file(path, sizeof kMagic);
  return head.size() == sizeof kMagic && std::memcmp(head.data(), kMagic, sizeof kMagic) == 0;
}

Package read_package(const std::string& path) {
  const std::string what = "kiln package '" + path + "'";
  const std::string data = read_file(path);
  if (data.size() < sizeof kMagic || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    throw Error(what + ": not a kiln package (it does not start with KILNPKG)");
  if (data.size() < sizeof kMagic + 4 + kChecksumBytes)
    throw Error(what + ": truncated (" + std::to_string(data.size()) + " bytes)");
  const std::string_view body(data.data(), data.size() - kChecksumBytes);
  uint64_t checksum;
  std::memcpy(&checksum, data.data() + body.size(), kChecksumBytes);
  Reader r(body, what);
  r.take(sizeof kMagic);
  const uint32_t format = r.u32();
  if (format != kPackageFormat)
    throw Error(what + ": format " + std::to_string(format) + ", this kiln reads format " +
                std::to_string(kPackageFormat) + "; export the model again");
  if (stable_hash(body) != checksum) throw Error(what + ": damaged or truncated (its checksum does not match)");

  Package package;
  ImportedModel& model = package.model;
  auto artifacts = std::make_shared<ArtifactSet>();
  bool have_graph = false;
  while (!r.done()) {
    const std::string name = r.string();
    const std::string_view contents = r.take(r.u64());
    try {
      if (name == "kiln") package.kiln = std::string(contents);
      else if (name == "device") package.device = std::string(contents);
      else if (name == "graph") {
        model.graph = parse_graph(std::string(contents));
        verify_graph_or_throw(model.graph);
        have_graph = true;
      } else if (!have_graph) throw Error("section '" + name + "' comes before the graph");
      else if (name == "model") read_model_section(contents, what, model);
      else if (name == "guards") read_guards_section(contents, what, model);
      else if (name == "weights") read_weights_section(contents, what, model);
      else if (name == "artifact") artifacts->add(read_artifact_section(contents, what));
      else throw Error("unknown section '" + name + "'");
    } catch (const std::exception& e) {
      const std::string message = e.what();
      throw Error(message.rfind(what, 0) == 0 ? message : what + ": " + message);
    }
  }
  if (!have_graph) throw Error(what + ": has no graph");
  const size_t expected = model.inputs.size() + model.captured.size();
  if (model.graph.inputs().size() != expected)
    throw Error(what + ": the graph has " + std::to_string(model.graph.inputs().size()) + " inputs, the package binds " +
                std::to_string(expected) + " (" + std::to_string(model.inputs.size()) + " inputs, " +
                std::to_string(model.captured.size()) + " weights)");
  if (model.outputs.size() != model.graph.outputs().size())
    throw Error(what + ": the graph has " + std::to_string(model.graph.outputs().size()) +
                " outputs, the package names " + std::to_string(model.outputs.size()));
  for (size_t i = 0; i < model.captured.size(); ++i) {
    const TensorType& declared = model.graph.inputs()[model.inputs.size() + i]->type;
    if (model.captured[i].type().str() != declared.str())
      throw Error(what + ": weight " + std::to_string(i) + " is " + model.captured[i].type().str() +
                  ", the graph takes " + declared.str());
  }
  model.artifacts = std::move(artifacts);
  return package;
}

}  // namespace kiln::onnx
