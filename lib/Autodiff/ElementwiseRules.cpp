//===- ElementwiseRules.cpp - gradients of elementwise ops ----------------===//
//
// Unary math, broadcasting arithmetic, selection, casts and dropout. Binary
// rules undo broadcasting with GradientBuilder::unbroadcast.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

#include <cmath>

using namespace mlir;

namespace kiln {

/// Registers a unary op whose input gradient is `grad * derivative(x, y)`.
template <typename OpTy, typename Derivative>
static void addUnary(GradientRuleTable &table, Derivative derivative) {
  table.add<OpTy>([derivative](OpTy op, ArrayRef<Value> grads,
                               GradientBuilder &b,
                               SmallVectorImpl<Value> &operandGrads) -> LogicalResult {
    operandGrads.push_back(
        b.mul(grads[0], derivative(b, op.getInput(), op.getResult())));
    return success();
  });
}


void registerElementwiseGradients(GradientRuleTable &table) {
  using B = GradientBuilder;
  addUnary<NegOp>(table, [](B &b, Value x, Value) { return b.scalarLike(-1.0, x); });
  addUnary<AbsOp>(table, [](B &b, Value x, Value) { return b.create<SignOp>(x).getResult(); });
  addUnary<ExpOp>(table, [](B &, Value, Value y) { return y; });
  addUnary<LogOp>(table, [](B &b, Value x, Value) {
    return b.create<ReciprocalOp>(x).getResult();
  });
  addUnary<TanhOp>(table, [](B &b, Value, Value y) {
    return b.sub(b.scalarLike(1.0, y), b.mul(y, y));
  });
  addUnary<ErfOp>(table, [](B &b, Value x, Value) {
    return b.mul(b.scalarLike(M_2_SQRTPI, x),
                 b.create<ExpOp>(b.neg(b.mul(x, x))).getResult());
  });
  addUnary<SigmoidOp>(table, [](B &b, Value, Value y) {
    return b.mul(y, b.sub(b.scalarLike(1.0, y), y));
  });
  addUnary<SiluOp>(table, [](B &b, Value x, Value) {
    Value s = b.create<SigmoidOp>(x);
    return b.mul(s, b.add(b.scalarLike(1.0, x),
                          b.mul(x, b.sub(b.scalarLike(1.0, x), s))));
  });
  addUnary<ReluOp>(table, [](B &b, Value x, Value) {
    Value positive = b.compare(ComparePredicate::GT, x, b.scalarLike(0.0, x));
    return b.select(positive, b.scalarLike(1.0, x), b.scalarLike(0.0, x));
  });
  addUnary<SinOp>(table, [](B &b, Value x, Value) { return b.create<CosOp>(x).getResult(); });
  addUnary<CosOp>(table, [](B &b, Value x, Value) {
    return b.neg(b.create<SinOp>(x));
  });
  addUnary<TanOp>(table, [](B &b, Value, Value y) {
    return b.add(b.scalarLike(1.0, y), b.mul(y, y));
  });
  // 1 / sqrt(1 - x^2), negated for acos.
  auto arcsine = [](B &b, Value x) -> Value {
    return b.create<RsqrtOp>(b.sub(b.scalarLike(1.0, x), b.mul(x, x)));
  };
  addUnary<AsinOp>(table, [=](B &b, Value x, Value) { return arcsine(b, x); });
  addUnary<AcosOp>(table,
                   [=](B &b, Value x, Value) { return b.neg(arcsine(b, x)); });
  addUnary<AtanOp>(table, [](B &b, Value x, Value) {
    return b.create<ReciprocalOp>(b.add(b.scalarLike(1.0, x), b.mul(x, x)))
        .getResult();
  });
  addUnary<SinhOp>(table, [](B &b, Value x, Value) {
    return b.create<CoshOp>(x).getResult();
  });
  addUnary<CoshOp>(table, [](B &b, Value x, Value) {
    return b.create<SinhOp>(x).getResult();
  });
  addUnary<AsinhOp>(table, [](B &b, Value x, Value) {
    return b.create<RsqrtOp>(b.add(b.mul(x, x), b.scalarLike(1.0, x)))
        .getResult();
  });
  // 1 / sqrt(x^2 - 1) as 1 / (sqrt(x - 1) sqrt(x + 1)): no cancellation in x^2.
  addUnary<AcoshOp>(table, [](B &b, Value x, Value) {
    Value one = b.scalarLike(1.0, x);
    return b.mul(b.create<RsqrtOp>(b.sub(x, one)).getResult(),
                 b.create<RsqrtOp>(b.add(x, one)).getResult());
  });
  addUnary<AtanhOp>(table, [](B &b, Value x, Value) {
    return b.create<ReciprocalOp>(b.sub(b.scalarLike(1.0, x), b.mul(x, x)))
        .getResult();
  });
  addUnary<SqrtOp>(table, [](B &b, Value, Value y) {
    return b.div(b.scalarLike(0.5, y), y);
  });
  addUnary<RsqrtOp>(table, [](B &b, Value, Value y) {
    return b.mul(b.scalarLike(-0.5, y), b.mul(y, b.mul(y, y)));
  });
  addUnary<ReciprocalOp>(table, [](B &b, Value, Value y) {
    return b.neg(b.mul(y, y));
  });
  table.add<GeluOp>([](GeluOp op, ArrayRef<Value> grads, B &b,
                       SmallVectorImpl<Value> &operandGrads) -> LogicalResult {
    operandGrads.push_back(b.create<GeluGradOp>(op.getInput(), grads[0],
                                                op.getApproximation()));
    return success();
  });

  table.add<CastOp>([](CastOp op, ArrayRef<Value> grads, B &b,
                       SmallVectorImpl<Value> &operandGrads) -> LogicalResult {
    Type from = op.getInput().getType();
    if (!isa<FloatType>(cast<RankedTensorType>(from).getElementType())) {
      operandGrads.push_back(nullptr);
      return success();
    }
    operandGrads.push_back(b.create<CastOp>(from, grads[0]));
    return success();
  });

  table.add<AddOp>([](AddOp op, ArrayRef<Value> grads, B &b,
                      SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.unbroadcast(grads[0], op.getLhs().getType()));
    g.push_back(b.unbroadcast(grads[0], op.getRhs().getType()));
    return success();
  });
  table.add<SubOp>([](SubOp op, ArrayRef<Value> grads, B &b,
                      SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.unbroadcast(grads[0], op.getLhs().getType()));
    g.push_back(b.unbroadcast(b.neg(grads[0]), op.getRhs().getType()));
    return success();
  });
  table.add<MulOp>([](MulOp op, ArrayRef<Value> grads, B &b,
                      SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.unbroadcast(b.mul(grads[0], op.getRhs()), op.getLhs().getType()));
    g.push_back(b.unbroadcast(b.mul(grads[0], op.getLhs()), op.getRhs().getType()));
    return success();
  });
  table.add<DivOp>([](DivOp op, ArrayRef<Value> grads, B &b,
                      SmallVectorImpl<Value> &g) -> LogicalResult {
    // d(l / r) = g / r, -g * l / r^2 = -g * result / r
    Value lhsGrad = b.div(grads[0], op.getRhs());
    g.push_back(b.unbroadcast(lhsGrad, op.getLhs().getType()));
    g.push_back(b.unbroadcast(b.neg(b.mul(lhsGrad, op.getResult())),
                              op.getRhs().getType()));
    return success();
  });
  table.add<PowOp>([](PowOp op, ArrayRef<Value> grads, B &b,
                      SmallVectorImpl<Value> &g) -> LogicalResult {
    // d(l^r) = r l^(r-1) dl + l^r log(l) dr
    Value l = op.getLhs(), r = op.getRhs();
    Value power = b.binary<PowOp>(l, b.sub(r, b.scalarLike(1.0, r)));
    g.push_back(b.unbroadcast(b.mul(grads[0], b.mul(r, power)), l.getType()));
    Value logBase = b.create<LogOp>(l);
    g.push_back(b.unbroadcast(b.mul(grads[0], b.mul(op.getResult(), logBase)),
                              r.getType()));
    return success();
  });
  // max and min route the gradient to the operand they chose; ties split it
  // evenly, as PyTorch's maximum and minimum do.
  auto extremum = [](ComparePredicate wins) {
    return [wins](Operation *op, ArrayRef<Value> grads, B &b,
                  SmallVectorImpl<Value> &g) -> LogicalResult {
      Value l = op->getOperand(0), r = op->getOperand(1), grad = grads[0];
      Value zero = b.scalarLike(0.0, grad);
      Value half = b.mul(grad, b.scalarLike(0.5, grad));
      Value tie = b.compare(ComparePredicate::EQ, l, r);
      Value lhsWins = b.compare(wins, l, r);
      Value lhsShare = b.select(lhsWins, grad, b.select(tie, half, zero));
      Value rhsShare = b.sub(grad, lhsShare);
      g.push_back(b.unbroadcast(lhsShare, l.getType()));
      g.push_back(b.unbroadcast(rhsShare, r.getType()));
      return success();
    };
  };
  table.add<MaxOp>([rule = extremum(ComparePredicate::GT)](
                       MaxOp op, ArrayRef<Value> grads, B &b,
                       SmallVectorImpl<Value> &g) -> LogicalResult { return rule(op, grads, b, g); });
  table.add<MinOp>([rule = extremum(ComparePredicate::LT)](
                       MinOp op, ArrayRef<Value> grads, B &b,
                       SmallVectorImpl<Value> &g) -> LogicalResult { return rule(op, grads, b, g); });
  table.add<RemainderOp>([](RemainderOp op, ArrayRef<Value> grads, B &b,
                            SmallVectorImpl<Value> &g) -> LogicalResult {
    // l - q r with q = trunc(l / r) (or floor): dl = g, dr = -g q
    Value quotient = b.div(op.getLhs(), op.getRhs());
    Value q = op.getFloored()
                  ? Value(b.create<FloorOp>(quotient))
                  : b.mul(b.create<SignOp>(quotient),
                          b.create<FloorOp>(b.create<AbsOp>(quotient)));
    g.push_back(b.unbroadcast(grads[0], op.getLhs().getType()));
    g.push_back(b.unbroadcast(b.neg(b.mul(grads[0], q)), op.getRhs().getType()));
    return success();
  });

  table.add<WhereOp>([](WhereOp op, ArrayRef<Value> grads, B &b,
                        SmallVectorImpl<Value> &g) -> LogicalResult {
    Value zero = b.scalarLike(0.0, grads[0]);
    g.push_back(nullptr);
    g.push_back(b.unbroadcast(b.select(op.getCondition(), grads[0], zero),
                              op.getOnTrue().getType()));
    g.push_back(b.unbroadcast(b.select(op.getCondition(), zero, grads[0]),
                              op.getOnFalse().getType()));
    return success();
  });
  table.add<DropoutOp>([](DropoutOp op, ArrayRef<Value> grads, B &b,
                          SmallVectorImpl<Value> &g) -> LogicalResult {
    double scale = 1.0 / (1.0 - op.getRatio().convertToDouble());
    Value scaled = b.mul(grads[0], b.scalarLike(scale, grads[0]));
    g.push_back(b.select(op.getMask(), scaled, b.scalarLike(0.0, scaled)));
    return success();
  });

  // The straight-through estimator: the gradient passes where the level
  // rint(x * (1 / scale)) + zero_point was not clamped.
  table.add<FakeQuantizeOp>([](FakeQuantizeOp op, ArrayRef<Value> grads, B &b,
                               SmallVectorImpl<Value> &g) -> LogicalResult {
    Value ratio = b.mul(op.getInput(),
                        b.div(b.scalarLike(1.0, op.getScale()), op.getScale()));
    Value level =
        b.add(b.create<RoundOp>(ratio).getResult(), op.getZeroPoint());
    auto bound = [&](ComparePredicate predicate, APFloat limit) {
      return b.compare(predicate, level,
                       b.scalarLike(limit.convertToDouble(), level));
    };
    Value atLeastMin = bound(ComparePredicate::GE, op.getQuantMin());
    Value atMostMax = bound(ComparePredicate::LE, op.getQuantMax());
    Value inside = b.binary<AndOp>(atLeastMin, atMostMax);
    g.push_back(b.select(inside, grads[0], b.scalarLike(0.0, grads[0])));
    g.append({nullptr, nullptr});
    return success();
  });

  table.addNonDifferentiable<SignOp, FloorOp, CeilOp, RoundOp, NotOp, AndOp,
                             OrOp, XorOp, ShiftLeftOp, ShiftRightOp, CompareOp,
                             IsNanOp, IsInfOp, ConstantOp, RangeOp,
                             RandomUniformOp, RandomNormalOp>();
}

} // namespace kiln
