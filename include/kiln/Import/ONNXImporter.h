//===- ONNXImporter.h - ONNX models into the kiln dialect --------*- C++
//-*-===//
//
// Imports an ONNX model (opsets 11 to 23 of the default domain) as one
// func.func of kiln ops with static shapes. Shape arithmetic is folded at
// import; initializers become kiln.parameter (floating point) or
// kiln.constant (integers and booleans).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IMPORT_ONNXIMPORTER_H
#define KILN_IMPORT_ONNXIMPORTER_H

#include "kiln/Interpreter/Tensor.h"

#include "onnx/onnx_pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace kiln {

struct ImportOptions {
  /// Sizes of the model's symbolic dimensions (`batch`, `seq`, ...).
  llvm::StringMap<int64_t> dimensions;
  /// Graph inputs whose values are fixed at compile time: they become
  /// constants rather than function arguments, so that values which decide
  /// shapes (a Reshape's target, a Slice's bounds) may be model inputs.
  llvm::StringMap<Tensor> boundInputs;
  /// Name of the imported function.
  std::string functionName = "main";
};

/// Imports the model at `path`. On failure an error that names the file, the
/// node (name and op type) and the reason is emitted on `context` and null is
/// returned.
mlir::OwningOpRef<mlir::ModuleOp> importONNXModel(llvm::StringRef path,
                                                  mlir::MLIRContext *context,
                                                  const ImportOptions &options);

/// True when kiln imports `node` (its domain and op type).
bool isSupportedONNXOp(const onnx::NodeProto &node);

/// The ONNX opsets kiln imports.
constexpr int64_t kMinONNXOpset = 11, kMaxONNXOpset = 23;

/// Parses `NAME=SIZE` into `options.dimensions`; false on a malformed entry.
bool parseDimensionOption(llvm::StringRef text, ImportOptions &options);

} // namespace kiln

#endif // KILN_IMPORT_ONNXIMPORTER_H
