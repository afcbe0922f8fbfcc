//===- RewriteAttention.cpp - attention pattern matching ------------------===//
//
// Matches, from each last-axis softmax of rank 4 outwards, the attention
// that exporters emit:
//
//   scores = matmul(q [* c1], k^T [* c2]) [* c | / c]
//   scores = scores + mask | where(keep, scores, lowest) | where(drop, lowest,
//   scores) p = softmax(scores) [then where(is_nan(p), 0, p)] [then dropout(p)]
//   output = matmul(p, v)
//
// with key and value optionally repeated for grouped-query heads
// (reshape -> broadcast -> reshape). Every intermediate must have no other
// use (else its [B, H, Tq, Tk] value is needed anyway) and the mask must not
// depend on a parameter (it gets no gradient). A constant mask that is all
// "keep" disappears, and one that is exactly causal becomes the causal flag:
// both are exact, since a -inf or lowest-float score contributes exactly 0.
// Anything else is left alone.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/RewriteAttention.h"

#include "PatternSupport.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_KILNREWRITEATTENTION
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

namespace {
/// What a match found, before anything is rewritten.
struct AttentionMatch {
  Value query, key, value; // key may still be transposed: see keyTransposed
  bool keyTransposed = false, valueTransposed = false, queryTransposed = false;
  double scale = 1.0;
  Value scores;            // the [B, H, Tq, Tk] softmax input
  Value mask;              // additive (float) or boolean (true: keep)
  bool negateMask = false; // the boolean mask is true where a key is dropped
  DropoutOp dropout;
  MatmulOp output;
  llvm::SetVector<Operation *> replaced;
};
} // namespace

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}


/// Whether a score plus `x` is excluded from the softmax exactly: -inf, or
/// the lowest finite value of its type (whatever it is added to rounds back
/// to it, whose exp relative to the row maximum is exactly 0).
static bool excludesScore(double x, Type elementType) {
  auto floatType = dyn_cast<FloatType>(elementType);
  if (!floatType)
    return false;
  double lowest =
      APFloat::getLargest(floatType.getFloatSemantics(), /*Negative=*/true)
          .convertToDouble();
  return x == -INFINITY || x <= lowest;
}

/// Whether `value` is computed without reading any parameter.
static bool dependsOnNoParameter(Value value) {
  SmallVector<Value> work = {value};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *op = v.getDefiningOp();
    if (!op)
      continue;
    if (isa<ParameterOp>(op) || op->getNumRegions())
      return false;
    llvm::append_range(work, op->getOperands());
  }
  return true;
}

/// `value`'s only user, if it has exactly one.
static Operation *onlyUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

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

/// Peels the additive or boolean mask off the softmax input.
static Value peelMask(const Literals &literals, Value scores,
                      AttentionMatch &match) {
  Operation *op = scores.getDefiningOp();
  if (!op || !scores.hasOneUse())
    return scores;
  if (auto add = dyn_cast<AddOp>(op)) {
    // The scores side is the one of the result's type that a matmul makes.
    for (auto [s, m] : {std::pair(add.getLhs(), add.getRhs()),
                        std::pair(add.getRhs(), add.getLhs())}) {
      if (s.getType() != scores.getType())
        continue;
      double ignored = 1.0;
      llvm::SetVector<Operation *> scratch;
      if (!peelScale(literals, s, ignored, scratch).getDefiningOp<MatmulOp>())
        continue;
      match.mask = m;
      match.replaced.insert(op);
      return s;
    }
    return scores;
  }
  if (auto where = dyn_cast<WhereOp>(op)) {
    Type element = getElementTypeOrSelf(scores.getType());
    std::optional<double> onTrue = literals.value(where.getOnTrue()),
                          onFalse = literals.value(where.getOnFalse());
    if (onFalse && excludesScore(*onFalse, element) &&
        where.getOnTrue().getType() == scores.getType()) {
      match.mask = where.getCondition();
      match.replaced.insert(op);
      match.replaced.insert(where.getOnFalse().getDefiningOp());
      return where.getOnTrue();
    }
    if (onTrue && excludesScore(*onTrue, element) &&
        where.getOnFalse().getType() == scores.getType()) {
      match.mask = where.getCondition();
      match.negateMask = true;
      match.replaced.insert(op);
      match.replaced.insert(where.getOnTrue().getDefiningOp());
      return where.getOnFalse();
    }
  }
  return scores;
}

/// Undoes the repetition of key/value heads for grouped-query attention:
/// reshape [B, Hkv, T, D] -> [B, Hkv, 1, T, D], broadcast to
/// [B, Hkv, n, T, D], reshape to [B, Hkv * n, T, D].
static Value peelRepeatedHeads(Value value,
                               llvm::SetVector<Operation *> &replaced) {
  auto merge = value.getDefiningOp<ReshapeOp>();
  if (!merge)
    return value;
  auto repeat = merge.getInput().getDefiningOp<BroadcastOp>();
  if (!repeat)
    return value;
  auto split = repeat.getInput().getDefiningOp<ReshapeOp>();
  if (!split)
    return value;
  Value heads = split.getInput();
  ArrayRef<int64_t> kv = shapeOf(heads), out = shapeOf(value),
                    expanded = shapeOf(repeat.getResult()),
                    unit = shapeOf(split.getResult());
  if (kv.size() != 4 || expanded.size() != 5 || unit.size() != 5 ||
      ArrayRef<int64_t>{kv[0], kv[1], 1, kv[2], kv[3]} != unit ||
      expanded[0] != kv[0] || expanded[1] != kv[1] || expanded[3] != kv[2] ||
      expanded[4] != kv[3] ||
      ArrayRef<int64_t>{kv[0], kv[1] * expanded[2], kv[2], kv[3]} != out)
    return value;
  replaced.insert(merge);
  replaced.insert(repeat);
  replaced.insert(split);
  return heads;
}

