//===- AttentionKernels.cpp - tiled attention, forward and backward -------===//
//
// FlashAttention's schedule without its numerics shortcuts: a block owns a
// tile of query rows (forward, query gradient) or of key rows (key and value
// gradients), streams the other side through shared memory tile by tile,
// and recomputes scores as it needs them, so no T x T tensor is ever
// stored. Every score, probability and gradient is rounded exactly where
// the interpreter rounds, so the two agree to the last bits of f32: the
// forward pass sweeps the keys three times (the maximum, the sum of
// exponentials, the weighted values), not once with a running maximum as
// FlashAttention does, whose rescaled sums differ in the last bits.
//
// Each thread walks rows `threadIdx.x, threadIdx.x + blockDim.x, ...` of
// its tile and keeps their state in shared memory, so the kernels are
// correct for any block size; the launch gives one thread per row. Tensor
// cores (mma/wgmma) are the next step; this is the baseline they are
// measured against.
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;

namespace kiln::cuda {

/// `text` with every `$name` replaced by its value, the longest name that
/// matches at each `$` (so `$A` never takes the start of `$ADDRESSING`);
/// values may hold names themselves (the score function), so replacing
/// repeats until none is left.
std::string
substitute(std::string text,
           std::vector<std::pair<std::string, std::string>> values) {
  llvm::stable_sort(
      values, [](auto &a, auto &b) { return a.first.size() > b.first.size(); });
  for (bool changed = true; changed;) {
    changed = false;
    std::string result;
    for (size_t at = 0; at < text.size(); ++at) {
      auto match = values.end();
      if (text[at] == '$')
        match = llvm::find_if(values, [&](auto &entry) {
          return text.compare(at + 1, entry.first.size(), entry.first) == 0;
        });
      if (match == values.end()) {
        result += text[at];
        continue;
      }
      result += match->second;
      at += match->first.size();
      changed = true;
    }
    text = std::move(result);
  }
  return text;
}

std::string attentionAddressing(Operation *op, StridesOf stridesOf) {
  SmallVector<std::pair<const char *, Value>> tensors;
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    tensors = {{"q", attention.getQuery()},
               {"k", attention.getKey()},
               {"v", attention.getValue()},
               {"out", attention.getOutput()}};
  } else {
    auto gradient = cast<AttentionGradOp>(op);
    tensors = {
        {"q", gradient.getQuery()},         {"k", gradient.getKey()},
        {"v", gradient.getValue()},         {"o", gradient.getOutput()},
        {"dout", gradient.getOutputGrad()}, {"dq", gradient.getQueryGrad()},
        {"dk", gradient.getKeyGrad()},      {"dv", gradient.getValueGrad()}};
  }
  std::string text;
  for (auto [name, value] : tensors) {
    SmallVector<int64_t> strides = stridesOf(value);
    int64_t heads = shapeOf(value)[1];
    text += "  [[maybe_unused]] auto " + std::string(name) +
            "At = [](idx head, idx row) -> idx { return head / " +
            indexConstant(heads) + " * " + indexConstant(strides[0]) +
            " + head % " + indexConstant(heads) + " * " +
            indexConstant(strides[1]) + " + row * " +
            indexConstant(strides[2]) +
            "; };\n  [[maybe_unused]] constexpr idx " + name +
            "Step = " + indexConstant(strides[2]) + ";\n";
  }
  return text;
}

/// The score of query i against key j of head `bh`, from their rows in
/// shared memory: `round(round(q . k) * scale)`, soft-capped, then the
/// mask; -inf where the key takes no part (with `slope`, also the cap's
/// slope there). And the dropout factor of that probability.
static const char *kScore = R"cuda(
  $OUTSIDE
  auto score = [&](i64 bh, i64 i, i64 j, const $TT *qv, const $TT *kv,
                   double *slope = nullptr) -> double {
    if (outside(i, j)) return -1.0 / 0.0;
    const i64 row = bh * $TQ + i;
    double dot = 0.0;
    for (i64 c = 0; c < $D; ++c) dot += (double)qv[c] * (double)kv[c];
    double s = $ROUND($ROUND(dot) * $SCALE);
    $CAP
    $MASK
    return s;
  };
  auto factor = [&](i64 bh, i64 i, i64 j) -> double {
    if ($RATIO == 0.0) return 1.0;
    return dropout_keep($KEY, (bh * $TQ + i) * $TK + j, $RATIO) ? 1.0 / (1.0 - $RATIO) : 0.0;
  };
  // Copies `rows` rows of `width` elements, `step` apart from `from`
  // (storage), to a tile.
  auto load = [&](auto *tile, const auto *from, i64 step, i64 rows, i64 width,
                  auto convert) {
    for (i64 e = threadIdx.x; e < rows * width; e += blockDim.x)
      tile[e] = convert(from[e / width * step + e % width]);
  };
)cuda";

