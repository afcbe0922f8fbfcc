//===- Recompute.h - recomputing activations in the backward ----*- C++ -*-===//
//
// Trades cheap elementwise kernels (and, optionally, GEMMs) for activation
// memory (Recompute.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_RECOMPUTE_H
#define KILN_TRANSFORMS_RECOMPUTE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Recomputes, right before their late uses, the elementwise ops and
/// fusions of `function` (with `products`, also fusions that compute a
/// matrix product, at most `maxProducts` of them when it is not negative,
/// the latest first) whose operands are live there anyway; returns how
/// many it recomputed. The function computes exactly what it did.
int recomputeActivations(mlir::func::FuncOp function, bool products = false,
                         int64_t maxProducts = -1);

} // namespace kiln

#endif // KILN_TRANSFORMS_RECOMPUTE_H
