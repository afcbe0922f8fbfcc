//===- TensorCoreAttention.cpp - attention on tensor cores ----------------===//
//
// Which attention ops the tensor-core kernels take, and each op's kernel
// plans: the kernels of TensorCoreAttentionKernels.inc (which describes
// them) with the op's shapes, strides, mask, dropout and soft cap filled
// in.
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace kiln::cuda {

#include "TensorCoreAttentionKernels.inc"

namespace {

using Values = std::vector<std::pair<std::string, std::string>>;

/// How far left and right of query row i its keys may lie: i - j <= left
/// and j - i <= right, -1 for no bound (causal masking, the window).
template <typename OpTy> std::pair<int64_t, int64_t> keyBand(OpTy op) {
  int64_t left = -1, right = op.getCausal() ? 0 : -1;
  if (std::optional<ArrayRef<int64_t>> window = op.getWindow()) {
    left = (*window)[0];
    if (!op.getCausal())
      right = (*window)[1];
  }
  return {left, right};
}

/// Device code for `keySpan(q0, first, last)`, the keys [first, last) that
/// some query row of the tile at q0 may attend to, `querySpan(k0, first,
/// last)`, the query rows that may attend to some key of the tile at k0:
/// what causal masking and the window leave of every tile; and
/// `attendsNoneFrom(i, rows, k0)`, whether no query row of [i, i + rows)
/// may attend to key k0 or a later one (the rows before a causal tile's).
template <typename OpTy> std::string spans(OpTy op) {
  auto [left, right] = keyBand(op);
  auto atLeastZero = [](const std::string &x) {
    return "(" + x + " > 0 ? " + x + " : 0)";
  };
  auto atMost = [](const std::string &x, const char *bound) {
    return "(" + x + " < " + bound + " ? " + x + " : " + bound + ")";
  };
  std::string l = indexConstant(left), r = indexConstant(right);
  std::string keyFirst = left < 0 ? "0" : atLeastZero("q0 - " + l);
  std::string keyLast = right < 0 ? "$TK" : atMost("q0 + $BQ + " + r, "$TK");
  std::string queryFirst = right < 0 ? "0" : atLeastZero("k0 - " + r);
  std::string queryLast = left < 0 ? "$TQ" : atMost("k0 + $BK + " + l, "$TQ");
  std::string noneFrom = right < 0 ? "false" : "k0 >= i + rows + " + r;
  return "  auto keySpan = [&](idx q0, idx &first, idx &last) { first = " +
         keyFirst + "; last = " + keyLast +
         "; };\n  auto querySpan = [&](idx k0, idx &first, idx &last) { "
         "first = " +
         queryFirst + "; last = " + queryLast +
         "; };\n  [[maybe_unused]] auto attendsNoneFrom = [&](idx i, idx "
         "rows, idx k0) -> bool { return " +
         noneFrom + "; };\n";
}

/// The pairs of a 64-row query tile and a 64-key tile of one head that
/// keySpan gives (some row of the query tile may attend to some key of
/// the key tile): the blocks of dS^T that the stored query gradient
/// keeps per head.
int64_t storedScoreTiles(AttentionGradOp op) {
  auto [left, right] = keyBand(op);
  int64_t tq = shapeOf(op.getQuery())[2], tk = shapeOf(op.getKey())[2];
  int64_t pairs = 0;
  for (int64_t q0 = 0; q0 < tq; q0 += 64) {
    int64_t first = left < 0 ? 0 : std::max<int64_t>(q0 - left, 0);
    int64_t last = right < 0 ? tk : std::min(q0 + 64 + right, tk);
    pairs += std::max<int64_t>((last - first / 64 * 64 + 63) / 64, 0);
  }
  return pairs;
}

/// The scratch of the tensor-core gradient kernels, whose pointer follows
/// the results: the rows' deltas; after them, where the key/value kernel
/// sums dQ, its f32 sums, and where it stores dS, the blocks of dS^T;
/// either from a multiple of 4 floats (16 bytes: pairs of sums take one
/// reduction, blocks are copied in 16-byte pieces).
struct GradientScratch {
  GradientScratch(AttentionGradOp op, const TargetOptions &options) {
    ArrayRef<int64_t> qs = shapeOf(op.getQuery());
    atomic = options.queryGradient == QueryGradient::Atomic && qs[3] <= 128;
    stored = options.queryGradient == QueryGradient::Stored;
    rows = qs[0] * qs[1] * qs[2];
    afterDeltas = llvm::alignTo(rows, 4);
    scoreTiles = stored ? storedScoreTiles(op) : 0;
    floats = atomic   ? afterDeltas + rows * qs[3]
             : stored ? afterDeltas + qs[0] * qs[1] * scoreTiles * 64 * 64 / 2
                      : rows;
  }
  bool atomic, stored;
  int64_t rows, afterDeltas, scoreTiles, floats;
};

/// Rows of the streamed side's tiles, which keep shared memory within
/// 48 KiB (a block's static limit) for head dimension `d`, rows padded
/// by 8 (16 rows for Gemma's 256).
int64_t streamedRows(int64_t d) { return d <= 64 ? 64 : d <= 128 ? 32 : 16; }

/// The substitution of $CHUNK, the streamed rows a gradient kernel takes
/// at once: the accumulators of a chunk's two products, live at once, hold
/// 32 columns at most over the warp's `rowTiles` tiles (more would spill).
std::pair<std::string, std::string> chunk(int64_t d, int64_t rowTiles) {
  return {"CHUNK",
          indexConstant(std::min<int64_t>(32 / rowTiles, streamedRows(d)))};
}

/// The substitution of `name`, the heads a group of attention's blocks
/// takes together (inHeadGroups): as many as stream at most `l2Bytes` of
/// operands, `bytesPerHead` each, between one and `heads`.
std::pair<std::string, std::string> groupHeads(const char *name,
                                               int64_t l2Bytes,
                                               int64_t bytesPerHead,
                                               int64_t heads) {
  return {name, indexConstant(std::clamp<int64_t>(
                    l2Bytes / std::max<int64_t>(bytesPerHead, 1), 1, heads))};
}

} // namespace

std::optional<std::string> tensorCoreAttentionUnsupported(Operation *op) {
  auto attention = dyn_cast<AttentionOp>(op);
  auto gradient = dyn_cast<AttentionGradOp>(op);
  Value query = attention ? attention.getQuery() : gradient.getQuery();
  Value key = attention ? attention.getKey() : gradient.getKey();
  Value value = attention ? attention.getValue() : gradient.getValue();
  Value logsumexp =
      attention ? attention.getLogsumexp() : gradient.getLogsumexp();
  Type qt = elementTypeOf(query);
  int64_t d = shapeOf(query)[3];
  if (!qt.isBF16() && !qt.isF16())
    return std::string("operands that are not bf16 or fp16");
  if (elementTypeOf(key) != qt || elementTypeOf(value) != qt)
    return std::string("query, key and value of different types");
  if (shapeOf(value)[3] != d)
    return std::string("a value head dimension other than the query's");
  if (d % 16 != 0 || d > 256)
    return "head dimension " + std::to_string(d) +
           " (tensor cores take multiples of 16 up to 256)";
  if (!elementTypeOf(logsumexp).isF32())
    return std::string("a log-sum-exp that is not f32");
  if (gradient && elementTypeOf(gradient.getOutputGrad()) != qt)
    return std::string("an output gradient of another type than the operands");
  return std::nullopt;
}

namespace {

/// The substitution of `name`, a lambda storing an f32 result of the
/// kernels as `value`'s element: a 16-bit one rounded from the float
/// itself, as round_bf16 would round the same value as a double, in a few
/// integer instructions instead of some twenty, several of them double.
std::pair<std::string, std::string> storer(const char *name, Value value) {
  return {name, "[](float x) { return " +
                    storedExact(elementTypeOf(value), "x") + "; }"};
}

/// The substitution of `name`, a lambda storing two neighbouring f32
/// results as `value`'s 16-bit elements in one 32-bit word, the first in
/// the low half: one cvt instruction, the same bits as two of storer's
/// (a NaN aside, which the GPU makes its canonical one); nullptr for
/// other element types, which storeRows stores one by one.
std::pair<std::string, std::string> pairStorer(const char *name, Value value) {
  Type type = elementTypeOf(value);
  if (!type.isBF16() && !type.isF16())
    return {name, "nullptr"};
  return {name, std::string("[](float lo, float hi) { return ") +
                    (type.isBF16() ? "pack_bf16" : "pack_f16") + "(lo, hi); }"};
}

/// The substitutions both passes share, if `op` is one the tensor-core
/// kernels compute: 16-bit operands of one type, equal head dimensions of
/// a multiple of 16 up to 256, an f32 log-sum-exp.
template <typename OpTy>
std::optional<Values> tensorCoreValues(OpTy op, const TargetOptions &options,
                                       StridesOf stridesOf) {
  if (tensorCoreAttentionUnsupported(op))
    return std::nullopt;
  Type qt = elementTypeOf(op.getQuery());
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  int64_t d = qs[3], group = qs[1] / ks[1];
  Type ot = elementTypeOf(op.getOutput());
  // An additive or boolean mask, broadcast to batch x heads x TQ x TK, is
  // the fourth operand.
  std::string maskArg, mask;
  if (Value m = op.getMask()) {
    Type mt = elementTypeOf(m);
    maskArg = "const " + storageType(mt) + " *mask = (const " +
              storageType(mt) + " *)args[3];";
    std::string element =
        loaded(mt, "mask[" +
                       broadcastIndex(m, {qs[0], qs[1], qs[2], ks[2]},
                                      "((row * $TK) + j)") +
                       "]");
    mask = isa<FloatType>(mt) ? "x = (float)(x + " + element + ");"
                              : "if (!" + element + ") return -inf;";
  }
  // Dropout's offset (the step's draw) follows the mask.
  double ratio = op.getDropoutRatio().convertToDouble();
  std::string offsetArg,
      key = "random_key(" + std::to_string(op.getSeed()) + "ll)";
  if (op.getOffset()) {
    offsetArg = "const i64 *offset = (const i64 *)args[" +
                std::to_string(3 + bool(op.getMask())) + "];";
    key = "random_key(" + std::to_string(op.getSeed()) + "ll, *offset)";
  }
  std::string factor = ratio > 0.0
                           ? "return dropout_keep(" + key +
                                 ", (bh * $TQ + i) * $TK + j, " +
                                 literal(ratio) + ") ? (float)" +
                                 literal(1.0 / (1.0 - ratio)) + " : 0.0f;"
                           : "return 1.0f;";
  // Whether a score in base 2 is its product times a constant (no mask,
  // no cap).
  bool scaledOnly = !op.getMask() && !op.getSoftcap();
  double scale = op.getScale().convertToDouble();
  std::string capped = "x", slope = "1.0f";
  if (std::optional<APFloat> softcap = op.getSoftcap()) {
    std::string c = "(float)" + literal(softcap->convertToDouble());
    capped = c + " * tanhf(x / " + c + ")";
    slope = "1.0f - tanhf(x / " + c + ") * tanhf(x / " + c + ")";
  }
  // Tiles of 64 rows (four warps of 16) on the side a block owns; the
  // streamed side's tiles keep shared memory within 48 KiB.
  return Values{
      {"PROLOGUE", kPrologue},
      {"ADDRESSING", attentionAddressing(op, stridesOf)},
      {"MASK_ARG", maskArg},
      {"MASK", mask},
      {"A", std::to_string(3 + bool(op.getMask()) + bool(op.getOffset()))},
      {"OFFSET_ARG", offsetArg},
      {"FACTOR", factor},
      {"DROPOUT", ratio > 0.0 ? "true" : "false"},
      {"OT", storageType(ot)},
      {"LOADO",
       "[](" + storageType(ot) + " x) { return " + loaded(ot, "x") + "; }"},
      storer("STOREO", op.getOutput()),
      pairStorer("PAIRO", op.getOutput()),
      {"PACK", qt.isBF16() ? "pack_bf16" : "pack_f16"},
      {"FROM16", qt.isBF16() ? "bf16_to_f32" : "f16_to_f32"},
      {"MMA", qt.isBF16() ? "mma_bf16" : "mma_f16"},
      {"SCALE", literal(scale)},
      {"OUTSIDE", outsideKeys(op)},
      {"SPANS", spans(op)},
      {"CAPPED", capped},
      {"SLOPE", slope},
      {"LOG2SCORE", scaledOnly ? "s * (float)$LOG2FACTOR"
                               : "masked(bh, i, j, s * (float)$SCALE) * log2e"},
      {"LOG2FACTOR", literal(scale * llvm::numbers::log2e)},
      {"RANKED", scaledOnly && scale > 0.0 ? "s" : "log2Score(bh, i, j, s)"},
      {"RANK_FACTOR", scaledOnly && scale > 0.0 ? "$LOG2FACTOR" : "1.0"},
      {"TQ", indexConstant(qs[2])},
      {"TK", indexConstant(ks[2])},
      {"H", indexConstant(qs[1])},
      {"HKV", indexConstant(ks[1])},
      {"GROUP", indexConstant(group)},
      {"HEADS", indexConstant(qs[0] * qs[1])},
      {"KVHEADS", indexConstant(ks[0] * ks[1])},
      {"D", indexConstant(d)},
      {"STREAMED", indexConstant(streamedRows(d))},
      // Blocks that own query rows stream their head's 16-bit keys and
      // values (a group's query heads share them); the key/value gradient's
      // blocks, the queries, output gradients, log-sum-exps and deltas of
      // the query heads their key/value head serves.
      groupHeads("KEY_GROUP_HEADS", options.attentionL2Bytes,
                 ks[2] * d * 2 * 2 / group, qs[0] * qs[1]),
      groupHeads("QUERY_GROUP_HEADS", options.attentionL2Bytes,
                 group * qs[2] * (d * 2 * 2 + 2 * 4), ks[0] * ks[1])};
}

/// The most elements an index of `op`'s kernels ranges over: each
/// tensor's view in its storage, and the scores where a mask or dropout
/// addresses them (`(bh * TQ + i) * TK + j`).
template <typename OpTy> int64_t indexBound(OpTy op, StridesOf stridesOf) {
  int64_t bound = 0;
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  for (Value value : values) {
    ArrayRef<int64_t> shape = shapeOf(value);
    SmallVector<int64_t> strides = stridesOf(value);
    int64_t extent = 1;
    for (auto [size, stride] : llvm::zip_equal(shape, strides))
      extent += (size - 1) * stride;
    bound = std::max({bound, extent, countOf(value)});
  }
  if (op.getMask() || !op.getDropoutRatio().isZero()) {
    ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
    bound = std::max(bound, qs[0] * qs[1] * qs[2] * ks[2]);
  }
  return bound;
}

/// Tiles of 16 query rows per warp of the kernels that own query rows (the
/// forward pass and dQ): two where their accumulators fit in registers
/// twice (FlashAttention-2's 128-row tiles: half the shared memory reads
/// per product, and each key and value tile staged once for 128 rows), at
/// head dimensions up to 64 and `queryTile` 128. Not with dropout, whose
/// draws per score then spill (80 to 190 bytes at head dimensions 48 and
/// 64).
template <typename OpTy> int64_t queryRowTiles(OpTy op, int64_t queryTile) {
  return queryTile == 128 && shapeOf(op.getQuery())[3] <= 64 &&
                 op.getDropoutRatio().isZero()
             ? 2
             : 1;
}

/// A block of four warps for each tile of `tile` (64 by default) of `rows`
/// in `heads`.
void launchTiles(KernelPlan &plan, int64_t heads, int64_t rows,
                 int64_t tile = 64) {
  plan.block = 128;
  plan.grid =
      std::clamp<int64_t>(heads * ((rows + tile - 1) / tile), 1, 4096);
}

} // namespace

std::optional<KernelPlan>
tensorCoreAttentionForward(AttentionOp op, const TargetOptions &options,
                           StridesOf stridesOf) {
  std::optional<Values> values = tensorCoreValues(op, options, stridesOf);
  if (!values)
    return std::nullopt;
  values->push_back({"LT", storageType(elementTypeOf(op.getLogsumexp()))});
  ArrayRef<int64_t> qs = shapeOf(op.getQuery());
  int64_t rowTiles = queryRowTiles(op, options.attentionQueryTile);
  values->push_back({"ROWTILES", std::to_string(rowTiles)});
  values->push_back({"BQ", std::to_string(64 * rowTiles)});
  values->push_back({"BK", "$STREAMED"});
  KernelPlan plan;
  plan.operands = {op.getQuery(), op.getKey(), op.getValue()};
  if (Value mask = op.getMask())
    plan.operands.push_back(mask);
  if (Value offset = op.getOffset())
    plan.operands.push_back(offset);
  plan.results = {op.getOutput(), op.getLogsumexp()};
  plan.body =
      substitute(std::string("$PROLOGUE") + kTensorCoreForward, *values);
  launchTiles(plan, qs[0] * qs[1], qs[2], 64 * rowTiles);
  plan.indexBound = indexBound(op, stridesOf);
  plan.flops = 2 * attentionProductFlops(op);
  return plan;
}

/// The kernel of `op`'s mask gradient on tensor cores, sharing the query
/// kernel `query`'s arguments and scratch, if the mask has every query and
/// key and broadcasts over the batch or the heads at most.
static std::optional<KernelPlan> tensorCoreMaskGradient(AttentionGradOp op,
                                                        const KernelPlan &query,
                                                        Values values) {
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  Value maskGrad = op.getMaskGrad();
  SmallVector<int64_t> shape(4 - shapeOf(maskGrad).size(), 1);
  llvm::append_range(shape, shapeOf(maskGrad));
  if (shape[2] != qs[2] || shape[3] != ks[2])
    return std::nullopt;
  values.push_back({"MT", storageType(elementTypeOf(maskGrad))});
  values.push_back(storer("STOREM", maskGrad));
  values.push_back({"MB", indexConstant(shape[0])});
  values.push_back({"MH", indexConstant(shape[1])});
  values.push_back({"SLICES", indexConstant(shape[0] * shape[1])});
  values.push_back({"B", indexConstant(qs[0])});
  values.push_back({"ROWTILES", "1"});
  values.push_back(chunk(qs[3], 1));
  values.push_back({"BQ", "64"});
  values.push_back({"BK", "$STREAMED"});
  KernelPlan plan = query;
  plan.body = substitute(std::string("$PROLOGUE") + kGradientPrologue +
                             kTensorCoreMaskGradient,
                         values);
  plan.untouched = {op.getOutput(), op.getQueryGrad(), op.getKeyGrad(),
                    op.getValueGrad()};
  int64_t streamed = streamedRows(qs[3]);
  launchTiles(plan, shape[0] * shape[1] * ((ks[2] + streamed - 1) / streamed),
              qs[2]);
  // S and dP again, for every head the mask's slices broadcast to.
  plan.flops = 2 * attentionProductFlops(op);
  return plan;
}

/// A kernel of attention's gradient that touches only `touched` of the
/// arguments it shares with `like`, striding over a grid of `grid` blocks.
static KernelPlan gradientPass(const KernelPlan &like, std::string body,
                               ArrayRef<Value> touched, int64_t grid) {
  KernelPlan plan = like;
  plan.body = std::move(body);
  plan.untouched.clear();
  for (Value value : llvm::concat<const Value>(like.operands, like.results))
    if (!llvm::is_contained(touched, value))
      plan.untouched.push_back(value);
  plan.block = 128;
  plan.grid = std::clamp<int64_t>(grid, 1, 4096);
  plan.gridStrided = true;
  plan.flops = 0;
  return plan;
}

int64_t kernelScratchBytes(Operation *op, const TargetOptions &options) {
  auto gradient = dyn_cast<AttentionGradOp>(op);
  if (!gradient || options.exactAttention ||
      options.attention != AttentionBackend::Kiln ||
      tensorCoreAttentionUnsupported(op))
    return 0;
  return GradientScratch(gradient, options).floats * 4;
}

std::optional<SmallVector<KernelPlan>>
tensorCoreAttentionGradient(AttentionGradOp op, const TargetOptions &options,
                            StridesOf stridesOf) {
  std::optional<Values> values = tensorCoreValues(op, options, stridesOf);
  if (!values)
    return std::nullopt;
  values->push_back({"DQT", storageType(elementTypeOf(op.getQueryGrad()))});
  values->push_back({"DKT", storageType(elementTypeOf(op.getKeyGrad()))});
  values->push_back({"DVT", storageType(elementTypeOf(op.getValueGrad()))});
  values->push_back(storer("STOREDQ", op.getQueryGrad()));
  values->push_back(storer("STOREDK", op.getKeyGrad()));
  values->push_back(storer("STOREDV", op.getValueGrad()));
  values->push_back(pairStorer("PAIRDQ", op.getQueryGrad()));
  values->push_back(pairStorer("PAIRDK", op.getKeyGrad()));
  values->push_back(pairStorer("PAIRDV", op.getValueGrad()));
  KernelPlan query;
  query.operands = {op.getQuery(), op.getKey(), op.getValue()};
  if (Value mask = op.getMask())
    query.operands.push_back(mask);
  if (Value offset = op.getOffset())
    query.operands.push_back(offset);
  query.operands.append(
      {op.getOutput(), op.getLogsumexp(), op.getOutputGrad()});
  query.results = {op.getQueryGrad(), op.getKeyGrad(), op.getValueGrad()};
  if (Value maskGrad = op.getMaskGrad()) {
    query.results.push_back(maskGrad);
    query.untouched.push_back(maskGrad);
  }
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  GradientScratch scratch(op, options);
  bool atomic = scratch.atomic, stored = scratch.stored;
  int64_t rows = scratch.rows;
  values->push_back({"DQ_SUMS_AT", indexConstant(scratch.afterDeltas)});
  values->push_back({"DS_AT", indexConstant(scratch.afterDeltas)});
  values->push_back({"SCORE_TILES", indexConstant(scratch.scoreTiles)});
  // The key tiles of query tile j of 64 rows: [j - behind, j + ahead) within
  // the key tiles (-1: no bound on that side).
  auto [left, right] = keyBand(op);
  values->push_back({"KEY_TILES", indexConstant(llvm::divideCeil(ks[2], 64))});
  values->push_back(
      {"BEHIND",
       left < 0 ? "(-1)" : indexConstant(llvm::divideCeil(left, 64))});
  values->push_back(
      {"AHEAD",
       right < 0 ? "(-1)" : indexConstant(1 + llvm::divideCeil(right, 64))});
  query.partialBytes = scratch.floats * 4;
  // The blocks of dS^T are addressed in 16-bit elements.
  query.indexBound = std::max(indexBound(op, stridesOf), 2 * scratch.floats);
  values->push_back({"SCRATCH_ARG", std::to_string(query.operands.size() +
                                                   query.results.size())});
  KernelPlan keyValue = query;
  std::string prologue = std::string("$PROLOGUE") + kGradientPrologue;
  Values queryValues = *values, keyValues = *values;
  int64_t rowTiles = queryRowTiles(op, options.attentionQueryTile);
  queryValues.push_back({"ROWTILES", std::to_string(rowTiles)});
  queryValues.push_back(chunk(qs[3], rowTiles));
  queryValues.push_back({"BQ", std::to_string(64 * rowTiles)});
  queryValues.push_back({"BK", "$STREAMED"});
  keyValues.push_back({"ROWTILES", "1"});
  keyValues.push_back(chunk(qs[3], 1));
  keyValues.push_back({"BQ", "$STREAMED"});
  keyValues.push_back({"BK", "64"});
  keyValues.push_back({"ATOMIC_DQ", atomic ? "true" : "false"});
  keyValues.push_back({"STORED_DS", stored ? "true" : "false"});
  query.body = substitute(prologue + kTensorCoreQueryGradient, queryValues);
  keyValue.body = substitute(prologue + kTensorCoreKeyValueGradient, keyValues);
  // The query kernel stores dq and each row's delta (dO . O), which the
  // key/value kernel reads instead of the output.
  query.untouched.append({op.getKeyGrad(), op.getValueGrad()});
  keyValue.untouched.append({op.getOutput(), op.getQueryGrad()});
  launchTiles(query, qs[0] * qs[1], qs[2], 64 * rowTiles);
  launchTiles(keyValue, ks[0] * ks[1], ks[2]);
  query.flops = 3 * attentionProductFlops(op);
  keyValue.flops = (atomic ? 5 : 4) * attentionProductFlops(op);
  // With dQ's product, ptxas took GPT-2's key/value kernel (head
  // dimension 64) from 168 registers (3 blocks per SM) to 242 (2); held to
  // 3 blocks, it spills 80 bytes. Without it, ptxas chooses 168 registers
  // or some 205 (2 blocks per SM) as small changes to the code fall (the
  // order of the work items took it there): held to 3 blocks, it spills 8
  // bytes, as the kernel measured at 122 TFLOP/s did 16. At 128 the
  // kernel takes 255 registers either way (2 blocks per SM, spilling 136
  // bytes, as the recomputing one spills 60); held to 3, it would spill
  // 1.5 KB.
  if (qs[3] <= 64)
    keyValue.minBlocksPerSM = 3;
  SmallVector<KernelPlan> plans = {query, keyValue};
  if (atomic || stored) {
    // The deltas (and cleared sums) first, 32 rows a block.
    KernelPlan &start = plans.front();
    start = gradientPass(
        query, substitute(prologue + kTensorCoreGradientStart, keyValues),
        {op.getOutput(), op.getOutputGrad()}, (rows + 31) / 32);
    if (stored)
      start.partialBytes = rows * 4;
  }
  if (atomic) {
    // The sums stored as dq last.
    plans.push_back(gradientPass(
        query,
        substitute(prologue + kTensorCoreQueryGradientStore, queryValues),
        {op.getQueryGrad()}, (rows * qs[3] + 127) / 128));
  }
  if (stored) {
    // dQ from the stored dS, in tiles of 64 query rows.
    Values storedValues = *values;
    storedValues.push_back({"ROWTILES", "1"});
    storedValues.push_back(chunk(qs[3], 1));
    storedValues.push_back({"BQ", "64"});
    storedValues.push_back({"BK", "$STREAMED"});
    KernelPlan &dq = plans.emplace_back(gradientPass(
        query,
        substitute(prologue + kTensorCoreStoredQueryGradient, storedValues),
        {op.getKey(), op.getQueryGrad()}, 0));
    launchTiles(dq, qs[0] * qs[1], qs[2]);
    dq.gridStrided = false;
    dq.flops = attentionProductFlops(op);
  }
  if (op.getMaskGrad())
    plans.push_back(tensorCoreMaskGradient(op, query, *values)
                        .value_or(attentionMaskGradient(op, stridesOf)));
  return plans;
}

} // namespace kiln::cuda
