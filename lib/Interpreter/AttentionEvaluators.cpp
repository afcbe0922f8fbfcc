//===- AttentionEvaluators.cpp - attention and its gradient ---------------===//
//
// Both ops compute one score row at a time, as a fused kernel does, so no
// [B, H, Tq, Tk] tensor is ever built. The forward rounds exactly where the
// ops it replaces round (the product, the scaled and the masked scores, the
// probabilities and the dropped probabilities, to the score type), so that
// on the eager pattern attention equals them bit for bit. Like tensor
// cores, each product reads its operands in their own types: the
// probabilities in v's type, the score gradients in q's and k's. Rows are
// spread over all cores.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/Support/Parallel.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln {

namespace {
/// The operands, shapes and attributes of one attention op.
class AttentionProblem {
public:
  template <typename OpTy>
  AttentionProblem(OpTy op, const EvaluationContext &context)
      : q(context.operand(0)), k(context.operand(1)), v(context.operand(2)),
        scoreType(q.getDType() == DType::F64 ? DType::F64 : DType::F32),
        scale(op.getScale().convertToDouble()), causal(op.getCausal()) {
    if (std::optional<ArrayRef<int64_t>> bounds = op.getWindow())
      window.assign(bounds->begin(), bounds->end());
    if (std::optional<APFloat> cap = op.getSoftcap())
      softcap = cap->convertToDouble();
    ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape();
    batch = qs[0];
    heads = qs[1];
    groupSize = qs[1] / ks[1];
    tq = qs[2];
    tk = ks[2];
    d = qs[3];
    dv = v.getShape()[3];
    auto operandAt = [&](unsigned odsIndex) -> const Tensor * {
      auto [start, length] = op.getODSOperandIndexAndLength(odsIndex);
      return length ? &context.operand(start) : nullptr;
    };
    mask = operandAt(3);
    if (mask)
      maskStrides = broadcastStrides(mask->getShape(), {batch, heads, tq, tk});
    std::optional<int64_t> offset;
    if (const Tensor *offsetTensor = operandAt(4))
      offset = offsetTensor->ints()[0];
    double ratio = op.getDropoutRatio().convertToDouble();
    if (ratio > 0.0)
      dropout.emplace(op.getSeed(), offset, ratio);
  }

  /// Rounds to the type scores are held in.
  double round(double x) const { return roundToElementType(scoreType, x); }

  int64_t rows() const { return batch * heads * tq; }
  /// Offsets of query row `row` (= (b * heads + h) * tq + i), and of key
  /// and value row `j` of the head it reads.
  int64_t queryAt(int64_t row) const { return row * d; }
  int64_t keyAt(int64_t row, int64_t j) const {
    return (kvHeadOf(row) * tk + j) * d;
  }
  int64_t valueAt(int64_t row, int64_t j) const {
    return (kvHeadOf(row) * tk + j) * dv;
  }

  /// The scores of query row `row`; -inf where a key does not take part.
  /// With `slopes`, also the soft cap's slope at each score, the factor its
  /// gradient takes (1 without a cap).
  void scores(int64_t row, MutableArrayRef<double> s,
              MutableArrayRef<double> slopes = {}) const {
    int64_t i = row % tq;
    int64_t maskBase = 0;
    if (mask) {
      int64_t bh = row / tq;
      maskBase = (bh / heads) * maskStrides[0] + (bh % heads) * maskStrides[1] +
                 i * maskStrides[2];
    }
    const double *query = q.floats().data() + queryAt(row);
    auto [first, last] = attentionKeyRange(
        causal,
        window.empty() ? std::nullopt
                       : std::optional<ArrayRef<int64_t>>(window),
        i, tk);
    for (int64_t j = 0; j < tk; ++j) {
      if (j < first || j >= last) {
        s[j] = -std::numeric_limits<double>::infinity();
        continue;
      }
      const double *key = k.floats().data() + keyAt(row, j);
      double dot = 0.0;
      for (int64_t c = 0; c < d; ++c)
        dot += query[c] * key[c];
      double score = round(round(dot) * scale);
      if (softcap > 0.0) {
        double t = round(std::tanh(round(score / softcap)));
        score = round(t * softcap);
        if (!slopes.empty())
          slopes[j] = 1.0 - t * t;
      }
      if (mask) {
        double m = mask->getAsDouble(maskBase + j * maskStrides[3]);
        if (mask->isFloat())
          score = round(score + m);
        else if (m == 0.0)
          score = -std::numeric_limits<double>::infinity();
      }
      s[j] = score;
    }
  }

