//===- PatternSupport.h - shared by the pattern passes ----------*- C++ -*-===//
//
// Internal to the pattern-matching passes (attention, GELU, projections):
// which parameters will be trained, reading the literals a pattern is built
// from, and erasing what a match replaced.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_PATTERNSUPPORT_H
#define KILN_LIB_TRANSFORMS_PATTERNSUPPORT_H

#include "kiln/Autodiff/Autodiff.h"
#include "kiln/Interpreter/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace kiln {

/// The parameter ops of `function` that autodiff will train, as `training`
/// selects them; fails on a bad pattern in `training`.
mlir::FailureOr<llvm::DenseSet<mlir::Operation *>>
trainedParameters(mlir::func::FuncOp function, const AutodiffOptions &training);

/// Reads the values a pattern is built from (scales, GELU's 0.044715, a
/// constant mask): constants, and parameters that will not be trained,
/// which exporters (dynamo) lift literals and folded masks into.
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
  /// The value of `value` if it is a constant or a parameter that will not
  /// be trained and has one.
  std::optional<Tensor> tensor(mlir::Value value) const;
  /// Whether `value` is computed without reading a trained parameter.
  bool dependsOnNoTrainedParameter(mlir::Value value) const;

private:
  explicit Literals(llvm::DenseSet<mlir::Operation *> trained)
      : trained(std::move(trained)) {}
  llvm::DenseSet<mlir::Operation *> trained;
};

/// The shape of a ranked tensor `value`.
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getShape();
}

/// `value`'s only user, if it has exactly one.
inline mlir::Operation *onlyUser(mlir::Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

/// Erases the ops of `replaced` (duplicates allowed) as they lose their last
/// user, so that users go before their producers; kiln.parameter ops stay,
/// since they name the model's parameters.
void eraseReplaced(llvm::ArrayRef<mlir::Operation *> replaced);

} // namespace kiln

#endif // KILN_LIB_TRANSFORMS_PATTERNSUPPORT_H
