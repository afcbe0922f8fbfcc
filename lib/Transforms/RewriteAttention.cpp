//===- RewriteAttention.cpp - attention pattern matching ------------------===//
//
// Matches, from each last-axis softmax outwards, the attention that
// exporters emit:
//
//   scores = matmul(q [* c1], k^T [* c2])
//   scores = scores [* c | / c] [tanh(scores / cap) * cap] (Gemma 2)
//   scores = scores [+ bias] [masked: where(keep, scores, x)
//            or where(drop, x, scores), x <= -1e4], in any order (with
//            the scales too where there is no cap)
//   p = softmax(scores) [then where(is_nan(p), 0, p)] [then dropout(p)]
//   output = matmul(p, v)
//
// on [B, H, T, D] operands, or with the heads flattened into the batch of
// 3-D products ([B * H, T, D], as BLOOM, OPT and BART export their bmm),
// reshaped to [B, H, ...] and back anywhere between the products, or with
// the heads in the query rows of 3-D products with one key and value head
// ([B, Tq * H, D] queries, scores viewed as [B, Tq, H, Tk]: GPTBigCode's
// multi-query attention); key and value optionally repeated for
// grouped-query heads (reshape -> broadcast -> reshape). Every intermediate
// must have no other use (else its [B, H, Tq, Tk] value is needed anyway), and
// a boolean mask must not depend on a trained parameter; a bias may (T5's and
// Swin's learned position biases: attention_grad computes its gradient). A
// constant mask (or one an exporter folded into a parameter that is not
// trained) that is all "keep" disappears, and one that keeps a band of keys
// around the diagonal becomes the causal flag and/or a window (a sliding
// window, ModernBERT's band; also the band a constant mask selects a bias
// within): exact, since an excluded score contributes exactly 0 where a row
// keeps some key (see excludesScore), and such a band keeps one in every row
// (the diagonal). A bias and a constant boolean mask become one additive mask;
// a bias the scale multiplies is multiplied by it (rounded once more than in
// the exported (s + bias) * c). A row that drops every key (possible only with
// masks that inputs decide) gives 0, where the exported softmax gives equal
// weights or NaN. Anything else is left alone.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/RewriteAttention.h"

#include "AttentionMatch.h"
#include "PatternSupport.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_KILNREWRITEATTENTION
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

/// Peels `x * c` (or `c * x`, or `x / c`) with `c` a splat constant that
/// does not change `x`'s shape, multiplying the factor into `scale`.
static Value peelScale(const Literals &literals, Value value, double &scale,
                       llvm::SetVector<Operation *> &replaced) {
  Operation *op = value.getDefiningOp();
  if (!op || !isa<MulOp, DivOp>(op) || !value.hasOneUse())
    return value;
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  if (std::optional<double> c = literals.value(rhs);
      c && lhs.getType() == value.getType()) {
    scale *= isa<DivOp>(op) ? 1.0 / *c : *c;
    replaced.insert(op);
    replaced.insert(rhs.getDefiningOp());
    return lhs;
  }
  if (std::optional<double> c = literals.value(lhs);
      c && isa<MulOp>(op) && rhs.getType() == value.getType()) {
    scale *= *c;
    replaced.insert(op);
    replaced.insert(lhs.getDefiningOp());
    return rhs;
  }
  return value;
}