  /// The dropout factor of probability (row, j): 0 or 1 / (1 - ratio).
  double dropoutFactor(int64_t row, int64_t j) const {
    if (!dropout)
      return 1.0;
    return dropout->keep(row * tk + j) ? dropout->scale() : 0.0;
  }

  /// Calls `visit(j, probability, factor, ds, slope)` for each key `j`
  /// with a nonzero probability in query row `row`, whose log-sum-exp is
  /// `lse`, output gradient `dout` and `delta` = dout . output: the
  /// probability recomputed from the log-sum-exp, its dropout factor, the
  /// gradient of its masked score (the mask's), rounded as the softmax's
  /// gradient rounds, and the soft cap's slope there. `s` and `slopes` are
  /// scratch of `tk` each.
  template <typename Visit>
  void forEachScoreGradient(int64_t row, double lse, const double *dout,
                            double delta, MutableArrayRef<double> s,
                            MutableArrayRef<double> slopes, Visit visit) const {
    std::fill(slopes.begin(), slopes.end(), 1.0);
    scores(row, s, slopes);
    for (int64_t j = 0; j < tk; ++j) {
      double probability = round(std::exp(s[j] - lse));
      if (probability == 0.0)
        continue;
      double factor = dropoutFactor(row, j);
      const double *value = v.floats().data() + valueAt(row, j);
      double dp = 0.0;
      for (int64_t c = 0; c < dv; ++c)
        dp += dout[c] * value[c];
      visit(j, probability, factor,
            round(probability * (round(dp) * factor - delta)), slopes[j]);
    }
  }

  const Tensor &q, &k, &v;
  DType scoreType;
  const Tensor *mask = nullptr;
  SmallVector<int64_t> maskStrides;
  std::optional<DropoutDraw> dropout;
  int64_t batch, heads, groupSize, tq, tk, d, dv;
  double scale;
  bool causal;
  SmallVector<int64_t, 2> window;
  /// Gemma 2's soft cap of the scaled scores; 0 for none.
  double softcap = 0.0;

private:
  /// The key/value head (batch included) that query row `row` reads.
  int64_t kvHeadOf(int64_t row) const {
    int64_t bh = row / tq;
    return (bh / heads) * (heads / groupSize) + (bh % heads) / groupSize;
  }
};
} // namespace

static LogicalResult evaluateAttention(AttentionOp op,
                                       const EvaluationContext &context,
                                       SmallVectorImpl<Tensor> &results) {
  AttentionProblem p(op, context);
  Tensor output = makeTensor(op.getOutput());
  Tensor logsumexp = makeTensor(op.getLogsumexp());
  llvm::parallelFor(0, static_cast<size_t>(p.rows()), [&](size_t task) {
    int64_t row = task;
    SmallVector<double> s(p.tk), acc(p.dv, 0.0);
    p.scores(row, s);
    double maximum = -std::numeric_limits<double>::infinity();
    for (double x : s)
      maximum = std::max(maximum, x);
    if (std::isinf(maximum)) {
      // No key takes part: the output row stays 0.
      logsumexp.floats()[row] = -std::numeric_limits<double>::infinity();
      return;
    }
    double sum = 0.0;
    for (double &x : s) {
      x = std::exp(x - maximum);
      sum += x;
    }
    for (int64_t j = 0; j < p.tk; ++j) {
      double probability = p.round(s[j] / sum);
      double factor = p.dropoutFactor(row, j);
      if (factor != 1.0)
        probability = p.round(probability * factor);
      probability = roundToElementType(p.v.getDType(), probability);
      if (probability == 0.0)
        continue;
      const double *value = p.v.floats().data() + p.valueAt(row, j);
      for (int64_t c = 0; c < p.dv; ++c)
        acc[c] += probability * value[c];
    }
    for (int64_t c = 0; c < p.dv; ++c)
      output.setFromDouble(row * p.dv + c, acc[c]);
    logsumexp.setFromDouble(row, maximum + std::log(sum));
  });
  results.push_back(std::move(output));
  results.push_back(std::move(logsumexp));
  return success();
}

