//===- AttentionOps.cpp - verifiers of attention and its gradient ---------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/IR/ShapeInference.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace kiln;

std::pair<int64_t, int64_t>
kiln::attentionKeyRange(bool causal, std::optional<ArrayRef<int64_t>> window,
                        int64_t i, int64_t keys) {
  int64_t first = 0, last = keys;
  if (causal)
    last = std::min(last, i + 1);
  if (window && (*window)[0] >= 0)
    first = std::max<int64_t>(first, i - (*window)[0]);
  if (window && (*window)[1] >= 0)
    last = std::min(last, i + (*window)[1] + 1);
  return {first, std::max(first, last)};
}

/// Checks the operands and attributes that the forward and the gradient
/// share; on success, `output` and `logsumexp` are the shapes of the
/// forward's results.
template <typename OpTy>
static LogicalResult
verifyAttentionOperands(OpTy op, SmallVectorImpl<int64_t> &output,
                        SmallVectorImpl<int64_t> &logsumexp) {
  RankedTensorType q = op.getQuery().getType(), k = op.getKey().getType(),
                   v = op.getValue().getType();
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return op.emitOpError("query, key and value must have rank 4 "
                          "[batch, heads, sequence, head dim]");
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  if (ks[0] != qs[0] || vs[0] != qs[0])
    return op.emitOpError("query, key and value must have one batch size");
  if (ks[1] != vs[1] || ks[2] != vs[2])
    return op.emitOpError("key and value must have the same heads and keys");
  if (ks[1] == 0 || qs[1] % ks[1] != 0)
    return op.emitOpError()
           << "query heads (" << qs[1]
           << ") must be a multiple of key/value heads (" << ks[1] << ")";
  if (ks[3] != qs[3])
    return op.emitOpError("query and key must have one head dim");
  if (Value mask = op.getMask()) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    Type element = maskType.getElementType();
    if (!isa<FloatType>(element) && !element.isInteger(1))
      return op.emitOpError("mask must be float (added to the scores) or i1 "
                            "(true where a key takes part)");
    SmallVector<int64_t> scores = {qs[0], qs[1], qs[2], ks[2]};
    FailureOr<SmallVector<int64_t>> merged =
        broadcastShapes(std::nullopt, {scores, maskType.getShape()});
    if (failed(merged) || ArrayRef<int64_t>(*merged) != ArrayRef(scores))
      return op.emitOpError() << "mask of shape [" << maskType.getShape()
                              << "] does not broadcast to the scores ["
                              << ArrayRef(scores) << "]";
  }
  if (std::optional<ArrayRef<int64_t>> window = op.getWindow();
      window && window->size() != 2)
    return op.emitOpError("window must be [left, right]");
  if (std::optional<APFloat> cap = op.getSoftcap();
      cap && !(cap->convertToDouble() > 0.0))
    return op.emitOpError("softcap must be positive");
  double ratio = op.getDropoutRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return op.emitOpError()
           << "dropout_ratio " << ratio << " is outside [0, 1)";
  output.assign({qs[0], qs[1], qs[2], vs[3]});
  logsumexp.assign({qs[0], qs[1], qs[2]});
  return success();
}

static LogicalResult verifyShape(Operation *op, StringRef what, Value value,
                                 ArrayRef<int64_t> shape) {
  if (cast<RankedTensorType>(value.getType()).getShape() != shape)
    return op->emitOpError() << what << " must have shape [" << shape << "]";
  return success();
}

/// Checks what the forward and the gradient share: the operands, and the
/// forward's output and log-sum-exp (scores are held in f32, or f64 for f64
/// operands). On success, `output` is the forward output's shape.
template <typename OpTy>
static LogicalResult verifyAttention(OpTy op,
                                     SmallVectorImpl<int64_t> &output) {
  SmallVector<int64_t> logsumexp;
  if (failed(verifyAttentionOperands(op, output, logsumexp)) ||
      failed(verifyShape(op, "output", op.getOutput(), output)) ||
      failed(verifyShape(op, "logsumexp", op.getLogsumexp(), logsumexp)))
    return failure();
  Type element = op.getQuery().getType().getElementType();
  Type expected = element.isF64() ? element : Float32Type::get(op.getContext());
  if (op.getLogsumexp().getType().getElementType() != expected)
    return op.emitOpError() << "logsumexp must have element type " << expected;
  return success();
}

LogicalResult AttentionOp::verify() {
  SmallVector<int64_t> output;
  return verifyAttention(*this, output);
}

LogicalResult AttentionGradOp::verify() {
  SmallVector<int64_t> output;
  if (failed(verifyAttention(*this, output)) ||
      failed(verifyShape(*this, "output_grad", getOutputGrad(), output)))
    return failure();
  for (auto [grad, operand] :
       llvm::zip(getResults(), ValueRange{getQuery(), getKey(), getValue()}))
    if (cast<RankedTensorType>(grad.getType()).getShape() !=
        cast<RankedTensorType>(operand.getType()).getShape())
      return emitOpError("each gradient must have its operand's shape");
  if (Value maskGrad = getMaskGrad()) {
    Value mask = getMask();
    if (!mask || !isa<FloatType>(getElementTypeOrSelf(mask.getType())))
      return emitOpError("mask_grad needs a float mask");
    if (maskGrad.getType() != mask.getType())
      return emitOpError("mask_grad must have the mask's type");
  }
  return success();
}
