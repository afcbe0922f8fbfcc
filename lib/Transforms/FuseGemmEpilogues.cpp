//===- FuseGemmEpilogues.cpp - what a GEMM computes around a product ------===//
//
// The ops after a matrix product that cuBLASLt's epilogues compute as the
// product is stored (a bias, the tanh GELU and its input, the GELU's
// gradient, a matrix added), and the bias gradient summed beside a weight
// gradient as the GEMM reads its operand, each outlined with the product
// into one kiln.fusion that the CUDA target maps to one GEMM.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Fuse.h"

#include "Outline.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/GemmEpilogues.h"
#include "kiln/Transforms/StridedViews.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace kiln {

/// Whether `type` is a 16-bit float, the type products are stored in.
static bool isHalf(Type type) { return type.isBF16() || type.isF16(); }

/// The cast widening `value` from 16 bits to f32 for its one reader, if
/// that is how it is read: the 16-bit bias or GELU input, which the GEMM
/// then reads as stored.
static Operation *wideningCast(Value value) {
  auto cast = value.getDefiningOp<CastOp>();
  return cast && cast->hasOneUse() && cast.getType().getElementType().isF32() &&
                 isHalf(getElementTypeOrSelf(cast.getInput()))
             ? cast.getOperation()
             : nullptr;
}

/// The cast rounding `value` to 16 bits as it is stored, if that is its one
/// reader.
static Operation *roundingCast(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  auto cast = dyn_cast<CastOp>(*value.user_begin());
  return cast && isHalf(cast.getType().getElementType()) ? cast.getOperation()
                                                         : nullptr;
}

/// The ops of a DGELU epilogue of `product` (backward: the product, maybe
/// behind reshapes, is the gradient a tanh GELU's derivative scales; the
/// pre-activation is the aux input), with the rounding of the result, or
/// none.
static SmallVector<Operation *> dgeluEpilogue(MatmulOp product) {
  SmallVector<Operation *> epilogue = {product};
  GeluGradOp dgelu = geluGradScaling(product, &epilogue);
  if (!dgelu || dgelu.getApproximation() != GeluApproximation::Tanh)
    return {};
  if (Operation *widen = wideningCast(dgelu.getInput()))
    epilogue.push_back(widen);
  epilogue.push_back(dgelu);
  if (Operation *round = roundingCast(dgelu.getResult()))
    epilogue.push_back(round);
  return epilogue;
}

/// The ops of a bias epilogue of `product`: the add of a row bias, then
/// the rounding of the sum to 16 bits, or, maybe behind reshapes (views), a
/// tanh GELU of the sum (the sum, or its rounding, stays a result where the
/// backward pass reads it: GELU_AUX) and a cast of the GELU (the output
/// type); or none.
static SmallVector<Operation *> biasEpilogue(MatmulOp product) {
  OpOperand *bias = nullptr;
  AddOp add = rowBiasAdd(product, bias);
  if (!add)
    return {};
  SmallVector<Operation *> epilogue = {product};
  if (Operation *widen = wideningCast(bias->get()))
    epilogue.push_back(widen);
  epilogue.push_back(add);
  if (Operation *round = roundingCast(add.getResult())) {
    epilogue.push_back(round);
    return epilogue;
  }
  // The sum stored in 16 bits for GELU's gradient, beside the GELU.
  Operation *round = nullptr;
  for (Operation *user : add->getUsers())
    if (auto cast = dyn_cast<CastOp>(user);
        cast && isHalf(cast.getType().getElementType()))
      round = cast;
  if (round)
    epilogue.push_back(round);
  auto isTanhGelu = [](Operation *user) {
    auto gelu = dyn_cast<GeluOp>(user);
    return gelu && gelu.getApproximation() == GeluApproximation::Tanh;
  };
  SmallVector<Operation *> views;
  Value sum = add.getResult();
  auto gelu = llvm::find_if(sum.getUsers(), isTanhGelu);
  while (gelu == sum.getUsers().end()) {
    auto view = llvm::find_if(
        sum.getUsers(), [](Operation *user) { return isa<ReshapeOp>(user); });
    if (view == sum.getUsers().end())
      return epilogue;
    views.push_back(*view);
    sum = (*view)->getResult(0);
    gelu = llvm::find_if(sum.getUsers(), isTanhGelu);
  }
  llvm::append_range(epilogue, views);
  Operation *last = *gelu;
  epilogue.push_back(last);
  while (last->hasOneUse() && isa<ReshapeOp>(*last->user_begin()))
    epilogue.push_back(last = *last->user_begin());
  if (last->hasOneUse() && isa<CastOp>(*last->user_begin()))
    epilogue.push_back(*last->user_begin());
  // Views of the stored sum that only the backward pass reads follow the
  // fusion (the model reshaped the sum once for GELU and its gradient).
  last = epilogue.back();
  if (round)
    for (Operation *view : llvm::make_early_inc_range(round->getUsers()))
      if (isa<ReshapeOp>(view) && view->isBeforeInBlock(last) &&
          llvm::all_of(view->getUsers(), [&](Operation *user) {
            return last->isBeforeInBlock(user);
          }))
        view->moveAfter(last);
  // Keep only as much as the fusion, placed at its last op, can hold.
  DenseSet<Operation *> members(epilogue.begin(), epilogue.end());
  while (epilogue.back() != add &&
         !usesFollow(epilogue, members, epilogue.back())) {
    members.erase(epilogue.back());
    epilogue.pop_back();
  }
  return epilogue;
}

