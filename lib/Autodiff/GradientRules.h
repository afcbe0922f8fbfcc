//===- GradientRules.h - gradient rules of kiln ops --------------*- C++ -*-===//
//
// Internal to autodiff. A gradient rule receives an op, the gradients of its
// results (null where a result does not reach the loss) and returns one
// gradient per operand (null where the operand gets none). Rules build their
// ops through GradientBuilder, whose helpers undo broadcasting and make
// constants. One file per op family registers its rules.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_AUTODIFF_GRADIENTRULES_H
#define KILN_LIB_AUTODIFF_GRADIENTRULES_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

namespace kiln {

class GradientBuilder {
public:
  GradientBuilder(mlir::OpBuilder &builder, mlir::Location loc,
                  const llvm::DenseSet<mlir::Value> *active = nullptr)
      : builder(builder), loc(loc), active(active) {}

  /// Whether `operand` needs a gradient (depends on a trained parameter and
  /// reaches the loss): a rule may skip work that only such an operand's
  /// gradient needs.
  bool needsGradient(mlir::Value operand) const {
    return !active || active->contains(operand);
  }

  template <typename OpTy, typename... Args> OpTy create(Args &&...args) {
    return builder.create<OpTy>(loc, std::forward<Args>(args)...);
  }
  template <typename OpTy> mlir::Value binary(mlir::Value lhs, mlir::Value rhs) {
    return create<OpTy>(lhs, rhs).getResult();
  }
  mlir::Value add(mlir::Value a, mlir::Value b) { return binary<AddOp>(a, b); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return binary<SubOp>(a, b); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return binary<MulOp>(a, b); }
  mlir::Value div(mlir::Value a, mlir::Value b) { return binary<DivOp>(a, b); }
  mlir::Value neg(mlir::Value a) { return create<NegOp>(a).getResult(); }
  /// `where(condition, a, b)`.
  mlir::Value select(mlir::Value condition, mlir::Value a, mlir::Value b) {
    return create<WhereOp>(condition, a, b).getResult();
  }
  mlir::Value compare(ComparePredicate predicate, mlir::Value a, mlir::Value b);

  /// A 0-D constant of `elementType`.
  mlir::Value scalar(double value, mlir::Type elementType);
  /// A splat constant of `type`.
  mlir::Value splat(double value, mlir::Type type);
  /// A 0-D constant of `like`'s element type.
  mlir::Value scalarLike(double value, mlir::Value like);

  /// Sums `grad` over the dimensions along which a value of `type` was
  /// broadcast to `grad`'s shape, and reshapes it to `type`.
  mlir::Value unbroadcast(mlir::Value grad, mlir::Type type);
  /// `value` reshaped to `shape`, or itself if it has that shape already.
  mlir::Value reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape);
  /// `value` (of a reduction's result shape) reshaped to keep the reduced
  /// `axes` as size-1 dimensions of a rank-`rank` tensor, then broadcast to
  /// `shape`.
  mlir::Value expandReduced(mlir::Value value, llvm::ArrayRef<int64_t> axes,
                            bool keptDims, llvm::ArrayRef<int64_t> shape);

  mlir::OpBuilder &builder;
  mlir::Location loc;

private:
  const llvm::DenseSet<mlir::Value> *active;
};

using GradientRule = std::function<mlir::LogicalResult(
    mlir::Operation *op, llvm::ArrayRef<mlir::Value> resultGrads,
    GradientBuilder &builder, llvm::SmallVectorImpl<mlir::Value> &operandGrads)>;

class GradientRuleTable {
public:
  /// Registers `fn(OpTy, resultGrads, builder, operandGrads)`.
  template <typename OpTy, typename Fn> void add(Fn fn) {
    rules[mlir::TypeID::get<OpTy>()] =
        [fn](mlir::Operation *op, llvm::ArrayRef<mlir::Value> resultGrads,
             GradientBuilder &builder,
             llvm::SmallVectorImpl<mlir::Value> &operandGrads) {
          return fn(llvm::cast<OpTy>(op), resultGrads, builder, operandGrads);
        };
  }
  /// Marks OpTy as having no gradient (piecewise constant, or not a number
  /// in its results): the paths through it carry none.
  template <typename... OpTys> void addNonDifferentiable() {
    (nonDifferentiable.insert(mlir::TypeID::get<OpTys>()), ...);
  }
  const GradientRule *lookup(mlir::Operation *op) const;
  bool isNonDifferentiable(mlir::Operation *op) const;

private:
  llvm::DenseMap<mlir::TypeID, GradientRule> rules;
  llvm::DenseSet<mlir::TypeID> nonDifferentiable;
};

const GradientRuleTable &gradientRules();

void registerElementwiseGradients(GradientRuleTable &table);
void registerContractionGradients(GradientRuleTable &table);
void registerDataMovementGradients(GradientRuleTable &table);

} // namespace kiln

#endif // KILN_LIB_AUTODIFF_GRADIENTRULES_H
