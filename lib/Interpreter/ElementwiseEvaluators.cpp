//===- ElementwiseEvaluators.cpp - elementwise ops ------------------------===//
//
// Elementwise math computes each element in fp64 and rounds once to the
// result's element type, so fp32 +, -, *, / are exactly IEEE fp32.
// Broadcasting follows NumPy.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace kiln {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// Registers an op computed as `fn(x)` in fp64 on every element.
template <typename OpTy>
static void addUnary(EvaluatorTable &table, double (*fn)(double)) {
  table.add<OpTy>([fn](OpTy op, const EvaluationContext &context,
                       SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &input = context.operand(0);
    Tensor result = makeTensor(op.getResult());
    for (int64_t i = 0; i < input.getNumElements(); ++i)
      result.setFromDouble(i, fn(input.getAsDouble(i)));
    results.push_back(std::move(result));
    return success();
  });
}

/// Integer ops that must not go through doubles (values beyond 2^53).
template <typename OpTy>
static void addExactUnary(EvaluatorTable &table, double (*fn)(double),
                          int64_t (*integerFn)(int64_t)) {
  table.add<OpTy>([fn, integerFn](OpTy op, const EvaluationContext &context,
                                  SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &input = context.operand(0);
    Tensor result = makeTensor(op.getResult());
    for (int64_t i = 0; i < input.getNumElements(); ++i) {
      if (input.isFloat())
        result.setFromDouble(i, fn(input.floats()[i]));
      else
        result.ints()[i] =
            wrapToElementType(result.getDType(), integerFn(input.ints()[i]));
    }
    results.push_back(std::move(result));
    return success();
  });
}

static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
static double sign(double x) {
  return std::isnan(x) ? x : static_cast<double>((x > 0) - (x < 0));
}

