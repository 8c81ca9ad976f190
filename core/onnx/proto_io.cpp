// ONNX protobuf files -> ModelProto and Literals, with every malformed input a kiln::Error.
#include "core/onnx/proto_io.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/onnx/onnx_import.h"
#include "core/support/error.h"

namespace kiln::onnx {
namespace detail {
namespace {

std::string read_file_bytes(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + ": cannot open '" + path + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw Error(what + ": error reading '" + path + "'");
  return buf.str();
}

// Element size in the TensorProto's own encoding (raw_data), 0 for unsupported types.
size_t onnx_elem_size(int t) {
  switch (t) {
    case kiln_onnx::TensorProto::FLOAT: case kiln_onnx::TensorProto::INT32:
    case kiln_onnx::TensorProto::UINT32: return 4;
    case kiln_onnx::TensorProto::UINT8: case kiln_onnx::TensorProto::INT8:
    case kiln_onnx::TensorProto::BOOL: return 1;
    case kiln_onnx::TensorProto::UINT16: case kiln_onnx::TensorProto::INT16:
    case kiln_onnx::TensorProto::FLOAT16: case kiln_onnx::TensorProto::BFLOAT16: return 2;
    case kiln_onnx::TensorProto::INT64: case kiln_onnx::TensorProto::UINT64:
    case kiln_onnx::TensorProto::DOUBLE: return 8;
    default: return 0;
  }
}

// Reads `length` bytes at `offset` of an external data file next to the model.
std::string read_external(const kiln_onnx::TensorProto& proto, const std::string& model_dir,
                          const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      throw Error(what + ": external data field '" + kv.key() + "' is not a number: '" +
                  kv.value() + "'");
    }
  }
  if (location.empty()) throw Error(what + ": external data without a 'location'");
  std::filesystem::path file = std::filesystem::path(model_dir) / location;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw Error(what + ": external data file '" + file.string() +
                "' is missing (locations are relative to the model's folder)");
  in.seekg(0, std::ios::end);
  const int64_t size = int64_t(in.tellg());
  // Written as `length > size - offset`: `offset + length` can pass int64's range.
  if (offset < 0 || offset > size || length < -1 || (length >= 0 && length > size - offset))
    throw Error(what + ": external data file '" + file.string() + "' has " +
                std::to_string(size) + " bytes, the tensor needs bytes " + std::to_string(offset) +
                ".." + std::to_string(length < 0 ? size : offset + length));
  if (length < 0) length = size - offset;
  std::string bytes(size_t(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) throw Error(what + ": cannot read external data file '" + file.string() + "'");
  return bytes;
}

// Typed-field storage -> the raw little-endian bytes of the ONNX type.
template <class Field, class Elem>
std::string pack(const Field& field) {
  std::string out(size_t(field.size()) * sizeof(Elem), '\0');
  for (int i = 0; i < field.size(); ++i) {
    Elem e = static_cast<Elem>(field.Get(i));
    std::memcpy(out.data() + size_t(i) * sizeof(Elem), &e, sizeof(Elem));
  }
  return out;
}

std::string typed_bytes(const kiln_onnx::TensorProto& p) {
  using T = kiln_onnx::TensorProto;
  switch (p.data_type()) {
    case T::FLOAT: return pack<decltype(p.float_data()), float>(p.float_data());
    case T::DOUBLE: return pack<decltype(p.double_data()), double>(p.double_data());
    case T::INT64: return pack<decltype(p.int64_data()), int64_t>(p.int64_data());
    case T::INT32: return pack<decltype(p.int32_data()), int32_t>(p.int32_data());
    case T::UINT8: case T::BOOL: return pack<decltype(p.int32_data()), uint8_t>(p.int32_data());
    case T::INT8: return pack<decltype(p.int32_data()), int8_t>(p.int32_data());
    case T::INT16: return pack<decltype(p.int32_data()), int16_t>(p.int32_data());
    case T::UINT16: return pack<decltype(p.int32_data()), uint16_t>(p.int32_data());
    case T::UINT32: return pack<decltype(p.uint64_data()), uint32_t>(p.uint64_data());
    case T::UINT64: return pack<decltype(p.uint64_data()), uint64_t>(p.uint64_data());
    // 16-bit floats are stored as their bit patterns in int32_data.
    case T::FLOAT16: case T::BFLOAT16:
      return pack<decltype(p.int32_data()), uint16_t>(p.int32_data());
    default: return {};
  }
}

}  // namespace

bool dtype_from_onnx(int t, DType* out) {
  using T = kiln_onnx::TensorProto;
  switch (t) {
    case T::FLOAT: *out = DType::F32; return true;
    case T::UINT8: *out = DType::U8; return true;
    case T::INT32: *out = DType::I32; return true;
    case T::INT64: *out = DType::I64; return true;
    case T::BOOL: *out = DType::Bool; return true;
    case T::FLOAT16: *out = DType::F16; return true;
    case T::DOUBLE: *out = DType::F64; return true;
    case T::BFLOAT16: *out = DType::BF16; return true;
    case T::INT8: *out = DType::I8; return true;
    case T::INT16: *out = DType::I16; return true;
    case T::UINT16: *out = DType::U16; return true;
    case T::UINT32: *out = DType::U32; return true;
    case T::UINT64: *out = DType::U64; return true;
    default: return false;
  }
}

std::string onnx_type_name(int t) {
  if (kiln_onnx::TensorProto::DataType_IsValid(t))
    return kiln_onnx::TensorProto::DataType_Name(kiln_onnx::TensorProto::DataType(t));
  return "type " + std::to_string(t);
}

kiln_onnx::ModelProto read_model_proto(const std::string& path) {
  const std::string bytes = read_file_bytes(path, "onnx import");
  kiln_onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes))
    throw Error("onnx import: '" + path + "' is not a valid ONNX model (" +
                std::to_string(bytes.size()) + " bytes; truncated or not an ONNX protobuf)");
  if (!model.has_graph())
    throw Error("onnx import: '" + path + "' has no graph (truncated or not an ONNX model)");
  return model;
}

