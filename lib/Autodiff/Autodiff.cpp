//===- Autodiff.cpp - reverse-mode differentiation of kiln functions ------===//
//
// 1. Activity: a value is active when it depends differentiably on a
//    trainable parameter and the loss depends differentiably on it. Only
//    active values get gradients, so frozen parameters and buffers (a causal
//    mask, position ids) cost no gradient work.
// 2. The reverse sweep visits the ops in reverse order, applies each op's
//    rule to the gradients of its results and adds the operand gradients
//    into a map; values used several times (tied weights) sum their uses.
// 3. The gradient function returns the forward results and one gradient per
//    trainable parameter; gradient work that nothing returns is erased.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"

#include "GradientRules.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Regex.h"

using namespace mlir;

namespace kiln {

static bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

FailureOr<SmallVector<ParameterOp>>
selectParameters(func::FuncOp function, const AutodiffOptions &options) {
  llvm::Regex train(options.train.empty() ? ".*" : options.train);
  llvm::Regex freeze(options.freeze);
  std::string error;
  if (!train.isValid(error) || (!options.freeze.empty() && !freeze.isValid(error)))
    return function.emitError() << "invalid parameter pattern: " << error;
  SmallVector<ParameterOp> selected;
  function.walk([&](ParameterOp op) {
    StringRef name = op.getName();
    // Literals and buffers are trained only when named explicitly.
    bool buffer = options.train.empty() && notAWeight(op);
    if (isFloatTensor(op) && !buffer && train.match(name) &&
        (options.freeze.empty() || !freeze.match(name)))
      selected.push_back(op);
  });
  return selected;
}

/// The returned value that is the loss.
static FailureOr<unsigned> findLoss(func::FuncOp function, StringRef name) {
  ArrayRef<Type> results = function.getFunctionType().getResults();
  for (unsigned i = 0; i < results.size(); ++i) {
    auto type = cast<RankedTensorType>(results[i]);
    auto resultName = function.getResultAttrOfType<StringAttr>(i, "kiln.name");
    bool named = resultName && resultName.getValue() == name;
    if (name.empty() ? type.getRank() == 0 && isa<FloatType>(type.getElementType())
                     : named) {
      if (type.getNumElements() != 1 || !isa<FloatType>(type.getElementType()))
        return function.emitError() << "the loss '" << name
                                    << "' must be a floating-point scalar, got "
                                    << type;
      return i;
    }
  }
  if (name.empty())
    return function.emitError("the function returns no floating-point scalar "
                              "to use as the loss; name one with --loss");
  return function.emitError() << "the function has no result named '" << name
                              << "'";
}

/// Values that depend differentiably on `sources` (forward) and on which
/// `loss` depends differentiably (backward), among `ops`.
static DenseSet<Value> activeValues(ArrayRef<Operation *> ops,
                                    ArrayRef<Value> sources, Value loss) {
  const GradientRuleTable &rules = gradientRules();
  DenseSet<Value> varied, useful;
  for (Value source : sources)
    varied.insert(source);
  for (Operation *opPointer : ops) {
    Operation &op = *opPointer;
    if (!rules.lookup(&op))
      continue;
    if (llvm::any_of(op.getOperands(), [&](Value v) { return varied.count(v); }))
      for (Value result : op.getResults())
        if (isFloatTensor(result))
          varied.insert(result);
  }
  useful.insert(loss);
  for (Operation *opPointer : llvm::reverse(ops)) {
    Operation &op = *opPointer;
    if (!rules.lookup(&op) ||
        llvm::none_of(op.getResults(), [&](Value v) { return useful.count(v); }))
      continue;
    for (Value operand : op.getOperands())
      if (isFloatTensor(operand))
        useful.insert(operand);
  }
  DenseSet<Value> active;
  for (Value value : varied)
    if (useful.count(value))
      active.insert(value);
  return active;
}

FailureOr<SmallVector<Value>> differentiate(OpBuilder &builder, Value y,
                                            ArrayRef<Value> xs) {
  Block *block = builder.getInsertionBlock();
  // The ops that can lie between the xs and y: those before the insertion
  // point.
  SmallVector<Operation *> forwardOps;
  for (Operation &op : *block) {
    if (&op == &*builder.getInsertionPoint())
      break;
    forwardOps.push_back(&op);
  }
  DenseSet<Value> active = activeValues(forwardOps, xs, y);

  const GradientRuleTable &rules = gradientRules();
  DenseMap<Value, Value> grads;
  Value seed = GradientBuilder(builder, y.getLoc()).splat(1.0, y.getType());
  seed.getDefiningOp()->setAttr(kLossSeedAttr, builder.getUnitAttr());
  grads[y] = seed;
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      Value grad = active.count(result) ? grads.lookup(result) : Value();
      resultGrads.push_back(grad);
      any |= bool(grad);
    }
    // Leaves (parameters, constants) keep their gradient in the map.
    if (!any || op->getNumOperands() == 0)
      continue;
    const GradientRule *rule = rules.lookup(op);
    if (!rule) {
      if (rules.isNonDifferentiable(op))
        continue;
      return op->emitOpError("has no gradient rule, but the loss depends on "
                             "its result");
    }
    GradientBuilder gradientBuilder(builder, op->getLoc(), &active);
    SmallVector<Value> operandGrads;
    if (failed((*rule)(op, resultGrads, gradientBuilder, operandGrads)))
      return failure();
    for (auto [index, grad] : llvm::enumerate(operandGrads)) {
      Value operand = op->getOperand(index);
      if (!active.count(operand))
        continue;
      // A rule that gives an operand no gradient must not meet one that a
      // trained parameter reaches: its gradient would silently be lost.
      if (!grad)
        return op->emitOpError("gives operand ")
               << index
               << " no gradient, but it depends on a trained parameter";
      Value &sum = grads[operand];
      sum = sum ? gradientBuilder.add(sum, grad) : grad;
    }
  }
  SmallVector<Value> result;
  for (Value x : xs)
    result.push_back(grads.lookup(x));
  return result;
}

