//===- MatmulEvaluator.cpp - batched matrix products ----------------------===//
//
// Rows of the result are independent tasks spread over all cores. Each row of
// the left operand is widened to fp64 once; products accumulate in fp64 and
// round once to the result type.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/Support/Parallel.h"

using namespace mlir;

namespace kiln {

namespace {
/// Where one matrix of the batch starts in each operand.
struct BatchOffsets {
  int64_t lhs, rhs;
};

struct MatmulShape {
  int64_t m, n, k;
  bool transposeLhs, transposeRhs;
};
} // namespace

/// Element [i, c] of the left matrix and [c, j] of the right one, honouring
/// the transpose flags.
static int64_t lhsIndex(const MatmulShape &s, int64_t i, int64_t c) {
  return s.transposeLhs ? c * s.m + i : i * s.k + c;
}
static int64_t rhsIndex(const MatmulShape &s, int64_t c, int64_t j) {
  return s.transposeRhs ? j * s.k + c : c * s.n + j;
}

static void multiplyFloatRow(const MatmulShape &s, const double *lhs,
                             const double *rhs, int64_t i, Tensor &result,
                             int64_t resultOffset) {
  SmallVector<double> row(s.k), acc(s.n, 0.0);
  for (int64_t c = 0; c < s.k; ++c)
    row[c] = lhs[lhsIndex(s, i, c)];
  if (s.transposeRhs) {
    // Both operands are contiguous along the contraction: dot products.
    for (int64_t j = 0; j < s.n; ++j) {
      const double *column = rhs + j * s.k;
      double sum = 0.0;
      for (int64_t c = 0; c < s.k; ++c)
        sum += row[c] * column[c];
      acc[j] = sum;
    }
  } else {
    // The right operand is contiguous along j: accumulate scaled rows.
    for (int64_t c = 0; c < s.k; ++c) {
      const double *rhsRow = rhs + c * s.n;
      double a = row[c];
      for (int64_t j = 0; j < s.n; ++j)
        acc[j] += a * rhsRow[j];
    }
  }
  for (int64_t j = 0; j < s.n; ++j)
    result.setFromDouble(resultOffset + j, acc[j]);
}

static void multiplyIntegerRow(const MatmulShape &s, const int64_t *lhs,
                               const int64_t *rhs, int64_t i, Tensor &result,
                               int64_t resultOffset) {
  for (int64_t j = 0; j < s.n; ++j) {
    uint64_t sum = 0;
    for (int64_t c = 0; c < s.k; ++c)
      sum += static_cast<uint64_t>(lhs[lhsIndex(s, i, c)]) *
             static_cast<uint64_t>(rhs[rhsIndex(s, c, j)]);
    result.ints()[resultOffset + j] =
        wrapToElementType(result.getDType(), static_cast<int64_t>(sum));
  }
}

static LogicalResult evaluateMatmul(MatmulOp op,
                                    const EvaluationContext &context,
                                    SmallVectorImpl<Tensor> &results) {
  const Tensor &lhs = context.operand(0), &rhs = context.operand(1);
  Tensor result = makeTensor(op.getResult());
  int64_t rank = result.getRank();
  MatmulShape s{result.getShape()[rank - 2], result.getShape()[rank - 1],
                lhs.getShape()[lhs.getRank() - (op.getTransposeLhs() ? 2 : 1)],
                op.getTransposeLhs(), op.getTransposeRhs()};

  ArrayRef<int64_t> batchShape = result.getShape().drop_back(2);
  SmallVector<int64_t> lhsStrides =
      broadcastStrides(lhs.getShape().drop_back(2), batchShape);
  SmallVector<int64_t> rhsStrides =
      broadcastStrides(rhs.getShape().drop_back(2), batchShape);
  std::vector<BatchOffsets> batches;
  forEachIndex<2>(batchShape, {lhsStrides, rhsStrides},
                  [&](int64_t, const std::array<int64_t, 2> &offsets) {
                    batches.push_back({offsets[0] * s.m * s.k,
                                       offsets[1] * s.k * s.n});
                  });

  llvm::parallelFor(0, static_cast<size_t>(batches.size() * s.m), [&](size_t task) {
    int64_t batch = task / s.m, i = task % s.m;
    int64_t resultOffset = (batch * s.m + i) * s.n;
    const BatchOffsets &at = batches[batch];
    if (result.isFloat())
      multiplyFloatRow(s, lhs.floats().data() + at.lhs,
                       rhs.floats().data() + at.rhs, i, result, resultOffset);
    else
      multiplyIntegerRow(s, lhs.ints().data() + at.lhs,
                         rhs.ints().data() + at.rhs, i, result, resultOffset);
  });
  results.push_back(std::move(result));
  return success();
}

void registerMatmulEvaluator(EvaluatorTable &table) {
  table.add<MatmulOp>(evaluateMatmul);
}

} // namespace kiln
