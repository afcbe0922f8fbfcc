//===- TemplateKernels.cpp - attention and scatter-add kernels ------------===//
//
// Ops with schedules of their own. Attention never holds a T x T tensor in
// memory: a thread owns one query row (forward, query gradient) or one key
// row (key and value gradients) and recomputes scores as it needs them,
// following the interpreter's order of rounding so that the two agree to
// the last bits of f32. These are the correct baseline that faster
// tensor-core kernels are measured against.
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace kiln::cuda {

/// `text` with every `$name` replaced by its value, longest names first.
static std::string substitute(
    std::string text, std::vector<std::pair<std::string, std::string>> values) {
  llvm::stable_sort(values, [](auto &a, auto &b) {
    return a.first.size() > b.first.size();
  });
  // Values may hold names themselves (the score function): repeat until
  // nothing is left to replace.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &[name, value] : values) {
      std::string key = "$" + name;
      for (size_t at = text.find(key); at != std::string::npos;
           at = text.find(key, at + value.size())) {
        text.replace(at, key.size(), value);
        changed = true;
      }
    }
  }
  return text;
}

/// Scores of query row `row` against key row `j`, as the interpreter rounds
/// them: `s = round(round(q . k) * scale)`, then the mask; -inf where the
/// key takes no part.
static const char *kScoreFunction = R"cuda(
  auto score = [&](i64 row, i64 j) -> double {
    const i64 i = row % $TQ, bh = row / $TQ, b = bh / $H, h = bh % $H;
    if ($CAUSAL && j > i) return -1.0 / 0.0;
    const i64 kv = (b * $HKV + h / $GROUP) * $TK + j;
    double dot = 0.0;
    for (i64 c = 0; c < $D; ++c) dot += $LOADQ(q[row * $D + c]) * $LOADK(k[kv * $D + c]);
    double s = $ROUND($ROUND(dot) * $SCALE);
    $MASK
    return s;
  };
  auto factor = [&](i64 row, i64 j) -> double {
    if ($RATIO == 0.0) return 1.0;
    return dropout_keep($KEY, row * $TK + j, $RATIO) ? 1.0 / (1.0 - $RATIO) : 0.0;
  };
)cuda";

static const char *kForward = R"cuda(
  const $QT *q = (const $QT *)args[0];
  const $KT *k = (const $KT *)args[1];
  const $VT *v = (const $VT *)args[2];
  $EXTRA_ARGS
  $OT *out = ($OT *)args[$FIRST_RESULT];
  $LT *lse = ($LT *)args[$FIRST_RESULT + 1];
  $SCORE
  for (i64 row = global_thread(); row < $ROWS; row += thread_count()) {
    const i64 bh = row / $TQ, b = bh / $H, h = bh % $H;
    double maximum = -1.0 / 0.0;
    for (i64 j = 0; j < $TK; ++j) maximum = kiln_max(maximum, score(row, j));
    double acc[$DV];
    for (i64 c = 0; c < $DV; ++c) acc[c] = 0.0;
    if (maximum == -1.0 / 0.0) {
      for (i64 c = 0; c < $DV; ++c) out[row * $DV + c] = $STOREO(0.0);
      lse[row] = ($LT)(-1.0 / 0.0);
      continue;
    }
    double sum = 0.0;
    for (i64 j = 0; j < $TK; ++j) sum += exp(score(row, j) - maximum);
    for (i64 j = 0; j < $TK; ++j) {
      double p = $ROUND(exp(score(row, j) - maximum) / sum);
      const double f = factor(row, j);
      if (f != 1.0) p = $ROUND(p * f);
      p = $ROUNDV(p);
      if (p == 0.0) continue;
      const i64 kv = (b * $HKV + h / $GROUP) * $TK + j;
      for (i64 c = 0; c < $DV; ++c) acc[c] += p * $LOADV(v[kv * $DV + c]);
    }
    for (i64 c = 0; c < $DV; ++c) out[row * $DV + c] = $STOREO(acc[c]);
    lse[row] = ($LT)(maximum + log(sum));
  }
)cuda";

