//===- ConstantEvaluators.cpp - constants, parameters, ranges, draws ------===//
//
// Ops whose values come from attributes rather than operands, and the random
// ones (dropout, uniform and normal draws), pure functions of their seed.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/TensorAttr.h"
#include "kiln/Support/SplitMix.h"

#include <cmath>

using namespace mlir;

namespace kiln {

static LogicalResult evaluateConstant(ConstantOp op, const EvaluationContext &,
                                      SmallVectorImpl<Tensor> &results) {
  FailureOr<Tensor> value = tensorFromAttr(op.getValue());
  if (failed(value))
    return op.emitOpError("holds a value the interpreter cannot read");
  results.push_back(std::move(*value));
  return success();
}

static LogicalResult evaluateParameter(ParameterOp op,
                                       const EvaluationContext &context,
                                       SmallVectorImpl<Tensor> &results) {
  if (const llvm::StringMap<Tensor> *given = context.options.parameters) {
    auto it = given->find(op.getName());
    if (it != given->end()) {
      // A padded parameter may be given in its stored or its logical shape.
      RankedTensorType type = it->second.getType(op.getContext());
      std::optional<ArrayRef<int64_t>> logical = op.getLogicalShape();
      if (type == op.getType()) {
        results.push_back(it->second);
        return success();
      }
      if (logical && type == op.getType().clone(*logical)) {
        results.push_back(it->second.resized(op.getType().getShape()));
        return success();
      }
      return op.emitOpError()
             << "value given for parameter '" << op.getName() << "' has type "
             << type << ", expected "
             << (logical ? op.getType().clone(*logical) : op.getType());
    }
  }
  std::optional<ElementsAttr> initial = op.getInitialValue();
  if (!initial)
    return op.emitOpError() << "parameter '" << op.getName()
                            << "' has no value: the model declares it without "
                               "one, so a value must be given";
  FailureOr<Tensor> value = tensorFromAttr(*initial);
  if (failed(value))
    return op.emitOpError() << "cannot read the value of parameter '"
                            << op.getName() << "'";
  results.push_back(value->resized(op.getType().getShape()));
  return success();
}

static LogicalResult evaluateRange(RangeOp op, const EvaluationContext &,
                                   SmallVectorImpl<Tensor> &results) {
  Tensor result = makeTensor(op.getResult());
  double start = op.getStart().convertToDouble();
  double step = op.getStep().convertToDouble();
  for (int64_t i = 0; i < result.getNumElements(); ++i)
    result.setFromDouble(i, start + static_cast<double>(i) * step);
  results.push_back(std::move(result));
  return success();
}

RandomDraw::RandomDraw(int64_t seed, std::optional<int64_t> offset)
    : key(splitMix64(static_cast<uint64_t>(seed))) {
  if (offset)
    key = splitMix64(key ^ static_cast<uint64_t>(*offset));
}

double RandomDraw::uniform(int64_t index) const {
  return uniformDraw(key, static_cast<uint64_t>(index));
}

double RandomDraw::normal(int64_t index) const {
  double radius = std::sqrt(-2.0 * std::log(1.0 - uniform(2 * index)));
  return radius * std::cos(2.0 * M_PI * uniform(2 * index + 1));
}

/// The offset operand of a random op, if it has one.
static std::optional<int64_t>
offsetOf(Value offset, const EvaluationContext &context, unsigned operand) {
  if (!offset)
    return std::nullopt;
  return context.operand(operand).ints()[0];
}

static LogicalResult evaluateRandomUniform(RandomUniformOp op,
                                           const EvaluationContext &context,
                                           SmallVectorImpl<Tensor> &results) {
  RandomDraw draw(op.getSeed(), offsetOf(op.getOffset(), context, 0));
  double low = op.getLow().convertToDouble(),
         high = op.getHigh().convertToDouble();
  Tensor result = makeTensor(op.getResult());
  for (int64_t i = 0; i < result.getNumElements(); ++i)
    result.setFromDouble(i, low + (high - low) * draw.uniform(i));
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateRandomNormal(RandomNormalOp op,
                                          const EvaluationContext &context,
                                          SmallVectorImpl<Tensor> &results) {
  RandomDraw draw(op.getSeed(), offsetOf(op.getOffset(), context, 0));
  double mean = op.getMean().convertToDouble(),
         scale = op.getScale().convertToDouble();
  Tensor result = makeTensor(op.getResult());
  for (int64_t i = 0; i < result.getNumElements(); ++i)
    result.setFromDouble(i, mean + scale * draw.normal(i));
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateDropout(DropoutOp op,
                                     const EvaluationContext &context,
                                     SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor output = makeTensor(op.getOutput());
  Tensor mask = makeTensor(op.getMask());
  DropoutDraw draw(op.getSeed(), offsetOf(op.getOffset(), context, 1),
                   op.getRatio().convertToDouble());
  for (int64_t i = 0; i < input.getNumElements(); ++i) {
    bool keep = draw.keep(i);
    mask.ints()[i] = keep;
    output.setFromDouble(i, keep ? input.floats()[i] * draw.scale() : 0.0);
  }
  results.push_back(std::move(output));
  results.push_back(std::move(mask));
  return success();
}

void registerConstantEvaluators(EvaluatorTable &table) {
  table.add<ConstantOp>(evaluateConstant);
  table.add<ParameterOp>(evaluateParameter);
  table.add<RangeOp>(evaluateRange);
  table.add<DropoutOp>(evaluateDropout);
  table.add<RandomUniformOp>(evaluateRandomUniform);
  table.add<RandomNormalOp>(evaluateRandomNormal);
}

} // namespace kiln
