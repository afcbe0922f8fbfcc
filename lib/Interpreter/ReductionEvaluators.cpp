//===- ReductionEvaluators.cpp - reductions, arg-reductions, softmax ------===//
//
// Floating-point reductions accumulate in fp64 and round once; integer ones
// accumulate in int64 and wrap to the result type.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;

namespace kiln {

namespace {
enum class Combine { Sum, Mean, Max, Min, Prod };

/// An axis-wise view of a tensor as [outer, size, inner].
struct AxisView {
  int64_t outer, size, inner;
  AxisView(ArrayRef<int64_t> shape, int64_t axis)
      : outer(product(shape.take_front(axis))), size(shape[axis]),
        inner(product(shape.drop_front(axis + 1))) {}
  int64_t index(int64_t o, int64_t i, int64_t in) const {
    return (o * size + i) * inner + in;
  }
};
} // namespace

static double initialValue(Combine combine) {
  switch (combine) {
  case Combine::Max: return -std::numeric_limits<double>::infinity();
  case Combine::Min: return std::numeric_limits<double>::infinity();
  case Combine::Prod: return 1.0;
  default: return 0.0;
  }
}

static double combineValues(Combine combine, double acc, double x) {
  switch (combine) {
  case Combine::Max:
    return std::isnan(acc) || std::isnan(x) ? NAN : std::max(acc, x);
  case Combine::Min:
    return std::isnan(acc) || std::isnan(x) ? NAN : std::min(acc, x);
  case Combine::Prod: return acc * x;
  default: return acc + x;
  }
}

static int64_t combineIntegers(Combine combine, int64_t acc, int64_t x) {
  switch (combine) {
  case Combine::Max: return std::max(acc, x);
  case Combine::Min: return std::min(acc, x);
  case Combine::Prod:
    return static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(x));
  default:
    return static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
  }
}

template <typename OpTy>
static void addReduction(EvaluatorTable &table, Combine combine) {
  table.add<OpTy>([combine](OpTy op, const EvaluationContext &context,
                            SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &input = context.operand(0);
    Tensor result = makeTensor(op.getResult());
    // Walk the input; each element lands in the output slot whose index is
    // the input's with the reduced coordinates dropped.
    SmallVector<int64_t> keptShape(input.getShape());
    for (int64_t axis : op.getAxes())
      keptShape[axis] = 1;
    SmallVector<int64_t> outputStrides = stridesOf(keptShape);
    for (int64_t axis : op.getAxes())
      outputStrides[axis] = 0;
    int64_t count = input.getNumElements() /
                    std::max<int64_t>(result.getNumElements(), 1);
    if (input.isFloat()) {
      std::vector<double> acc(result.getNumElements(), initialValue(combine));
      forEachIndex<1>(input.getShape(), {outputStrides},
                      [&](int64_t i, const std::array<int64_t, 1> &out) {
                        acc[out[0]] = combineValues(combine, acc[out[0]],
                                                    input.floats()[i]);
                      });
      for (int64_t i = 0; i < result.getNumElements(); ++i)
        result.setFromDouble(i, combine == Combine::Mean ? acc[i] / count
                                                         : acc[i]);
    } else {
      int64_t init = combine == Combine::Max   ? std::numeric_limits<int64_t>::min()
                     : combine == Combine::Min ? std::numeric_limits<int64_t>::max()
                     : combine == Combine::Prod ? 1
                                                : 0;
      std::vector<int64_t> acc(result.getNumElements(), init);
      forEachIndex<1>(input.getShape(), {outputStrides},
                      [&](int64_t i, const std::array<int64_t, 1> &out) {
                        acc[out[0]] = combineIntegers(combine, acc[out[0]],
                                                      input.ints()[i]);
                      });
      for (int64_t i = 0; i < result.getNumElements(); ++i)
        result.ints()[i] = wrapToElementType(
            result.getDType(), combine == Combine::Mean && count
                                   ? acc[i] / count
                                   : acc[i]);
    }
    results.push_back(std::move(result));
    return success();
  });
}

template <typename OpTy>
static void addArgReduction(EvaluatorTable &table, bool findMax) {
  table.add<OpTy>([findMax](OpTy op, const EvaluationContext &context,
                            SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &input = context.operand(0);
    if (input.getShape()[op.getAxis()] == 0)
      return op.emitOpError("reduces an empty axis");
    Tensor result = makeTensor(op.getResult());
    AxisView view(input.getShape(), op.getAxis());
    bool last = op.getSelectLastIndex();
    for (int64_t o = 0; o < view.outer; ++o)
      for (int64_t in = 0; in < view.inner; ++in) {
        int64_t best = 0;
        double bestValue = input.getAsDouble(view.index(o, 0, in));
        for (int64_t i = 1; i < view.size; ++i) {
          double x = input.getAsDouble(view.index(o, i, in));
          bool better = findMax ? (x > bestValue || (last && x == bestValue))
                                : (x < bestValue || (last && x == bestValue));
          if (better) {
            best = i;
            bestValue = x;
          }
        }
        result.ints()[o * view.inner + in] = best;
      }
    results.push_back(std::move(result));
    return success();
  });
}