/// The gradient's common prologue: operands, then dq, dk, dv.
static const char *kGradientPrologue = R"cuda(
  const $QT *q = (const $QT *)args[0];
  const $KT *k = (const $KT *)args[1];
  const $VT *v = (const $VT *)args[2];
  $EXTRA_ARGS
  const $OGT *o = (const $OGT *)args[$OUTPUT_ARG];
  const $LT *lse = (const $LT *)args[$OUTPUT_ARG + 1];
  const $OGT *dout = (const $OGT *)args[$OUTPUT_ARG + 2];
  $SCORE
  // ds of (row, j) and the dropped probability, as the interpreter rounds.
  auto delta = [&](i64 row) -> double {
    double d = 0.0;
    for (i64 c = 0; c < $DV; ++c)
      d += $LOADO(dout[row * $DV + c]) * $LOADO(o[row * $DV + c]);
    return d;
  };
  auto gradients = [&](i64 row, i64 j, double dlt, double &ds, double &dropped) -> bool {
    const double l = (double)lse[row];
    if (l == -1.0 / 0.0) return false;
    const double p = $ROUND(exp(score(row, j) - l));
    if (p == 0.0) return false;
    const double f = factor(row, j);
    dropped = $ROUNDV($ROUND(p * f));
    const i64 bh = row / $TQ, b = bh / $H, h = bh % $H;
    const i64 kv = (b * $HKV + h / $GROUP) * $TK + j;
    double dp = 0.0;
    for (i64 c = 0; c < $DV; ++c) dp += $LOADO(dout[row * $DV + c]) * $LOADV(v[kv * $DV + c]);
    ds = $ROUND(p * ($ROUND(dp) * f - dlt) * $SCALE);
    return true;
  };
)cuda";

static const char *kQueryGradient = R"cuda(
  $DQT *dq = ($DQT *)args[$FIRST_RESULT];
  for (i64 row = global_thread(); row < $ROWS; row += thread_count()) {
    const i64 bh = row / $TQ, b = bh / $H, h = bh % $H;
    const double dlt = delta(row);
    double acc[$D];
    for (i64 c = 0; c < $D; ++c) acc[c] = 0.0;
    for (i64 j = 0; j < $TK; ++j) {
      double ds, dropped;
      if (!gradients(row, j, dlt, ds, dropped)) continue;
      ds = $ROUNDK(ds);
      const i64 kv = (b * $HKV + h / $GROUP) * $TK + j;
      for (i64 c = 0; c < $D; ++c) acc[c] += ds * $LOADK(k[kv * $D + c]);
    }
    for (i64 c = 0; c < $D; ++c) dq[row * $D + c] = $STOREDQ(acc[c]);
  }
)cuda";

static const char *kKeyValueGradient = R"cuda(
  $DKT *dk = ($DKT *)args[$FIRST_RESULT + 1];
  $DVT *dv = ($DVT *)args[$FIRST_RESULT + 2];
  // One thread per key row of a key/value head: it sums over the query rows
  // of every head that reads it.
  for (i64 kvRow = global_thread(); kvRow < $KVROWS; kvRow += thread_count()) {
    const i64 j = kvRow % $TK, kvHead = kvRow / $TK, b = kvHead / $HKV, g = kvHead % $HKV;
    double dkAcc[$D], dvAcc[$DV];
    for (i64 c = 0; c < $D; ++c) dkAcc[c] = 0.0;
    for (i64 c = 0; c < $DV; ++c) dvAcc[c] = 0.0;
    for (i64 h = g * $GROUP; h < (g + 1) * $GROUP; ++h)
      for (i64 i = 0; i < $TQ; ++i) {
        const i64 row = (b * $H + h) * $TQ + i;
        double ds, dropped;
        if (!gradients(row, j, delta(row), ds, dropped)) continue;
        for (i64 c = 0; c < $DV; ++c) dvAcc[c] += dropped * $LOADO(dout[row * $DV + c]);
        ds = $ROUNDQ(ds);
        for (i64 c = 0; c < $D; ++c) dkAcc[c] += ds * $LOADQ(q[row * $D + c]);
      }
    for (i64 c = 0; c < $D; ++c) dk[kvRow * $D + c] = $STOREDK(dkAcc[c]);
    for (i64 c = 0; c < $DV; ++c) dv[kvRow * $DV + c] = $STOREDV(dvAcc[c]);
  }
)cuda";

