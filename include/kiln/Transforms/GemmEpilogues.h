//===- GemmEpilogues.h - what cuBLASLt applies as it stores -----*- C++ -*-===//
//
// The ops after a matrix product that cuBLASLt's epilogues compute before
// the product is stored: precision assignment rounds the epilogue's result
// rather than the bare product, and fusion puts the epilogue in the
// product's fusion.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_GEMMEPILOGUES_H
#define KILN_TRANSFORMS_GEMMEPILOGUES_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

namespace kiln {

/// The one reader of `product` when it adds a bias along the product's
/// rows (a vector as long as its last dimension), or null; `bias` is then
/// set to the add's bias operand.
AddOp rowBiasAdd(MatmulOp product, mlir::OpOperand *&bias);

/// The tanh GELU derivative that scales `product` (backward, maybe behind
/// reshapes that only it reads), or null; `views` gets the reshapes.
GeluGradOp geluGradScaling(MatmulOp product,
                           llvm::SmallVectorImpl<mlir::Operation *> *views =
                               nullptr);

} // namespace kiln

#endif // KILN_TRANSFORMS_GEMMEPILOGUES_H