/// The ops of a matrix added to `product` as cuBLASLt's C (an f32 product
/// and a matrix of its type: the tied embedding's two gradients, a gradient
/// accumulated over micro-batches), when the sum is stored anyway (a reader
/// that is not elementwise, such as an optimizer's update, reads it), or
/// none: elementwise readers would rather compute the add in their kernel.
static SmallVector<Operation *> matrixAddEpilogue(MatmulOp product) {
  auto add = dyn_cast<AddOp>(*product->user_begin());
  if (!add || !product.getType().getElementType().isF32() ||
      add.getLhs().getType() != add.getRhs().getType() ||
      add.getLhs() == add.getRhs() ||
      llvm::all_of(add->getUsers(), isElementwise))
    return {};
  return {product, add};
}

/// The ops of a bias gradient summed beside the weight gradient `product`
/// (cuBLASLt's BGRADA/BGRADB): the product, then the sum over its k
/// dimension of one operand (and the exact widening the sum reads), moved
/// right after it; or none if something reads the sum before the product.
static SmallVector<Operation *> biasGradientEpilogue(MatmulOp product) {
  CastOp widening;
  bool ofLhs;
  ReduceSumOp sum = operandSum(product, widening, ofLhs);
  if (!sum || llvm::any_of(sum->getUsers(), [&](Operation *user) {
        return !product->isBeforeInBlock(user);
      }))
    return {};
  // The product first, where the CUDA target looks for a GEMM.
  SmallVector<Operation *> epilogue = {product};
  if (widening)
    epilogue.push_back(widening);
  epilogue.push_back(sum);
  for (auto [previous, op] :
       llvm::zip(epilogue, ArrayRef(epilogue).drop_front()))
    op->moveAfter(previous);
  return epilogue;
}

int fuseGemmEpilogues(func::FuncOp function) {
  SmallVector<SmallVector<Operation *>> epilogues;
  // An op is the epilogue of one product: of two products added together,
  // the first takes the sum.
  DenseSet<Operation *> claimed;
  for (Operation &op : function.getBody().front()) {
    auto product = dyn_cast<MatmulOp>(op);
    if (!product || !product->hasOneUse())
      continue;
    SmallVector<Operation *> epilogue = dgeluEpilogue(product);
    if (epilogue.empty())
      epilogue = biasEpilogue(product);
    if (epilogue.empty())
      epilogue = matrixAddEpilogue(product);
    if (epilogue.empty() || llvm::any_of(epilogue, [&](Operation *member) {
          return claimed.contains(member);
        }))
      continue;
    claimed.insert(epilogue.begin(), epilogue.end());
    epilogues.push_back(std::move(epilogue));
  }
  for (ArrayRef<Operation *> epilogue : epilogues)
    outline(epilogue);
  return epilogues.size();
}