namespace {
/// The substitutions shared by the attention kernels of one op.
template <typename OpTy>
std::vector<std::pair<std::string, std::string>>
attentionValues(OpTy op, KernelPlan &plan) {
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  int64_t heads = qs[1], kvHeads = ks[1];
  Type qt = elementTypeOf(op.getQuery()), kt = elementTypeOf(op.getKey()),
       vt = elementTypeOf(op.getValue());
  Type scoreType = qt.isF64() ? qt : Float32Type::get(op.getContext());
  auto roundFn = [](Type t) { return "[](double x) { return " + rounded(t, "x") + "; }"; };
  auto loadFn = [](Type t) {
    return "[](" + storageType(t) + " x) { return " + loaded(t, "x") + "; }";
  };
  plan.operands = {op.getQuery(), op.getKey(), op.getValue()};
  std::string extra, mask = "(void)0;", key = "0";
  if (Value m = op.getMask()) {
    unsigned n = plan.operands.size();
    plan.operands.push_back(m);
    Type mt = elementTypeOf(m);
    extra += "const " + storageType(mt) + " *mask = (const " + storageType(mt) +
             " *)args[" + std::to_string(n) + "];\n";
    SmallVector<int64_t> full = {qs[0], heads, qs[2], ks[2]};
    std::string index = broadcastIndex(m, full, "((row * $TK) + j)");
    std::string element = loaded(mt, "mask[" + index + "]");
    mask = isa<FloatType>(mt) ? "s = $ROUND(s + " + element + ");"
                              : "if (!" + element + ") return -1.0 / 0.0;";
  }
  if (Value offset = op.getOffset()) {
    unsigned n = plan.operands.size();
    plan.operands.push_back(offset);
    extra += "const i64 *offset = (const i64 *)args[" + std::to_string(n) + "];\n";
    key = "dropout_key(" + std::to_string(op.getSeed()) + "ll, *offset)";
  } else {
    key = "dropout_key(" + std::to_string(op.getSeed()) + "ll)";
  }
  return {{"QT", storageType(qt)},
          {"KT", storageType(kt)},
          {"VT", storageType(vt)},
          {"LOADQ", loadFn(qt)},
          {"LOADK", loadFn(kt)},
          {"LOADV", loadFn(vt)},
          {"ROUND", roundFn(scoreType)},
          {"ROUNDV", roundFn(vt)},
          {"ROUNDK", roundFn(kt)},
          {"ROUNDQ", roundFn(qt)},
          {"SCORE", kScoreFunction},
          {"MASK", mask},
          {"KEY", key},
          {"EXTRA_ARGS", extra},
          {"SCALE", literal(op.getScale().convertToDouble())},
          {"RATIO", literal(op.getDropoutRatio().convertToDouble())},
          {"CAUSAL", op.getCausal() ? "true" : "false"},
          {"TQ", std::to_string(qs[2]) + "ll"},
          {"TK", std::to_string(ks[2]) + "ll"},
          {"H", std::to_string(heads) + "ll"},
          {"HKV", std::to_string(kvHeads) + "ll"},
          {"GROUP", std::to_string(heads / kvHeads) + "ll"},
          {"D", std::to_string(qs[3])},
          {"DV", std::to_string(shapeOf(op.getValue())[3])},
          {"ROWS", std::to_string(qs[0] * heads * qs[2]) + "ll"},
          {"KVROWS", std::to_string(ks[0] * kvHeads * ks[2]) + "ll"}};
}

std::pair<std::string, std::string> typed(const char *name, Value value) {
  return {name, storageType(elementTypeOf(value))};
}
std::pair<std::string, std::string> storer(const char *name, Value value) {
  Type t = elementTypeOf(value);
  return {name, "[](double x) { return " + stored(t, "x") + "; }"};
}

int64_t gridFor(int64_t threads) {
  return std::max<int64_t>(1, std::min<int64_t>((threads + 127) / 128, 4096));
}
} // namespace

static KernelPlan attentionForward(AttentionOp op) {
  KernelPlan plan;
  auto values = attentionValues(op, plan);
  values.push_back({"FIRST_RESULT", std::to_string(plan.operands.size())});
  values.push_back(typed("OT", op.getOutput()));
  values.push_back(storer("STOREO", op.getOutput()));
  values.push_back(typed("LT", op.getLogsumexp()));
  plan.results = {op.getOutput(), op.getLogsumexp()};
  plan.body = substitute(kForward, values);
  plan.block = 128;
  plan.grid = gridFor(countOf(op.getLogsumexp()));
  return plan;
}

