//===- GemmEpilogueMatch.h - what cuBLASLt applies after a product -*- C++
//-*-===//
//
// The ops after a matrix product in a fusion body that a cuBLASLt matmul
// computes as it stores the product: a matrix added (C), a bias, a bias
// and the tanh GELU (storing the GELU's input), the GELU's gradient; or
// beside it, as it reads an operand: the operand's sum (a bias gradient).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TARGET_CUDA_GEMMEPILOGUEMATCH_H
#define KILN_LIB_TARGET_CUDA_GEMMEPILOGUEMATCH_H

#include "kiln/Artifact/Artifact.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace kiln::cuda {

/// What a GEMM leaves in D: the product, or an epilogue's result.
struct GemmEpilogue {
  mlir::Value result;
  artifact::Epilogue kind = artifact::Epilogue::None;
  /// Arena offsets of the bias vector and of the GELU input that DGELU
  /// reads or GELU_AUX writes (-1: none).
  int64_t bias = -1, aux = -1;
  /// The value of the fusion GELU_AUX writes as aux.
  mlir::Value auxResult;
  /// The sum of an operand that BGRADA/BGRADB write to `bias`, the arena
  /// offset of the fusion's result: kernels compute it too, run only where
  /// cuBLASLt has no algorithm with the epilogue.
  mlir::Value biasGradient;
  /// The arena offset of a matrix added to the product (C), or -1.
  int64_t c = -1;
};

/// The epilogue cuBLASLt can apply after `matmul` in a fusion body, whose
/// block arguments `outer` maps to the fusion's operands; `offsetOf` gives
/// such an operand's arena offset and `resultOffset` a yielded value's
/// (-1: none). None (the bare product) if no epilogue applies.
GemmEpilogue
matchGemmEpilogue(MatmulOp matmul,
                  llvm::function_ref<mlir::Value(mlir::Value)> outer,
                  llvm::function_ref<int64_t(mlir::Value)> offsetOf,
                  llvm::function_ref<int64_t(mlir::Value)> resultOffset);

} // namespace kiln::cuda

#endif // KILN_LIB_TARGET_CUDA_GEMMEPILOGUEMATCH_H