namespace {
/// The gradient terms of each query row: its log-sum-exp, output gradient
/// and delta = dout . output.
class RowGradients {
public:
  RowGradients(const AttentionProblem &p, const Tensor &output,
               const Tensor &logsumexp, const Tensor &outputGrad)
      : p(p), output(output), logsumexp(logsumexp), outputGrad(outputGrad) {}

  /// Calls `visit(j, probability, factor, ds, slope)` as
  /// AttentionProblem::forEachScoreGradient does, for a row in which some
  /// key took part (nothing flows back through the others).
  template <typename Visit>
  void forEachScoreGradient(int64_t row, MutableArrayRef<double> s,
                            MutableArrayRef<double> slopes, Visit visit) const {
    double lse = logsumexp.floats()[row];
    if (std::isinf(lse))
      return;
    const double *dout = outputGradRow(row);
    const double *out = output.floats().data() + row * p.dv;
    double delta = 0.0;
    for (int64_t c = 0; c < p.dv; ++c)
      delta += dout[c] * out[c];
    p.forEachScoreGradient(row, lse, dout, delta, s, slopes, visit);
  }
  const double *outputGradRow(int64_t row) const {
    return outputGrad.floats().data() + row * p.dv;
  }

private:
  const AttentionProblem &p;
  const Tensor &output, &logsumexp, &outputGrad;
};
} // namespace

/// The mask's gradient: each element sums the score gradients (before the
/// scale) of the positions it broadcasts to, in row-major order of the
/// [B, H, Tq, Tk] scores. One task per row of the mask, its only writer.
static Tensor maskGradient(const AttentionProblem &p, const RowGradients &rows,
                           Value maskGrad) {
  Tensor result = makeTensor(maskGrad);
  SmallVector<int64_t> shape(4 - result.getShape().size(), 1);
  llvm::append_range(shape, result.getShape());
  int64_t full[] = {p.batch, p.heads, p.tq};
  llvm::parallelFor(
      0, static_cast<size_t>(shape[0] * shape[1] * shape[2]), [&](size_t task) {
        int64_t at[] = {static_cast<int64_t>(task) / (shape[1] * shape[2]),
                        static_cast<int64_t>(task) / shape[2] % shape[1],
                        static_cast<int64_t>(task) % shape[2]};
        // The score rows this mask row broadcast to: all of a dimension the
        // mask has as 1, else the mask's own index.
        int64_t first[3], last[3];
        for (int d = 0; d < 3; ++d) {
          bool broadcast = shape[d] == 1;
          first[d] = broadcast ? 0 : at[d];
          last[d] = broadcast ? full[d] : at[d] + 1;
        }
        std::vector<double> acc(shape[3], 0.0);
        SmallVector<double> s(p.tk), slopes(p.tk);
        for (int64_t b = first[0]; b < last[0]; ++b)
          for (int64_t h = first[1]; h < last[1]; ++h)
            for (int64_t i = first[2]; i < last[2]; ++i)
              rows.forEachScoreGradient(
                  (b * p.heads + h) * p.tq + i, s, slopes,
                  [&](int64_t j, double, double, double ds, double) {
                    acc[shape[3] == 1 ? 0 : j] += ds;
                  });
        for (int64_t j = 0; j < shape[3]; ++j)
          result.setFromDouble(task * shape[3] + j, acc[j]);
      });
  return result;
}