static const char *kForward = R"cuda(
  const $QT *q = (const $QT *)args[0];
  const $KT *k = (const $KT *)args[1];
  const $VT *v = (const $VT *)args[2];
  $EXTRA_ARGS
  $OT *out = ($OT *)args[$FIRST_RESULT];
  $LT *lse = ($LT *)args[$FIRST_RESULT + 1];
  $ADDRESSING
  __shared__ $TT Qs[$BQ * $D], Ks[$BK * $D], Vs[$BK * $DV];
  __shared__ double acc[$BQ * $DV], maximum[$BQ], sum[$BQ];
  $SCORE
  const i64 tiles = ($TQ + $BQ - 1) / $BQ;
  for (i64 work = blockIdx.x; work < $HEADS * tiles; work += gridDim.x) {
    const i64 bh = work / tiles, q0 = work % tiles * $BQ, b = bh / $H, h = bh % $H;
    const i64 kv = b * $HKV + h / $GROUP;
    const i64 rows = $TQ - q0 < $BQ ? $TQ - q0 : $BQ;
    __syncthreads();
    load(Qs, q + qAt(bh, q0), qStep, rows, $D, $LOADQ);
    for (i64 r = threadIdx.x; r < $BQ; r += blockDim.x) {
      maximum[r] = -1.0 / 0.0;
      sum[r] = 0.0;
      for (i64 c = 0; c < $DV; ++c) acc[r * $DV + c] = 0.0;
    }
    // Sweeps 1 and 2: each row's maximum, then its sum of exponentials,
    // in the interpreter's order.
    for (int sweep = 0; sweep < 2; ++sweep)
      for (i64 k0 = 0; k0 < $TK; k0 += $BK) {
        const i64 keys = $TK - k0 < $BK ? $TK - k0 : $BK;
        __syncthreads();
        load(Ks, k + kAt(kv, k0), kStep, keys, $D, $LOADK);
        __syncthreads();
        for (i64 r = threadIdx.x; r < rows; r += blockDim.x)
          for (i64 j = 0; j < keys; ++j) {
            const double s = score(bh, q0 + r, k0 + j, Qs + r * $D, Ks + j * $D);
            if (sweep == 0)
              maximum[r] = kiln_max(maximum[r], s);
            else if (maximum[r] != -1.0 / 0.0)
              sum[r] += exp(s - maximum[r]);
          }
      }
    // Sweep 3: the probabilities, as the interpreter rounds them, times V.
    for (i64 k0 = 0; k0 < $TK; k0 += $BK) {
      const i64 keys = $TK - k0 < $BK ? $TK - k0 : $BK;
      __syncthreads();
      load(Ks, k + kAt(kv, k0), kStep, keys, $D, $LOADK);
      load(Vs, v + vAt(kv, k0), vStep, keys, $DV, $LOADV);
      __syncthreads();
      for (i64 r = threadIdx.x; r < rows; r += blockDim.x) {
        if (maximum[r] == -1.0 / 0.0) continue;
        for (i64 j = 0; j < keys; ++j) {
          double p = $ROUND(exp(score(bh, q0 + r, k0 + j, Qs + r * $D, Ks + j * $D) -
                                maximum[r]) / sum[r]);
          const double f = factor(bh, q0 + r, k0 + j);
          if (f != 1.0) p = $ROUND(p * f);
          p = $ROUNDV(p);
          if (p == 0.0) continue;
          for (i64 c = 0; c < $DV; ++c) acc[r * $DV + c] += p * (double)Vs[j * $DV + c];
        }
      }
    }
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x) {
      const i64 row = bh * $TQ + q0 + r;
      const bool empty = maximum[r] == -1.0 / 0.0;
      for (i64 c = 0; c < $DV; ++c)
        out[outAt(bh, q0 + r) + c] = $STOREO(empty ? 0.0 : acc[r * $DV + c]);
      lse[row] = ($LT)(empty ? -1.0 / 0.0 : maximum[r] + log(sum[r]));
    }
  }
)cuda";