/// Whether `fusion` only sums the one tensor it reads, maybe widened
/// exactly: a kernel of its own that reads the tensor again.
static bool onlySums(FusionOp fusion) {
  Block &body = fusion.getBody().front();
  if (fusion->getNumOperands() != 1 || fusion->getNumResults() != 1)
    return false;
  auto sum = body.getTerminator()->getOperand(0).getDefiningOp<ReduceSumOp>();
  auto widening = sum ? sum.getInput().getDefiningOp<CastOp>() : CastOp();
  if (widening && !widening.widensExactly())
    return false;
  return sum && body.getOperations().size() == (widening ? 3u : 2u);
}

/// Replaces `fusion` by the ops of its body, in its place; returns them.
static SmallVector<Operation *> unfuse(FusionOp fusion) {
  Block &body = fusion.getBody().front();
  IRMapping mapping;
  mapping.map(body.getArguments(), fusion->getOperands());
  OpBuilder builder(fusion);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(builder.clone(op, mapping));
  for (auto [result, value] :
       llvm::zip(fusion->getResults(), body.getTerminator()->getOperands()))
    result.replaceAllUsesWith(mapping.lookupOrDefault(value));
  fusion->erase();
  return ops;
}

/// Replaces `fusion` by one without result `index`, and drops what only
/// that result needed from its body.
static void dropResult(FusionOp fusion, unsigned index) {
  Block &body = fusion.getBody().front();
  body.getTerminator()->eraseOperand(index);
  SmallVector<Type> types;
  SmallVector<Value> kept;
  for (auto [i, result] : llvm::enumerate(fusion->getResults()))
    if (i != index) {
      types.push_back(result.getType());
      kept.push_back(result);
    }
  OpBuilder builder(fusion);
  auto fresh =
      builder.create<FusionOp>(fusion.getLoc(), types, fusion->getOperands());
  fresh.getBody().takeBody(fusion.getBody());
  for (auto [old, now] : llvm::zip(kept, fresh->getResults()))
    old.replaceAllUsesWith(now);
  fusion->erase();
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(fresh.getBody().front())))
    if (op.use_empty() && !op.hasTrait<OpTrait::IsTerminator>())
      op.erase();
}

/// Whether `value` only rearranges a block argument (reshapes, transposes).
static bool rearrangesArgument(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<ReshapeOp, TransposeOp>(op))
      return false;
    value = op->getOperand(0);
  }
  return isa<BlockArgument>(value);
}

/// Whether `fusion` computes element by element but for sums over rows of
/// what it computes: without them its kernel takes 16-byte pieces a thread,
/// with them a block per tile of 32 columns, whose threads wait on memory
/// row by row.
static bool elementwiseButColumnSums(FusionOp fusion) {
  return llvm::all_of(fusion.getBody().front(), [](Operation &op) {
    return isElementwise(&op) || isa<ReshapeOp, ConstantOp, YieldOp>(op) ||
           (isa<ReduceSumOp>(op) && sumsColumns(&op));
  });
}

