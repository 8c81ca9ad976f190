// Writes small ONNX models with the protobuf API, for the importer tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kiln_onnx.pb.h"

namespace kiln::onnx {

namespace fs = std::filesystem;
using P = kiln_onnx::TensorProto;

inline fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_onnx_test_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

struct ModelBuilder {
  kiln_onnx::ModelProto model;
  kiln_onnx::GraphProto* g;
  explicit ModelBuilder(int64_t opset = 13) {
    model.set_ir_version(8);
    auto* o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = model.mutable_graph();
    g->set_name("test");
  }
  // dims: >= 0 sizes; "" entries in params give a dim_param instead.
  void io(bool input, const std::string& name, int type, const std::vector<int64_t>& dims,
          const std::vector<std::string>& params = {}) {
    auto* vi = input ? g->add_input() : g->add_output();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = shape->add_dim();
      if (i < params.size() && !params[i].empty()) d->set_dim_param(params[i]);
      else d->set_dim_value(dims[i]);
    }
  }
  void input(const std::string& n, const std::vector<int64_t>& d, const std::vector<std::string>& p = {}) {
    io(true, n, P::FLOAT, d, p);
  }
  // Without dims, the output's shape is left undeclared.
  void output(const std::string& n, const std::vector<int64_t>& d = {}) {
    if (!d.empty()) return io(false, n, P::FLOAT, d);
    auto* vi = g->add_output();
    vi->set_name(n);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(P::FLOAT);
  }
  P* init(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    P* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(P::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float f : v) t->add_float_data(f);
    return t;
  }
  void init_i64(const std::string& name, const std::vector<int64_t>& v) {
    P* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(P::INT64);
    t->add_dims(int64_t(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  }
  void init_scalar_i64(const std::string& name, int64_t v) {
    P* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(P::INT64);
    t->add_int64_data(v);
  }
  kiln_onnx::NodeProto* node(const std::string& op, const std::string& name,
                             const std::vector<std::string>& in, const std::vector<std::string>& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return n;
  }
  static void attr_int(kiln_onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(kiln_onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_ints(kiln_onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(kiln_onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void attr_string(kiln_onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(kiln_onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  // A graph attribute of node `n` (a Loop's or Scan's body), to fill with the helpers below.
  static kiln_onnx::GraphProto* attr_graph(kiln_onnx::NodeProto* n, const std::string& name) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(kiln_onnx::AttributeProto::GRAPH);
    kiln_onnx::GraphProto* g = a->mutable_g();
    g->set_name(name);
    return g;
  }
  // Declares a tensor of `type` and static `dims` in a graph's input or output list.
  static void declare(google::protobuf::RepeatedPtrField<kiln_onnx::ValueInfoProto>* list, const std::string& name,
                      int type, const std::vector<int64_t>& dims) {
    auto* vi = list->Add();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  }
  // A node of graph `g` with one output, named after it.
  static kiln_onnx::NodeProto* add_node(kiln_onnx::GraphProto* g, const std::string& op,
                                        const std::vector<std::string>& in, const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(g->name() + "_" + out);
    for (const auto& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  }
  std::string save(const fs::path& dir, const std::string& file = "model.onnx") const {
    const std::string path = (dir / file).string();
    std::ofstream out(path, std::ios::binary);
    model.SerializeToOstream(&out);
    return path;
  }
};

}  // namespace kiln::onnx