/// The gradient's operands, and delta = dout . out of a query row.
static const char *kGradientOperands = R"cuda(
  const $QT *q = (const $QT *)args[0];
  const $KT *k = (const $KT *)args[1];
  const $VT *v = (const $VT *)args[2];
  $EXTRA_ARGS
  const $OT *o = (const $OT *)args[$OUTPUT_ARG];
  const $LT *lse = (const $LT *)args[$OUTPUT_ARG + 1];
  const $DOT *dout = (const $DOT *)args[$OUTPUT_ARG + 2];
  $ADDRESSING
  $SCORE
  // delta = dout . out of query row i of head bh.
  auto delta = [&](i64 bh, i64 i) -> double {
    double d = 0.0;
    for (i64 c = 0; c < $DV; ++c)
      d += $LOADDO(dout[doutAt(bh, i) + c]) * $LOADO(o[oAt(bh, i) + c]);
    return d;
  };
)cuda";

/// The tiles the query and key/value gradient kernels stream, and the terms
/// of one (query row, key) pair both need, as the interpreter rounds them.
static const char *kGradientTiles = R"cuda(
  // Query rows with their output gradients and per-row terms, and key rows
  // with their values.
  __shared__ $TT Qs[$BQ * $D], DOs[$BQ * $DV], Ks[$BK * $D], Vs[$BK * $DV];
  __shared__ double deltas[$BQ], lses[$BQ];
  auto loadQueries = [&](i64 bh, i64 q0, i64 rows) {
    load(Qs, q + qAt(bh, q0), qStep, rows, $D, $LOADQ);
    load(DOs, dout + doutAt(bh, q0), doutStep, rows, $DV, $LOADDO);
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x) {
      deltas[r] = delta(bh, q0 + r);
      lses[r] = (double)lse[bh * $TQ + q0 + r];
    }
  };
  auto loadKeys = [&](i64 kv, i64 k0, i64 keys) {
    load(Ks, k + kAt(kv, k0), kStep, keys, $D, $LOADK);
    load(Vs, v + vAt(kv, k0), vStep, keys, $DV, $LOADV);
  };
  // ds of query row r of the query tile at q0 and key row j of the key
  // tile at k0 (the softmax's gradient, through the cap, then scaled), and
  // the dropped probability; false where the probability is 0.
  auto gradients = [&](i64 bh, i64 q0, i64 r, i64 k0, i64 j, double &ds,
                       double &dropped) -> bool {
    const double l = lses[r];
    if (l == -1.0 / 0.0) return false;
    double slope = 1.0;
    const double s = score(bh, q0 + r, k0 + j, Qs + r * $D, Ks + j * $D, &slope);
    const double p = $ROUND(exp(s - l));
    if (p == 0.0) return false;
    const double f = factor(bh, q0 + r, k0 + j);
    dropped = $ROUNDV($ROUND(p * f));
    double dp = 0.0;
    for (i64 c = 0; c < $DV; ++c) dp += (double)DOs[r * $DV + c] * (double)Vs[j * $DV + c];
    ds = $ROUND($ROUND($ROUND(p * ($ROUND(dp) * f - deltas[r])) * slope) * $SCALE);
    return true;
  };
)cuda";

