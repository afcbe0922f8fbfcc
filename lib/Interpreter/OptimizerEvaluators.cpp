//===- OptimizerEvaluators.cpp - AdamW, SGD and Adagrad updates -----------===//
//
// Each update is computed per element in fp64 from the stored (rounded)
// state and rounds the new parameter and state once to their type; PyTorch's
// fp32 kernels round each intermediate, which differs by a few fp32 ulps.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include <cmath>

using namespace mlir;

namespace kiln {

/// The learning rate and the 1-based step number, which must be positive.
static FailureOr<std::pair<double, int64_t>>
schedule(Operation *op, const EvaluationContext &context, unsigned lrOperand) {
  double lr = context.operand(lrOperand).getAsDouble(0);
  int64_t step = context.operand(lrOperand + 1).ints()[0];
  if (step < 1)
    return op->emitOpError() << "step " << step << " is not positive";
  return std::make_pair(lr, step);
}

static LogicalResult evaluateAdamW(AdamWOp op, const EvaluationContext &context,
                                   SmallVectorImpl<Tensor> &results) {
  FailureOr<std::pair<double, int64_t>> at = schedule(op, context, 4);
  if (failed(at))
    return failure();
  auto [lr, step] = *at;
  const Tensor &param = context.operand(0), &grad = context.operand(1);
  const Tensor &m = context.operand(2), &v = context.operand(3);
  double beta1 = op.getBeta1().convertToDouble();
  double beta2 = op.getBeta2().convertToDouble();
  double epsilon = op.getEpsilon().convertToDouble();
  double decay = 1.0 - lr * op.getWeightDecay().convertToDouble();
  double stepSize = lr / (1.0 - std::pow(beta1, step));
  double correction2 = std::sqrt(1.0 - std::pow(beta2, step));
  Tensor newParam = makeTensor(op.getNewParam());
  Tensor newM = makeTensor(op.getNewExpAvg());
  Tensor newV = makeTensor(op.getNewExpAvgSq());
  for (int64_t i = 0; i < param.getNumElements(); ++i) {
    double g = grad.floats()[i];
    newM.setFromDouble(i, beta1 * m.floats()[i] + (1.0 - beta1) * g);
    newV.setFromDouble(i, beta2 * v.floats()[i] + (1.0 - beta2) * g * g);
    double denominator = std::sqrt(newV.floats()[i]) / correction2 + epsilon;
    newParam.setFromDouble(i, param.floats()[i] * decay -
                                  stepSize * newM.floats()[i] / denominator);
  }
  results.push_back(std::move(newParam));
  results.push_back(std::move(newM));
  results.push_back(std::move(newV));
  return success();
}

static LogicalResult evaluateSgd(SgdOp op, const EvaluationContext &context,
                                 SmallVectorImpl<Tensor> &results) {
  FailureOr<std::pair<double, int64_t>> at = schedule(op, context, 3);
  if (failed(at))
    return failure();
  auto [lr, step] = *at;
  const Tensor &param = context.operand(0), &grad = context.operand(1);
  const Tensor &buffer = context.operand(2);
  double momentum = op.getMomentum().convertToDouble();
  double dampening = op.getDampening().convertToDouble();
  double decay = op.getWeightDecay().convertToDouble();
  Tensor newParam = makeTensor(op.getNewParam());
  Tensor newBuffer = makeTensor(op.getNewMomentumBuffer());
  for (int64_t i = 0; i < param.getNumElements(); ++i) {
    double g = grad.floats()[i] + decay * param.floats()[i];
    if (momentum != 0.0) {
      newBuffer.setFromDouble(i, step == 1 ? g
                                           : momentum * buffer.floats()[i] +
                                                 (1.0 - dampening) * g);
      g = op.getNesterov() ? g + momentum * newBuffer.floats()[i]
                           : newBuffer.floats()[i];
    }
    newParam.setFromDouble(i, param.floats()[i] - lr * g);
  }
  results.push_back(std::move(newParam));
  results.push_back(std::move(newBuffer));
  return success();
}

static LogicalResult evaluateAdagrad(AdagradOp op,
                                     const EvaluationContext &context,
                                     SmallVectorImpl<Tensor> &results) {
  FailureOr<std::pair<double, int64_t>> at = schedule(op, context, 3);
  if (failed(at))
    return failure();
  auto [lr, step] = *at;
  const Tensor &param = context.operand(0), &grad = context.operand(1);
  const Tensor &sum = context.operand(2);
  double decay = op.getWeightDecay().convertToDouble();
  double epsilon = op.getEpsilon().convertToDouble();
  double clr = lr / (1.0 + (step - 1) * op.getLrDecay().convertToDouble());
  Tensor newParam = makeTensor(op.getNewParam());
  Tensor newSum = makeTensor(op.getNewSum());
  for (int64_t i = 0; i < param.getNumElements(); ++i) {
    double g = grad.floats()[i] + decay * param.floats()[i];
    newSum.setFromDouble(i, sum.floats()[i] + g * g);
    newParam.setFromDouble(i, param.floats()[i] -
                                  clr * g / (std::sqrt(newSum.floats()[i]) +
                                             epsilon));
  }
  results.push_back(std::move(newParam));
  results.push_back(std::move(newSum));
  return success();
}

void registerOptimizerEvaluators(EvaluatorTable &table) {
  table.add<AdamWOp>(evaluateAdamW);
  table.add<SgdOp>(evaluateSgd);
  table.add<AdagradOp>(evaluateAdagrad);
}

} // namespace kiln
