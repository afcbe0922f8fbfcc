//===- OpChain.cpp - straight-line op building for one node ---------------===//

#include "OpChain.h"

using namespace mlir;

namespace kiln {

Value OpChain::compare(ComparePredicate predicate, Value a, Value b) {
  return build<CompareOp>(
      {a, b}, {node.builder.getNamedAttr(
                  "predicate", ComparePredicateAttr::get(
                                   node.builder.getContext(), predicate))});
}

Value OpChain::productTransposed(Value a, Value b) {
  return build<MatmulOp>(
      {a, b},
      {node.builder.getNamedAttr("transpose_rhs", node.builder.getUnitAttr())});
}

Value OpChain::cast(Value x, Type elementType) {
  if (!x)
    return {};
  auto type = llvm::cast<RankedTensorType>(x.getType());
  if (type.getElementType() == elementType)
    return x;
  return build<CastOp>({x}, {}, {type.clone(elementType)});
}

Value OpChain::powerOfMagnitude(Value x, int64_t p) {
  if (p == 2)
    return mul(x, x);
  Value magnitude = unary<AbsOp>(x);
  return p == 1 ? magnitude
                : build<PowOp>({magnitude, constant(static_cast<double>(p))});
}

Value OpChain::root(Value x, int64_t p) {
  if (p == 1)
    return x;
  if (p == 2)
    return unary<SqrtOp>(x);
  return build<PowOp>({x, constant(1.0 / static_cast<double>(p))});
}

} // namespace kiln
