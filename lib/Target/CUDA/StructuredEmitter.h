//===- StructuredEmitter.h - lambdas of ops that read other positions ----===//
//
// The emitter of StructuredOps.cpp and OptimizerOps.cpp: one value of an op
// whose elements read other positions of its operands (or, for an
// optimizer, several of its state), defined as a lambda of its index by
// the kernel writer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TARGET_CUDA_STRUCTUREDEMITTER_H
#define KILN_LIB_TARGET_CUDA_STRUCTUREDEMITTER_H

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

namespace kiln::cuda {

struct StructuredEmitter {
  KernelWriter &w;
  mlir::Value value;
  bool nested;
  mlir::Operation *op = value.getDefiningOp();
  mlir::Type type = elementTypeOf(value);
  mlir::ArrayRef<int64_t> shape = shapeOf(value);
  mlir::Type f64 = mlir::Float64Type::get(value.getContext());
  bool failedOperand = false;

  /// `operand(index)`; records a failure (already reported) instead of
  /// returning it, so that expressions compose.
  std::string at(mlir::Value operand, const std::string &index,
                 bool inTerm = false) {
    mlir::FailureOr<std::string> x = w.at(operand, index, nested || inTerm);
    if (failed(x)) {
      failedOperand = true;
      return "0";
    }
    return *x;
  }
  mlir::FailureOr<std::string> returns(const std::string &body) {
    if (failedOperand)
      return mlir::failure();
    return w.define(value, nested, body);
  }
  mlir::FailureOr<std::string> returnsExpr(const std::string &expr) {
    return returns("    return " + rounded(type, expr) + ";\n");
  }
  /// An element of an operand of the value's own type, moved unchanged:
  /// every lambda's value is already of its type, so it is not rounded
  /// again.
  mlir::FailureOr<std::string> moves(const std::string &element) {
    return returns("    return " + element + ";\n");
  }
  mlir::FailureOr<std::string> reduces(const Reduction &r) {
    if (failedOperand)
      return mlir::failure();
    return w.defineReduction(value, nested, r);
  }
  /// A statistic of the value; `inTerm` when it is read inside the term of
  /// another reduction, where each thread of a block asks for a different
  /// one and so must compute it alone.
  std::string stat(const Reduction &r, bool inTerm = false) {
    return w.reduction(f64, nested || inTerm, r);
  }
  /// The index, for a whole row of a block-per-row kernel, of a statistic
  /// the value reads at `i / period` (KernelWriter::rowStart).
  std::string rowStart(int64_t period) {
    return w.rowStart(value, period, "(i0 / " + indexConstant(period) + ")");
  }
  /// Likewise for a statistic of a row of `split`, which only rows along
  /// the last axis keep in one piece.
  std::string rowStart(const AxisSplit &split) {
    return split.inner == 1 ? w.rowStart(value, split.extent, split.row("i0"))
                            : "";
  }
  mlir::FailureOr<std::string> unsupported(const mlir::Twine &why) {
    return op->emitError() << "the CUDA target cannot compile '"
                           << op->getName() << "': " << why;
  }

  mlir::FailureOr<std::string> emit();
  mlir::FailureOr<std::string> reduction(mlir::Value input,
                                         mlir::ArrayRef<int64_t> axes,
                                         const char *combiner,
                                         const std::string &init, bool mean);
  mlir::FailureOr<std::string> argReduction(mlir::Value input, int64_t axis,
                                            bool max, bool last);
  mlir::FailureOr<std::string> topK(TopKOp op);
  mlir::FailureOr<std::string> softmax(mlir::Value input, int64_t axis,
                                       bool log);
  mlir::FailureOr<std::string>
  normalization(mlir::Value input, mlir::Value mean, mlir::Value scale,
                mlir::Value bias, int64_t axis, double epsilon);
  mlir::FailureOr<std::string>
  normalizationGrad(mlir::Value input, mlir::Value mean, mlir::Value rstd,
                    mlir::Value grad, mlir::Value scale, int64_t axis);
  mlir::FailureOr<std::string>
  classification(mlir::Value input, mlir::Value labels, mlir::Value weight,
                 mlir::Value grad, LossReduction reduction,
                 std::optional<int64_t> ignoreIndex,
                 std::optional<int64_t> classes, bool logits);
  mlir::FailureOr<std::string> matmul(MatmulOp op);
  mlir::FailureOr<std::string> pad(PadOp op);
  /// An optimizer's update of a parameter's elements, or of its state
  /// (OptimizerOps.cpp).
  mlir::FailureOr<std::string> optimizerUpdate();
};

} // namespace kiln::cuda

#endif // KILN_LIB_TARGET_CUDA_STRUCTUREDEMITTER_H
