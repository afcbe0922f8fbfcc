//===- TemplateKernels.cpp - ops with schedules of their own --------------===//
//
// Attention (TensorCoreAttention.cpp, AttentionKernels.cpp), the scatter-add
// of gather_grad and scatter_elements, whose repeated indices need atomics
// or order.
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

/// gather_grad: zero the sums, then add every slice of the gradient at the
/// row its index selected (atomically: indices repeat). f32 and f64 results
/// are the sums; 16-bit ones are summed in f64 scratch and rounded once at
/// the end, as the interpreter does.
static SmallVector<KernelPlan> gatherGradient(GatherGradOp op) {
  Type type = elementTypeOf(op.getResult());
  bool direct = type.isF32() || type.isF64();
  ArrayRef<int64_t> data = shapeOf(op.getResult());
  int64_t axis = op.getAxis(), inner = 1;
  for (int64_t size : data.drop_front(axis + 1))
    inner *= size;
  int64_t count = countOf(op.getResult());
  std::vector<std::pair<std::string, std::string>> values = {
      {"T", storageType(type)},
      {"S", direct ? storageType(type) : "double"},
      {"SUMS", direct ? "($S *)args[2]" : "(double *)args[3]"},
      {"STATUS", direct ? "args[3]" : "args[4]"},
      {"IT", storageType(elementTypeOf(op.getIndices()))},
      {"N", std::to_string(count) + "ll"},
      {"G", std::to_string(countOf(op.getGrad())) + "ll"},
      {"INNER", std::to_string(inner) + "ll"},
      {"INDICES", std::to_string(countOf(op.getIndices())) + "ll"},
      {"SIZE", std::to_string(data[axis]) + "ll"},
      {"ROUNDED", stored(type, "sums[i]")}};
  KernelPlan zero, scatter;
  zero.operands = {op.getGrad(), op.getIndices()};
  zero.results = {op.getResult()};
  if (!direct)
    zero.partialBytes = count * 8;
  zero.body = substitute(R"cuda(
  $S *sums = $SUMS;
  for (i64 i = global_thread(); i < $N; i += thread_count()) sums[i] = 0;
)cuda",
                         values);
  zero.grid = gridFor(count);
  scatter = zero;
  scatter.body = substitute(R"cuda(
  const $T *grad = (const $T *)args[0];
  const $IT *index = (const $IT *)args[1];
  $S *sums = $SUMS;
  unsigned *status = (unsigned *)$STATUS;
  for (i64 e = global_thread(); e < $G; e += thread_count()) {
    const i64 m = (e / $INNER) % $INDICES, outer = e / ($INNER * $INDICES);
    const i64 q = checked_index((i64)index[m], $SIZE, status);
    atomicAdd(&sums[(outer * $SIZE + q) * $INNER + e % $INNER], ($S)$LOADG);
  }
)cuda",
                            values);
  scatter.body =
      substitute(scatter.body,
                 {{"LOADG", loaded(elementTypeOf(op.getGrad()), "grad[e]")}});
  scatter.grid = gridFor(countOf(op.getGrad()));
  scatter.checksIndices = true;
  if (direct)
    return {zero, scatter};
  KernelPlan round = zero;
  round.body = substitute(R"cuda(
  $T *out = ($T *)args[2];
  const double *sums = $SUMS;
  for (i64 i = global_thread(); i < $N; i += thread_count()) out[i] = $ROUNDED;
)cuda",
                          values);
  return {zero, scatter, round};
}

