//===- TemplateKernels.cpp - ops with schedules of their own --------------===//
//
// Attention (TensorCoreAttention.cpp, AttentionKernels.cpp) and the
// scatter-add of gather_grad, whose repeated indices need atomics.
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace kiln::cuda {

namespace {
int64_t gridFor(int64_t threads) {
  return std::max<int64_t>(1, std::min<int64_t>((threads + 127) / 128, 4096));
}
} // namespace

/// gather_grad: zero the result, then add every slice of the gradient at
/// the row its index selected (atomically: indices repeat).
static FailureOr<SmallVector<KernelPlan>> gatherGradient(GatherGradOp op) {
  Type type = elementTypeOf(op.getResult());
  if (!type.isF32() && !type.isF64())
    return op.emitError() << "the CUDA target cannot compile '" << op->getName()
                          << "' of " << type
                          << ": only f32 and f64 gradients are accumulated";
  ArrayRef<int64_t> data = shapeOf(op.getResult());
  int64_t axis = op.getAxis(), inner = 1;
  for (int64_t size : data.drop_front(axis + 1))
    inner *= size;
  int64_t indices = countOf(op.getIndices());
  std::string t = storageType(type),
              it = storageType(elementTypeOf(op.getIndices()));
  std::vector<std::pair<std::string, std::string>> values = {
      {"T", t},
      {"IT", it},
      {"N", std::to_string(countOf(op.getResult())) + "ll"},
      {"G", std::to_string(countOf(op.getGrad())) + "ll"},
      {"INNER", std::to_string(inner) + "ll"},
      {"INDICES", std::to_string(indices) + "ll"},
      {"SIZE", std::to_string(data[axis]) + "ll"}};
  KernelPlan zero, scatter;
  zero.operands = {op.getGrad(), op.getIndices()};
  zero.results = {op.getResult()};
  zero.body = substitute(R"cuda(
  $T *out = ($T *)args[2];
  for (i64 i = global_thread(); i < $N; i += thread_count()) out[i] = 0;
)cuda",
                         values);
  zero.grid = gridFor(countOf(op.getResult()));
  scatter = zero;
  scatter.body = substitute(R"cuda(
  const $T *grad = (const $T *)args[0];
  const $IT *index = (const $IT *)args[1];
  $T *out = ($T *)args[2];
  unsigned *status = (unsigned *)args[3];
  for (i64 e = global_thread(); e < $G; e += thread_count()) {
    const i64 m = (e / $INNER) % $INDICES, outer = e / ($INNER * $INDICES);
    i64 q = (i64)index[m];
    if (q < 0) q += $SIZE;
    if (q < 0 || q >= $SIZE) {
      *status = 1u;
      q = q < 0 ? 0 : $SIZE - 1;
    }
    atomicAdd(&out[(outer * $SIZE + q) * $INNER + e % $INNER], grad[e]);
  }
)cuda",
                            values);
  scatter.grid = gridFor(countOf(op.getGrad()));
  scatter.checksIndices = true;
  return SmallVector<KernelPlan>{zero, scatter};
}

FailureOr<SmallVector<KernelPlan>> planTemplateKernels(Operation *op,
                                                       bool exactAttention) {
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    std::optional<KernelPlan> fast;
    if (!exactAttention)
      fast = tensorCoreAttentionForward(attention);
    return SmallVector<KernelPlan>{fast ? *fast : attentionForward(attention)};
  }
  if (auto gradient = dyn_cast<AttentionGradOp>(op)) {
    std::optional<SmallVector<KernelPlan>> fast;
    if (!exactAttention)
      fast = tensorCoreAttentionGradient(gradient);
    return fast ? *fast : attentionGradient(gradient);
  }
  if (auto gather = dyn_cast<GatherGradOp>(op))
    return gatherGradient(gather);
  return failure();
}

} // namespace kiln::cuda
