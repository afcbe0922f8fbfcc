//===- MergeProjections.h - one product for sibling projections -*- C++ -*-===//
//
// Merges products of one input by several weights into one product by the
// weights concatenated (MergeProjections.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_MERGEPROJECTIONS_H
#define KILN_TRANSFORMS_MERGEPROJECTIONS_H

#include "kiln/Autodiff/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Replaces the products of one input by 2-D weight parameters stored as
/// Linear layers store theirs ([out, in], read transposed), whose results
/// attention reads in place (each with or each without a 1-D bias
/// parameter added, the weights all trained or all not, as `training`
/// selects them), with one product by the weights stacked, whose column
/// slices the products' readers read; returns how many products were
/// merged.
mlir::FailureOr<int> mergeProjections(mlir::func::FuncOp function,
                                      const AutodiffOptions &training);

} // namespace kiln

#endif // KILN_TRANSFORMS_MERGEPROJECTIONS_H
