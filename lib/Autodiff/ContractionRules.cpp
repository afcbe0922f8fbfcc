//===- ContractionRules.cpp - gradients of products, reductions, norms ----===//
//
// Matrix products, reductions, softmax, normalizations and losses. Softmax,
// the normalizations and the losses use the fused gradient ops, which need
// only what the forward op produced (its output, or its saved statistics).
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace kiln {

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// The gradient of a weight matrix `rhs` (rank 2) shared by every batch of
/// `lhs` (rank > 2, not transposed): the batch folds into the rows, so one
/// matmul contracts over all of it instead of making a [batch, K, N] tensor
/// to sum afterwards (GPT-2's tied output projection: 2.3 GiB at 16x1024).
static Value sharedWeightGradient(GradientBuilder &b, Value lhs, Value grad,
                                  bool tb) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto gradType = cast<RankedTensorType>(grad.getType());
  int64_t rows = lhsType.getNumElements() / lhsType.getShape().back();
  Value lhs2d = b.reshape(lhs, {rows, lhsType.getShape().back()});
  Value grad2d = b.reshape(grad, {rows, gradType.getShape().back()});
  return tb ? b.create<MatmulOp>(grad2d, lhs2d, /*transpose_lhs=*/true,
                                 /*transpose_rhs=*/false, TypeAttr())
                  .getResult()
            : b.create<MatmulOp>(lhs2d, grad2d, /*transpose_lhs=*/true,
                                 /*transpose_rhs=*/false, TypeAttr())
                  .getResult();
}

/// C = op(A) op(B). With A' = op(A) and B' = op(B): dA' = dC B'^T and
/// dB' = A'^T dC, each expressed as one matmul with transpose flags, then
/// summed over broadcast batch dimensions.
static LogicalResult matmulGradient(MatmulOp op, ArrayRef<Value> grads,
                                    GradientBuilder &b,
                                    SmallVectorImpl<Value> &g) {
  // Autodiff runs before precision assignment, on same-type products.
  if (op.getAccumulate())
    return op.emitOpError("gradients of mixed-precision products are not "
                          "supported; assign precision after autodiff");
  Value lhs = op.getLhs(), rhs = op.getRhs(), grad = grads[0];
  bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
  bool sharedWeight = op.getRhs().getType().getRank() == 2 &&
                      op.getLhs().getType().getRank() > 2 && !ta;
  Value lhsGrad =
      ta ? b.create<MatmulOp>(rhs, grad, /*transpose_lhs=*/tb,
                              /*transpose_rhs=*/true, TypeAttr())
               .getResult()
         : b.create<MatmulOp>(grad, rhs, /*transpose_lhs=*/false,
                              /*transpose_rhs=*/!tb, TypeAttr())
               .getResult();
  Value rhsGrad =
      sharedWeight ? sharedWeightGradient(b, lhs, grad, tb)
      : tb ? b.create<MatmulOp>(grad, lhs, /*transpose_lhs=*/true,
                              /*transpose_rhs=*/ta, TypeAttr())
               .getResult()
         : b.create<MatmulOp>(lhs, grad, /*transpose_lhs=*/!ta,
                              /*transpose_rhs=*/false, TypeAttr())
               .getResult();
  g.push_back(b.unbroadcast(lhsGrad, lhs.getType()));
  g.push_back(b.unbroadcast(rhsGrad, rhs.getType()));
  return success();
}

/// Sum and mean spread the gradient over the reduced elements.
template <typename OpTy>
static void addSpreadingReduction(GradientRuleTable &table, bool mean) {
  table.add<OpTy>([mean](OpTy op, ArrayRef<Value> grads, GradientBuilder &b,
                         SmallVectorImpl<Value> &g) -> LogicalResult {
    ArrayRef<int64_t> shape = shapeOf(op.getInput());
    Value grad = grads[0];
    if (mean) {
      int64_t count = 1;
      for (int64_t axis : op.getAxes())
        count *= shape[axis];
      grad = b.div(grad, b.scalarLike(static_cast<double>(count), grad));
    }
    g.push_back(b.expandReduced(grad, op.getAxes(), op.getKeepDims(), shape));
    return success();
  });
}

/// Max and min send the gradient to the elements equal to the result,
/// shared evenly among ties as PyTorch's amax and amin do.
template <typename OpTy>
static void addSelectingReduction(GradientRuleTable &table) {
  table.add<OpTy>([](OpTy op, ArrayRef<Value> grads, GradientBuilder &b,
                     SmallVectorImpl<Value> &g) -> LogicalResult {
    Value x = op.getInput();
    ArrayRef<int64_t> shape = shapeOf(x);
    Value result = b.expandReduced(op.getResult(), op.getAxes(),
                                   op.getKeepDims(), shape);
    Value chosen = b.compare(ComparePredicate::EQ, x, result);
    Value ones = b.select(chosen, b.scalarLike(1.0, x), b.scalarLike(0.0, x));
    Value ties = b.create<ReduceSumOp>(ones, op.getAxes(), op.getKeepDims());
    Value share = b.expandReduced(b.div(grads[0], ties), op.getAxes(),
                                  op.getKeepDims(), shape);
    g.push_back(b.mul(share, ones));
    return success();
  });
}