static const char *kQueryGradient = R"cuda(
  $DQT *dq = ($DQT *)args[$FIRST_RESULT];
  __shared__ double acc[$BQ * $D];
  const i64 tiles = ($TQ + $BQ - 1) / $BQ;
  for (i64 work = blockIdx.x; work < $HEADS * tiles; work += gridDim.x) {
    const i64 bh = work / tiles, q0 = work % tiles * $BQ, b = bh / $H, h = bh % $H;
    const i64 kv = b * $HKV + h / $GROUP;
    const i64 rows = $TQ - q0 < $BQ ? $TQ - q0 : $BQ;
    __syncthreads();
    loadQueries(bh, q0, rows);
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x)
      for (i64 c = 0; c < $D; ++c) acc[r * $D + c] = 0.0;
    for (i64 k0 = 0; k0 < $TK; k0 += $BK) {
      const i64 keys = $TK - k0 < $BK ? $TK - k0 : $BK;
      __syncthreads();
      loadKeys(kv, k0, keys);
      __syncthreads();
      for (i64 r = threadIdx.x; r < rows; r += blockDim.x)
        for (i64 j = 0; j < keys; ++j) {
          double ds, dropped;
          if (!gradients(bh, q0, r, k0, j, ds, dropped)) continue;
          ds = $ROUNDK(ds);
          for (i64 c = 0; c < $D; ++c) acc[r * $D + c] += ds * (double)Ks[j * $D + c];
        }
    }
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x)
      for (i64 c = 0; c < $D; ++c)
        dq[dqAt(bh, q0 + r) + c] = $STOREDQ(acc[r * $D + c]);
  }
)cuda";

static const char *kKeyValueGradient = R"cuda(
  $DKT *dk = ($DKT *)args[$FIRST_RESULT + 1];
  $DVT *dv = ($DVT *)args[$FIRST_RESULT + 2];
  __shared__ double dkAcc[$BK * $D], dvAcc[$BK * $DV];
  // A block owns a tile of key rows of one key/value head and sums over the
  // query rows of every head that reads it, in the interpreter's order.
  const i64 tiles = ($TK + $BK - 1) / $BK, queryTiles = ($TQ + $BQ - 1) / $BQ;
  for (i64 work = blockIdx.x; work < $KVHEADS * tiles; work += gridDim.x) {
    const i64 kv = work / tiles, k0 = work % tiles * $BK, b = kv / $HKV, g = kv % $HKV;
    const i64 keys = $TK - k0 < $BK ? $TK - k0 : $BK;
    __syncthreads();
    loadKeys(kv, k0, keys);
    for (i64 j = threadIdx.x; j < keys; j += blockDim.x) {
      for (i64 c = 0; c < $D; ++c) dkAcc[j * $D + c] = 0.0;
      for (i64 c = 0; c < $DV; ++c) dvAcc[j * $DV + c] = 0.0;
    }
    for (i64 h = g * $GROUP; h < (g + 1) * $GROUP; ++h)
      for (i64 t = 0; t < queryTiles; ++t) {
        const i64 bh = b * $H + h, q0 = t * $BQ;
        const i64 rows = $TQ - q0 < $BQ ? $TQ - q0 : $BQ;
        __syncthreads();
        loadQueries(bh, q0, rows);
        __syncthreads();
        for (i64 j = threadIdx.x; j < keys; j += blockDim.x)
          for (i64 r = 0; r < rows; ++r) {
            double ds, dropped;
            if (!gradients(bh, q0, r, k0, j, ds, dropped)) continue;
            for (i64 c = 0; c < $DV; ++c) dvAcc[j * $DV + c] += dropped * (double)DOs[r * $DV + c];
            ds = $ROUNDQ(ds);
            for (i64 c = 0; c < $D; ++c) dkAcc[j * $D + c] += ds * (double)Qs[r * $D + c];
          }
      }
    for (i64 j = threadIdx.x; j < keys; j += blockDim.x) {
      for (i64 c = 0; c < $D; ++c) dk[dkAt(kv, k0 + j) + c] = $STOREDK(dkAcc[j * $D + c]);
      for (i64 c = 0; c < $DV; ++c) dv[dvAt(kv, k0 + j) + c] = $STOREDV(dvAcc[j * $DV + c]);
    }
  }
)cuda";

