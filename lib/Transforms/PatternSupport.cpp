//===- PatternSupport.cpp - shared by the pattern passes ------------------===//

#include "PatternSupport.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/TensorAttr.h"

#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;

namespace kiln {

FailureOr<Literals> Literals::of(func::FuncOp function,
                                 const AutodiffOptions &training) {
  FailureOr<SmallVector<ParameterOp>> trained =
      selectParameters(function, training);
  if (failed(trained))
    return failure();
  DenseSet<Operation *> ops;
  for (ParameterOp op : *trained)
    ops.insert(op);
  return Literals(std::move(ops));
}

std::optional<double> Literals::value(Value value) const {
  Operation *op = value.getDefiningOp();
  if (auto constant = dyn_cast_if_present<ConstantOp>(op)) {
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    if (splat && isa<FloatType>(splat.getElementType()))
      return splat.getSplatValue<APFloat>().convertToDouble();
  } else if (auto parameter = dyn_cast_if_present<ParameterOp>(op)) {
    if (trained.contains(op) || !parameter.getInitialValue() ||
        parameter.getType().getNumElements() != 1)
      return std::nullopt;
    FailureOr<Tensor> initial = tensorFromAttr(*parameter.getInitialValue());
    if (succeeded(initial) && initial->isFloat())
      return initial->floats()[0];
  }
  return std::nullopt;
}

bool Literals::is(Value value, double expected) const {
  std::optional<double> actual = this->value(value);
  return actual && std::fabs(*actual - expected) <= 1e-6 * std::fabs(expected);
}

void eraseReplaced(ArrayRef<Operation *> replaced) {
  llvm::SetVector<Operation *> unique(replaced.begin(), replaced.end());
  SmallVector<Operation *> ops = unique.takeVector();
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *&op : ops)
      if (op && op->use_empty() && !isa<ParameterOp>(op)) {
        op->erase();
        op = nullptr;
        erased = true;
      }
  }
}

} // namespace kiln
