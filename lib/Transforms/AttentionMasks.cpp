//===- AttentionMasks.cpp - what attention's masks keep ------------------===//

#include "AttentionMasks.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace kiln {

bool excludesScore(double x, Type elementType) {
  return isa<FloatType>(elementType) && x <= kExcludedScore;
}

std::optional<KeyBand> keptBand(ArrayRef<bool> keep, ArrayRef<int64_t> shape,
                                ArrayRef<int64_t> scores) {
  int64_t tq = scores.end()[-2], tk = scores.back();
  bool square = shape.size() >= 2 && shape.take_back(2) == scores.take_back(2);
  if (!square)
    return llvm::all_of(keep, [](bool k) { return k; })
               ? std::optional<KeyBand>(KeyBand{})
               : std::nullopt;
  // The widest reach of the first [Tq, Tk] slice, then every flag checked.
  int64_t left = 0, right = 0;
  for (int64_t at = 0; at < tq * tk; ++at)
    if (keep[at]) {
      left = std::max(left, at / tk - at % tk);
      right = std::max(right, at % tk - at / tk);
    }
  for (size_t at = 0; at < keep.size(); ++at) {
    int64_t j = at % tk, i = (at / tk) % tq;
    // A row past the band's last key would keep none.
    if (keep[at] != (i - left <= j && j <= i + right) || i - left >= tk)
      return std::nullopt;
  }
  KeyBand band;
  band.causal = right == 0;
  int64_t windowLeft = left >= tq - 1 ? -1 : left;
  int64_t windowRight = band.causal || right >= tk - 1 ? -1 : right;
  if (windowLeft >= 0 || windowRight >= 0)
    band.window = {windowLeft, windowRight};
  return band;
}

bool broadcastsTo(ArrayRef<int64_t> shape, ArrayRef<int64_t> target) {
  if (shape.size() > target.size())
    return false;
  ArrayRef<int64_t> aligned = target.take_back(shape.size());
  for (auto [dim, into] : llvm::zip(shape, aligned))
    if (dim != 1 && dim != into)
      return false;
  return true;
}

KeyBand intersection(const KeyBand &a, const KeyBand &b) {
  KeyBand both;
  both.causal = a.causal || b.causal;
  // The tighter of each pair of bounds, a negative one none.
  auto tighter = [](int64_t x, int64_t y) {
    return x < 0 ? y : y < 0 ? x : std::min(x, y);
  };
  auto bound = [](const KeyBand &band, int side) {
    return band.window.empty() ? int64_t(-1) : band.window[side];
  };
  int64_t left = tighter(bound(a, 0), bound(b, 0));
  int64_t right = both.causal ? -1 : tighter(bound(a, 1), bound(b, 1));
  if (left >= 0 || right >= 0)
    both.window = {left, right};
  return both;
}

std::optional<ConstantMask> constantMask(const Literals &literals, Value mask,
                                         bool negate) {
  Operation *op = mask.getDefiningOp();
  if (std::optional<Tensor> values = literals.tensor(mask)) {
    Type element = getElementTypeOrSelf(mask);
    ConstantMask result{{}, SmallVector<int64_t>(shapeOf(mask)), {op}};
    for (int64_t i = 0; i < values->getNumElements(); ++i) {
      double v = values->getAsDouble(i);
      if (!element.isInteger(1) && v != 0.0 && !excludesScore(v, element))
        return std::nullopt; // a bias, not a mask
      bool flag = element.isInteger(1) ? v != 0.0 : v == 0.0;
      result.keep.push_back(flag != negate);
    }
    return result;
  }
  std::optional<ConstantMask> result;
  if (auto broadcast = dyn_cast_or_null<BroadcastOp>(op)) {
    result = constantMask(literals, broadcast.getInput(), negate);
  } else if (auto inverse = dyn_cast_or_null<NotOp>(op);
             inverse && getElementTypeOrSelf(mask).isInteger(1)) {
    result = constantMask(literals, inverse.getInput(), !negate);
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

} // namespace kiln