/// Peels Gemma 2's soft cap `tanh(x / c) * c` (either side of the product,
/// x divided by c or times 1 / c) into `match.softcap`.
static Value peelSoftcap(const Literals &literals, Value value,
                         AttentionMatch &match) {
  auto outer = value.getDefiningOp<MulOp>();
  if (!outer || !value.hasOneUse())
    return value;
  Value capped = outer.getLhs(), factor = outer.getRhs();
  if (!capped.getDefiningOp<TanhOp>())
    std::swap(capped, factor);
  auto tanh = capped.getDefiningOp<TanhOp>();
  std::optional<double> cap = literals.value(factor);
  if (!tanh || !cap || !(*cap > 0.0) || !capped.hasOneUse() ||
      capped.getType() != value.getType())
    return value;
  double inverse = 1.0;
  llvm::SetVector<Operation *> divided;
  Value x = peelScale(literals, tanh.getInput(), inverse, divided);
  if (x == tanh.getInput() || std::fabs(inverse * *cap - 1.0) > 1e-6)
    return value;
  match.softcap = *cap;
  match.replaced.insert(divided.begin(), divided.end());
  match.replaced.insert(tanh);
  match.replaced.insert(outer);
  match.replaced.insert(factor.getDefiningOp());
  return x;
}

/// Whether `scores` is a product, after scales, soft caps and head
/// reshapes.
static bool comesFromProduct(const Literals &literals, Value scores) {
  AttentionMatch scratch;
  for (Value previous; previous != scores;) {
    previous = scores;
    double ignored = 1.0;
    scores = peelSoftcap(literals, scores, scratch);
    scores = peelScale(literals, scores, ignored, scratch.replaced);
    scores = peelHeadReshape(scores, scratch);
  }
  return scores.getDefiningOp<MatmulOp>() != nullptr;
}

/// Peels an additive or a boolean mask off the scores, unless the match
/// already has one of its kind.
static Value peelMask(const Literals &literals, Value scores,
                      AttentionMatch &match) {
  Operation *op = scores.getDefiningOp();
  if (!op || !scores.hasOneUse())
    return scores;
  SmallVector<int64_t> shape(shapeOf(scores));
  if (auto add = dyn_cast<AddOp>(op); add && !match.bias) {
    // The scores side is the one of the result's type that a matmul makes.
    for (auto [s, m] : {std::pair(add.getLhs(), add.getRhs()),
                        std::pair(add.getRhs(), add.getLhs())}) {
      if (s.getType() != scores.getType() || !comesFromProduct(literals, s))
        continue;
      match.bias = m;
      match.biasScores = shape;
      match.replaced.insert(op);
      return s;
    }
    return scores;
  }
  auto where = dyn_cast<WhereOp>(op);
  if (!where || match.keep)
    return scores;
  Type element = getElementTypeOrSelf(scores.getType());
  std::optional<double> onTrue = literals.value(where.getOnTrue()),
                        onFalse = literals.value(where.getOnFalse());
  bool keeps = onFalse && excludesScore(*onFalse, element) &&
               where.getOnTrue().getType() == scores.getType();
  bool drops = onTrue && excludesScore(*onTrue, element) &&
               where.getOnFalse().getType() == scores.getType();
  if (!keeps && !drops)
    return scores;
  match.keep = where.getCondition();
  match.keepScores = shape;
  match.negateKeep = !keeps;
  match.replaced.insert(op);
  match.excluded = keeps ? where.getOnFalse() : where.getOnTrue();
  match.replaced.insert(match.excluded.getDefiningOp());
  return keeps ? where.getOnTrue() : where.getOnFalse();
}

/// Whether `mask` can stand for what it did in `scores`: it broadcasts to
/// them without changing them. A bias may be trained (its gradient is
/// attention_grad's `mask_grad`); a boolean mask that a trained parameter
/// decides is left to the ops that spell it out.
static bool isMaskOf(const Literals &literals, Value mask,
                     ArrayRef<int64_t> scores, bool mayTrain) {
  return !mask || ((mayTrain || literals.dependsOnNoTrainedParameter(mask)) &&
                   broadcastsTo(shapeOf(mask), scores));
}

/// Whether constants alone make `mask` an additive mask of zeros.
static bool keepsEveryScore(const Literals &literals, Value mask) {
  std::optional<ConstantMask> constant =
      constantMask(literals, mask, /*negate=*/false);
  return constant &&
         llvm::all_of(constant->keep, [](bool kept) { return kept; });
}

