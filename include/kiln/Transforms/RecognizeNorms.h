//===- RecognizeNorms.h - spelled-out norms become one op -------*- C++ -*-===//
//
// Recognizes the RMS and layer norms that exporters spell out op by op
// (RecognizeNorms.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_RECOGNIZENORMS_H
#define KILN_TRANSFORMS_RECOGNIZENORMS_H

#include "kiln/Autodiff/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Replaces every RMS norm and layer norm of `function` spelled out op by
/// op with kiln.rms_norm or kiln.layer_norm; returns how many. `training`
/// says which scalar parameters will be trained (those that will not are
/// read as the literals they hold).
mlir::FailureOr<int> recognizeNorms(mlir::func::FuncOp function,
                                    const AutodiffOptions &training);

} // namespace kiln

#endif // KILN_TRANSFORMS_RECOGNIZENORMS_H