/// The mask's gradient: one thread per element sums the score gradients
/// (before the scale) of the positions it broadcasts to, in the
/// interpreter's order, recomputing each from the rows in memory.
static const char *kMaskGradient = R"cuda(
  $MT *dmask = ($MT *)args[$FIRST_RESULT + 3];
  const i64 full[4] = {$B, $H, $TQ, $TK}, size[4] = {$MASK_SHAPE};
  $TT qv[$D], kv[$D];
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < $MASK_ELEMENTS;
       e += (i64)gridDim.x * blockDim.x) {
    i64 first[4], last[4], rest = e;
    for (int d = 3; d >= 0; --d) {
      const i64 at = rest % size[d];
      rest /= size[d];
      first[d] = size[d] == 1 ? 0 : at;
      last[d] = size[d] == 1 ? full[d] : at + 1;
    }
    double acc = 0.0;
    for (i64 b = first[0]; b < last[0]; ++b)
      for (i64 h = first[1]; h < last[1]; ++h)
        for (i64 i = first[2]; i < last[2]; ++i) {
          const i64 bh = b * $H + h, kvh = b * $HKV + h / $GROUP;
          const double l = (double)lse[bh * $TQ + i];
          if (l == -1.0 / 0.0) continue;
          const double d = delta(bh, i);
          for (i64 c = 0; c < $D; ++c) qv[c] = $LOADQ(q[qAt(bh, i) + c]);
          for (i64 j = first[3]; j < last[3]; ++j) {
            for (i64 c = 0; c < $D; ++c) kv[c] = $LOADK(k[kAt(kvh, j) + c]);
            const double p = $ROUND(exp(score(bh, i, j, qv, kv) - l));
            if (p == 0.0) continue;
            double dp = 0.0;
            for (i64 c = 0; c < $DV; ++c)
              dp += (double)$LOADDO(dout[doutAt(bh, i) + c]) *
                    (double)$LOADV(v[vAt(kvh, j) + c]);
            acc += $ROUND(p * ($ROUND(dp) * factor(bh, i, j) - d));
          }
        }
    dmask[e] = $STOREM(acc);
  }
)cuda";

namespace {

using Values = std::vector<std::pair<std::string, std::string>>;

/// Rows per tile: the largest power of two up to 32 whose tiles fit in
/// `budget` bytes of shared memory, given the bytes one row takes.
int64_t tileRows(int64_t bytesPerRow) {
  constexpr int64_t budget = 44 * 1024;
  int64_t rows = 32;
  while (rows > 1 && rows * bytesPerRow > budget)
    rows /= 2;
  return rows;
}

/// A function from a stored element of type `t` to its tile's element type
/// (float, or double when `wide`), exact for every operand type.
std::string tileLoader(Type t, bool wide) {
  return "[](" + storageType(t) + " x) { return (" +
         std::string(wide ? "double" : "float") + ")" + loaded(t, "x") + "; }";
}

/// Device code soft-capping score `s` as the interpreter rounds it, and
/// setting `*slope` (if given) to the cap's slope; nothing without a cap.
template <typename OpTy> std::string softcapped(OpTy op) {
  std::optional<APFloat> cap = op.getSoftcap();
  if (!cap)
    return "(void)slope;";
  std::string c = literal(cap->convertToDouble());
  return "{ const double t = $ROUND(tanh($ROUND(s / " + c +
         "))); s = $ROUND(t * " + c + "); if (slope) *slope = 1.0 - t * t; }";
}

/// The substitutions shared by the kernels of one attention op.
template <typename OpTy>
Values attentionValues(OpTy op, KernelPlan &plan, StridesOf stridesOf) {
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  int64_t heads = qs[1], kvHeads = ks[1];
  Type qt = elementTypeOf(op.getQuery()), kt = elementTypeOf(op.getKey()),
       vt = elementTypeOf(op.getValue());
  // Scores are f32 (f64 for f64 operands); tiles hold operands exactly.
  bool wide = qt.isF64();
  Type scoreType = wide ? qt : Float32Type::get(op.getContext());
  auto roundFn = [](Type t) {
    return "[](double x) { return " + rounded(t, "x") + "; }";
  };
  plan.operands = {op.getQuery(), op.getKey(), op.getValue()};
  std::string extra, mask = "(void)0;", key;
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
    extra +=
        "const i64 *offset = (const i64 *)args[" + std::to_string(n) + "];\n";
    key = "random_key(" + std::to_string(op.getSeed()) + "ll, *offset)";
  } else {
    key = "random_key(" + std::to_string(op.getSeed()) + "ll)";
  }
  auto count = [](int64_t n) { return std::to_string(n) + "ll"; };
  return {{"ADDRESSING", attentionAddressing(op, stridesOf)},
          {"QT", storageType(qt)},
          {"KT", storageType(kt)},
          {"VT", storageType(vt)},
          {"TT", wide ? "double" : "float"},
          {"LOADQ", tileLoader(qt, wide)},
          {"LOADK", tileLoader(kt, wide)},
          {"LOADV", tileLoader(vt, wide)},
          {"ROUND", roundFn(scoreType)},
          {"ROUNDV", roundFn(vt)},
          {"ROUNDK", roundFn(kt)},
          {"ROUNDQ", roundFn(qt)},
          {"SCORE", kScore},
          {"MASK", mask},
          {"KEY", key},
          {"EXTRA_ARGS", extra},
          {"SCALE", literal(op.getScale().convertToDouble())},
          {"RATIO", literal(op.getDropoutRatio().convertToDouble())},
          {"OUTSIDE", outsideKeys(op)},
          {"CAP", softcapped(op)},
          {"TQ", count(qs[2])},
          {"TK", count(ks[2])},
          {"H", count(heads)},
          {"HKV", count(kvHeads)},
          {"GROUP", count(heads / kvHeads)},
          {"HEADS", count(qs[0] * heads)},
          {"KVHEADS", count(ks[0] * kvHeads)},
          {"D", count(qs[3])},
          {"DV", count(shapeOf(op.getValue())[3])}};
}

