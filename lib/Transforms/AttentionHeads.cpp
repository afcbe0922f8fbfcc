//===- AttentionHeads.cpp - where attention's heads are -------------------===//
//
// The layouts exporters give attention's heads, and the moves between them
// and kiln.attention's [B, H, T, D]: heads as a dimension of their own,
// folded into the batch of 3-D products ([B * H, T, D]), or folded into
// the query rows of 3-D products with one key and value head ([B, Tq * H,
// D], GPTBigCode's multi-query attention); key and value heads repeated
// for grouped-query attention.
//
//===----------------------------------------------------------------------===//

#include "AttentionMatch.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace kiln {

bool recordHeads(ArrayRef<int64_t> shape, AttentionMatch &match) {
  SmallVector<int64_t> heads = {shape[0], shape[match.rows.empty() ? 1 : 2]};
  if (!match.heads.empty() && match.heads != heads)
    return false;
  match.heads = heads;
  return true;
}

/// Whether `reshape` splits [B * H, x, y] into [B, H, x, y] or merges them
/// back; records the split.
static bool isBatchHeadReshape(ReshapeOp reshape, AttentionMatch &match) {
  ArrayRef<int64_t> from = shapeOf(reshape.getInput()),
                    to = shapeOf(reshape.getResult());
  return match.rows.empty() && from.size() + to.size() == 7 &&
         from.take_back(2) == to.take_back(2) &&
         recordHeads(from.size() == 4 ? from : to, match);
}

/// Whether `reshape` splits the rows of 3-D scores [B, Tq * H, Tk] into
/// [B, Tq, H, Tk] or merges them back (the row layout); records the split.
/// Heads recorded before from 4-D scores, read as [B, H, ...] then, are
/// read as [B, Tq, H, ...] from now on.
static bool isRowHeadReshape(ReshapeOp reshape, AttentionMatch &match) {
  ArrayRef<int64_t> from = shapeOf(reshape.getInput()),
                    to = shapeOf(reshape.getResult());
  if (from.size() + to.size() != 7)
    return false;
  ArrayRef<int64_t> flat = from.size() == 3 ? from : to,
                    split = from.size() == 3 ? to : from;
  if (split[0] != flat[0] || split[3] != flat[2] ||
      split[1] * split[2] != flat[1] || split[1] == 1)
    return false;
  SmallVector<int64_t> rows = {split[1], split[2]};
  if (!match.rows.empty())
    return match.rows == rows;
  if (!match.heads.empty() &&
      match.heads != ArrayRef<int64_t>{split[0], split[1]})
    return false;
  match.rows = rows;
  match.heads = {split[0], split[2]};
  return true;
}

/// Whether `reshape` moves the heads between the batch or the rows of 3-D
/// products and a dimension of their own; records them.
static bool isHeadReshape(ReshapeOp reshape, AttentionMatch &match) {
  if (!isBatchHeadReshape(reshape, match) && !isRowHeadReshape(reshape, match))
    return false;
  match.replaced.insert(reshape);
  return true;
}

Value peelHeadReshape(Value value, AttentionMatch &match) {
  auto reshape = value.getDefiningOp<ReshapeOp>();
  return reshape && value.hasOneUse() && isHeadReshape(reshape, match)
             ? reshape.getInput()
             : value;
}

