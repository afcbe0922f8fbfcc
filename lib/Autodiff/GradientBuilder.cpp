//===- GradientBuilder.cpp - helpers of the gradient rules ----------------===//
//
// Constants, broadcasting undone, and the rule table.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace kiln {

Value GradientBuilder::compare(ComparePredicate predicate, Value a, Value b) {
  return create<CompareOp>(predicate, a, b).getResult();
}

Value GradientBuilder::splat(double value, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  Type elementType = tensorType.getElementType();
  Attribute element =
      isa<FloatType>(elementType)
          ? Attribute(builder.getFloatAttr(elementType, value))
          : Attribute(builder.getIntegerAttr(elementType,
                                             static_cast<int64_t>(value)));
  return create<ConstantOp>(DenseElementsAttr::get(tensorType, element))
      .getResult();
}

Value GradientBuilder::scalar(double value, Type elementType) {
  return splat(value, RankedTensorType::get({}, elementType));
}

Value GradientBuilder::scalarLike(double value, Value like) {
  return scalar(value, cast<RankedTensorType>(like.getType()).getElementType());
}

Value GradientBuilder::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return create<ReshapeOp>(type.clone(shape), value).getResult();
}

Value GradientBuilder::unbroadcast(Value grad, Type type) {
  auto target = cast<RankedTensorType>(type);
  auto from = cast<RankedTensorType>(grad.getType());
  if (from.getShape() == target.getShape())
    return grad;
  int64_t offset = from.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < from.getRank(); ++d)
    if (d < offset || (target.getDimSize(d - offset) == 1 &&
                       from.getDimSize(d) != 1))
      axes.push_back(d);
  Value summed = grad;
  if (!axes.empty())
    summed = create<ReduceSumOp>(grad, axes, /*keep_dims=*/false).getResult();
  return reshape(summed, target.getShape());
}

Value GradientBuilder::expandReduced(Value value, ArrayRef<int64_t> axes,
                                     bool keptDims, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> kept(shape);
  for (int64_t axis : axes)
    kept[axis] = 1;
  Value reshaped = keptDims ? value : reshape(value, kept);
  auto type = cast<RankedTensorType>(reshaped.getType());
  if (type.getShape() == shape)
    return reshaped;
  return create<BroadcastOp>(type.clone(shape), reshaped).getResult();
}

const GradientRule *GradientRuleTable::lookup(Operation *op) const {
  std::optional<RegisteredOperationName> name = op->getRegisteredInfo();
  if (!name)
    return nullptr;
  auto it = rules.find(name->getTypeID());
  return it == rules.end() ? nullptr : &it->second;
}

bool GradientRuleTable::isNonDifferentiable(Operation *op) const {
  std::optional<RegisteredOperationName> name = op->getRegisteredInfo();
  return name && nonDifferentiable.contains(name->getTypeID());
}

const GradientRuleTable &gradientRules() {
  static const GradientRuleTable table = [] {
    GradientRuleTable t;
    registerElementwiseGradients(t);
    registerContractionGradients(t);
    registerDataMovementGradients(t);
    return t;
  }();
  return table;
}

} // namespace kiln
