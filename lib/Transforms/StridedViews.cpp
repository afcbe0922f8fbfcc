//===- StridedViews.cpp - values that live inside another's buffer --------===//
//
// A layout (offset, shape, strides) follows a value through reshapes,
// slices and transposes the way NumPy's views do; a reshape that would
// need a copy (merging dimensions that are not adjacent in memory) ends
// the chain.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/StridedViews.h"

#include "kiln/Transforms/Fuse.h"
#include "kiln/Transforms/MemoryPlan.h"

#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include <optional>

using namespace mlir;

namespace kiln {

SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

namespace {

struct Layout {
  int64_t offset = 0;
  SmallVector<int64_t> shape, strides;
};

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

Layout contiguous(ArrayRef<int64_t> shape) {
  return {0, SmallVector<int64_t>(shape), contiguousStrides(shape)};
}

/// `layout` seen under `shape` (same element count), if strides can
/// express it: each run of old dimensions that new dimensions split or
/// merge must be contiguous in memory.
std::optional<Layout> reshaped(const Layout &layout, ArrayRef<int64_t> shape) {
  // Dimensions of size 1 take no part in addressing.
  SmallVector<int64_t> sizes, strides;
  for (auto [size, stride] : llvm::zip(layout.shape, layout.strides))
    if (size != 1) {
      sizes.push_back(size);
      strides.push_back(stride);
    }
  Layout result{layout.offset, SmallVector<int64_t>(shape),
                SmallVector<int64_t>(shape.size(), 0)};
  size_t i = 0, j = 0;
  while (i < sizes.size() && j < shape.size()) {
    if (shape[j] == 1) {
      ++j;
      continue;
    }
    // The smallest runs [i, oldEnd) and [j, newEnd) of equal element count.
    size_t oldEnd = i + 1, newEnd = j + 1;
    int64_t oldCount = sizes[i], newCount = shape[j];
    while (oldCount != newCount) {
      if (oldCount < newCount)
        oldCount *= sizes[oldEnd++];
      else
        newCount *= shape[newEnd++];
    }
    for (size_t k = i; k + 1 < oldEnd; ++k)
      if (strides[k] != strides[k + 1] * sizes[k + 1])
        return std::nullopt;
    int64_t stride = strides[oldEnd - 1];
    for (size_t k = newEnd; k-- > j;) {
      result.strides[k] = stride;
      stride *= shape[k];
    }
    i = oldEnd;
    j = newEnd;
  }
  return result;
}

Layout transposed(const Layout &layout, ArrayRef<int64_t> permutation) {
  Layout result{layout.offset, {}, {}};
  for (int64_t from : permutation) {
    result.shape.push_back(layout.shape[from]);
    result.strides.push_back(layout.strides[from]);
  }
  return result;
}

/// The layout of `transpose`'s input, given its result's `layout`.
Layout untransposed(const Layout &layout, TransposeOp transpose) {
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  SmallVector<int64_t> inverse(permutation.size());
  for (auto [to, from] : llvm::enumerate(permutation))
    inverse[from] = to;
  return transposed(layout, inverse);
}

Layout sliced(const Layout &layout, SliceOp slice) {
  Layout result{layout.offset, SmallVector<int64_t>(shapeOf(slice)), {}};
  for (auto [start, step, stride] :
       llvm::zip(slice.getStart(), slice.getStride(), layout.strides)) {
    result.offset += start * stride;
    result.strides.push_back(step * stride);
  }
  return result;
}

/// `value`'s layout in the buffer of the block argument that reshapes,
/// slices and transposes alone compute it from.
std::optional<std::pair<BlockArgument, Layout>> viewChain(Value value) {
  if (auto argument = dyn_cast<BlockArgument>(value))
    return std::make_pair(argument, contiguous(shapeOf(argument)));
  Operation *op = value.getDefiningOp();
  if (!isa<ReshapeOp, TransposeOp, SliceOp>(op))
    return std::nullopt;
  auto chain = viewChain(op->getOperand(0));
  if (!chain)
    return std::nullopt;
  Layout &layout = chain->second;
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    layout = transposed(layout, transpose.getPermutation());
  } else if (auto slice = dyn_cast<SliceOp>(op)) {
    layout = sliced(layout, slice);
  } else if (auto view = reshaped(layout, shapeOf(value))) {
    layout = *view;
  } else {
    return std::nullopt;
  }
  return chain;
}

/// The block argument that reshapes and transposes alone compute `value`
/// from, and its layout given `value`'s `layout` (by default, the buffer
/// of `value`): each step undone, from `value` back.
std::optional<std::pair<BlockArgument, Layout>>
inverseViewChain(Value value, std::optional<Layout> start = {}) {
  Layout layout = start ? *start : contiguous(shapeOf(value));
  while (!isa<BlockArgument>(value)) {
    Operation *op = value.getDefiningOp();
    if (!isa<ReshapeOp, TransposeOp>(op))
      return std::nullopt;
    Value input = op->getOperand(0);
    if (auto transpose = dyn_cast<TransposeOp>(op)) {
      layout = untransposed(layout, transpose);
    } else if (auto view = reshaped(layout, shapeOf(input))) {
      layout = *view;
    } else {
      return std::nullopt;
    }
    value = input;
  }
  return std::make_pair(cast<BlockArgument>(value), layout);
}

/// Whether `value` is attention's gradient of a query, key or value head
/// tensor, which its kernels write by strides (not a mask's gradient).
static bool isHeadGradient(Value value) {
  auto gradient = value.getDefiningOp<AttentionGradOp>();
  return gradient && value != gradient.getMaskGrad();
}

/// Whether `use` is an attention operand its kernels address by strides.
bool readsStrided(OpOperand &use) {
  Operation *owner = use.getOwner();
  unsigned n = use.getOperandNumber();
  if (auto attention = dyn_cast<AttentionOp>(owner))
    return n == attention.getQueryMutable().getOperandNumber() ||
           n == attention.getKeyMutable().getOperandNumber() ||
           n == attention.getValueMutable().getOperandNumber();
  if (auto gradient = dyn_cast<AttentionGradOp>(owner))
    return n == gradient.getQueryMutable().getOperandNumber() ||
           n == gradient.getKeyMutable().getOperandNumber() ||
           n == gradient.getValueMutable().getOperandNumber() ||
           n == gradient.getOutputMutable().getOperandNumber() ||
           n == gradient.getOutputGradMutable().getOperandNumber();
  return false;
}

bool innermostContiguous(const Layout &layout) {
  return !layout.strides.empty() && layout.strides.back() == 1;
}

/// A buffer the step computes (not a parameter, a constant or an updated
/// value, which other rules place).
bool plainStorage(Value value, func::FuncOp step) {
  if (isa<BlockArgument>(value))
    return true;
  if (isa<ParameterOp, ConstantOp>(value.getDefiningOp()))
    return false;
  for (OpOperand &use : value.getUses())
    if (isa<func::ReturnOp>(use.getOwner()) &&
        writesBack(step, use.getOperandNumber()))
      return false;
  return true;
}

Value yielded(FusionOp fusion, unsigned result) {
  return fusion.getRegion().front().getTerminator()->getOperand(result);
}

/// Whether `value` is a splat constant 0.
bool isZeros(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  auto splat = constant ? dyn_cast<SplatElementsAttr>(constant.getValue())
                        : SplatElementsAttr();
  return splat && isa<FloatType>(splat.getElementType()) &&
         splat.getSplatValue<APFloat>().isZero();
}

/// The parts of an assembly that `result` of `fusion` is: block arguments
/// of its type rearranged (reshapes, transposes), maybe widened exactly,
/// inserted into zeros at disjoint places that cover the whole, added up,
/// and rounded back to the parts' type if widened (the packed gradient of a
/// q/k/v projection from the heads' gradients); or one such argument
/// rearranged alone (a head gradient put back in token order). Each value on
/// the way is read once, so the region's other results read the parts only
/// through the assembly; its layout in the result's buffer with each part. None
/// if `result` is not one.
std::optional<SmallVector<std::pair<BlockArgument, Layout>>>
assembledParts(FusionOp fusion, unsigned result) {
  Value assembled = yielded(fusion, result);
  Type partType = getElementTypeOrSelf(assembled.getType());
  auto round = assembled.getDefiningOp<CastOp>();
  if (round)
    assembled = round.getInput();
  // From the assembly back to the sum, through reshapes.
  Value whole = assembled;
  std::optional<Layout> layout = contiguous(shapeOf(whole));
  while (auto reshape = whole.getDefiningOp<ReshapeOp>()) {
    if (!whole.hasOneUse() && whole != assembled)
      return std::nullopt;
    whole = reshape.getInput();
    if (!(layout = reshaped(*layout, shapeOf(whole))))
      return std::nullopt;
  }
  // The terms of the sum, each a part placed at `start` (inserted into
  // zeros, or the whole itself).
  struct Placed {
    Value source;
    SmallVector<int64_t> start;
  };
  SmallVector<Placed> placed;
  SmallVector<Value> sums = {whole};
  while (!sums.empty()) {
    Value sum = sums.pop_back_val();
    if (sum != assembled && !sum.hasOneUse())
      return std::nullopt;
    if (auto add = sum.getDefiningOp<AddOp>();
        add && add.getLhs().getType() == add.getType() &&
        add.getRhs().getType() == add.getType()) {
      sums.append({add.getLhs(), add.getRhs()});
    } else if (auto insert = sum.getDefiningOp<InsertSliceOp>()) {
      if (!isZeros(insert.getDest()) ||
          !llvm::all_of(insert.getStride(), [](int64_t s) { return s == 1; }))
        return std::nullopt;
      placed.push_back(
          {insert.getSource(), SmallVector<int64_t>(insert.getStart())});
    } else {
      placed.push_back({sum, SmallVector<int64_t>(shapeOf(sum).size(), 0)});
    }
  }
  // Disjoint boxes whose sizes add up to the whole cover it.
  int64_t covered = 0;
  for (auto [n, part] : llvm::enumerate(placed)) {
    ArrayRef<int64_t> size = shapeOf(part.source);
    covered += cast<RankedTensorType>(part.source.getType()).getNumElements();
    for (const Placed &other : llvm::drop_begin(placed, n + 1)) {
      ArrayRef<int64_t> otherSize = shapeOf(other.source);
      bool apart = false;
      for (size_t d = 0; d < size.size(); ++d)
        apart |= part.start[d] + size[d] <= other.start[d] ||
                 other.start[d] + otherSize[d] <= part.start[d];
      if (!apart)
        return std::nullopt;
    }
  }
  if (covered != cast<RankedTensorType>(whole.getType()).getNumElements())
    return std::nullopt;
  SmallVector<std::pair<BlockArgument, Layout>> parts;
  for (const Placed &term : placed) {
    // Widened exactly where the result rounds back.
    Value source = term.source;
    if (round) {
      auto widen = source.getDefiningOp<CastOp>();
      if (!widen || !widen->hasOneUse() || !widen.widensExactly())
        return std::nullopt;
      source = widen.getInput();
    }
    if (getElementTypeOrSelf(source.getType()) != partType)
      return std::nullopt;
    Layout at = *layout;
    at.shape = SmallVector<int64_t>(shapeOf(source));
    for (auto [start, stride] : llvm::zip(term.start, layout->strides))
      at.offset += start * stride;
    auto part = inverseViewChain(source, at);
    if (!part)
      return std::nullopt;
    for (Value v = source;; v = v.getDefiningOp()->getOperand(0)) {
      if (v != assembled && !v.hasOneUse())
        return std::nullopt;
      if (v == part->first)
        break;
    }
    parts.push_back(*part);
  }
  return parts;
}

} // namespace

