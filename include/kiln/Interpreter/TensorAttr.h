//===- TensorAttr.h - tensors to and from MLIR attributes --------*- C++ -*-===//
//
// Converts between interpreter tensors and the elements attributes that hold
// constants and parameter values in kiln IR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_INTERPRETER_TENSORATTR_H
#define KILN_INTERPRETER_TENSORATTR_H

#include "kiln/Interpreter/Tensor.h"

#include "mlir/IR/BuiltinAttributeInterfaces.h"

namespace kiln {

/// The value of a dense or dense-resource elements attribute; failure for
/// other attributes or unsupported element types.
mlir::FailureOr<Tensor> tensorFromAttr(mlir::ElementsAttr attr);

/// A DenseElementsAttr holding `tensor` (splat when all elements are equal).
mlir::ElementsAttr denseAttrFromTensor(const Tensor &tensor,
                                       mlir::MLIRContext *context);

/// A DenseResourceElementsAttr named after `key` holding `tensor`: large
/// values (model weights) stay out of MLIR's uniqued attribute storage.
mlir::ElementsAttr resourceAttrFromTensor(const Tensor &tensor,
                                          llvm::StringRef key,
                                          mlir::MLIRContext *context);

/// Packs `tensor` into little-endian bytes of its element type.
std::vector<char> packTensor(const Tensor &tensor);
/// Unpacks little-endian bytes of `type` into a tensor of `shape`.
Tensor unpackTensor(DType type, llvm::ArrayRef<int64_t> shape,
                    llvm::ArrayRef<char> bytes);

} // namespace kiln

#endif // KILN_INTERPRETER_TENSORATTR_H
