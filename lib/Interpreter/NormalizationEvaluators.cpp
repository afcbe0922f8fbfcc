//===- NormalizationEvaluators.cpp - layer norm and RMS norm --------------===//
//
// Statistics are computed in fp64 over the trailing dimensions and stored in
// f32, as the ops define.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include <cmath>

using namespace mlir;

namespace kiln {

/// `affine` (scale or bias) broadcast to the normalized shape, flattened;
/// `fill` when the op has none.
static std::vector<double> expandAffine(const Tensor *affine,
                                        ArrayRef<int64_t> normalizedShape,
                                        double fill) {
  std::vector<double> values(product(normalizedShape), fill);
  if (!affine)
    return values;
  SmallVector<int64_t> strides =
      broadcastStrides(affine->getShape(), normalizedShape);
  forEachIndex<1>(normalizedShape, {strides},
                  [&](int64_t i, const std::array<int64_t, 1> &at) {
                    values[i] = affine->floats()[at[0]];
                  });
  return values;
}

static LogicalResult evaluateLayerNorm(LayerNormOp op,
                                       const EvaluationContext &context,
                                       SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  ArrayRef<int64_t> normalized = input.getShape().drop_front(op.getAxis());
  unsigned next = 1;
  const Tensor *scale = op.getScale() ? &context.operand(next++) : nullptr;
  const Tensor *bias = op.getBias() ? &context.operand(next++) : nullptr;
  std::vector<double> gamma = expandAffine(scale, normalized, 1.0);
  std::vector<double> beta = expandAffine(bias, normalized, 0.0);

  Tensor output = makeTensor(op.getOutput());
  Tensor mean = makeTensor(op.getMean());
  Tensor invStdDev = makeTensor(op.getInvStdDev());
  int64_t inner = gamma.size(), outer = mean.getNumElements();
  double epsilon = op.getEpsilon().convertToDouble();
  for (int64_t o = 0; o < outer; ++o) {
    const double *x = input.floats().data() + o * inner;
    double sum = 0.0;
    for (int64_t i = 0; i < inner; ++i)
      sum += x[i];
    double mu = sum / inner;
    double squares = 0.0;
    for (int64_t i = 0; i < inner; ++i)
      squares += (x[i] - mu) * (x[i] - mu);
    double rstd = 1.0 / std::sqrt(squares / inner + epsilon);
    for (int64_t i = 0; i < inner; ++i)
      output.setFromDouble(o * inner + i, (x[i] - mu) * rstd * gamma[i] + beta[i]);
    mean.setFromDouble(o, mu);
    invStdDev.setFromDouble(o, rstd);
  }
  results.push_back(std::move(output));
  results.push_back(std::move(mean));
  results.push_back(std::move(invStdDev));
  return success();
}

static LogicalResult evaluateRmsNorm(RmsNormOp op,
                                     const EvaluationContext &context,
                                     SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  ArrayRef<int64_t> normalized = input.getShape().drop_front(op.getAxis());
  const Tensor *scale = op.getScale() ? &context.operand(1) : nullptr;
  std::vector<double> gamma = expandAffine(scale, normalized, 1.0);

  Tensor output = makeTensor(op.getOutput());
  Tensor invRms = makeTensor(op.getInvRms());
  int64_t inner = gamma.size(), outer = invRms.getNumElements();
  double epsilon = op.getEpsilon().convertToDouble();
  for (int64_t o = 0; o < outer; ++o) {
    const double *x = input.floats().data() + o * inner;
    double squares = 0.0;
    for (int64_t i = 0; i < inner; ++i)
      squares += static_cast<double>(x[i]) * x[i];
    double rrms = 1.0 / std::sqrt(squares / inner + epsilon);
    for (int64_t i = 0; i < inner; ++i)
      output.setFromDouble(o * inner + i, x[i] * rrms * gamma[i]);
    invRms.setFromDouble(o, rrms);
  }
  results.push_back(std::move(output));
  results.push_back(std::move(invRms));
  return success();
}

/// Shared backward of the two normalizations over rows of `inner` elements:
/// `x^ = (x - mean) * rstd` (mean 0 for RMS norm), `g = dy * gamma`, and
/// `dx = rstd * (g - [centered] mean(g) - x^ * mean(g * x^))`; also
/// accumulates `sum(dy * x^)` and `sum(dy)` over rows.
static void normalizationBackward(const Tensor &x, const Tensor &dy,
                                  const std::vector<double> &gamma,
                                  const Tensor *mean, const Tensor &rstd,
                                  Tensor &dx, std::vector<double> &scaleGrad,
                                  std::vector<double> &biasGrad) {
  int64_t inner = gamma.size(), outer = rstd.getNumElements();
  std::vector<double> xhat(inner), g(inner);
  for (int64_t o = 0; o < outer; ++o) {
    double mu = mean ? mean->floats()[o] : 0.0, r = rstd.floats()[o];
    double meanG = 0.0, meanGX = 0.0;
    for (int64_t i = 0; i < inner; ++i) {
      int64_t at = o * inner + i;
      xhat[i] = (x.floats()[at] - mu) * r;
      g[i] = dy.floats()[at] * gamma[i];
      meanG += g[i];
      meanGX += g[i] * xhat[i];
      scaleGrad[i] += dy.floats()[at] * xhat[i];
      biasGrad[i] += dy.floats()[at];
    }
    meanG = mean ? meanG / inner : 0.0;
    meanGX /= inner;
    for (int64_t i = 0; i < inner; ++i)
      dx.setFromDouble(o * inner + i, r * (g[i] - meanG - xhat[i] * meanGX));
  }
}

static Tensor tensorOf(Value value, const std::vector<double> &values) {
  Tensor tensor = makeTensor(value);
  for (size_t i = 0; i < values.size(); ++i)
    tensor.setFromDouble(i, values[i]);
  return tensor;
}

static LogicalResult evaluateLayerNormGrad(LayerNormGradOp op,
                                           const EvaluationContext &context,
                                           SmallVectorImpl<Tensor> &results) {
  const Tensor &x = context.operand(0);
  ArrayRef<int64_t> normalized = x.getShape().drop_front(op.getAxis());
  const Tensor *scale = op.getScale() ? &context.operand(4) : nullptr;
  std::vector<double> gamma = expandAffine(scale, normalized, 1.0);
  std::vector<double> scaleGrad(gamma.size()), biasGrad(gamma.size());
  Tensor dx = makeTensor(op.getInputGrad());
  normalizationBackward(x, context.operand(3), gamma, &context.operand(1),
                        context.operand(2), dx, scaleGrad, biasGrad);
  results.push_back(std::move(dx));
  results.push_back(tensorOf(op.getScaleGrad(), scaleGrad));
  results.push_back(tensorOf(op.getBiasGrad(), biasGrad));
  return success();
}

static LogicalResult evaluateRmsNormGrad(RmsNormGradOp op,
                                         const EvaluationContext &context,
                                         SmallVectorImpl<Tensor> &results) {
  const Tensor &x = context.operand(0);
  ArrayRef<int64_t> normalized = x.getShape().drop_front(op.getAxis());
  const Tensor *scale = op.getScale() ? &context.operand(3) : nullptr;
  std::vector<double> gamma = expandAffine(scale, normalized, 1.0);
  std::vector<double> scaleGrad(gamma.size()), biasGrad(gamma.size());
  Tensor dx = makeTensor(op.getInputGrad());
  normalizationBackward(x, context.operand(2), gamma, /*mean=*/nullptr,
                        context.operand(1), dx, scaleGrad, biasGrad);
  results.push_back(std::move(dx));
  results.push_back(tensorOf(op.getScaleGrad(), scaleGrad));
  return success();
}

void registerNormalizationEvaluators(EvaluatorTable &table) {
  table.add<LayerNormGradOp>(evaluateLayerNormGrad);
  table.add<RmsNormGradOp>(evaluateRmsNormGrad);
  table.add<LayerNormOp>(evaluateLayerNorm);
  table.add<RmsNormOp>(evaluateRmsNorm);
}

} // namespace kiln