/// One fused op recomputes the probabilities (FlashAttention's backward), so
/// nothing of size [B, H, Tq, Tk] is kept from the forward pass. A float mask
/// that depends on a trained parameter (a learned position bias) gets its
/// gradient from the same op; any other mask is data.
static LogicalResult attentionGradient(AttentionOp op, ArrayRef<Value> grads,
                                       GradientBuilder &b,
                                       SmallVectorImpl<Value> &g) {
  if (grads[1])
    return op.emitOpError("logsumexp is not differentiable");
  Value mask = op.getMask();
  bool trainedMask = mask && b.needsGradient(mask) &&
                     isa<FloatType>(getElementTypeOrSelf(mask.getType()));
  auto grad = b.create<AttentionGradOp>(
      op.getQuery().getType(), op.getKey().getType(), op.getValue().getType(),
      trainedMask ? mask.getType() : Type(), op.getQuery(), op.getKey(),
      op.getValue(), mask, op.getOffset(), op.getOutput(), op.getLogsumexp(),
      grads[0], op.getScaleAttr(), op.getCausalAttr(), op.getWindowAttr(),
      op.getSoftcapAttr(), op.getDropoutRatioAttr(), op.getSeedAttr());
  g.append({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  if (mask)
    g.push_back(grad.getMaskGrad());
  if (op.getOffset())
    g.push_back(nullptr);
  return success();
}

void registerContractionGradients(GradientRuleTable &table) {
  table.add<MatmulOp>(matmulGradient);
  table.add<AttentionOp>(attentionGradient);
  addSpreadingReduction<ReduceSumOp>(table, /*mean=*/false);
  addSpreadingReduction<ReduceMeanOp>(table, /*mean=*/true);
  addSelectingReduction<ReduceMaxOp>(table);
  addSelectingReduction<ReduceMinOp>(table);
  // d prod = prod / x: exact for nonzero inputs, like the common formula.
  table.add<ReduceProdOp>([](ReduceProdOp op, ArrayRef<Value> grads,
                             GradientBuilder &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    ArrayRef<int64_t> shape = shapeOf(op.getInput());
    Value product = b.expandReduced(b.mul(grads[0], op.getResult()),
                                    op.getAxes(), op.getKeepDims(), shape);
    g.push_back(b.div(product, op.getInput()));
    return success();
  });
  table.add<CumsumOp>([](CumsumOp op, ArrayRef<Value> grads, GradientBuilder &b,
                         SmallVectorImpl<Value> &g) -> LogicalResult {
    // Each input contributes to the outputs after it: the gradient is the
    // cumulative sum in the other direction.
    g.push_back(b.create<CumsumOp>(grads[0], op.getAxis(), op.getExclusive(),
                                   !op.getReverse()));
    return success();
  });

  table.add<SoftmaxOp>([](SoftmaxOp op, ArrayRef<Value> grads,
                          GradientBuilder &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.create<SoftmaxGradOp>(op.getResult(), grads[0], op.getAxis()));
    return success();
  });
  table.add<LogSoftmaxOp>([](LogSoftmaxOp op, ArrayRef<Value> grads,
                             GradientBuilder &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(
        b.create<LogSoftmaxGradOp>(op.getResult(), grads[0], op.getAxis()));
    return success();
  });

  table.add<LayerNormOp>([](LayerNormOp op, ArrayRef<Value> grads,
                            GradientBuilder &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    if (grads[1] || grads[2])
      return op.emitOpError("gradients through the mean or inverse standard "
                            "deviation results are not supported");
    RankedTensorType type = op.getInput().getType();
    RankedTensorType normalized =
        type.clone(type.getShape().drop_front(op.getAxis()));
    auto grad = b.create<LayerNormGradOp>(
        TypeRange{type, normalized, normalized}, op.getInput(), op.getMean(),
        op.getInvStdDev(), grads[0], op.getScale(), op.getAxis());
    g.push_back(grad.getInputGrad());
    if (op.getScale())
      g.push_back(b.unbroadcast(grad.getScaleGrad(), op.getScale().getType()));
    if (op.getBias())
      g.push_back(b.unbroadcast(grad.getBiasGrad(), op.getBias().getType()));
    return success();
  });
  table.add<RmsNormOp>([](RmsNormOp op, ArrayRef<Value> grads,
                          GradientBuilder &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    if (grads[1])
      return op.emitOpError("gradients through the inverse RMS result are "
                            "not supported");
    RankedTensorType type = op.getInput().getType();
    RankedTensorType normalized =
        type.clone(type.getShape().drop_front(op.getAxis()));
    auto grad = b.create<RmsNormGradOp>(
        TypeRange{type, normalized}, op.getInput(), op.getInvRms(), grads[0],
        op.getScale(), op.getAxis());
    g.push_back(grad.getInputGrad());
    if (op.getScale())
      g.push_back(b.unbroadcast(grad.getScaleGrad(), op.getScale().getType()));
    return success();
  });

  table.add<CrossEntropyOp>([](CrossEntropyOp op, ArrayRef<Value> grads,
                               GradientBuilder &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.create<CrossEntropyGradOp>(
        op.getInput().getType(), op.getInput(), op.getLabels(), grads[0],
        op.getWeight(), op.getReductionAttr(), op.getIgnoreIndexAttr(),
        op.getNumClassesAttr()));
    return success();
  });
  table.add<NllLossOp>([](NllLossOp op, ArrayRef<Value> grads,
                          GradientBuilder &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.create<NllLossGradOp>(
        op.getInput().getType(), op.getInput(), op.getLabels(), grads[0],
        op.getWeight(), op.getReductionAttr(), op.getIgnoreIndexAttr(),
        op.getNumClassesAttr()));
    return success();
  });

  table.addNonDifferentiable<ArgMaxOp, ArgMinOp, TopKOp>();
}

} // namespace kiln