Literal literal_from_proto(const kiln_onnx::TensorProto& p, const std::string& model_dir,
                           const std::string& what) {
  Literal lit;
  if (!dtype_from_onnx(p.data_type(), &lit.dtype))
    throw UnsupportedError(what + ": element type " + onnx_type_name(p.data_type()) +
                " is not supported (kiln has f32 f16 bf16 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool)");
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t(1) << 40) / d)) {
      std::string dims;
      for (int64_t x : p.dims()) dims += (dims.empty() ? "" : ",") + std::to_string(x);
      throw Error(what + ": dims [" + dims + "] " +
                  (d < 0 ? "hold a negative size" : "hold more than 2^40 elements"));
    }
    lit.shape.push_back(d);
    n *= d;
  }
  std::string raw;
  if (p.data_location() == kiln_onnx::TensorProto::EXTERNAL) raw = read_external(p, model_dir, what);
  else if (p.has_raw_data()) raw = p.raw_data();
  else raw = typed_bytes(p);
  const size_t elem = onnx_elem_size(p.data_type());
  if (raw.size() != size_t(n) * elem)
    throw Error(what + ": holds " + std::to_string(raw.size()) + " bytes of data, its type " +
                onnx_type_name(p.data_type()) + shape_str(make_shape(lit.shape)) + " needs " +
                std::to_string(size_t(n) * elem));
  lit.bytes.assign(raw.begin(), raw.end());
  if (lit.dtype == DType::Bool)  // normalize to 0/1, as kiln's bool is
    for (uint8_t& b : lit.bytes) b = b != 0;
  return lit;
}

}  // namespace detail

NamedLiteral read_named_tensor_file(const std::string& path) {
  const std::string bytes = detail::read_file_bytes(path, "onnx tensor");
  kiln_onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes))
    throw Error("onnx tensor: '" + path + "' is not a valid TensorProto (truncated?)");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return {proto.name(), detail::literal_from_proto(proto, dir, "tensor '" + path + "'")};
}

Literal read_tensor_file(const std::string& path) { return read_named_tensor_file(path).literal; }

}  // namespace kiln::onnx
