// Reading ONNX protobuf files: models (with size and truncation checks) and TensorProtos
// (typed fields, raw bytes or external data files) as kiln Literals.
#pragma once

#include <string>

#include "core/ir/attr.h"
#include "kiln_onnx.pb.h"

namespace kiln::onnx::detail {

// Parses `path` as a ModelProto; kiln::Error when it cannot be read or does not parse.
kiln_onnx::ModelProto read_model_proto(const std::string& path);

// The kiln dtype of an ONNX TensorProto.DataType; false for types kiln has no dtype for.
bool dtype_from_onnx(int onnx_type, DType* out);
std::string onnx_type_name(int onnx_type);  // "FLOAT", "INT8", ...

// A TensorProto's data as a literal. `model_dir` resolves external data locations; `what` names
// the tensor in errors.
Literal literal_from_proto(const kiln_onnx::TensorProto& proto, const std::string& model_dir,
                           const std::string& what);

}  // namespace kiln::onnx::detail
