// Bundle <-> DIR/bundle.json + DIR/sources/. Sources live in their own files so they open in any
// editor and diff cleanly; the JSON names them. Unknown fields are ignored and missing ones take
// their defaults, so version 1 bundles still read.
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/support/error.h"
#include "core/trace/bundle.h"

namespace kiln::trace {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A field whose JSON value does not fit the C++ type it is read into. nlohmann's own conversion
// would cast 1e300 into an int, which is undefined behaviour; these readers check first.
struct SchemaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class T> struct IsVector : std::false_type {};
template <class T> struct IsVector<std::vector<T>> : std::true_type {};
template <class T> struct IsArray : std::false_type {};
template <class T, size_t N> struct IsArray<std::array<T, N>> : std::true_type {};
template <class T> struct IsMap : std::false_type {};
template <class T> struct IsMap<std::map<std::string, T>> : std::true_type {};

template <class T>
T integer_from(const json& v, const std::string& key) {
  using Limits = std::numeric_limits<T>;
  auto out_of_range = [&] {
    return SchemaError("field '" + key + "' holds " + v.dump() + ", which is not an integer from " +
                       std::to_string(Limits::min()) + " to " + std::to_string(Limits::max()));
  };
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(Limits::max())) throw out_of_range();
    return T(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < int64_t(Limits::min()) || (i > 0 && uint64_t(i) > uint64_t(Limits::max())))
      throw out_of_range();
    return T(i);
  }
  if (v.is_number_float()) {
    // [min, max + 1) in doubles: both bounds are exact powers of two for every integer type here.
    const double d = v.get<double>();
    if (!(d >= double(Limits::min()) && d < double(Limits::max()) + 1.0) || d != std::floor(d))
      throw out_of_range();
    return T(d);
  }
  throw SchemaError("field '" + key + "' holds " + v.dump() + ", not a number");
}

// Reads v as T: an integer, a double, or a vector, array or string-keyed map of them. Strings and
// bools go through nlohmann, whose type errors are already exceptions.
template <class T>
T read_as(const json& v, const std::string& key) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    return v.get<T>();
  } else if constexpr (std::is_integral_v<T>) {
    return integer_from<T>(v, key);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) throw SchemaError("field '" + key + "' holds " + v.dump() + ", not a number");
    return v.get<T>();
  } else if constexpr (IsVector<T>::value || IsArray<T>::value) {
    if (!v.is_array()) throw SchemaError("field '" + key + "' is not an array");
    T out{};
    if constexpr (IsArray<T>::value) {
      if (v.size() != out.size())
        throw SchemaError("field '" + key + "' has " + std::to_string(v.size()) + " values, not " +
                          std::to_string(out.size()));
    } else {
      out.resize(v.size());
    }
    for (size_t i = 0; i < v.size(); ++i)
      out[i] = read_as<typename T::value_type>(v[i], key + "[" + std::to_string(i) + "]");
    return out;
  } else {
    static_assert(IsMap<T>::value, "read_as: no reader for this type");
    if (!v.is_object()) throw SchemaError("field '" + key + "' is not an object");
    T out;
    for (const auto& [name, item] : v.items())
      out[name] = read_as<typename T::mapped_type>(item, key + "." + name);
    return out;
  }
}

// j[key] read as T, or fallback when absent. The fallback's type is the field's type.
template <class T>
T field(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() ? fallback : read_as<T>(*it, key);
}
template <class T>
T required(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) throw SchemaError(std::string("field '") + key + "' is missing");
  return read_as<T>(*it, key);
}

json origin_json(const Origin& o) {
  json j = {{"file", o.file}, {"line", o.line}, {"function", o.function}, {"scope", o.scope}};
  if (!o.imported.empty()) j["imported"] = o.imported;
  return j;
}

Origin origin_from(const json& j) {
  Origin o;
  o.file = j.value("file", "");
  o.line = field(j, "line", 0);
  o.function = j.value("function", "");
  o.scope = j.value("scope", "");
  o.imported = j.value("imported", "");
  return o;
}