Value peelHeadReshapeForward(Value value, AttentionMatch &match) {
  auto reshape = dyn_cast_if_present<ReshapeOp>(onlyUser(value));
  return reshape && isHeadReshape(reshape, match) ? reshape.getResult() : value;
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

/// `shape` with its heads split from the batch: [B, H, x, y] for
/// [B * H, x, y]; empty where they do not multiply out.
static SmallVector<int64_t> withHeads(ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> heads) {
  if (shape.size() == 4)
    return SmallVector<int64_t>(shape);
  if (shape.size() != 3 || shape[0] != heads[0] * heads[1])
    return {};
  return {heads[0], heads[1], shape[1], shape[2]};
}

bool hasAttentionShapes(AttentionMatch &match) {
  Value output = match.output.getResult();
  if (!match.rows.empty()) {
    auto batchOf = [&](Value operand) {
      return shapeOf(operand).size() == 3 &&
             shapeOf(operand)[0] == match.heads[0];
    };
    auto allRows = [&](Value operand) {
      return shapeOf(operand)[1] == match.rows[0] * match.rows[1];
    };
    return !match.queryTransposed &&
           llvm::all_of(ValueRange{match.query, match.key, match.value, output},
                        batchOf) &&
           allRows(match.query) && allRows(output);
  }
  for (Value operand : {match.query, match.key, match.value, output}) {
    SmallVector<int64_t> shape = withHeads(shapeOf(operand), match.heads);
    if (shape.empty())
      return false;
    bool sharedHead = (operand == match.key || operand == match.value) &&
                      shapeOf(operand).size() == 4 && shape[1] == 1;
    if (shape[0] != match.heads[0] ||
        (shape[1] != match.heads[1] && !sharedHead))
      return false;
  }
  return true;
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

/// The permutation between [B, Tq, H, x] and [B, H, Tq, x] (its own
/// inverse).
static constexpr int64_t kSwapHeadsAndRows[] = {0, 2, 1, 3};

/// In the row layout, queries [B, Tq * H, D] as [B, H, Tq, D]; a key or
/// value head [B, x, y] as [B, 1, x, y].
static Value rowsToHeads(OpBuilder &builder, Location loc, Value value,
                         bool isQuery, const AttentionMatch &match) {
  auto type = cast<RankedTensorType>(value.getType());
  ArrayRef<int64_t> shape = type.getShape();
  if (!isQuery)
    return builder.create<ReshapeOp>(
        loc, type.clone({shape[0], 1, shape[1], shape[2]}), value);
  Value split = builder.create<ReshapeOp>(
      loc, type.clone({shape[0], match.rows[0], match.rows[1], shape[2]}),
      value);
  return builder.create<TransposeOp>(loc, split, kSwapHeadsAndRows);
}

/// `value` as [B, H, x, y]: as it is, as the 4-D value a head reshape
/// merged (looked through), or split by a new reshape.
static Value toHeads(OpBuilder &builder, Location loc, Value value,
                     AttentionMatch &match) {
  if (shapeOf(value).size() == 4)
    return value;
  if (auto reshape = value.getDefiningOp<ReshapeOp>())
    if (value.hasOneUse() && shapeOf(reshape.getInput()).size() == 4 &&
        isHeadReshape(reshape, match))
      return reshape.getInput();
  auto type = cast<RankedTensorType>(value.getType());
  return builder.create<ReshapeOp>(
      loc, type.clone(withHeads(type.getShape(), match.heads)), value);
}

/// In the row layout, the 4-D shape of a mask of `shape` over `scores`
/// ([B, Tq * H, Tk] or [B, Tq, H, Tk]) that broadcasts to [B, Tq, H, Tk]:
/// a mask over all of the 3-D rows split as they are.
static SmallVector<int64_t> rowMaskShape(ArrayRef<int64_t> shape,
                                         ArrayRef<int64_t> scores,
                                         const AttentionMatch &match) {
  SmallVector<int64_t> padded(scores.size() - shape.size(), 1);
  llvm::append_range(padded, shape);
  if (scores.size() == 4)
    return padded;
  bool allRows = padded[1] != 1;
  return {padded[0], allRows ? match.rows[0] : 1, allRows ? match.rows[1] : 1,
          padded[2]};
}

std::optional<KeyBand> bandOf(const ConstantMask &mask,
                              ArrayRef<int64_t> scores,
                              const AttentionMatch &match) {
  if (match.rows.empty())
    return keptBand(mask.keep, mask.shape, scores);
  SmallVector<int64_t> shape = rowMaskShape(mask.shape, scores, match);
  SmallVector<int64_t> swapped = {shape[0], shape[2], shape[1], shape[3]};
  SmallVector<bool> keep(mask.keep.size());
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t i = 0; i < shape[1]; ++i)
      for (int64_t h = 0; h < shape[2]; ++h)
        for (int64_t k = 0; k < shape[3]; ++k)
          keep[((b * shape[2] + h) * shape[1] + i) * shape[3] + k] =
              mask.keep[((b * shape[1] + i) * shape[2] + h) * shape[3] + k];
  return keptBand(
      keep, swapped,
      {match.heads[0], match.heads[1], match.rows[0], scores.back()});
}

Value maskToHeads(OpBuilder &builder, Location loc, Value mask,
                  ArrayRef<int64_t> scores, AttentionMatch &match) {
  auto type = cast<RankedTensorType>(mask.getType());
  if (!match.rows.empty()) {
    SmallVector<int64_t> shape = rowMaskShape(type.getShape(), scores, match);
    if (ArrayRef<int64_t>(shape) != type.getShape())
      mask = builder.create<ReshapeOp>(loc, type.clone(shape), mask);
    return builder.create<TransposeOp>(loc, mask, kSwapHeadsAndRows);
  }
  if (scores.size() == 4)
    return mask;
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<int64_t> split =
      shape.size() == 3 && shape[0] != 1
          ? SmallVector<int64_t>{match.heads[0], match.heads[1], shape[1],
                                 shape[2]}
          : SmallVector<int64_t>{1, 1, shape.size() > 1 ? shape.end()[-2] : 1,
                                 shape.empty() ? 1 : shape.back()};
  return builder.create<ReshapeOp>(loc, type.clone(split), mask);
}

HeadOperands operandsAsHeads(OpBuilder &builder, Location loc,
                             AttentionMatch &match) {
  auto oriented = [&](Value value, bool transposed, bool isQuery) {
    if (match.rows.empty()) {
      value = toHeads(builder, loc, value, match);
    } else {
      // A 3-D transpose of a key or value head: read its input instead.
      auto swapped = value.getDefiningOp<TransposeOp>();
      if (transposed && swapped && value.hasOneUse() &&
          swapped.getPermutation() == ArrayRef<int64_t>{0, 2, 1}) {
        match.replaced.insert(swapped);
        value = swapped.getInput();
        transposed = false;
      }
      value = rowsToHeads(builder, loc, value, isQuery, match);
    }
    return transposed ? swapLastTwo(builder, loc, value, match.replaced)
                      : value;
  };
  Value query = oriented(match.query, match.queryTransposed, true);
  Value key = oriented(match.key, match.keyTransposed, false);
  Value value = oriented(match.value, match.valueTransposed, false);
  return {query, peelRepeatedHeads(key, match.replaced),
          peelRepeatedHeads(value, match.replaced)};
}

RankedTensorType headsOutputType(const AttentionMatch &match,
                                 const HeadOperands &heads) {
  MatmulOp product = match.output;
  RankedTensorType type = product.getType();
  if (match.rows.empty())
    return type.clone(withHeads(type.getShape(), match.heads));
  ArrayRef<int64_t> q = shapeOf(heads.query);
  return type.clone({q[0], q[1], q[2], shapeOf(heads.value).back()});
}

Value outputFromHeads(OpBuilder &builder, Location loc, Value output,
                      const AttentionMatch &match) {
  if (!match.rows.empty())
    output = builder.create<TransposeOp>(loc, output, kSwapHeadsAndRows);
  MatmulOp product = match.output;
  Type type = product.getType();
  return output.getType() == type
             ? output
             : builder.create<ReshapeOp>(loc, type, output).getResult();
}

} // namespace kiln