template <typename OpTy>
static void addSoftmax(EvaluatorTable &table, bool logarithm) {
  table.add<OpTy>([logarithm](OpTy op, const EvaluationContext &context,
                              SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &input = context.operand(0);
    Tensor result = makeTensor(op.getResult());
    AxisView view(input.getShape(), op.getAxis());
    std::vector<double> shifted(view.size);
    for (int64_t o = 0; o < view.outer; ++o)
      for (int64_t in = 0; in < view.inner; ++in) {
        double maximum = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < view.size; ++i)
          maximum = std::max<double>(maximum, input.floats()[view.index(o, i, in)]);
        if (std::isinf(maximum))
          maximum = 0.0; // all -inf: let the sum be 0 and the result NaN
        double sum = 0.0;
        for (int64_t i = 0; i < view.size; ++i) {
          shifted[i] = input.floats()[view.index(o, i, in)] - maximum;
          sum += std::exp(shifted[i]);
        }
        double logSum = std::log(sum);
        for (int64_t i = 0; i < view.size; ++i)
          result.setFromDouble(view.index(o, i, in),
                               logarithm ? shifted[i] - logSum
                                         : std::exp(shifted[i]) / sum);
      }
    results.push_back(std::move(result));
    return success();
  });
}

template <typename OpTy>
static void addSoftmaxGrad(EvaluatorTable &table, bool logarithm) {
  table.add<OpTy>([logarithm](OpTy op, const EvaluationContext &context,
                              SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &y = context.operand(0), &dy = context.operand(1);
    Tensor result = makeTensor(op.getResult());
    AxisView view(y.getShape(), op.getAxis());
    for (int64_t o = 0; o < view.outer; ++o)
      for (int64_t in = 0; in < view.inner; ++in) {
        // softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - e^y sum(dy)
        double sum = 0.0;
        for (int64_t i = 0; i < view.size; ++i) {
          int64_t at = view.index(o, i, in);
          sum += logarithm ? dy.floats()[at] : dy.floats()[at] * y.floats()[at];
        }
        for (int64_t i = 0; i < view.size; ++i) {
          int64_t at = view.index(o, i, in);
          result.setFromDouble(at, logarithm
                                       ? dy.floats()[at] - std::exp(y.floats()[at]) * sum
                                       : y.floats()[at] * (dy.floats()[at] - sum));
        }
      }
    results.push_back(std::move(result));
    return success();
  });
}

static LogicalResult evaluateCumsum(CumsumOp op,
                                    const EvaluationContext &context,
                                    SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  AxisView view(input.getShape(), op.getAxis());
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t in = 0; in < view.inner; ++in) {
      double sum = 0.0;
      uint64_t integerSum = 0;
      for (int64_t step = 0; step < view.size; ++step) {
        int64_t i = op.getReverse() ? view.size - 1 - step : step;
        int64_t at = view.index(o, i, in);
        if (input.isFloat()) {
          if (!op.getExclusive())
            sum += input.floats()[at];
          result.setFromDouble(at, sum);
          if (op.getExclusive())
            sum += input.floats()[at];
        } else {
          if (!op.getExclusive())
            integerSum += static_cast<uint64_t>(input.ints()[at]);
          result.ints()[at] = wrapToElementType(
              result.getDType(), static_cast<int64_t>(integerSum));
          if (op.getExclusive())
            integerSum += static_cast<uint64_t>(input.ints()[at]);
        }
      }
    }
  results.push_back(std::move(result));
  return success();
}

/// The k best indices of each row: a stable sort by value, largest (or
/// smallest) first, NaN counting as larger than every number.
static LogicalResult evaluateTopK(TopKOp op, const EvaluationContext &context,
                                  SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  AxisView in(input.getShape(), op.getAxis()),
      out(result.getShape(), op.getAxis());
  bool largest = op.getLargest();
  std::vector<int64_t> order(in.size);
  for (int64_t o = 0; o < in.outer; ++o)
    for (int64_t inner = 0; inner < in.inner; ++inner) {
      auto value = [&](int64_t i) {
        return input.getAsDouble(in.index(o, i, inner));
      };
      // Whether a sorts before b (a NaN is the largest).
      auto before = [&](int64_t a, int64_t b) {
        double x = value(a), y = value(b);
        if (std::isnan(x) || std::isnan(y))
          return std::isnan(x) == largest && std::isnan(y) != largest;
        return largest ? x > y : x < y;
      };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), before);
      for (int64_t j = 0; j < out.size; ++j)
        result.ints()[out.index(o, j, inner)] = order[j];
    }
  results.push_back(std::move(result));
  return success();
}

void registerReductionEvaluators(EvaluatorTable &table) {
  table.add<TopKOp>(evaluateTopK);
  table.add<CumsumOp>(evaluateCumsum);
  addReduction<ReduceSumOp>(table, Combine::Sum);
  addReduction<ReduceMeanOp>(table, Combine::Mean);
  addReduction<ReduceMaxOp>(table, Combine::Max);
  addReduction<ReduceMinOp>(table, Combine::Min);
  addReduction<ReduceProdOp>(table, Combine::Prod);
  addArgReduction<ArgMaxOp>(table, /*findMax=*/true);
  addArgReduction<ArgMinOp>(table, /*findMax=*/false);
  addSoftmax<SoftmaxOp>(table, /*logarithm=*/false);
  addSoftmax<LogSoftmaxOp>(table, /*logarithm=*/true);
  addSoftmaxGrad<SoftmaxGradOp>(table, /*logarithm=*/false);
  addSoftmaxGrad<LogSoftmaxGradOp>(table, /*logarithm=*/true);
}

} // namespace kiln