/// Whether the keep flags of a mask of `shape` keep every score
/// (`causal` false) or exactly those whose key index is at most the query
/// index, for every query row of `scores` [B, H, Tq, Tk].
static bool keepsExactly(ArrayRef<bool> keep, ArrayRef<int64_t> shape,
                         ArrayRef<int64_t> scores, bool causal) {
  if (causal && (shape.size() < 2 || shape.take_back(2) != scores.take_back(2)))
    return false;
  int64_t tk = shape.empty() ? 1 : shape.back();
  int64_t tq = shape.size() < 2 ? 1 : shape[shape.size() - 2];
  for (size_t at = 0; at < keep.size(); ++at) {
    int64_t j = at % tk, i = (at / tk) % tq;
    if (keep[at] != (!causal || j <= i))
      return false;
  }
  return true;
}

/// Whether `shape` broadcasts to `target` without changing it.
static bool broadcastsTo(ArrayRef<int64_t> shape, ArrayRef<int64_t> target) {
  if (shape.size() > target.size())
    return false;
  ArrayRef<int64_t> aligned = target.take_back(shape.size());
  for (auto [dim, into] : llvm::zip(shape, aligned))
    if (dim != 1 && dim != into)
      return false;
  return true;
}

/// Whether q, k and v have the attention shapes: batch and head dims equal
/// to the output's (the products broadcast nothing).
static bool hasAttentionShapes(AttentionMatch &match) {
  ArrayRef<int64_t> out = shapeOf(match.output.getResult());
  for (Value operand : {match.query, match.key, match.value})
    if (shapeOf(operand).take_front(2) != out.take_front(2))
      return false;
  return true;
}

/// Matches the pattern around `softmax`.
static std::optional<AttentionMatch> matchAttention(const Literals &literals,
                                                    SoftmaxOp softmax) {
  auto type = cast<RankedTensorType>(softmax.getType());
  if (type.getRank() != 4 || softmax.getAxis() != 3)
    return std::nullopt;
  AttentionMatch match;
  match.replaced.insert(softmax);
  match.scores = softmax.getInput();

  // Backwards: mask, scale, product, per-operand scales.
  Value scores = peelMask(literals, softmax.getInput(), match);
  scores = peelScale(literals, scores, match.scale, match.replaced);
  auto product = scores.getDefiningOp<MatmulOp>();
  if (!product || !scores.hasOneUse() ||
      shapeOf(product.getLhs()).size() != 4 ||
      shapeOf(product.getRhs()).size() != 4)
    return std::nullopt;
  match.replaced.insert(product);
  match.query =
      peelScale(literals, product.getLhs(), match.scale, match.replaced);
  match.queryTransposed = product.getTransposeLhs();
  match.key =
      peelScale(literals, product.getRhs(), match.scale, match.replaced);
  match.keyTransposed = !product.getTransposeRhs();
  if (match.mask && (!dependsOnNoParameter(match.mask) ||
                     !broadcastsTo(shapeOf(match.mask), type.getShape())))
    return std::nullopt;

  // Forwards: the NaN guard of SDPA exports, dropout, the product with v.
  Value probabilities = softmax.getResult();
  if (!probabilities.hasOneUse()) {
    auto users = llvm::to_vector(probabilities.getUsers());
    if (users.size() != 2)
      return std::nullopt;
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
      return std::nullopt;
    match.replaced.insert(isNan);
    match.replaced.insert(where);
    match.replaced.insert(where.getOnTrue().getDefiningOp());
    probabilities = where.getResult();
  }
  if (auto dropout = dyn_cast_if_present<DropoutOp>(onlyUser(probabilities))) {
    if (!dropout.getMask().use_empty())
      return std::nullopt;
    match.dropout = dropout;
    match.replaced.insert(dropout);
    probabilities = dropout.getOutput();
  }
  auto output = dyn_cast_if_present<MatmulOp>(onlyUser(probabilities));
  if (!output || output.getLhs() != probabilities || output.getTransposeLhs() ||
      shapeOf(output.getRhs()).size() != 4)
    return std::nullopt;
  match.output = output;
  match.replaced.insert(output);
  match.value = output.getRhs();
  match.valueTransposed = output.getTransposeRhs();
  if (!hasAttentionShapes(match))
    return std::nullopt;
  return match;
}