std::pair<std::string, std::string> typed(const char *name, Value value) {
  return {name, storageType(elementTypeOf(value))};
}
std::pair<std::string, std::string> storer(const char *name, Value value) {
  return {name,
          "[](double x) { return " + stored(elementTypeOf(value), "x") + "; }"};
}
std::pair<std::string, std::string> tile(const char *name, int64_t rows) {
  return {name, std::to_string(rows) + "ll"};
}

/// Blocks for `work` tiles of `rows` threads each.
void launch(KernelPlan &plan, int64_t work, int64_t rows) {
  plan.block = rows;
  plan.grid = std::max<int64_t>(1, std::min<int64_t>(work, 4096));
}

} // namespace

KernelPlan attentionForward(AttentionOp op, StridesOf stridesOf) {
  KernelPlan plan;
  Values values = attentionValues(op, plan, stridesOf);
  ArrayRef<int64_t> qs = shapeOf(op.getQuery());
  int64_t d = qs[3], dv = shapeOf(op.getValue())[3];
  int64_t element = elementTypeOf(op.getQuery()).isF64() ? 8 : 4;
  // Query tile (Q, accumulators, statistics) and key tile (K, V) alike.
  int64_t rows = tileRows(element * (2 * d + dv) + 8 * (dv + 2));
  values.push_back({"FIRST_RESULT", std::to_string(plan.operands.size())});
  values.push_back(typed("OT", op.getOutput()));
  values.push_back(storer("STOREO", op.getOutput()));
  values.push_back(typed("LT", op.getLogsumexp()));
  values.push_back(tile("BQ", rows));
  values.push_back(tile("BK", rows));
  plan.results = {op.getOutput(), op.getLogsumexp()};
  plan.body = substitute(kForward, values);
  plan.flops = 2 * attentionProductFlops(op);
  launch(plan, qs[0] * qs[1] * ((qs[2] + rows - 1) / rows), rows);
  return plan;
}

/// The substitutions and operands the gradient's kernels share, with
/// `rows` rows per tile.
static Values gradientValues(AttentionGradOp op, KernelPlan &common,
                             StridesOf stridesOf, int64_t rows) {
  Values values = attentionValues(op, common, stridesOf);
  values.push_back({"OUTPUT_ARG", std::to_string(common.operands.size())});
  common.operands.append(
      {op.getOutput(), op.getLogsumexp(), op.getOutputGrad()});
  values.push_back({"FIRST_RESULT", std::to_string(common.operands.size())});
  // The output and its gradient may differ in type (an f32 output, a bf16
  // gradient in a mixed-precision step).
  values.push_back(typed("OT", op.getOutput()));
  values.push_back(typed("DOT", op.getOutputGrad()));
  bool wide = elementTypeOf(op.getQuery()).isF64();
  values.push_back({"LOADO", tileLoader(elementTypeOf(op.getOutput()), wide)});
  values.push_back(
      {"LOADDO", tileLoader(elementTypeOf(op.getOutputGrad()), wide)});
  values.push_back(typed("LT", op.getLogsumexp()));
  values.push_back(tile("BQ", rows));
  values.push_back(tile("BK", rows));
  common.results = {op.getQueryGrad(), op.getKeyGrad(), op.getValueGrad()};
  if (Value maskGrad = op.getMaskGrad())
    common.results.push_back(maskGrad);
  return values;
}

