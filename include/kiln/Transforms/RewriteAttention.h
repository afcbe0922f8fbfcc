//===- RewriteAttention.h - attention pattern matching ----------*- C++ -*-===//
//
// Replaces the attention that exporters spell out op by op with one
// kiln.attention (RewriteAttention.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_REWRITEATTENTION_H
#define KILN_TRANSFORMS_REWRITEATTENTION_H

#include "kiln/Autodiff/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Rewrites every attention pattern of `function` that matches exactly into
/// kiln.attention; returns how many it rewrote. `training` says which
/// parameters will be trained (as autodiff selects them): scalars that will
/// not be are read as the literals they hold.
mlir::FailureOr<int> rewriteAttention(mlir::func::FuncOp function,
                                      const AutodiffOptions &training);

} // namespace kiln

#endif // KILN_TRANSFORMS_REWRITEATTENTION_H