json note_json(const BundleNote& n) { return {{"text", n.text}, {"file", n.file}, {"line", n.line}}; }
BundleNote note_from(const json& j) {
  return {j.value("text", ""), j.value("file", ""), field(j, "line", 0)};
}

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
std::optional<double> optional_from(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<double>();
}

// JSON has no infinity: an error too large to write (a NaN on one side only) is null.
json error_json(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
double error_from(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  return it->is_null() ? INFINITY : it->get<double>();
}

std::string extension(const std::string& dialect) {
  if (dialect == "cuda") return "cu";
  if (dialect == "cpp") return "cpp";
  if (dialect == "host") return "txt";
  return "glsl";
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error("bundle: cannot write " + path.string());
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("bundle: cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json bundle_json(const Bundle& b, std::vector<std::pair<std::string, std::string>>& files) {
  json j;
  j["version"] = b.version;
  j["kind"] = b.kind;
  j["name"] = b.name;
  j["device"] = b.device;
  json& passes = j["passes"] = json::array();
  for (const BundlePass& p : b.passes)
    passes.push_back({{"name", p.name}, {"ir", p.ir}, {"seconds", p.seconds}, {"stats", p.stats}});
  json& graph = j["graph"];
  graph["inputs"] = json::array();
  for (const BundleInput& in : b.graph_inputs)
    graph["inputs"].push_back({{"value", in.value}, {"name", in.name}, {"type", in.type}});
  graph["outputs"] = b.graph_outputs;
  graph["nodes"] = json::array();
  for (const BundleNode& n : b.nodes) {
    json jn = {{"id", n.id}, {"op", n.op}, {"inputs", n.inputs}, {"outputs", n.outputs},
               {"input_types", n.input_types}, {"output_types", n.output_types},
               {"origins", json::array()}};
    for (const Origin& o : n.origins) jn["origins"].push_back(origin_json(o));
    if (!n.no_kernel.empty()) jn["no_kernel"] = n.no_kernel;
    graph["nodes"].push_back(std::move(jn));
  }
  json& kernels = j["kernels"] = json::array();
  for (size_t k = 0; k < b.kernels.size(); ++k) {
    const BundleKernel& bk = b.kernels[k];
    json jk = {{"name", bk.name}, {"origins", bk.origins}, {"bytes_read", bk.bytes_read},
               {"bytes_written", bk.bytes_written}, {"flops", bk.flops}, {"phase", bk.phase},
               {"start_us", optional_json(bk.start_us)}, {"time_us", optional_json(bk.time_us)},
               {"sources", json::array()}};
    for (size_t s = 0; s < bk.sources.size(); ++s) {
      const KernelSource& src = bk.sources[s];
      std::string stem = "sources/kernel_" + std::to_string(k) + (s ? "." + std::to_string(s) : "");
      std::string file = stem + "." + extension(src.dialect);
      files.emplace_back(file, src.text);
      json js = {{"entry", src.entry}, {"dialect", src.dialect}, {"file", file},
                 {"line_origins", src.line_origins}, {"groups", src.groups},
                 {"workgroup_size", src.workgroup_size}, {"program", src.program},
                 {"template", src.is_template}, {"time_us", optional_json(src.time_us)}};
      if (!src.spirv.empty()) {
        std::string spv = stem + (src.dialect == "cuda" ? ".ptx" : ".spvasm");
        files.emplace_back(spv, src.spirv);
        js["spirv_file"] = spv;
      }
      jk["sources"].push_back(std::move(js));
    }
    kernels.push_back(std::move(jk));
  }
  json& mem = j["memory"];
  mem["arena_bytes"] = b.memory.arena_bytes;
  mem["naive_bytes"] = b.memory.naive_bytes;
  mem["lower_bound_bytes"] = b.memory.lower_bound_bytes;
  mem["planned_bytes"] = b.memory.planned_bytes;
  mem["buffers"] = json::array();
  for (const BundleBuffer& m : b.memory.buffers)
    mem["buffers"].push_back({{"value", m.value}, {"name", m.name}, {"bytes", m.bytes}, {"arena", m.arena},
                              {"offset", m.offset}, {"first", m.first}, {"last", m.last},
                              {"in_place", m.in_place}});
  for (auto [key, notes] : {std::pair{"guards", &b.guards}, {"recompiles", &b.recompiles},
                            {"graph_breaks", &b.graph_breaks}}) {
    j[key] = json::array();
    for (const BundleNote& n : *notes) j[key].push_back(note_json(n));
  }
  j["accuracy"] = json::array();
  for (const AccuracyRow& r : b.accuracy)
    j["accuracy"].push_back({{"kernel", r.kernel}, {"max_abs", error_json(r.max_abs)},
                             {"max_rel", error_json(r.max_rel)}, {"tolerance", r.tolerance}, {"passed", r.passed}, {"name", r.name},
                             {"worst", r.worst}, {"node", r.node}, {"lines", r.lines}});
  return j;
}

// The memory view draws every buffer at its arena's base plus its offset: each must lie inside its
// arena, and the arenas' sum must stay far from int64's end.
void check_memory_plan(const BundleMemory& m, const fs::path& dir) {
  auto fail = [&](const std::string& why) {
    throw Error("bundle: " + (dir / "bundle.json").string() + ": the memory plan " + why);
  };
  int64_t total = 0;
  for (int64_t bytes : m.arena_bytes) {
    if (bytes < 0 || bytes > (int64_t(1) << 56) - total)
      fail("has an arena of " + std::to_string(bytes) + " bytes");
    total += bytes;
  }
  for (const BundleBuffer& buffer : m.buffers) {
    const std::string which = "buffer '" + buffer.name + "' ";
    if (buffer.arena < 0 || size_t(buffer.arena) >= m.arena_bytes.size())
      fail(which + "names arena " + std::to_string(buffer.arena) + " of " +
           std::to_string(m.arena_bytes.size()));
    const int64_t arena = m.arena_bytes[size_t(buffer.arena)];
    if (buffer.offset < 0 || buffer.bytes < 0 || buffer.offset > arena ||
        buffer.bytes > arena - buffer.offset)
      fail(which + "(" + std::to_string(buffer.bytes) + " bytes at offset " +
           std::to_string(buffer.offset) + ") does not fit its arena of " + std::to_string(arena) +
           " bytes");
  }
}

Bundle bundle_from(const json& j, const fs::path& dir) {
  Bundle b;
  b.version = required<int>(j, "version");
  if (b.version > kBundleVersion)
    throw Error("bundle: " + dir.string() + " has schema version " + std::to_string(b.version) +
                "; this kiln reads up to version " + std::to_string(kBundleVersion) + " (update kiln)");
  b.kind = j.value("kind", "per-node");
  b.name = j.value("name", "");
  b.device = j.value("device", "");
  for (const json& p : j.value("passes", json::array()))
    b.passes.push_back({p.value("name", ""), p.value("ir", ""), field(p, "seconds", 0.0),
                        field(p, "stats", std::map<std::string, int64_t>{})});
  const json graph = j.value("graph", json::object());
  for (const json& in : graph.value("inputs", json::array()))
    b.graph_inputs.push_back({field(in, "value", 0), in.value("name", ""), in.value("type", "")});
  b.graph_outputs = field(graph, "outputs", std::vector<int>{});
  for (const json& jn : graph.value("nodes", json::array())) {
    BundleNode n;
    n.id = required<int>(jn, "id");
    n.op = jn.value("op", "");
    n.inputs = field(jn, "inputs", std::vector<int>{});
    n.outputs = field(jn, "outputs", std::vector<int>{});
    n.input_types = jn.value("input_types", std::vector<std::string>{});
    n.output_types = jn.value("output_types", std::vector<std::string>{});
    for (const json& o : jn.value("origins", json::array())) n.origins.push_back(origin_from(o));
    n.no_kernel = jn.value("no_kernel", "");
    b.nodes.push_back(std::move(n));
  }
  for (const json& jk : j.value("kernels", json::array())) {
    BundleKernel k;
    k.name = jk.value("name", "");
    k.origins = field(jk, "origins", std::vector<int>{});
    k.bytes_read = field(jk, "bytes_read", int64_t(0));
    k.bytes_written = field(jk, "bytes_written", int64_t(0));
    k.flops = field(jk, "flops", int64_t(0));
    k.phase = jk.value("phase", std::string());
    k.start_us = optional_from(jk, "start_us");
    k.time_us = optional_from(jk, "time_us");
    for (const json& js : jk.value("sources", json::array())) {
      KernelSource s;
      s.entry = js.value("entry", "main");
      s.dialect = js.value("dialect", "glsl");
      s.file = js.value("file", "");
      if (!s.file.empty()) s.text = read_text(dir / s.file);
      s.line_origins = field(js, "line_origins", std::vector<std::vector<int>>{});
      s.groups = field(js, "groups", std::array<uint32_t, 3>{1, 1, 1});
      s.workgroup_size = field(js, "workgroup_size", 256);
      s.program = js.value("program", "");
      s.is_template = js.value("template", false);
      s.time_us = optional_from(js, "time_us");
      std::string spv = js.value("spirv_file", "");
      if (!spv.empty()) s.spirv = read_text(dir / spv);
      k.sources.push_back(std::move(s));
    }
    b.kernels.push_back(std::move(k));
  }
  const json mem = j.value("memory", json::object());
  b.memory.arena_bytes = field(mem, "arena_bytes", std::vector<int64_t>{});
  b.memory.naive_bytes = field(mem, "naive_bytes", int64_t(0));
  b.memory.lower_bound_bytes = field(mem, "lower_bound_bytes", int64_t(0));
  b.memory.planned_bytes = field(mem, "planned_bytes", int64_t(0));
  for (const json& m : mem.value("buffers", json::array()))
    b.memory.buffers.push_back({field(m, "value", -1), m.value("name", ""), field(m, "bytes", int64_t(0)),
                                field(m, "arena", 0), field(m, "offset", int64_t(0)), field(m, "first", 0),
                                field(m, "last", 0), m.value("in_place", false)});
  for (auto [key, notes] : {std::pair{"guards", &b.guards}, {"recompiles", &b.recompiles},
                            {"graph_breaks", &b.graph_breaks}})
    for (const json& n : j.value(key, json::array())) notes->push_back(note_from(n));
  for (const json& r : j.value("accuracy", json::array()))
    b.accuracy.push_back({field(r, "kernel", 0), error_from(r, "max_abs"), error_from(r, "max_rel"),
                          field(r, "tolerance", 0.0), r.value("passed", true), r.value("name", ""),
                          r.value("worst", ""), field(r, "node", -1),
                          r.value("lines", std::vector<std::string>{})});
  check_memory_plan(b.memory, dir);
  return b;
}

}  // namespace

void write_bundle(const std::string& dir, const Bundle& bundle) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "sources", ec);
  if (ec) throw Error("bundle: cannot create " + dir + "/sources: " + ec.message());
  std::vector<std::pair<std::string, std::string>> files;
  json j = bundle_json(bundle, files);
  for (const auto& [name, text] : files) write_text(fs::path(dir) / name, text);
  // Written last, so a reader never sees a bundle.json whose sources are missing.
  write_text(fs::path(dir) / "bundle.json", j.dump(1));
}

Bundle read_bundle(const std::string& dir) {
  fs::path path = fs::path(dir) / "bundle.json";
  std::string text = read_text(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("bundle: " + path.string() + " is not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("version"))
    throw Error("bundle: " + path.string() + " has no \"version\" field; is it a kiln bundle?");
  try {
    return bundle_from(j, dir);
  } catch (const json::exception& e) {
    throw Error("bundle: " + path.string() + " does not match the schema (docs/bundle.md): " + e.what());
  } catch (const SchemaError& e) {
    throw Error("bundle: " + path.string() + " does not match the schema (docs/bundle.md): " + e.what());
  }
}

}  // namespace kiln::trace