/// `value` with its last two dimensions swapped; a transpose that swaps
/// them back is looked through.
static Value swapLastTwo(OpBuilder &builder, Location loc, Value value,
                         llvm::SetVector<Operation *> &replaced) {
  SmallVector<int64_t> swap = {0, 1, 3, 2};
  if (auto transpose = value.getDefiningOp<TransposeOp>())
    if (transpose.getPermutation() == ArrayRef<int64_t>(swap)) {
      replaced.insert(transpose);
      return transpose.getInput();
    }
  return builder.create<TransposeOp>(loc, value, swap);
}

namespace {
/// A mask computed from constants alone, as "keep" flags of its
/// pre-broadcast shape, which broadcasts to the scores.
struct ConstantMask {
  SmallVector<bool> keep;
  SmallVector<int64_t> shape;
  /// The ops computing it, which nothing else may need.
  SmallVector<Operation *> ops;
};
} // namespace

/// The keep flags of `mask` if constants alone compute it: a constant
/// (boolean, or additive with 0 and excluding values), a broadcast of one,
/// or an additive mask that selects 0 or an excluding value by a boolean
/// one (GPT-2's triangle, broadcast over the batch, then
/// `where(keep, 0, finfo.min)`).
static std::optional<ConstantMask> constantMask(const Literals &literals,
                                                Value mask, bool negate) {
  Operation *op = mask.getDefiningOp();
  if (auto constant = dyn_cast_or_null<ConstantOp>(op)) {
    auto elements = cast<DenseElementsAttr>(constant.getValue());
    Type element = elements.getElementType();
    ConstantMask result{{}, SmallVector<int64_t>(shapeOf(mask)), {op}};
    if (element.isInteger(1)) {
      for (bool flag : elements.getValues<bool>())
        result.keep.push_back(flag != negate);
      return result;
    }
    for (const APFloat &x : elements.getValues<APFloat>()) {
      double v = x.convertToDouble();
      if (v != 0.0 && !excludesScore(v, element))
        return std::nullopt; // a bias, not a mask
      result.keep.push_back((v == 0.0) != negate);
    }
    return result;
  }
  std::optional<ConstantMask> result;
  if (auto broadcast = dyn_cast_or_null<BroadcastOp>(op)) {
    result = constantMask(literals, broadcast.getInput(), negate);
  } else if (auto where = dyn_cast_or_null<WhereOp>(op)) {
    Type element = getElementTypeOrSelf(mask);
    std::optional<double> onTrue = literals.value(where.getOnTrue()),
                          onFalse = literals.value(where.getOnFalse());
    if (!onTrue || !onFalse)
      return std::nullopt;
    if (*onTrue == 0.0 && excludesScore(*onFalse, element))
      result = constantMask(literals, where.getCondition(), negate);
    else if (excludesScore(*onTrue, element) && *onFalse == 0.0)
      result = constantMask(literals, where.getCondition(), !negate);
    if (result)
      for (Value literal : {where.getOnTrue(), where.getOnFalse()})
        if (Operation *producer = literal.getDefiningOp())
          result->ops.push_back(producer);
  }
  if (result)
    result->ops.push_back(op);
  return result;
}

static void rewrite(const Literals &literals, AttentionMatch &match) {
  OpBuilder builder(match.output);
  Location loc = match.output.getLoc();
  Value query = match.queryTransposed
                    ? swapLastTwo(builder, loc, match.query, match.replaced)
                    : match.query;
  Value key = match.keyTransposed
                  ? swapLastTwo(builder, loc, match.key, match.replaced)
                  : match.key;
  Value value = match.valueTransposed
                    ? swapLastTwo(builder, loc, match.value, match.replaced)
                    : match.value;
  key = peelRepeatedHeads(key, match.replaced);
  value = peelRepeatedHeads(value, match.replaced);

  bool causal = false;
  Value mask = match.mask;
  if (mask) {
    if (std::optional<ConstantMask> constant =
            constantMask(literals, mask, match.negateMask)) {
      ArrayRef<int64_t> scores = shapeOf(match.scores);
      causal = keepsExactly(constant->keep, constant->shape, scores,
                            /*causal=*/true);
      if (causal || keepsExactly(constant->keep, constant->shape, scores,
                                 /*causal=*/false)) {
        match.replaced.insert(constant->ops.begin(), constant->ops.end());
        mask = nullptr;
      }
    }
  }
  if (mask && match.negateMask)
    mask = builder.create<NotOp>(loc, mask);

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
      loc, match.output.getType(), logsumexpType, query, key, value, mask,
      dropout ? dropout.getOffset() : Value(), builder.getF64FloatAttr(scale),
      causal ? builder.getUnitAttr() : nullptr,
      builder.getF64FloatAttr(dropout ? dropout.getRatio().convertToDouble()
                                      : 0.0),
      builder.getI64IntegerAttr(dropout ? dropout.getSeed() : 0));
  match.output.getResult().replaceAllUsesWith(attention.getOutput());
  // Erase what nothing reads any more, users before their producers.
  eraseReplaced(match.replaced.getArrayRef());
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
      match = matchAttention(*literals, softmax);
      return match ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (!match)
      return rewritten;
    rewrite(*literals, *match);
    ++rewritten;
  }
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