/// Recomputes each row's probabilities from the saved log-sum-exp. One task
/// per key/value head, so that the key and value gradients, which sum over
/// the query rows and heads that read them, have a single writer.
static LogicalResult evaluateAttentionGrad(AttentionGradOp op,
                                           const EvaluationContext &context,
                                           SmallVectorImpl<Tensor> &results) {
  AttentionProblem p(op, context);
  auto operandAt = [&](unsigned odsIndex) -> const Tensor & {
    return context.operand(op.getODSOperandIndexAndLength(odsIndex).first);
  };
  RowGradients rows(p, operandAt(5), operandAt(6), operandAt(7));
  Tensor dq = makeTensor(op.getQueryGrad());
  Tensor dk = makeTensor(op.getKeyGrad());
  Tensor dv = makeTensor(op.getValueGrad());
  int64_t kvHeads = p.heads / p.groupSize;
  llvm::parallelFor(
      0, static_cast<size_t>(p.batch * kvHeads), [&](size_t task) {
        int64_t b = task / kvHeads, kvHead = task % kvHeads;
        std::vector<double> dkAcc(p.tk * p.d, 0.0), dvAcc(p.tk * p.dv, 0.0);
        SmallVector<double> s(p.tk), slopes(p.tk), dqAcc(p.d);
        for (int64_t h = kvHead * p.groupSize; h < (kvHead + 1) * p.groupSize;
             ++h)
          for (int64_t i = 0; i < p.tq; ++i) {
            int64_t row = (b * p.heads + h) * p.tq + i;
            const double *dout = rows.outputGradRow(row);
            const double *query = p.q.floats().data() + p.queryAt(row);
            std::fill(dqAcc.begin(), dqAcc.end(), 0.0);
            rows.forEachScoreGradient(
                row, s, slopes,
                [&](int64_t j, double probability, double factor, double ds,
                    double slope) {
                  double dropped = roundToElementType(
                      p.v.getDType(), p.round(probability * factor));
                  for (int64_t c = 0; c < p.dv; ++c)
                    dvAcc[j * p.dv + c] += dropped * dout[c];
                  double scaled = p.round(p.round(ds * slope) * p.scale);
                  double dsForQuery =
                      roundToElementType(p.k.getDType(), scaled);
                  double dsForKey = roundToElementType(p.q.getDType(), scaled);
                  const double *key = p.k.floats().data() + p.keyAt(row, j);
                  for (int64_t c = 0; c < p.d; ++c) {
                    dqAcc[c] += dsForQuery * key[c];
                    dkAcc[j * p.d + c] += dsForKey * query[c];
                  }
                });
            for (int64_t c = 0; c < p.d; ++c)
              dq.setFromDouble(p.queryAt(row) + c, dqAcc[c]);
          }
        int64_t kvRow = b * kvHeads + kvHead;
        for (int64_t j = 0; j < p.tk; ++j) {
          for (int64_t c = 0; c < p.d; ++c)
            dk.setFromDouble((kvRow * p.tk + j) * p.d + c, dkAcc[j * p.d + c]);
          for (int64_t c = 0; c < p.dv; ++c)
            dv.setFromDouble((kvRow * p.tk + j) * p.dv + c,
                             dvAcc[j * p.dv + c]);
        }
      });
  results.push_back(std::move(dq));
  results.push_back(std::move(dk));
  results.push_back(std::move(dv));
  if (Value maskGrad = op.getMaskGrad())
    results.push_back(maskGradient(p, rows, maskGrad));
  return success();
}

void registerAttentionEvaluators(EvaluatorTable &table) {
  table.add<AttentionOp>(evaluateAttention);
  table.add<AttentionGradOp>(evaluateAttentionGrad);
}

} // namespace kiln