static SmallVector<KernelPlan> attentionGradient(AttentionGradOp op) {
  KernelPlan common;
  auto values = attentionValues(op, common);
  values.push_back({"OUTPUT_ARG", std::to_string(common.operands.size())});
  common.operands.append({op.getOutput(), op.getLogsumexp(), op.getOutputGrad()});
  values.push_back({"FIRST_RESULT", std::to_string(common.operands.size())});
  values.push_back(typed("OGT", op.getOutput()));
  Type ot = elementTypeOf(op.getOutput());
  values.push_back({"LOADO", "[](" + storageType(ot) + " x) { return " +
                                 loaded(ot, "x") + "; }"});
  values.push_back(typed("LT", op.getLogsumexp()));
  values.push_back(typed("DQT", op.getQueryGrad()));
  values.push_back(typed("DKT", op.getKeyGrad()));
  values.push_back(typed("DVT", op.getValueGrad()));
  values.push_back(storer("STOREDQ", op.getQueryGrad()));
  values.push_back(storer("STOREDK", op.getKeyGrad()));
  values.push_back(storer("STOREDV", op.getValueGrad()));
  std::string prologue = substitute(kGradientPrologue, values);
  common.results = {op.getQueryGrad(), op.getKeyGrad(), op.getValueGrad()};
  common.block = 128;
  KernelPlan query = common, keyValue = common;
  query.body = prologue + substitute(kQueryGradient, values);
  query.grid = gridFor(countOf(op.getQueryGrad()) / shapeOf(op.getQuery())[3]);
  keyValue.body = prologue + substitute(kKeyValueGradient, values);
  keyValue.grid = gridFor(countOf(op.getKeyGrad()) / shapeOf(op.getKey())[3]);
  return {query, keyValue};
}

/// gather_grad: zero the result, then add every slice of the gradient at
/// the row its index selected (atomically: indices repeat).
static FailureOr<SmallVector<KernelPlan>> gatherGradient(GatherGradOp op) {
  Type type = elementTypeOf(op.getResult());
  if (!type.isF32() && !type.isF64())
    return op.emitError() << "the CUDA target cannot compile '"
                          << op->getName() << "' of " << type
                          << ": only f32 and f64 gradients are accumulated";
  ArrayRef<int64_t> data = shapeOf(op.getResult());
  int64_t axis = op.getAxis(), inner = 1;
  for (int64_t size : data.drop_front(axis + 1))
    inner *= size;
  int64_t indices = countOf(op.getIndices());
  std::string t = storageType(type), it = storageType(elementTypeOf(op.getIndices()));
  std::vector<std::pair<std::string, std::string>> values = {
      {"T", t}, {"IT", it}, {"N", std::to_string(countOf(op.getResult())) + "ll"},
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
)cuda", values);
  zero.grid = gridFor(countOf(op.getResult()));
  scatter = zero;
  scatter.body = substitute(R"cuda(
  const $T *grad = (const $T *)args[0];
  const $IT *index = (const $IT *)args[1];
  $T *out = ($T *)args[2];
  for (i64 e = global_thread(); e < $G; e += thread_count()) {
    const i64 m = (e / $INNER) % $INDICES, outer = e / ($INNER * $INDICES);
    i64 q = (i64)index[m];
    if (q < 0) q += $SIZE;
    q = q < 0 ? 0 : q >= $SIZE ? $SIZE - 1 : q;
    atomicAdd(&out[(outer * $SIZE + q) * $INNER + e % $INNER], grad[e]);
  }
)cuda", values);
  scatter.grid = gridFor(countOf(op.getGrad()));
  return SmallVector<KernelPlan>{zero, scatter};
}

FailureOr<SmallVector<KernelPlan>> planTemplateKernels(Operation *op) {
  if (auto attention = dyn_cast<AttentionOp>(op))
    return SmallVector<KernelPlan>{attentionForward(attention)};
  if (auto gradient = dyn_cast<AttentionGradOp>(op))
    return attentionGradient(gradient);
  if (auto gather = dyn_cast<GatherGradOp>(op))
    return gatherGradient(gather);
  return failure();
}

} // namespace kiln::cuda
