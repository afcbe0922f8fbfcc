//===- KilnDialect.cpp - kiln dialect registration ------------------------===//
//
// Registers the kiln ops and materializes folded constants as kiln.constant.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;
using namespace kiln;

#include "kiln/Dialect/Kiln/IR/KilnOpsDialect.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
      >();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}
