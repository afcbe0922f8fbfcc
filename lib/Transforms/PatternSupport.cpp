//===- PatternSupport.cpp - shared by the pattern passes ------------------===//

#include "PatternSupport.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/TensorAttr.h"

#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;

namespace kiln {

FailureOr<DenseSet<Operation *>>
trainedParameters(func::FuncOp function, const AutodiffOptions &training) {
  FailureOr<SmallVector<ParameterOp>> trained =
      selectParameters(function, training);
  if (failed(trained))
    return failure();
  DenseSet<Operation *> ops;
  for (ParameterOp op : *trained)
    ops.insert(op);
  return ops;
}

FailureOr<Literals> Literals::of(func::FuncOp function,
                                 const AutodiffOptions &training) {
  FailureOr<DenseSet<Operation *>> trained =
      trainedParameters(function, training);
  if (failed(trained))
    return failure();
  return Literals(std::move(*trained));
}

std::optional<Tensor> Literals::tensor(Value value) const {
  Operation *op = value.getDefiningOp();
  std::optional<ElementsAttr> attr;
  if (auto constant = dyn_cast_if_present<ConstantOp>(op))
    attr = constant.getValue();
  else if (auto parameter = dyn_cast_if_present<ParameterOp>(op);
           parameter && !trained.contains(op))
    attr = parameter.getInitialValue();
  if (!attr)
    return std::nullopt;
  FailureOr<Tensor> tensor = tensorFromAttr(*attr);
  return succeeded(tensor) ? std::optional<Tensor>(std::move(*tensor))
                           : std::nullopt;
}

std::optional<double> Literals::value(Value value) const {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !isa<FloatType>(type.getElementType()))
    return std::nullopt;
  // A splat constant of any shape; a parameter of one element.
  if (auto constant = dyn_cast_if_present<ConstantOp>(value.getDefiningOp())) {
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    return splat
               ? std::optional(splat.getSplatValue<APFloat>().convertToDouble())
               : std::nullopt;
  }
  if (type.getNumElements() != 1)
    return std::nullopt;
  std::optional<Tensor> scalar = tensor(value);
  return scalar ? std::optional(scalar->floats()[0]) : std::nullopt;
}

bool Literals::dependsOnNoTrainedParameter(Value value) const {
  SmallVector<Value> work = {value};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *op = v.getDefiningOp();
    if (!op)
      continue;
    if (trained.contains(op) || op->getNumRegions())
      return false;
    llvm::append_range(work, op->getOperands());
  }
  return true;
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
