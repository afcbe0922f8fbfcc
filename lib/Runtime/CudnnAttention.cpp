//===- CudnnAttention.cpp - an artifact's attention by cuDNN --------------===//
//
// The graphs are those cuDNN's fused flash attention engines recognize (the
// composition cudnn-frontend builds for scaled dot-product attention):
//
//   forward:  S = Q K^T * scale, causal -inf, the softmax as max, exp, sum
//             (Stats = max + log sum), O = P V with P in the operands' type
//   backward: D = rowsum(dO * O); P = exp(Q K^T * scale, masked, - Stats);
//             dV = P^T dO; dS = P * (dO V^T - D) * scale;
//             dK = dS^T Q; dQ = dS K, accumulated in f32 and converted
//
// Key (and in the backward pass value) descriptors are the transposes
// [batch, heads, head_dim, keys] of the artifact's tensors, by their
// strides. The f32 row sums and dQ accumulator live in the workspace after
// cuDNN's own.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"

#include <limits>

namespace kiln::runtime {

using Dims = CudnnGraph::Dims;

namespace {
cudnnDataType_t dataType(const artifact::LibraryAttention &a) {
  return a.element_type() == artifact::ElementType::BF16 ? CUDNN_DATA_BFLOAT16
                                                         : CUDNN_DATA_HALF;
}

/// Row-major strides of `dims`.
Dims rowMajor(Dims dims) {
  return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
}
} // namespace

std::unique_ptr<CudnnAttention>
CudnnAttention::create(const CudnnLibrary &api, cudnnHandle_t handle,
                       const artifact::LibraryAttention &attention,
                       std::string &error) {
  std::unique_ptr<CudnnAttention> result(new CudnnAttention(api, attention));
  if (attention.backward())
    result->buildBackward();
  else
    result->buildForward();
  if (!result->graph.plan(handle)) {
    error = result->graph.failure();
    return nullptr;
  }
  return result;
}

int64_t CudnnAttention::workspaceBytes() const {
  // cuDNN's part first, then ours, 256-byte aligned.
  return (graph.workspaceBytes() + 255) / 256 * 256 + extraWorkspace;
}

bool CudnnAttention::bind(char *arena, char *workspace, std::string &error) {
  int64_t ours = (graph.workspaceBytes() + 255) / 256 * 256;
  std::vector<std::pair<int64_t, void *>> pointers = graph.scalars();
  for (const Binding &binding : bindings)
    pointers.push_back({binding.uid, binding.inWorkspace
                                         ? workspace + ours + binding.offset
                                         : arena + binding.offset});
  if (!graph.bind(pointers, workspace)) {
    error = graph.failure();
    return false;
  }
  return true;
}

GraphTensor CudnnAttention::operand(size_t index, bool transposed) {
  const artifact::LibraryAttention &a = attention;
  auto [offset, rows] = artifact::attentionOperands(a)[index];
  Dims dims = {a.batch(), a.heads(), rows, a.head_dim()};
  Dims strides;
  for (size_t d = 0; d < 4; ++d)
    strides[d] = a.strides()->Get(4 * index + d);
  if (transposed) {
    std::swap(dims[2], dims[3]);
    std::swap(strides[2], strides[3]);
  }
  GraphTensor tensor = graph.tensor(dataType(a), dims, strides, false);
  bindings.push_back({tensor.uid, offset, false});
  return tensor;
}

GraphTensor CudnnAttention::logsumexp() {
  const artifact::LibraryAttention &a = attention;
  Dims dims = {a.batch(), a.heads(), a.rows(), 1};
  GraphTensor tensor =
      graph.tensor(CUDNN_DATA_FLOAT, dims, rowMajor(dims), false);
  bindings.push_back({tensor.uid, a.logsumexp(), false});
  return tensor;
}

GraphTensor CudnnAttention::maskedScores(GraphTensor q, GraphTensor kT,
                                         GraphTensor scale) {
  const artifact::LibraryAttention &a = attention;
  Dims dims = {a.batch(), a.heads(), a.rows(), a.keys()};
  GraphTensor products = graph.intermediate(dims);
  graph.matmul(q, kT, products);
  GraphTensor scores = graph.intermediate(dims);
  graph.pointwise(CUDNN_POINTWISE_MUL, products, scores, &scale);
  if (!a.causal())
    return scores;
  // Key j takes part in row i when i >= j.
  GraphTensor row = graph.intermediate(dims, CUDNN_DATA_INT32);
  GraphTensor column = graph.intermediate(dims, CUDNN_DATA_INT32);
  graph.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, row, nullptr, nullptr,
                  /*axis=*/2);
  graph.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, column, nullptr, nullptr,
                  /*axis=*/3);
  GraphTensor keep = graph.intermediate(dims, CUDNN_DATA_BOOLEAN);
  graph.pointwise(CUDNN_POINTWISE_CMP_GE, row, keep, &column, nullptr, -1,
                  CUDNN_DATA_BOOLEAN);
  GraphTensor excluded = graph.scalar(-std::numeric_limits<float>::infinity());
  GraphTensor masked = graph.intermediate(dims);
  graph.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, masked, &excluded,
                  &keep);
  return masked;
}