/// scatter_elements: copy the data, then write or combine every update at
/// the element its index addresses. A sum of f32/f64 updates is atomic and
/// parallel; every other form runs in the order of the updates on one
/// thread, as the interpreter does, so that repeated indices leave the last
/// write (`none`) and products, maxima and minima round the same way.
static SmallVector<KernelPlan> scatterElements(ScatterElementsOp op) {
  Type type = elementTypeOf(op.getResult());
  ArrayRef<int64_t> data = shapeOf(op.getData()),
                    positions = shapeOf(op.getIndices());
  int64_t axis = op.getAxis();
  SmallVector<int64_t> dataStrides = contiguousStrides(data);
  // The addressed element of update e: e's coordinates in the indices'
  // shape, with the index in place of the one along `axis`.
  std::string target;
  for (int64_t d = 0; d < static_cast<int64_t>(positions.size()); ++d)
    target += " + " +
              (d == axis ? std::string("q") : coordinate(positions, d, "e")) +
              " * " + std::to_string(dataStrides[d]) + "ll";
  bool parallel = op.getReduction() == ScatterReduction::Add &&
                  (type.isF32() || type.isF64());
  // As the interpreter combines: rounded to the type after every update.
  std::string current = loaded(type, "out[at]"),
              next = loaded(type, "updates[e]"), combined;
  switch (op.getReduction()) {
  case ScatterReduction::Add:
    combined = current + " + " + next;
    break;
  case ScatterReduction::Mul:
    combined = current + " * " + next;
    break;
  case ScatterReduction::Max: // std::max
    combined =
        "(" + current + " < " + next + " ? " + next + " : " + current + ")";
    break;
  case ScatterReduction::Min: // std::min
    combined =
        "(" + next + " < " + current + " ? " + next + " : " + current + ")";
    break;
  case ScatterReduction::None:
    break;
  }
  std::string update = parallel ? "atomicAdd(&out[at], updates[e]);"
                       : op.getReduction() == ScatterReduction::None
                           ? "out[at] = updates[e];"
                           : "out[at] = " + stored(type, combined) + ";";
  std::vector<std::pair<std::string, std::string>> values = {
      {"T", storageType(type)},
      {"IT", storageType(elementTypeOf(op.getIndices()))},
      {"N", std::to_string(countOf(op.getData())) + "ll"},
      {"G", std::to_string(countOf(op.getIndices())) + "ll"},
      {"SIZE", std::to_string(data[axis]) + "ll"},
      {"TARGET", "0ll" + target},
      {"UPDATE", update},
      {"FIRST", parallel ? "global_thread()" : "0"},
      {"STRIDE", parallel ? "thread_count()" : "1"},
      {"ACTIVE", parallel ? "true" : "blockIdx.x == 0 && threadIdx.x == 0"}};
  KernelPlan copy, scatter;
  copy.operands = {op.getData(), op.getIndices(), op.getUpdates()};
  copy.results = {op.getResult()};
  copy.body = substitute(R"cuda(
  const $T *data = (const $T *)args[0];
  $T *out = ($T *)args[3];
  for (i64 i = global_thread(); i < $N; i += thread_count()) out[i] = data[i];
)cuda",
                         values);
  copy.grid = gridFor(countOf(op.getData()));
  scatter = copy;
  scatter.body = substitute(R"cuda(
  const $IT *index = (const $IT *)args[1];
  const $T *updates = (const $T *)args[2];
  $T *out = ($T *)args[3];
  unsigned *status = (unsigned *)args[4];
  if (!($ACTIVE)) return;
  for (i64 e = $FIRST; e < $G; e += $STRIDE) {
    const i64 q = checked_index((i64)index[e], $SIZE, status);
    const i64 at = $TARGET;
    $UPDATE
  }
)cuda",
                            values);
  scatter.grid = parallel ? gridFor(countOf(op.getIndices())) : 1;
  scatter.checksIndices = true;
  return {copy, scatter};
}

FailureOr<SmallVector<KernelPlan>>
planTemplateKernels(Operation *op, const TargetOptions &options,
                    StridesOf stridesOf) {
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    std::optional<KernelPlan> fast;
    if (!options.exactAttention)
      fast = tensorCoreAttentionForward(attention, options, stridesOf);
    return SmallVector<KernelPlan>{
        fast ? *fast : attentionForward(attention, stridesOf)};
  }
  if (auto gradient = dyn_cast<AttentionGradOp>(op)) {
    std::optional<SmallVector<KernelPlan>> fast;
    if (!options.exactAttention)
      fast = tensorCoreAttentionGradient(gradient, options, stridesOf);
    return fast ? *fast : attentionGradient(gradient, stridesOf);
  }
  if (auto gather = dyn_cast<GatherGradOp>(op))
    return gatherGradient(gather);
  if (auto scatter = dyn_cast<ScatterElementsOp>(op))
    return scatterElements(scatter);
  return failure();
}

} // namespace kiln::cuda
