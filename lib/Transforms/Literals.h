//===- Literals.h - the numbers a matched pattern multiplies by -*- C++ -*-===//
//
// Internal to the pattern-matching passes (attention, GELU).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_LITERALS_H
#define KILN_LIB_TRANSFORMS_LITERALS_H

#include "kiln/Autodiff/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace kiln {

/// Reads the scalars a pattern is built from (scales, GELU's 0.044715):
/// splat constants, and scalar parameters that will not be trained, which
/// exporters (dynamo) lift literals into.
class Literals {
public:
  /// The literals of `function`, whose trained parameters `training` says
  /// (as autodiff selects them); fails on a bad pattern in `training`.
  static mlir::FailureOr<Literals> of(mlir::func::FuncOp function,
                                      const AutodiffOptions &training);

  /// The value of `value`, if it is one number.
  std::optional<double> value(mlir::Value value) const;
  /// Whether `value` is the number `expected`, to within the rounding of
  /// the float type that holds it (relative 1e-6).
  bool is(mlir::Value value, double expected) const;

private:
  explicit Literals(llvm::DenseSet<mlir::Operation *> trained)
      : trained(std::move(trained)) {}
  llvm::DenseSet<mlir::Operation *> trained;
};

} // namespace kiln

#endif // KILN_LIB_TRANSFORMS_LITERALS_H