SmallVector<KernelPlan> attentionGradient(AttentionGradOp op,
                                          StridesOf stridesOf) {
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  int64_t d = qs[3], dv = shapeOf(op.getValue())[3];
  int64_t element = elementTypeOf(op.getQuery()).isF64() ? 8 : 4;
  // Every tile row holds a Q (or K) row, a dO (or V) row and the double
  // accumulators of one side.
  int64_t rows = tileRows(2 * element * (d + dv) + 8 * (d + dv + 2));
  KernelPlan common;
  Values values = gradientValues(op, common, stridesOf, rows);
  values.push_back(typed("DQT", op.getQueryGrad()));
  values.push_back(typed("DKT", op.getKeyGrad()));
  values.push_back(typed("DVT", op.getValueGrad()));
  values.push_back(storer("STOREDQ", op.getQueryGrad()));
  values.push_back(storer("STOREDK", op.getKeyGrad()));
  values.push_back(storer("STOREDV", op.getValueGrad()));
  std::string prologue =
      substitute(std::string(kGradientOperands) + kGradientTiles, values);
  KernelPlan query = common, keyValue = common;
  query.untouched = {op.getKeyGrad(), op.getValueGrad()};
  keyValue.untouched = {op.getQueryGrad()};
  if (Value maskGrad = op.getMaskGrad()) {
    query.untouched.push_back(maskGrad);
    keyValue.untouched.push_back(maskGrad);
  }
  query.body = prologue + substitute(kQueryGradient, values);
  launch(query, qs[0] * qs[1] * ((qs[2] + rows - 1) / rows), rows);
  keyValue.body = prologue + substitute(kKeyValueGradient, values);
  launch(keyValue, ks[0] * ks[1] * ((ks[2] + rows - 1) / rows), rows);
  query.flops = 3 * attentionProductFlops(op);
  keyValue.flops = 4 * attentionProductFlops(op);
  SmallVector<KernelPlan> plans = {query, keyValue};
  if (op.getMaskGrad())
    plans.push_back(attentionMaskGradient(op, stridesOf));
  return plans;
}

KernelPlan attentionMaskGradient(AttentionGradOp op, StridesOf stridesOf) {
  KernelPlan plan;
  Values values = gradientValues(op, plan, stridesOf, /*rows=*/1);
  Value maskGrad = op.getMaskGrad();
  ArrayRef<int64_t> qs = shapeOf(op.getQuery());
  SmallVector<int64_t> shape(4 - shapeOf(maskGrad).size(), 1);
  llvm::append_range(shape, shapeOf(maskGrad));
  std::string dims;
  for (int64_t size : shape)
    dims += (dims.empty() ? "" : ", ") + std::to_string(size) + "ll";
  int64_t elements = shape[0] * shape[1] * shape[2] * shape[3];
  values.push_back(typed("MT", maskGrad));
  values.push_back(storer("STOREM", maskGrad));
  values.push_back({"MASK_SHAPE", dims});
  values.push_back({"MASK_ELEMENTS", std::to_string(elements) + "ll"});
  values.push_back({"B", std::to_string(qs[0]) + "ll"});
  plan.body =
      substitute(std::string(kGradientOperands) + kMaskGradient, values);
  plan.untouched = {op.getQueryGrad(), op.getKeyGrad(), op.getValueGrad()};
  plan.block = 128;
  plan.grid = std::clamp<int64_t>((elements + 127) / 128, 1, 4096);
  // Each element recomputes its scores and dP: two of the products.
  plan.flops = 2 * attentionProductFlops(op);
  return plan;
}

} // namespace kiln::cuda