/// Whether `value` is read by a matrix product, directly or through a
/// reshape or dropout: what a softmax's probabilities in attention are.
static bool feedsProduct(Value value) {
  return llvm::any_of(value.getUsers(), [](Operation *user) {
    if (isa<MatmulOp>(user))
      return true;
    return isa<ReshapeOp, DropoutOp>(user) && feedsProduct(user->getResult(0));
  });
}

/// Matches the pattern around `softmax`. Where it is attention that
/// kiln.attention cannot stand for, `whyNot` says why (a literal; left
/// empty where `softmax` is no attention at all).
static std::optional<AttentionMatch>
matchAttention(const Literals &literals, SoftmaxOp softmax, StringRef &whyNot) {
  auto type = cast<RankedTensorType>(softmax.getType());
  if (type.getRank() < 3 || type.getRank() > 4 ||
      softmax.getAxis() != static_cast<uint64_t>(type.getRank() - 1))
    return std::nullopt;
  AttentionMatch match;
  match.replaced.insert(softmax);
  if (type.getRank() == 4 && !recordHeads(type.getShape(), match))
    return std::nullopt;

  // Backwards: masks, scale, product, per-operand scales, with the heads
  // split or merged anywhere between them.
  // Masks and scales come in either order; a scale applied to masked
  // scores scales the bias (and must keep dropped scores dropped).
  Value scores = softmax.getInput();
  for (Value previous; previous != scores;) {
    previous = scores;
    scores = peelHeadReshape(scores, match);
    bool hadBias = bool(match.bias);
    Value unmasked = peelMask(literals, scores, match);
    if (unmasked == scores) {
      // A soft cap applies to the scaled scores, before any mask.
      Value uncapped =
          match.softcap ? scores : peelSoftcap(literals, scores, match);
      if (uncapped != scores && match.scale != 1.0) {
        whyNot = "a scale of the soft-capped scores";
        return std::nullopt;
      }
      scores = uncapped != scores
                   ? uncapped
                   : peelScale(literals, scores, match.scale, match.replaced);
      continue;
    }
    if (match.scale <= 0.0 || match.softcap) {
      whyNot = match.softcap ? "a mask inside the soft cap"
                             : "masked scores scaled by a factor that is "
                               "not positive";
      return std::nullopt;
    }
    if (match.bias && !hadBias)
      match.biasScale = match.scale;
    scores = unmasked;
  }
  auto product = scores.getDefiningOp<MatmulOp>();
  if (!product) {
    if (feedsProduct(softmax.getResult()))
      whyNot = "its scores pass through ops the rewrite does not look "
               "through";
    return std::nullopt;
  }
  if (!scores.hasOneUse()) {
    whyNot = "its scores are also read elsewhere";
    return std::nullopt;
  }
  size_t rank = shapeOf(scores).size();
  if (rank < 3 || shapeOf(product.getLhs()).size() != rank ||
      shapeOf(product.getRhs()).size() != rank)
    return std::nullopt;
  match.replaced.insert(product);
  match.query =
      peelScale(literals, product.getLhs(), match.scale, match.replaced);
  match.queryTransposed = product.getTransposeLhs();
  match.key =
      peelScale(literals, product.getRhs(), match.scale, match.replaced);
  match.keyTransposed = !product.getTransposeRhs();
  if (!isMaskOf(literals, match.bias, match.biasScores, /*mayTrain=*/true) ||
      !isMaskOf(literals, match.keep, match.keepScores, /*mayTrain=*/true)) {
    whyNot = "a mask that does not broadcast to the scores";
    return std::nullopt;
  }
  if (!isMaskOf(literals, match.keep, match.keepScores, /*mayTrain=*/false)) {
    whyNot = "a boolean mask that a trained parameter decides";
    return std::nullopt;
  }
  // A bias with a boolean mask that inputs decide (BLOOM's ALiBi with the
  // causal and padding mask) stays as exported: a left-padded row that
  // drops every key is a row of equal weights there, which the loss reads
  // (the last padding position predicts the first token), and 0 in
  // kiln.attention. A bias of zeros (baddbmm's beta * empty) is none.
  if (match.bias && match.keep && !keepsEveryScore(literals, match.bias) &&
      !constantMask(literals, match.keep, match.negateKeep)) {
    whyNot = "a bias with a boolean mask that inputs decide (a row that "
             "drops every key would differ)";
    return std::nullopt;
  }

  // Forwards: the NaN guard of SDPA exports, dropout, the product with v.
  Value probabilities = peelHeadReshapeForward(softmax.getResult(), match);
  // Probabilities that a product with the values reads besides others
  // (returned attention weights) must be stored anyway.
  auto readElsewhere = [&] {
    if (llvm::any_of(probabilities.getUsers(), llvm::IsaPred<MatmulOp>))
      whyNot = "its probabilities are also read elsewhere (returned "
               "attention weights)";
    return std::nullopt;
  };
  if (!probabilities.hasOneUse()) {
    auto users = llvm::to_vector(probabilities.getUsers());
    if (users.size() != 2)
      return readElsewhere();
    auto isNan = dyn_cast<IsNanOp>(users[0]);
    auto where = dyn_cast<WhereOp>(users[1]);
    if (!isNan) {
      isNan = dyn_cast<IsNanOp>(users[1]);
      where = dyn_cast<WhereOp>(users[0]);
    }
    std::optional<double> zero =
        where ? literals.value(where.getOnTrue()) : std::nullopt;
    if (!isNan || !where || where.getCondition() != isNan.getResult() ||
        !isNan.getResult().hasOneUse() || where.getOnFalse() != probabilities ||
        zero != 0.0 || where.getType() != probabilities.getType())
      return readElsewhere();
    match.replaced.insert(isNan);
    match.replaced.insert(where);
    match.replaced.insert(where.getOnTrue().getDefiningOp());
    probabilities = where.getResult();
  }
  probabilities = peelHeadReshapeForward(probabilities, match);
  if (auto dropout = dyn_cast_if_present<DropoutOp>(onlyUser(probabilities))) {
    if (!dropout.getMask().use_empty()) {
      whyNot = "its dropout mask is also read elsewhere";
      return std::nullopt;
    }
    match.dropout = dropout;
    match.replaced.insert(dropout);
    probabilities = peelHeadReshapeForward(dropout.getOutput(), match);
  }
  auto output = dyn_cast_if_present<MatmulOp>(onlyUser(probabilities));
  if (!output || output.getLhs() != probabilities || output.getTransposeLhs() ||
      shapeOf(output.getRhs()).size() != shapeOf(probabilities).size())
    return std::nullopt;
  match.output = output;
  match.replaced.insert(output);
  match.value = output.getRhs();
  match.valueTransposed = output.getTransposeRhs();
  if (match.heads.empty()) // 3-D throughout: each batch entry one head
    match.heads = {shapeOf(match.query)[0], 1};
  if (!hasAttentionShapes(match)) {
    whyNot = "query, key and value heads of shapes kiln.attention does not "
             "take";
    return std::nullopt;
  }
  // kiln.attention draws dropout in its [B, H, Tq, Tk] order, the same
  // draws as the exported dropout only where that is its order too.
  if (match.dropout && !match.rows.empty()) {
    whyNot = "dropout of probabilities with the heads in the query rows";
    return std::nullopt;
  }
  return match;
}