static double geluExact(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
static double geluTanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

static LogicalResult evaluateGelu(GeluOp op, const EvaluationContext &context,
                                  SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  auto fn = op.getApproximation() == GeluApproximation::Tanh ? geluTanh
                                                              : geluExact;
  for (int64_t i = 0; i < input.getNumElements(); ++i)
    result.setFromDouble(i, fn(input.floats()[i]));
  results.push_back(std::move(result));
  return success();
}

/// The derivatives of geluExact and geluTanh. The normal density is its
/// exp times the rounded 1 / sqrt(2 pi), the CDF's erf at x times the
/// rounded 1 / sqrt(2), as the CUDA target computes them: where the
/// density is subnormal, another association rounded it to 0 where the
/// kernels did not, and the sign of the zero gradient differed.
static double geluExactDerivative(double x) {
  double cdf = 0.5 * (1.0 + std::erf(x * M_SQRT1_2));
  double pdf = std::exp(-0.5 * x * x) * 0.3989422804014327;
  return cdf + x * pdf;
}
static double geluTanhDerivative(double x) {
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  double t = std::tanh(k * (x + c * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * c * x * x);
}

static LogicalResult evaluateGeluGrad(GeluGradOp op,
                                      const EvaluationContext &context,
                                      SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0), &grad = context.operand(1);
  Tensor result = makeTensor(op.getResult());
  auto derivative = op.getApproximation() == GeluApproximation::Tanh
                        ? geluTanhDerivative
                        : geluExactDerivative;
  for (int64_t i = 0; i < input.getNumElements(); ++i)
    result.setFromDouble(i, grad.floats()[i] * derivative(input.floats()[i]));
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateIsNan(IsNanOp op, const EvaluationContext &context,
                                   SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  for (int64_t i = 0; i < input.getNumElements(); ++i)
    result.ints()[i] = std::isnan(input.floats()[i]);
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateIsInf(IsInfOp op, const EvaluationContext &context,
                                   SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  for (int64_t i = 0; i < input.getNumElements(); ++i) {
    float x = input.floats()[i];
    result.ints()[i] = std::isinf(x) && ((x > 0 && op.getDetectPositive()) ||
                                         (x < 0 && op.getDetectNegative()));
  }
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateCast(CastOp op, const EvaluationContext &context,
                                  SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  for (int64_t i = 0; i < input.getNumElements(); ++i) {
    if (!input.isFloat() && !result.isFloat())
      result.ints()[i] = wrapToElementType(result.getDType(), input.ints()[i]);
    else
      result.setFromDouble(i, input.getAsDouble(i));
  }
  results.push_back(std::move(result));
  return success();
}

//===----------------------------------------------------------------------===//
// Binary with broadcasting
//===----------------------------------------------------------------------===//

/// Calls `fn(resultIndex, lhsIndex, rhsIndex)` over the broadcast shape.
template <typename Fn>
static void forEachBroadcastPair(const Tensor &lhs, const Tensor &rhs,
                                 const Tensor &result, Fn &&fn) {
  SmallVector<int64_t> lhsStrides =
      broadcastStrides(lhs.getShape(), result.getShape());
  SmallVector<int64_t> rhsStrides =
      broadcastStrides(rhs.getShape(), result.getShape());
  forEachIndex<2>(result.getShape(), {lhsStrides, rhsStrides},
                  [&](int64_t i, const std::array<int64_t, 2> &offsets) {
                    fn(i, offsets[0], offsets[1]);
                  });
}

struct ArithmeticRule {
  double (*onFloats)(double, double);
  /// Null when the op is computed through doubles for integers too.
  int64_t (*onIntegers)(int64_t, int64_t);
};

template <typename OpTy>
static void addArithmetic(EvaluatorTable &table, ArithmeticRule rule) {
  table.add<OpTy>([rule](OpTy op, const EvaluationContext &context,
                         SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &lhs = context.operand(0), &rhs = context.operand(1);
    Tensor result = makeTensor(op.getResult());
    bool integerPath = !result.isFloat() && rule.onIntegers;
    forEachBroadcastPair(lhs, rhs, result, [&](int64_t i, int64_t l, int64_t r) {
      if (integerPath)
        result.ints()[i] = wrapToElementType(
            result.getDType(), rule.onIntegers(lhs.ints()[l], rhs.ints()[r]));
      else
        result.setFromDouble(
            i, rule.onFloats(lhs.getAsDouble(l), rhs.getAsDouble(r)));
    });
    results.push_back(std::move(result));
    return success();
  });
}

/// Integer division truncates toward zero; dividing by zero is an error
/// rather than undefined behaviour.
static LogicalResult evaluateDiv(DivOp op, const EvaluationContext &context,
                                 SmallVectorImpl<Tensor> &results) {
  const Tensor &lhs = context.operand(0), &rhs = context.operand(1);
  Tensor result = makeTensor(op.getResult());
  bool divisionByZero = false;
  forEachBroadcastPair(lhs, rhs, result, [&](int64_t i, int64_t l, int64_t r) {
    if (result.isFloat()) {
      result.setFromDouble(i, lhs.getAsDouble(l) / rhs.getAsDouble(r));
      return;
    }
    int64_t divisor = rhs.ints()[r];
    if (divisor == 0) {
      divisionByZero = true;
      return;
    }
    int64_t dividend = lhs.ints()[l];
    result.ints()[i] = wrapToElementType(
        result.getDType(),
        divisor == -1 ? static_cast<int64_t>(0ull - static_cast<uint64_t>(dividend))
                      : dividend / divisor);
  });
  if (divisionByZero)
    return op.emitOpError("divides an integer by zero");
  results.push_back(std::move(result));
  return success();
}

/// C's fmod (sign of the dividend) or, `floored`, Python's % (sign of the
/// divisor). An integer remainder by zero is an error.
static LogicalResult evaluateRemainder(RemainderOp op,
                                       const EvaluationContext &context,
                                       SmallVectorImpl<Tensor> &results) {
  const Tensor &lhs = context.operand(0), &rhs = context.operand(1);
  Tensor result = makeTensor(op.getResult());
  bool floored = op.getFloored(), divisionByZero = false;
  forEachBroadcastPair(lhs, rhs, result, [&](int64_t i, int64_t l, int64_t r) {
    if (result.isFloat()) {
      double a = lhs.getAsDouble(l), b = rhs.getAsDouble(r);
      double remainder = std::fmod(a, b);
      if (floored && remainder != 0 && (remainder < 0) != (b < 0))
        remainder += b;
      result.setFromDouble(i, remainder);
      return;
    }
    int64_t a = lhs.ints()[l], b = rhs.ints()[r];
    if (b == 0) {
      divisionByZero = true;
      return;
    }
    int64_t remainder = b == -1 ? 0 : a % b;
    if (floored && remainder != 0 && (remainder < 0) != (b < 0))
      remainder += b;
    result.ints()[i] = wrapToElementType(result.getDType(), remainder);
  });
  if (divisionByZero)
    return op.emitOpError("takes an integer remainder by zero");
  results.push_back(std::move(result));
  return success();
}

static double maxPropagatingNan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}
static double minPropagatingNan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
}
static int64_t wrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
static int64_t wrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
static int64_t wrappingMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

/// Registers an integer op computed as `fn(lhs, rhs)` on the elements'
/// 64-bit patterns (an unsigned 64-bit value held as its two's-complement
/// int64), wrapped to the element type.
template <typename OpTy>
static void addIntegerBinary(EvaluatorTable &table,
                             int64_t (*fn)(int64_t, int64_t, DType)) {
  table.add<OpTy>([fn](OpTy op, const EvaluationContext &context,
                       SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &lhs = context.operand(0), &rhs = context.operand(1);
    Tensor result = makeTensor(op.getResult());
    DType type = result.getDType();
    forEachBroadcastPair(
        lhs, rhs, result, [&](int64_t i, int64_t l, int64_t r) {
          result.ints()[i] =
              wrapToElementType(type, fn(lhs.ints()[l], rhs.ints()[r], type));
        });
    results.push_back(std::move(result));
    return success();
  });
}

static int64_t bitWidth(DType type) {
  return type == DType::Bool ? 1 : byteWidth(type) * 8;
}

/// Whether integers of `type` are unsigned (i1 counts as unsigned: 0, 1).
static bool isUnsignedInteger(DType type) {
  return type == DType::U8 || type == DType::U16 || type == DType::U32 ||
         type == DType::U64 || type == DType::Bool;
}

static int64_t shiftLeft(int64_t x, int64_t n, DType type) {
  if (n < 0 || n >= bitWidth(type))
    return 0;
  return static_cast<int64_t>(static_cast<uint64_t>(x) << n);
}

static int64_t shiftRight(int64_t x, int64_t n, DType type) {
  int64_t bits = bitWidth(type);
  if (!isUnsignedInteger(type))
    return n < 0 || n >= bits ? (x < 0 ? -1 : 0) : x >> n;
  if (n < 0 || n >= bits)
    return 0;
  uint64_t pattern = static_cast<uint64_t>(x);
  if (bits < 64)
    pattern &= (uint64_t(1) << bits) - 1;
  return static_cast<int64_t>(pattern >> n);
}

template <typename T> static bool compare(ComparePredicate predicate, T a, T b) {
  switch (predicate) {
  case ComparePredicate::EQ: return a == b;
  case ComparePredicate::NE: return a != b;
  case ComparePredicate::LT: return a < b;
  case ComparePredicate::LE: return a <= b;
  case ComparePredicate::GT: return a > b;
  case ComparePredicate::GE: return a >= b;
  }
  return false;
}

static LogicalResult evaluateCompare(CompareOp op,
                                     const EvaluationContext &context,
                                     SmallVectorImpl<Tensor> &results) {
  const Tensor &lhs = context.operand(0), &rhs = context.operand(1);
  Tensor result = makeTensor(op.getResult());
  ComparePredicate predicate = op.getPredicate();
  bool isUnsigned64 = lhs.getDType() == DType::U64;
  forEachBroadcastPair(lhs, rhs, result, [&](int64_t i, int64_t l, int64_t r) {
    if (lhs.isFloat())
      result.ints()[i] = compare(predicate, lhs.floats()[l], rhs.floats()[r]);
    else if (isUnsigned64)
      result.ints()[i] = compare(predicate, static_cast<uint64_t>(lhs.ints()[l]),
                                 static_cast<uint64_t>(rhs.ints()[r]));
    else
      result.ints()[i] = compare(predicate, lhs.ints()[l], rhs.ints()[r]);
  });
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateWhere(WhereOp op, const EvaluationContext &context,
                                   SmallVectorImpl<Tensor> &results) {
  const Tensor &condition = context.operand(0);
  const Tensor &onTrue = context.operand(1), &onFalse = context.operand(2);
  Tensor result = makeTensor(op.getResult());
  SmallVector<int64_t> c = broadcastStrides(condition.getShape(), result.getShape());
  SmallVector<int64_t> t = broadcastStrides(onTrue.getShape(), result.getShape());
  SmallVector<int64_t> f = broadcastStrides(onFalse.getShape(), result.getShape());
  forEachIndex<3>(result.getShape(), {c, t, f},
                  [&](int64_t i, const std::array<int64_t, 3> &at) {
                    bool pick = condition.ints()[at[0]] != 0;
                    if (result.isFloat())
                      result.floats()[i] = pick ? onTrue.floats()[at[1]]
                                                : onFalse.floats()[at[2]];
                    else
                      result.ints()[i] = pick ? onTrue.ints()[at[1]]
                                              : onFalse.ints()[at[2]];
                  });
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateFakeQuantize(FakeQuantizeOp op,
                                          const EvaluationContext &context,
                                          SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  const Tensor &scale = context.operand(1), &zero = context.operand(2);
  Tensor result = makeTensor(op.getResult());
  double low = op.getQuantMin().convertToDouble();
  double high = op.getQuantMax().convertToDouble();
  SmallVector<int64_t> x =
      broadcastStrides(input.getShape(), result.getShape());
  SmallVector<int64_t> s =
      broadcastStrides(scale.getShape(), result.getShape());
  SmallVector<int64_t> z = broadcastStrides(zero.getShape(), result.getShape());
  forEachIndex<3>(
      result.getShape(), {x, s, z},
      [&](int64_t i, const std::array<int64_t, 3> &at) {
        double step = scale.floats()[at[1]], offset = zero.floats()[at[2]];
        DType type = result.getDType();
        double ratio = roundToElementType(
            type, input.floats()[at[0]] * roundToElementType(type, 1.0 / step));
        double q = std::clamp(std::nearbyint(ratio) + offset, low, high);
        result.setFromDouble(i, (q - offset) * step);
      });
  results.push_back(std::move(result));
  return success();
}

void registerElementwiseEvaluators(EvaluatorTable &table) {
  addExactUnary<NegOp>(table, [](double x) { return -x; },
                       [](int64_t x) { return wrappingSub(0, x); });
  addExactUnary<AbsOp>(table, [](double x) { return std::fabs(x); },
                       [](int64_t x) { return x < 0 ? wrappingSub(0, x) : x; });
  addExactUnary<SignOp>(table, sign,
                        [](int64_t x) { return int64_t((x > 0) - (x < 0)); });
  addUnary<ExpOp>(table, [](double x) { return std::exp(x); });
  addUnary<LogOp>(table, [](double x) { return std::log(x); });
  addUnary<TanhOp>(table, [](double x) { return std::tanh(x); });
  addUnary<ErfOp>(table, [](double x) { return std::erf(x); });
  addUnary<SigmoidOp>(table, sigmoid);
  addUnary<SiluOp>(table, [](double x) { return x * sigmoid(x); });
  addUnary<ReluOp>(table, [](double x) { return x > 0 ? x : (x == x ? 0.0 : x); });
  addUnary<SinOp>(table, [](double x) { return std::sin(x); });
  addUnary<CosOp>(table, [](double x) { return std::cos(x); });
  addUnary<TanOp>(table, [](double x) { return std::tan(x); });
  addUnary<AsinOp>(table, [](double x) { return std::asin(x); });
  addUnary<AcosOp>(table, [](double x) { return std::acos(x); });
  addUnary<AtanOp>(table, [](double x) { return std::atan(x); });
  addUnary<SinhOp>(table, [](double x) { return std::sinh(x); });
  addUnary<CoshOp>(table, [](double x) { return std::cosh(x); });
  addUnary<AsinhOp>(table, [](double x) { return std::asinh(x); });
  addUnary<AcoshOp>(table, [](double x) { return std::acosh(x); });
  addUnary<AtanhOp>(table, [](double x) { return std::atanh(x); });
  addUnary<SqrtOp>(table, [](double x) { return std::sqrt(x); });
  addUnary<RsqrtOp>(table, [](double x) { return 1.0 / std::sqrt(x); });
  addUnary<ReciprocalOp>(table, [](double x) { return 1.0 / x; });
  addUnary<FloorOp>(table, [](double x) { return std::floor(x); });
  addUnary<CeilOp>(table, [](double x) { return std::ceil(x); });
  addUnary<RoundOp>(table, [](double x) { return std::nearbyint(x); });
  table.add<NotOp>([](NotOp op, const EvaluationContext &context,
                      SmallVectorImpl<Tensor> &results) -> LogicalResult {
    const Tensor &input = context.operand(0);
    Tensor result = makeTensor(op.getResult());
    bool logical = result.getDType() == DType::Bool;
    for (int64_t i = 0; i < input.getNumElements(); ++i) {
      int64_t x = input.ints()[i];
      result.ints()[i] =
          logical ? x == 0 : wrapToElementType(result.getDType(), ~x);
    }
    results.push_back(std::move(result));
    return success();
  });
  table.add<GeluOp>(evaluateGelu);
  table.add<GeluGradOp>(evaluateGeluGrad);
  table.add<IsNanOp>(evaluateIsNan);
  table.add<IsInfOp>(evaluateIsInf);
  table.add<CastOp>(evaluateCast);

  addArithmetic<AddOp>(table, {[](double a, double b) { return a + b; }, wrappingAdd});
  addArithmetic<SubOp>(table, {[](double a, double b) { return a - b; }, wrappingSub});
  addArithmetic<MulOp>(table, {[](double a, double b) { return a * b; }, wrappingMul});
  addArithmetic<PowOp>(table, {[](double a, double b) { return std::pow(a, b); }, nullptr});
  addArithmetic<MaxOp>(table, {maxPropagatingNan,
                               [](int64_t a, int64_t b) { return std::max(a, b); }});
  addArithmetic<MinOp>(table, {minPropagatingNan,
                               [](int64_t a, int64_t b) { return std::min(a, b); }});
  table.add<DivOp>(evaluateDiv);
  table.add<RemainderOp>(evaluateRemainder);
  addIntegerBinary<AndOp>(table,
                          [](int64_t a, int64_t b, DType) { return a & b; });
  addIntegerBinary<OrOp>(table,
                         [](int64_t a, int64_t b, DType) { return a | b; });
  addIntegerBinary<XorOp>(table,
                          [](int64_t a, int64_t b, DType) { return a ^ b; });
  addIntegerBinary<ShiftLeftOp>(table, shiftLeft);
  addIntegerBinary<ShiftRightOp>(table, shiftRight);
  table.add<CompareOp>(evaluateCompare);
  table.add<WhereOp>(evaluateWhere);
  table.add<FakeQuantizeOp>(evaluateFakeQuantize);
}

} // namespace kiln
