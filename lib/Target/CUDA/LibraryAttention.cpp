//===- LibraryAttention.cpp - attention that cuDNN computes ---------------===//
//
// With --attention=cudnn, each kiln.attention and kiln.attention_grad that
// cuDNN's fused flash attention computes with the same meaning becomes an
// artifact operation describing it (shapes, strides, arena offsets); the
// runtime builds cuDNN's graphs from those at load time. The rest keep
// kiln's kernels, and the reason is reported.
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"
#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;

namespace kiln::cuda {

/// The tensors of an attention op in the artifact's order: query, key,
/// value, output, then output_grad and the three gradients.
static SmallVector<Value, 8> attentionTensors(Operation *op) {
  if (auto attention = dyn_cast<AttentionOp>(op))
    return {attention.getQuery(), attention.getKey(), attention.getValue(),
            attention.getOutput()};
  auto gradient = cast<AttentionGradOp>(op);
  return {gradient.getQuery(),      gradient.getKey(),
          gradient.getValue(),      gradient.getOutput(),
          gradient.getOutputGrad(), gradient.getQueryGrad(),
          gradient.getKeyGrad(),    gradient.getValueGrad()};
}

template <typename AttentionOpTy>
static std::optional<std::string> unsupportedMeaning(AttentionOpTy op) {
  if (op.getMask())
    return "a mask other than the causal one";
  if (op.getWindow())
    return "a sliding window";
  if (op.getSoftcap())
    return "a soft cap";
  if (!op.getDropoutRatio().isZero())
    return "dropout";
  if (shapeOf(op.getQuery())[1] != shapeOf(op.getKey())[1])
    return "grouped-query heads";
  if (elementTypeOf(op.getLogsumexp()) !=
      Float32Type::get(op->getContext()))
    return "f64 operands";
  return std::nullopt;
}

std::optional<std::string> cudnnAttentionUnsupported(Operation *op,
                                                     StridesOf stridesOf) {
  std::optional<std::string> meaning =
      isa<AttentionOp>(op) ? unsupportedMeaning(cast<AttentionOp>(op))
                           : unsupportedMeaning(cast<AttentionGradOp>(op));
  if (meaning)
    return meaning;
  SmallVector<Value, 8> tensors = attentionTensors(op);
  Type element = elementTypeOf(tensors.front());
  if (!element.isBF16() && !element.isF16())
    return "operands that are not bf16 or fp16";
  for (Value tensor : tensors)
    if (elementTypeOf(tensor) != element)
      return "operands and results of different types";
  int64_t headDim = shapeOf(tensors.front())[3];
  if (shapeOf(tensors[2])[3] != headDim)
    return "a value width other than the query's";
  if (headDim % 8 != 0 || headDim > 128)
    return "a head dimension that is not a multiple of 8 up to 128";
  for (Value tensor : tensors)
    if (stridesOf(tensor).back() != 1)
      return "a tensor whose rows are not contiguous";
  Value logsumexp = isa<AttentionOp>(op)
                        ? cast<AttentionOp>(op).getLogsumexp()
                        : cast<AttentionGradOp>(op).getLogsumexp();
  if (stridesOf(logsumexp) != contiguousStrides(shapeOf(logsumexp)))
    return "a strided log-sum-exp";
  return std::nullopt;
}

std::unique_ptr<artifact::OperationT>
cudnnAttention(Operation *op, function_ref<int64_t(Value)> offsetOf,
               StridesOf stridesOf) {
  SmallVector<Value, 8> tensors = attentionTensors(op);
  ArrayRef<int64_t> query = shapeOf(tensors[0]);
  auto attention = std::make_unique<artifact::LibraryAttentionT>();
  attention->backward = isa<AttentionGradOp>(op);
  attention->batch = query[0];
  attention->heads = query[1];
  attention->rows = query[2];
  attention->keys = shapeOf(tensors[1])[2];
  attention->head_dim = query[3];
  attention->element_type = elementTypeOf(tensors[0]).isBF16()
                                ? artifact::ElementType::BF16
                                : artifact::ElementType::F16;
  int64_t flops = 0, bytes = 0;
  auto describe = [&](auto typed) {
    attention->causal = typed.getCausal();
    attention->scale = typed.getScale().convertToDouble();
    attention->logsumexp = offsetOf(typed.getLogsumexp());
    // The forward pass computes two products the size of Q K^T, the
    // backward pass five (S, dP, dV, dQ, dK).
    flops = attentionProductFlops(typed) * (attention->backward ? 5 : 2);
    bytes = countOf(typed.getLogsumexp()) * 4;
  };
  if (auto forward = dyn_cast<AttentionOp>(op))
    describe(forward);
  else
    describe(cast<AttentionGradOp>(op));
  int64_t *offsets[] = {&attention->query,       &attention->key,
                        &attention->value,       &attention->output,
                        &attention->output_grad, &attention->query_grad,
                        &attention->key_grad,    &attention->value_grad};
  for (auto [i, tensor] : llvm::enumerate(tensors)) {
    *offsets[i] = offsetOf(tensor);
    SmallVector<int64_t> strides = stridesOf(tensor);
    attention->strides.insert(attention->strides.end(), strides.begin(),
                              strides.end());
    bytes += countOf(tensor) * storageBytes(elementTypeOf(tensor));
  }
  auto operation = std::make_unique<artifact::OperationT>();
  operation->attention = std::move(attention);
  operation->flops = flops;
  operation->bytes = bytes;
  return operation;
}

} // namespace kiln::cuda