/// Whether constants alone make `mask` keep a band of keys (all of them,
/// the causal ones, a sliding window: setting `band`); its ops are then
/// replaced. Two constant masks keep the keys both keep.
static bool isConstantMask(const Literals &literals, Value mask, bool negate,
                           ArrayRef<int64_t> scores, KeyBand &band,
                           AttentionMatch &match) {
  std::optional<ConstantMask> constant = constantMask(literals, mask, negate);
  if (!constant)
    return false;
  std::optional<KeyBand> kept = bandOf(*constant, scores, match);
  if (!kept)
    return false;
  band = intersection(band, *kept);
  match.replaced.insert(constant->ops.begin(), constant->ops.end());
  return true;
}

/// A bias that a constant band of keys selects from, the excluded score
/// elsewhere (ModernBERT's local layers fill their padding mask with the
/// lowest score outside the band): the band, kept in `band`, and the bias
/// it selects from, returned; `bias` itself otherwise. The keys outside
/// the band contribute exactly 0 to a row that the bias keeps some key of
/// in it; a row whose band keys the bias drops all (padding far from any
/// token) attends to its band's keys equally, where the exported softmax
/// weighs every key so.
static Value peelBandOfBias(const Literals &literals, Value bias,
                            ArrayRef<int64_t> scores, KeyBand &band,
                            AttentionMatch &match) {
  auto where = bias.getDefiningOp<WhereOp>();
  if (!where)
    return bias;
  Type element = getElementTypeOrSelf(bias);
  std::optional<double> onTrue = literals.value(where.getOnTrue()),
                        onFalse = literals.value(where.getOnFalse());
  bool keepsOnTrue = onFalse && excludesScore(*onFalse, element);
  if (!keepsOnTrue && !(onTrue && excludesScore(*onTrue, element)))
    return bias;
  Value inner = keepsOnTrue ? where.getOnTrue() : where.getOnFalse();
  if (!isa<FloatType>(getElementTypeOrSelf(inner)) ||
      !broadcastsTo(shapeOf(inner), scores))
    return bias;
  std::optional<ConstantMask> constant =
      constantMask(literals, where.getCondition(), /*negate=*/!keepsOnTrue);
  if (!constant)
    return bias;
  std::optional<KeyBand> kept = bandOf(*constant, scores, match);
  if (!kept)
    return bias;
  band = intersection(band, *kept);
  match.replaced.insert(where);
  match.replaced.insert(constant->ops.begin(), constant->ops.end());
  Value excluded = keepsOnTrue ? where.getOnFalse() : where.getOnTrue();
  if (Operation *producer = excluded.getDefiningOp())
    match.replaced.insert(producer);
  return inner;
}

