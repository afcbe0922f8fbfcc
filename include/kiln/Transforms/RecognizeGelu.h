//===- RecognizeGelu.h - GELU spelled out becomes kiln.gelu -----*- C++ -*-===//
//
// Recognizes the tanh and erf forms of GELU that exporters spell out
// (RecognizeGelu.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_RECOGNIZEGELU_H
#define KILN_TRANSFORMS_RECOGNIZEGELU_H

#include "kiln/Autodiff/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Replaces every GELU of `function` spelled out op by op with kiln.gelu;
/// returns how many. `training` says which scalar parameters will be
/// trained (those that will not are read as the literals they hold).
mlir::FailureOr<int> recognizeGelu(mlir::func::FuncOp function,
                                   const AutodiffOptions &training);

} // namespace kiln

#endif // KILN_TRANSFORMS_RECOGNIZEGELU_H