void CudnnAttention::buildForward() {
  const artifact::LibraryAttention &a = attention;
  cudnnDataType_t type = dataType(a);
  int64_t b = a.batch(), h = a.heads(), rows = a.rows(), keys = a.keys();
  GraphTensor q = operand(0), kT = operand(1, true), v = operand(2),
              o = operand(3), stats = logsumexp();
  Dims rowDims = {b, h, rows, 1};

  Dims scoreDims = {b, h, rows, keys};
  GraphTensor scale = graph.scalar(static_cast<float>(a.scale()));
  GraphTensor scores = maskedScores(q, kT, scale);
  // The softmax, keeping each row's log-sum-exp.
  GraphTensor maximum = graph.intermediate(rowDims);
  graph.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, maximum);
  GraphTensor shifted = graph.intermediate(scoreDims);
  graph.pointwise(CUDNN_POINTWISE_SUB, scores, shifted, &maximum);
  GraphTensor exponentials = graph.intermediate(scoreDims);
  graph.pointwise(CUDNN_POINTWISE_EXP, shifted, exponentials);
  GraphTensor sum = graph.intermediate(rowDims);
  graph.reduction(CUDNN_REDUCE_TENSOR_ADD, exponentials, sum);
  GraphTensor logSum = graph.intermediate(rowDims);
  graph.pointwise(CUDNN_POINTWISE_LOG, sum, logSum);
  graph.pointwise(CUDNN_POINTWISE_ADD, maximum, stats, &logSum);
  GraphTensor probabilities = graph.intermediate(scoreDims, type);
  graph.pointwise(CUDNN_POINTWISE_DIV, exponentials, probabilities, &sum);
  graph.matmul(probabilities, v, o);
}

void CudnnAttention::buildBackward() {
  const artifact::LibraryAttention &a = attention;
  cudnnDataType_t type = dataType(a);
  int64_t b = a.batch(), h = a.heads(), rows = a.rows(), keys = a.keys(),
          d = a.head_dim();
  GraphTensor q = operand(0), kT = operand(1, true), vT = operand(2, true),
              o = operand(3), dO = operand(4), dQ = operand(5), dK = operand(6),
              dV = operand(7), stats = logsumexp();
  Dims rowDims = {b, h, rows, 1};
  // Workspace buffers: the row sums of dO * O, the f32 dQ accumulator.
  GraphTensor rowSums =
      graph.tensor(CUDNN_DATA_FLOAT, rowDims, rowMajor(rowDims), false);
  Dims queryDims = {b, h, rows, d};
  GraphTensor dQAccumulator =
      graph.tensor(CUDNN_DATA_FLOAT, queryDims, rowMajor(queryDims), false);
  int64_t rowSumBytes = (b * h * rows * 4 + 255) / 256 * 256;
  extraWorkspace = rowSumBytes + b * h * rows * d * 4;
  bindings.push_back({rowSums.uid, 0, true});
  bindings.push_back({dQAccumulator.uid, rowSumBytes, true});

  // D = rowsum(dO * O), through a multiplication by 1 into the workspace.
  GraphTensor products = graph.tensor(CUDNN_DATA_FLOAT, queryDims,
                                      {h * rows * d, rows * d, h * d, 1}, true);
  graph.pointwise(CUDNN_POINTWISE_MUL, dO, products, &o);
  GraphTensor sums = graph.intermediate(rowDims);
  graph.reduction(CUDNN_REDUCE_TENSOR_ADD, products, sums);
  GraphTensor one = graph.scalar(1.0f);
  graph.pointwise(CUDNN_POINTWISE_MUL, sums, rowSums, &one);

  // P = exp(S - Stats), recomputed.
  Dims scoreDims = {b, h, rows, keys};
  GraphTensor scale = graph.scalar(static_cast<float>(a.scale()));
  GraphTensor scores = maskedScores(q, kT, scale);
  GraphTensor shifted = graph.intermediate(scoreDims);
  graph.pointwise(CUDNN_POINTWISE_SUB, scores, shifted, &stats);
  GraphTensor probabilities = graph.intermediate(scoreDims);
  graph.pointwise(CUDNN_POINTWISE_EXP, shifted, probabilities);

  // dV = P^T dO, P^T a view in the operands' type.
  Dims transposedDims = {b, h, keys, rows};
  Dims transposedStrides = {h * rows * keys, rows * keys, 1, keys};
  GraphTensor pT = graph.tensor(type, transposedDims, transposedStrides, true);
  graph.reshape(probabilities, pT);
  graph.matmul(pT, dO, dV);

  // dS = P * (dO V^T - D) * scale.
  GraphTensor dP = graph.intermediate(scoreDims);
  graph.matmul(dO, vT, dP);
  GraphTensor centered = graph.intermediate(scoreDims);
  graph.pointwise(CUDNN_POINTWISE_SUB, dP, centered, &rowSums);
  GraphTensor weighted = graph.intermediate(scoreDims);
  graph.pointwise(CUDNN_POINTWISE_MUL, centered, weighted, &probabilities);
  GraphTensor dS = graph.intermediate(scoreDims);
  graph.pointwise(CUDNN_POINTWISE_MUL, weighted, dS, &scale);

  // dK = dS^T Q.
  GraphTensor dST = graph.tensor(type, transposedDims, transposedStrides, true);
  graph.reshape(dS, dST);
  graph.matmul(dST, q, dK);

  // dQ = dS K, K the transpose of K^T, accumulated in f32.
  Dims keyStrides;
  for (size_t i = 0; i < 4; ++i)
    keyStrides[i] = a.strides()->Get(4 + i);
  GraphTensor k = graph.tensor(type, {b, h, keys, d}, keyStrides, true);
  graph.reshape(kT, k);
  graph.matmul(dS, k, dQAccumulator);
  graph.pointwise(CUDNN_POINTWISE_IDENTITY, dQAccumulator, dQ);
}

} // namespace kiln::runtime