/// The masks of `match` as kiln.attention takes them: constant ones gone
/// (or the causal flag), a boolean mask as it is, a bias and a constant
/// boolean mask as one additive mask that adds the excluded score where the
/// boolean one drops a key.
static Value attentionMask(OpBuilder &builder, Location loc,
                           const Literals &literals, AttentionMatch &match,
                           KeyBand &band) {
  Value bias = match.bias, keep = match.keep;
  if (bias &&
      isConstantMask(literals, bias, false, match.biasScores, band, match))
    bias = nullptr;
  if (bias)
    bias = peelBandOfBias(literals, bias, match.biasScores, band, match);
  if (keep && isConstantMask(literals, keep, match.negateKeep, match.keepScores,
                             band, match))
    keep = nullptr;
  if (bias && match.biasScale != 1.0) {
    auto scalar = RankedTensorType::get({}, getElementTypeOrSelf(bias));
    Value factor = builder.create<ConstantOp>(
        loc, DenseElementsAttr::get(
                 scalar, builder.getFloatAttr(scalar.getElementType(),
                                              match.biasScale)));
    bias = builder.create<MulOp>(loc, bias, factor);
  }
  if (bias)
    bias = maskToHeads(builder, loc, bias, match.biasScores, match);
  if (!keep)
    return bias;
  keep = maskToHeads(builder, loc, keep, match.keepScores, match);
  if (!bias)
    return match.negateKeep ? builder.create<NotOp>(loc, keep) : keep;
  Value drop = match.excluded; // -inf or the lowest score
  return match.negateKeep ? builder.create<WhereOp>(loc, keep, drop, bias)
                          : builder.create<WhereOp>(loc, keep, bias, drop);
}

