//===- LossEvaluators.cpp - cross-entropy and negative log-likelihood -----===//
//
// Both losses view the input as [N, C, D] and the labels as [N, D]; they
// differ only in how the log-probability of a label is obtained.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln {

namespace {
/// The input as [N, C, D]; only the first `valid` classes exist (the rest
/// are tensor-core padding).
struct ClassView {
  ClassView(Operation *op, ArrayRef<int64_t> shape)
      : batch(shape[0]), classes(shape[1]), inner(product(shape.drop_front(2))),
        valid(classes) {
    if (auto count = op->getAttrOfType<IntegerAttr>("num_classes"))
      valid = count.getInt();
  }
  int64_t index(int64_t n, int64_t c, int64_t d) const {
    return (n * classes + c) * inner + d;
  }
  int64_t batch, classes, inner, valid;
};
} // namespace

/// Which labels count toward the loss: all but `ignore_index`, if set.
struct CountedLabels {
  explicit CountedLabels(Operation *op) {
    if (auto attr = op->getAttrOfType<IntegerAttr>("ignore_index")) {
      hasIgnored = true;
      ignored = attr.getInt();
    }
  }
  bool operator()(int64_t label) const { return !hasIgnored || label != ignored; }

  bool hasIgnored = false;
  int64_t ignored = 0;
};

/// log_softmax(input[n, :, d])[label], computed in fp64.
static double logSoftmaxAt(const Tensor &input, const ClassView &view,
                           int64_t n, int64_t d, int64_t label) {
  double maximum = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < view.valid; ++c)
    maximum = std::max<double>(maximum, input.floats()[view.index(n, c, d)]);
  double sum = 0.0;
  for (int64_t c = 0; c < view.valid; ++c)
    sum += std::exp(input.floats()[view.index(n, c, d)] - maximum);
  return input.floats()[view.index(n, label, d)] - maximum - std::log(sum);
}

template <typename OpTy>
static void addClassificationLoss(EvaluatorTable &table, bool fromLogits) {
  table.add<OpTy>([fromLogits](OpTy op, const EvaluationContext &context,
                               SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &input = context.operand(0), &labels = context.operand(1);
    const Tensor *weight = op.getWeight() ? &context.operand(2) : nullptr;
    ClassView view(op, input.getShape());
    CountedLabels counted(op);

    Tensor result = makeTensor(op.getResult());
    double total = 0.0, totalWeight = 0.0;
    for (int64_t n = 0; n < view.batch; ++n)
      for (int64_t d = 0; d < view.inner; ++d) {
        int64_t position = n * view.inner + d;
        int64_t label = labels.ints()[position];
        double loss = 0.0;
        if (counted(label)) {
          if (label < 0 || label >= view.valid)
            return op.emitOpError()
                   << "label " << label << " at position " << position
                   << " is outside [0, " << view.valid << ")";
          double w = weight ? weight->floats()[label] : 1.0;
          double logProb = fromLogits
                               ? logSoftmaxAt(input, view, n, d, label)
                               : input.floats()[view.index(n, label, d)];
          loss = -logProb * w;
          total += loss;
          totalWeight += w;
        }
        if (op.getReduction() == LossReduction::None)
          result.setFromDouble(position, loss);
      }
    if (op.getReduction() == LossReduction::Sum)
      result.setFromDouble(0, total);
    else if (op.getReduction() == LossReduction::Mean)
      result.setFromDouble(0, total / totalWeight);
    results.push_back(std::move(result));
    return success();
  });
}

/// The gradient of the loss with respect to its input: for a counted element
/// with label y and weight w, (softmax - onehot(y)) or -onehot(y), times w
/// and the element's share of the incoming gradient.
template <typename OpTy>
static void addClassificationLossGrad(EvaluatorTable &table, bool fromLogits) {
  table.add<OpTy>([fromLogits](OpTy op, const EvaluationContext &context,
                               SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &input = context.operand(0), &labels = context.operand(1);
    const Tensor &grad = context.operand(2);
    const Tensor *weight = op.getWeight() ? &context.operand(3) : nullptr;
    ClassView view(op, input.getShape());
    CountedLabels counted(op);
    LossReduction reduction = op.getReduction();
    double totalWeight = 0.0;
    for (int64_t p = 0; p < labels.getNumElements(); ++p) {
      int64_t label = labels.ints()[p];
      if (!counted(label))
        continue;
      if (label < 0 || label >= view.valid)
        return op.emitOpError() << "label " << label << " at position " << p
                                << " is outside [0, " << view.valid << ")";
      totalWeight += weight ? weight->floats()[label] : 1.0;
    }
    Tensor result = makeTensor(op.getResult());
    for (int64_t n = 0; n < view.batch; ++n)
      for (int64_t d = 0; d < view.inner; ++d) {
        int64_t position = n * view.inner + d;
        int64_t label = labels.ints()[position];
        if (!counted(label))
          continue;
        double share = reduction == LossReduction::None ? grad.floats()[position]
                       : reduction == LossReduction::Sum
                           ? grad.floats()[0]
                           : grad.floats()[0] / totalWeight;
        double scale = share * (weight ? weight->floats()[label] : 1.0);
        double maximum = -std::numeric_limits<double>::infinity(), sum = 0.0;
        if (fromLogits) {
          for (int64_t c = 0; c < view.valid; ++c)
            maximum = std::max(maximum, input.floats()[view.index(n, c, d)]);
          for (int64_t c = 0; c < view.valid; ++c)
            sum += std::exp(input.floats()[view.index(n, c, d)] - maximum);
        }
        // Padding classes keep the zeros they were created with.
        for (int64_t c = 0; c < view.valid; ++c) {
          int64_t at = view.index(n, c, d);
          double probability =
              fromLogits ? std::exp(input.floats()[at] - maximum) / sum : 0.0;
          result.setFromDouble(at, scale * (probability - (c == label)));
        }
      }
    results.push_back(std::move(result));
    return success();
  });
}

void registerLossEvaluators(EvaluatorTable &table) {
  addClassificationLoss<CrossEntropyOp>(table, /*fromLogits=*/true);
  addClassificationLoss<NllLossOp>(table, /*fromLogits=*/false);
  addClassificationLossGrad<CrossEntropyGradOp>(table, /*fromLogits=*/true);
  addClassificationLossGrad<NllLossGradOp>(table, /*fromLogits=*/false);
}

} // namespace kiln
