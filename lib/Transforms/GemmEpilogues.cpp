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
      return gelu.getGrad() == grad &&
                     gelu.getApproximation() == GeluApproximation::Tanh
                 ? gelu
                 : GeluGradOp();
    if (!isa<ReshapeOp>(reader))
      return {};
    if (views)
      views->push_back(reader);
    grad = reader->getResult(0);
  }
  return {};
}

} // namespace kiln
