//===- ShapeInference.cpp - result types of kiln ops ----------------------===//
//
// Implements the shape rules shared by type inference, verifiers and the
// ONNX importer.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/ShapeInference.h"

#include "kiln/Support/Shapes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace kiln {

FailureOr<SmallVector<int64_t>>
broadcastShapes(std::optional<Location> location,
                ArrayRef<ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (ArrayRef<int64_t> shape : shapes)
    rank = std::max(rank, shape.size());
  SmallVector<int64_t> result(rank, 1);
  for (ArrayRef<int64_t> shape : shapes) {
    size_t offset = rank - shape.size();
    for (auto [i, size] : llvm::enumerate(shape)) {
      int64_t &merged = result[offset + i];
      if (size == merged || size == 1)
        continue;
      if (merged != 1) {
        std::string all;
        for (ArrayRef<int64_t> s : shapes)
          all += (all.empty() ? "" : " and ") + formatShape(s);
        return emitOptionalError(location, "shapes ", all,
                                 " do not broadcast: dimension ", offset + i,
                                 " has sizes ", merged, " and ", size);
      }
      merged = size;
    }
  }
  return result;
}

LogicalResult inferBroadcastResultType(std::optional<Location> location,
                                       ArrayRef<Type> operandTypes,
                                       Type elementType,
                                       SmallVectorImpl<Type> &inferred) {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Type type : operandTypes)
    shapes.push_back(cast<RankedTensorType>(type).getShape());
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(location, shapes);
  if (failed(shape))
    return failure();
  if (!elementType)
    elementType = cast<RankedTensorType>(operandTypes.front()).getElementType();
  inferred.push_back(RankedTensorType::get(*shape, elementType));
  return success();
}

LogicalResult inferReductionResultType(std::optional<Location> location,
                                       RankedTensorType inputType,
                                       ArrayRef<int64_t> axes, bool keepDims,
                                       Type elementType,
                                       SmallVectorImpl<Type> &inferred) {
  int64_t rank = inputType.getRank();
  SmallVector<bool> reduced(rank, false);
  for (int64_t axis : axes) {
    if (axis < 0 || axis >= rank)
      return emitOptionalError(location, "reduction axis ", axis,
                               " is outside [0, ", rank, ")");
    if (reduced[axis])
      return emitOptionalError(location, "reduction axis ", axis,
                               " appears twice");
    reduced[axis] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      shape.push_back(inputType.getDimSize(d));
    else if (keepDims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(
      shape, elementType ? elementType : inputType.getElementType()));
  return success();
}

LogicalResult inferClassificationLossType(std::optional<Location> location,
                                          Type inputType, Type labelsType,
                                          Type weightType,
                                          LossReduction reduction,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = cast<RankedTensorType>(inputType);
  auto labels = cast<RankedTensorType>(labelsType);
  if (input.getRank() < 2)
    return emitOptionalError(location, "loss input must have shape [N, C, ...]"
                                       ", got rank ",
                             input.getRank());
  SmallVector<int64_t> expected{input.getDimSize(0)};
  llvm::append_range(expected, input.getShape().drop_front(2));
  if (labels.getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(location, "labels have shape ",
                             formatShape(labels.getShape()), " but input ",
                             formatShape(input.getShape()),
                             " needs labels of shape ", formatShape(expected));
  if (weightType) {
    auto weight = cast<RankedTensorType>(weightType);
    if (weight.getShape() != ArrayRef<int64_t>{input.getDimSize(1)})
      return emitOptionalError(location, "class weight has shape ",
                               formatShape(weight.getShape()),
                               ", expected [", input.getDimSize(1), "]");
  }
  if (reduction == LossReduction::None)
    inferred.push_back(RankedTensorType::get(expected, input.getElementType()));
  else
    inferred.push_back(RankedTensorType::get({}, input.getElementType()));
  return success();
}

LogicalResult verifyClassCount(Operation *op) {
  auto count = op->getAttrOfType<IntegerAttr>("num_classes");
  if (!count)
    return success();
  int64_t classes = cast<RankedTensorType>(op->getOperand(0).getType()).getDimSize(1);
  if (count.getInt() < 1 || count.getInt() > classes)
    return op->emitOpError() << "num_classes " << count.getInt()
                             << " is outside [1, " << classes << "]";
  return success();
}

LogicalResult verifyClassificationLossGrad(Operation *op) {
  auto reduction = op->getAttrOfType<LossReductionAttr>("reduction");
  Type weight = op->getNumOperands() > 3 ? op->getOperand(3).getType() : Type();
  SmallVector<Type> forward;
  if (failed(inferClassificationLossType(
          op->getLoc(), op->getOperand(0).getType(), op->getOperand(1).getType(),
          weight, reduction.getValue(), forward)))
    return failure();
  // The incoming gradient may be wider than the input (an f32 loss gradient
  // for 16-bit logits); its shape is the loss's.
  auto grad = cast<RankedTensorType>(op->getOperand(2).getType());
  if (grad.getShape() != cast<RankedTensorType>(forward.front()).getShape())
    return op->emitOpError() << "grad has type " << grad
                             << " but the loss has type " << forward.front();
  return verifyClassCount(op);
}

LogicalResult verifySliceWindow(Operation *op, ArrayRef<int64_t> shape,
                                ArrayRef<int64_t> start,
                                ArrayRef<int64_t> stride,
                                ArrayRef<int64_t> windowShape) {
  size_t rank = shape.size();
  if (windowShape.size() != rank || start.size() != rank ||
      stride.size() != rank)
    return op->emitOpError() << "start, stride and window must all have the "
                                "tensor's rank "
                             << rank;
  for (size_t d = 0; d < rank; ++d) {
    if (stride[d] == 0)
      return op->emitOpError() << "stride of dimension " << d << " is zero";
    if (windowShape[d] == 0)
      continue;
    int64_t last = start[d] + (windowShape[d] - 1) * stride[d];
    if (start[d] < 0 || start[d] >= shape[d] || last < 0 || last >= shape[d])
      return op->emitOpError() << "dimension " << d << " reads indices "
                               << start[d] << " to " << last << ", outside [0, "
                               << shape[d] << ")";
  }
  return success();
}

LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << "axis " << axis << " is outside [0, " << rank
                             << ")";
  return success();
}

OpFoldResult foldEmptyReduction(Operation *op) {
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
  if (axes && axes.empty() &&
      op->getOperand(0).getType() == op->getResult(0).getType())
    return op->getOperand(0);
  return {};
}

} // namespace kiln
