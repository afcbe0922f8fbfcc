//===- GemmEpilogues.cpp - what cuBLASLt applies as it stores -------------===//

#include "kiln/Transforms/GemmEpilogues.h"

using namespace mlir;

namespace kiln {

AddOp rowBiasAdd(MatmulOp product, OpOperand *&bias) {
  if (!product->hasOneUse())
    return {};
  auto add = dyn_cast<AddOp>(*product->user_begin());
  if (!add || add.getType() != product.getType())
    return {};
  OpOperand &other = add.getLhs() == product.getResult() ? add.getRhsMutable()
                                                         : add.getLhsMutable();
  auto type = cast<RankedTensorType>(other.get().getType());
  if (other.get() == product.getResult() || type.getRank() != 1 ||
      type.getDimSize(0) != product.getType().getShape().back())
    return {};
  bias = &other;
  return add;
}

GeluGradOp geluGradScaling(MatmulOp product,
                           SmallVectorImpl<Operation *> *views) {
  Value grad = product.getResult();
  while (grad.hasOneUse()) {
    Operation *reader = *grad.user_begin();
    if (auto gelu = dyn_cast<GeluGradOp>(reader))
      return gelu.getGrad() == grad ? gelu : GeluGradOp();
    if (!isa<ReshapeOp>(reader))
      return {};
    if (views)
      views->push_back(reader);
    grad = reader->getResult(0);
  }
  return {};
}

ReduceSumOp operandSum(MatmulOp product, CastOp &widening, bool &ofLhs) {
  auto rankOf = [](Value value) {
    return cast<RankedTensorType>(value.getType()).getRank();
  };
  if (rankOf(product.getLhs()) != 2 || rankOf(product.getRhs()) != 2)
    return {};
  Type type = product.getType().getElementType();
  // The sum over `axis` of `operand`, into the product's type.
  auto sumOver = [&](Value operand, int64_t axis) -> ReduceSumOp {
    for (Operation *reader : operand.getUsers()) {
      auto cast = dyn_cast<CastOp>(reader);
      if (cast && (!cast.widensExactly() || !cast->hasOneUse()))
        continue;
      auto sum = dyn_cast<ReduceSumOp>(cast ? *cast->user_begin() : reader);
      if (sum && sum.getAxes() == ArrayRef<int64_t>{axis} &&
          sum.getType().getElementType() == type) {
        widening = cast;
        return sum;
      }
    }
    return {};
  };
  ofLhs = true;
  if (ReduceSumOp sum =
          sumOver(product.getLhs(), product.getTransposeLhs() ? 0 : 1))
    return sum;
  ofLhs = false;
  return sumOver(product.getRhs(), product.getTransposeRhs() ? 1 : 0);
}

} // namespace kiln
