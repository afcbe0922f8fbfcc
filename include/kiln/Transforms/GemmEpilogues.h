//===- GemmEpilogues.h - what cuBLASLt applies as it stores -----*- C++ -*-===//
//
// The ops after a matrix product that cuBLASLt's epilogues compute before
// the product is stored, and the sum beside it that one computes as it
// reads an operand: precision assignment rounds the epilogue's result
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

/// The GELU derivative (either approximation) that scales `product`
/// (backward, maybe behind reshapes that only it reads), or null; `views`
/// gets the reshapes.
GeluGradOp geluGradScaling(MatmulOp product,
                           llvm::SmallVectorImpl<mlir::Operation *> *views =
                               nullptr);

/// The sum over `product`'s k dimension of one of its operands, read as
/// stored or widened exactly, into the product's element type: a bias
/// gradient beside the weight gradient `product` computes, which cuBLASLt's
/// BGRADA/BGRADB epilogues sum as the GEMM reads the operand. Only for
/// products of two matrices (no batch); null if none. `widening` gets the
/// cast the sum reads, if any, and `ofLhs` whether it sums the lhs.
ReduceSumOp operandSum(MatmulOp product, CastOp &widening, bool &ofLhs);

} // namespace kiln

#endif // KILN_TRANSFORMS_GEMMEPILOGUES_H
