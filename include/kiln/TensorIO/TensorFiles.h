//===- TensorFiles.h - tensors in ONNX TensorProto and NumPy files -*- C++ -*-===//
//
// Reading and writing the tensor files users touch: ONNX TensorProto (`.pb`,
// also initializers inside a model, with external data) and NumPy `.npy`.
// Every failure is an llvm::Error whose message names the file and the
// reason.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TENSORIO_TENSORFILES_H
#define KILN_TENSORIO_TENSORFILES_H

#include "kiln/Interpreter/Tensor.h"

#include "llvm/Support/Error.h"

#include <string>

#include "onnx/onnx_pb.h"

namespace kiln {

/// The kiln element type of an ONNX TensorProto data type, if supported.
std::optional<DType> dtypeFromOnnx(int32_t dataType);
/// The ONNX TensorProto data type of `type`.
int32_t onnxDataType(DType type);
/// A readable name of an ONNX data type ("FLOAT", "STRING", ...).
std::string onnxDataTypeName(int32_t dataType);

/// True when `proto` carries element values (inline or external); graph-only
/// exports declare initializers without any.
bool protoHasValues(const onnx::TensorProto &proto);

/// Decodes `proto`. External data is read relative to `baseDirectory` and
/// must stay inside it.
llvm::Expected<Tensor> tensorFromProto(const onnx::TensorProto &proto,
                                       llvm::StringRef baseDirectory);

/// Encodes `tensor` as a TensorProto named `name` with raw data.
onnx::TensorProto tensorToProto(const Tensor &tensor, llvm::StringRef name);

/// Reads a `.npy` file or a serialized TensorProto (any other name).
llvm::Expected<Tensor> readTensorFile(llvm::StringRef path);

/// Writes `tensor` as a serialized TensorProto named `name`. The file appears
/// complete or not at all: it is written under a temporary name and renamed.
llvm::Error writeTensorProtoFile(const Tensor &tensor, llvm::StringRef name,
                                 llvm::StringRef path);

} // namespace kiln

#endif // KILN_TENSORIO_TENSORFILES_H