/// Moves out of a fusion a bias gradient it computes beside what it yields:
/// `product` reads, as the [k, n] `operand` it sums over k, a fusion's result
/// (maybe reshaped) that the fusion only rearranges from an operand (BERT's
/// query, key and value gradients put in token order) or assembles exactly
/// from several (GPT-2's packed q/k/v gradient), both of which attention
/// writes in place, so that the fusion's kernel would read it from memory
/// only to sum it; or that it computes element by element, and only sums
/// besides (BERT's erf GELU gradient), so that its kernel, without the sum,
/// is elementwise; and the fusion also yields the sum of that value (in any
/// shape whose last dimension is n, or of the assembly before it is rounded
/// back) over all but its last dimension, as stored or exactly widened. The
/// same sum of the operand, before `product`, replaces it, for cuBLASLt to
/// compute. (A norm's gradient kernel sums what it computes at no extra
/// read: its sums stay.)
static void peelOperandSum(MatmulOp product, Value operand) {
  Value source = operand;
  if (auto view = operand.getDefiningOp<ReshapeOp>())
    source = view.getInput();
  auto fusion = source.getDefiningOp<FusionOp>();
  if (!fusion || cast<RankedTensorType>(operand.getType()).getRank() != 2)
    return;
  auto yield = cast<YieldOp>(fusion.getBody().front().getTerminator());
  unsigned result = cast<OpResult>(source).getResultNumber();
  Value stored = yield.getOperand(result);
  // An assembly the result rounds back holds the result's values exactly.
  if (roundsExactAssembly(fusion, result))
    stored = stored.getDefiningOp<CastOp>().getInput();
  else if (!rearrangesArgument(stored) && !elementwiseButColumnSums(fusion))
    return;
  while (auto view = stored.getDefiningOp<ReshapeOp>())
    stored = view.getInput();
  // The sums of `stored` (the same elements in the same order), maybe
  // reshaped, maybe widened exactly.
  SmallVector<Value> views = {stored};
  for (size_t i = 0; i < views.size(); ++i)
    for (Operation *user : views[i].getUsers())
      if (isa<ReshapeOp>(user) ||
          (isa<CastOp>(user) && cast<CastOp>(user).widensExactly()))
        views.push_back(user->getResult(0));
  Type type = product.getType().getElementType();
  int64_t columns = cast<RankedTensorType>(operand.getType()).getDimSize(1);
  for (Value summed : views)
    for (Operation *user : summed.getUsers()) {
      auto sum = dyn_cast<ReduceSumOp>(user);
      auto input = cast<RankedTensorType>(summed.getType());
      if (!sum || !sum->hasOneUse() || *sum->user_begin() != yield ||
          sum.getKeepDims() || sum.getType().getElementType() != type ||
          input.getShape().back() != columns ||
          !llvm::equal(sum.getAxes(),
                       llvm::seq<int64_t>(0, input.getRank() - 1)))
        continue;
      unsigned index = sum->use_begin()->getOperandNumber();
      Value result = fusion->getResult(index);
      if (llvm::any_of(result.getUsers(), [&](Operation *reader) {
            return !product->isBeforeInBlock(reader);
          }))
        continue;
      OpBuilder builder(product);
      Value read = operand;
      auto operandType = cast<RankedTensorType>(operand.getType());
      if (operandType.getElementType() != type)
        read = builder.create<CastOp>(sum.getLoc(), operandType.clone(type),
                                      operand);
      Value peeled = builder.create<ReduceSumOp>(
          sum.getLoc(), read, builder.getDenseI64ArrayAttr({0}), false);
      result.replaceAllUsesWith(peeled);
      dropResult(fusion, index);
      return;
    }
}

int fuseBiasGradients(func::FuncOp function) {
  SmallVector<MatmulOp> products;
  for (Operation &op : function.getBody().front())
    if (auto product = dyn_cast<MatmulOp>(op))
      products.push_back(product);
  int fused = 0;
  for (MatmulOp product : products) {
    // A sum that no fusion took, one alone in its fusion, or one a fusion
    // computes of the operand it yields.
    if (!product.getTransposeRhs())
      peelOperandSum(product, product.getRhs());
    if (product.getTransposeLhs())
      peelOperandSum(product, product.getLhs());
    SmallVector<Operation *> epilogue = biasGradientEpilogue(product);
    SmallVector<FusionOp> sums;
    for (Value operand : product->getOperands())
      for (Operation *user : operand.getUsers())
        if (auto fusion = dyn_cast<FusionOp>(user); fusion && onlySums(fusion))
          sums.push_back(fusion);
    for (FusionOp sum : sums) {
      if (!epilogue.empty())
        break;
      SmallVector<Operation *> ops = unfuse(sum);
      epilogue = biasGradientEpilogue(product);
      if (epilogue.empty())
        outline(ops);
    }
    if (!epilogue.empty()) {
      outline(epilogue);
      ++fused;
    }
  }
  return fused;
}

} // namespace kiln