/// Whether `value` is stored whatever reads it: a product, a fusion's
/// result, a reduction's (its own kernel's or yielded by one), a step
/// argument. Elementwise values may instead be computed by their readers'
/// kernels, slices and all.
static bool storedAnyway(Value value) {
  Operation *op = value.getDefiningOp();
  return !op || isa<MatmulOp, FusionOp>(op) || isFusedReduction(op);
}

bool slicesContiguousBlock(SliceOp slice, func::FuncOp step) {
  Layout layout = sliced(contiguous(shapeOf(slice.getInput())), slice);
  int64_t offsetBytes =
      layout.offset * elementBytes(getElementTypeOrSelf(slice.getType()));
  return storedAnyway(slice.getInput()) &&
         layout.strides == contiguousStrides(shapeOf(slice)) &&
         offsetBytes % kBufferAlignment == 0 &&
         plainStorage(slice.getInput(), step) &&
         plainStorage(slice.getResult(), step);
}

bool roundsExactAssembly(Operation *fusion, unsigned result) {
  auto assembly = cast<FusionOp>(fusion);
  return yielded(assembly, result).getDefiningOp<CastOp>() &&
         assembledParts(assembly, result);
}

DenseMap<Value, StridedView> findStridedViews(func::FuncOp step) {
  DenseMap<Value, StridedView> views;
  Block &body = step.getBody().front();
  // Fusion results that attention reads through strides.
  for (auto fusion : body.getOps<FusionOp>())
    for (OpResult result : fusion->getResults()) {
      if (result.use_empty() || !llvm::all_of(result.getUses(), readsStrided))
        continue;
      auto chain = viewChain(yielded(fusion, result.getResultNumber()));
      if (!chain || !innermostContiguous(chain->second))
        continue;
      Value storage = fusion.getOperand(chain->first.getArgNumber());
      if (plainStorage(storage, step))
        views[result] = {storage, chain->second.offset, chain->second.strides};
    }
  // Attention outputs that the first fusion (or bare transpose: BERT's
  // head merge, whose token-major result two products read) rearranging
  // them holds. Others rearranging them the same way (recomputed for the
  // backward pass) read the holder's result as it is.
  for (auto attention : body.getOps<AttentionOp>()) {
    Value output = attention.getOutput();
    SmallVector<Operation *> holders;
    bool others = false;
    for (OpOperand &use : output.getUses()) {
      Operation *user = use.getOwner();
      if (isa<TransposeOp>(user) ||
          (isa<FusionOp>(user) && user->getNumOperands() == 1 &&
           user->getNumResults() == 1))
        holders.push_back(user);
      else
        others |= !isa<AttentionGradOp>(user) || !readsStrided(use);
    }
    if (others || holders.empty())
      continue;
    auto layoutIn = [&](Operation *holder) -> std::optional<Layout> {
      Value held = holder->getResult(0);
      if (views.count(held) || !plainStorage(held, step))
        return std::nullopt;
      if (auto transpose = dyn_cast<TransposeOp>(holder))
        return untransposed(contiguous(shapeOf(held)), transpose);
      auto chain = inverseViewChain(yielded(cast<FusionOp>(holder), 0));
      return chain ? std::optional<Layout>(chain->second) : std::nullopt;
    };
    std::optional<Layout> layout = layoutIn(holders.front());
    if (!layout || !innermostContiguous(*layout) ||
        !llvm::all_of(llvm::drop_begin(holders), [&](Operation *other) {
          std::optional<Layout> same = layoutIn(other);
          return same && same->offset == layout->offset &&
                 same->strides == layout->strides;
        }))
      continue;
    Value storage = holders.front()->getResult(0);
    views[output] = {storage, layout->offset, layout->strides,
                     /*writes=*/true};
    for (Operation *other : llvm::drop_begin(holders)) {
      Value copy = other->getResult(0);
      views[copy] = {storage, 0, contiguousStrides(shapeOf(copy))};
    }
  }
  // Gradients of attention's heads that a fusion assembles into one tensor
  // and rounds back to their type (the packed gradient of the q/k/v
  // projection): attention writes each where the assembly puts it, and the
  // fusion computes nothing of that result; what else it computes from the
  // assembly reads the result, widened.
  for (auto fusion : body.getOps<FusionOp>())
    for (OpResult result : fusion->getResults()) {
      auto parts = assembledParts(fusion, result.getResultNumber());
      if (!parts || !plainStorage(result, step))
        continue;
      auto written = [&](const std::pair<BlockArgument, Layout> &part) {
        Value gradient = fusion->getOperand(part.first.getArgNumber());
        return isHeadGradient(gradient) && gradient.hasOneUse() &&
               !views.count(gradient) && innermostContiguous(part.second);
      };
      if (!llvm::all_of(*parts, written))
        continue;
      for (auto &[argument, layout] : *parts)
        views[fusion->getOperand(argument.getArgNumber())] = {
            result, layout.offset, layout.strides, /*writes=*/true};
    }
  // Slices that take a contiguous block of their input (a part of a
  // weight or bias gradient that merged projections computed together)
  // are their input at an offset, read as any contiguous tensor.
  for (auto slice : body.getOps<SliceOp>()) {
    Value input = slice.getInput();
    if (!slicesContiguousBlock(slice, step) || views.count(input))
      continue;
    Layout layout = sliced(contiguous(shapeOf(input)), slice);
    views[slice.getResult()] = {input, layout.offset, layout.strides};
  }
  // Attention's gradients that a transpose alone puts back in token order
  // (a product without a bias reads it: Llama's value projection) are
  // written by attention in that order.
  for (auto transpose : body.getOps<TransposeOp>()) {
    Value gradient = transpose.getInput();
    Layout layout =
        untransposed(contiguous(shapeOf(transpose.getResult())), transpose);
    if (isHeadGradient(gradient) && gradient.hasOneUse() &&
        !views.count(gradient) && innermostContiguous(layout) &&
        plainStorage(transpose.getResult(), step))
      views[gradient] = {transpose.getResult(), layout.offset, layout.strides,
                         /*writes=*/true};
  }
  return views;
}

} // namespace kiln