static void rewrite(const Literals &literals, AttentionMatch &match) {
  OpBuilder builder(match.output);
  Location loc = match.output.getLoc();
  HeadOperands heads = operandsAsHeads(builder, loc, match);
  Value query = heads.query;

  KeyBand band;
  Value mask = attentionMask(builder, loc, literals, match, band);
  Type scoreType = getElementTypeOrSelf(query.getType()).isF64()
                       ? getElementTypeOrSelf(query.getType())
                       : builder.getF32Type();
  // The scores are f32 (f64 for f64 operands): so is the scale they are
  // multiplied by, as in the ops replaced.
  double scale = scoreType.isF64()
                     ? match.scale
                     : static_cast<double>(static_cast<float>(match.scale));
  ArrayRef<int64_t> q = shapeOf(query);
  auto logsumexpType = RankedTensorType::get({q[0], q[1], q[2]}, scoreType);
  DropoutOp dropout = match.dropout;
  auto attention = builder.create<AttentionOp>(
      loc, headsOutputType(match, heads), logsumexpType, query, heads.key,
      heads.value, mask, dropout ? dropout.getOffset() : Value(),
      builder.getF64FloatAttr(scale),
      band.causal ? builder.getUnitAttr() : nullptr,
      band.window.empty() ? nullptr : builder.getDenseI64ArrayAttr(band.window),
      match.softcap ? builder.getF64FloatAttr(match.softcap) : nullptr,
      builder.getF64FloatAttr(dropout ? dropout.getRatio().convertToDouble()
                                      : 0.0),
      builder.getI64IntegerAttr(dropout ? dropout.getSeed() : 0));
  match.output.getResult().replaceAllUsesWith(
      outputFromHeads(builder, loc, attention.getOutput(), match));
  // Erase what nothing reads any more, users before their producers.
  eraseReplaced(match.replaced.getArrayRef());
}

/// One remark per reason that attention stays as exported ops, on the
/// first softmax it keeps, with how many it keeps: what a user needs to
/// know why a model's step stores its probabilities.
static void remarkOnKeptAttention(const Literals &literals,
                                  func::FuncOp function) {
  llvm::MapVector<StringRef, SmallVector<SoftmaxOp>> kept;
  function.walk([&](SoftmaxOp softmax) {
    StringRef whyNot;
    if (!matchAttention(literals, softmax, whyNot) && !whyNot.empty())
      kept[whyNot].push_back(softmax);
  });
  for (auto &[whyNot, softmaxes] : kept) {
    InFlightDiagnostic remark = softmaxes.front().emitRemark()
                                << "attention kept as exported ops";
    if (size_t more = softmaxes.size() - 1)
      remark << " here and in " << more << " more place"
             << (more > 1 ? "s" : "");
    remark << ": " << whyNot;
  }
}

FailureOr<int> rewriteAttention(func::FuncOp function,
                                const AutodiffOptions &training) {
  FailureOr<Literals> literals = Literals::of(function, training);
  if (failed(literals))
    return failure();
  // One match at a time, matched afresh after each rewrite: a later match
  // may read what an earlier one replaced (one attention's output as the
  // next one's query). Each rewrite removes a softmax.
  int softmaxes = 0;
  function.walk([&](SoftmaxOp) { ++softmaxes; });
  int rewritten = 0;
  while (rewritten < softmaxes) {
    std::optional<AttentionMatch> match;
    function.walk([&](SoftmaxOp softmax) {
      StringRef ignored;
      match = matchAttention(*literals, softmax, ignored);
      return match ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (!match)
      break;
    rewrite(*literals, *match);
    ++rewritten;
  }
  remarkOnKeptAttention(*literals, function);
  return rewritten;
}

namespace {
struct RewriteAttentionPass
    : kiln::impl::KilnRewriteAttentionBase<RewriteAttentionPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(rewriteAttention(getOperation(), {"", train, freeze})))
      signalPassFailure();
  }
};
} // namespace

} // namespace kiln
