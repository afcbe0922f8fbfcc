//===- ShapeInference.h - result types of kiln ops ---------------*- C++ -*-===//
//
// Shape rules shared by the ops' type inference and verifiers, so that the two
// never disagree, and by the ONNX importer, which checks a model's shapes with
// the same rules before it builds an op.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_SHAPEINFERENCE_H
#define KILN_DIALECT_KILN_IR_SHAPEINFERENCE_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

namespace kiln {

/// The NumPy broadcast of `shapes`, or failure with a message naming the first
/// pair of sizes that do not broadcast.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(std::optional<mlir::Location> location,
                llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes);

/// Result type of an elementwise op with broadcasting: the broadcast of the
/// operand shapes with `elementType`, or the first operand's element type.
mlir::LogicalResult
inferBroadcastResultType(std::optional<mlir::Location> location,
                         llvm::ArrayRef<mlir::Type> operandTypes,
                         mlir::Type elementType,
                         llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Result type of a reduction over `axes`.
mlir::LogicalResult
inferReductionResultType(std::optional<mlir::Location> location,
                         mlir::RankedTensorType inputType,
                         llvm::ArrayRef<int64_t> axes, bool keepDims,
                         mlir::Type elementType,
                         llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Result type of cross_entropy and nll_loss.
mlir::LogicalResult inferClassificationLossType(
    std::optional<mlir::Location> location, mlir::Type inputType,
    mlir::Type labelsType, mlir::Type weightType, LossReduction reduction,
    llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Checks the operands of cross_entropy_grad and nll_loss_grad against the
/// forward op's rules.
mlir::LogicalResult verifyClassificationLossGrad(mlir::Operation *op);
/// Checks a loss's `num_classes`, if any, against its input's classes.
mlir::LogicalResult verifyClassCount(mlir::Operation *op);

/// Checks that a strided window (`start`, `stride`, `windowShape`) lies
/// inside a tensor of `shape` (slice and insert_slice).
mlir::LogicalResult verifySliceWindow(mlir::Operation *op,
                                      llvm::ArrayRef<int64_t> shape,
                                      llvm::ArrayRef<int64_t> start,
                                      llvm::ArrayRef<int64_t> stride,
                                      llvm::ArrayRef<int64_t> windowShape);

/// Checks that `axis` names a dimension of a tensor of rank `rank`.
mlir::LogicalResult verifyAxis(mlir::Operation *op, int64_t axis, int64_t rank);

/// A reduction over no axes returns its input.
mlir::OpFoldResult foldEmptyReduction(mlir::Operation *op);

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_SHAPEINFERENCE_H
