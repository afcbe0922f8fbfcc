//===- RecognizeRmsNorm.h - RMS norms become kiln.rms_norm ------*- C++ -*-===//
//
// Recognizes the RMS norms that exporters below opset 23 spell out
// (RecognizeRmsNorm.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_RECOGNIZERMSNORM_H
#define KILN_TRANSFORMS_RECOGNIZERMSNORM_H

#include "kiln/Autodiff/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Replaces every RMS norm of `function` spelled out op by op with
/// kiln.rms_norm; returns how many. `training` says which scalar parameters
/// will be trained (those that will not are read as the literals they
/// hold).
mlir::FailureOr<int> recognizeRmsNorm(mlir::func::FuncOp function,
                                      const AutodiffOptions &training);

} // namespace kiln

#endif // KILN_TRANSFORMS_RECOGNIZERMSNORM_H