FailureOr<func::FuncOp> buildGradientFunction(func::FuncOp forward,
                                              const AutodiffOptions &options) {
  if (!forward.getBody().hasOneBlock())
    return forward.emitError("autodiff needs a single-block function");
  FailureOr<unsigned> lossIndex = findLoss(forward, options.loss);
  if (failed(lossIndex))
    return failure();

  OpBuilder builder(forward);
  builder.setInsertionPointAfter(forward);
  auto function = cast<func::FuncOp>(builder.clone(*forward));
  function.setSymName((forward.getSymName() + "_grad").str());
  SymbolTable::setSymbolVisibility(function, SymbolTable::Visibility::Public);
  Block &body = function.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(*lossIndex);

  FailureOr<SmallVector<ParameterOp>> selected = selectParameters(function, options);
  if (failed(selected))
    return failure();
  remarkOnBuffers(function, options);
  warnAboutUntiedCopies(*selected);
  warnAboutMergedParameters(*selected);
  SmallVector<Value> parameterValues;
  for (ParameterOp op : *selected)
    parameterValues.push_back(op.getResult());
  builder.setInsertionPoint(ret);
  FailureOr<SmallVector<Value>> parameterGrads =
      differentiate(builder, loss, parameterValues);
  if (failed(parameterGrads))
    return failure();

  // One gradient per parameter name, summing parameters imported twice.
  llvm::MapVector<StringRef, Value> byName;
  for (auto [op, grad] : llvm::zip(*selected, *parameterGrads)) {
    if (!grad)
      continue; // does not reach the loss: not trainable
    Value &sum = byName[op.getName()];
    sum = sum ? GradientBuilder(builder, op.getLoc()).add(sum, grad) : grad;
  }
  SmallVector<Value> results(ret.getOperands());
  for (auto &[name, grad] : byName)
    results.push_back(grad);
  builder.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  unsigned numForward = forward.getNumResults();
  function.setType(builder.getFunctionType(
      function.getArgumentTypes(), ValueRange(results).getTypes()));
  function->setAttr(kLossIndexAttr, builder.getI64IntegerAttr(*lossIndex));
  for (auto [i, entry] : llvm::enumerate(byName))
    function.setResultAttr(numForward + i, kGradientOfAttr,
                           builder.getStringAttr(entry.first));

  // Gradient work that reaches no result (frozen parameters, values that
  // the loss does not depend on) is removed, not computed and dropped.
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && isPure(op))
      op->erase();
  return function;
}

} // namespace kiln
