//===- KilnFolders.cpp - kiln folders and canonicalizations ---------------===//
//
// Folds that pay for Transformer graphs: identities of data movement that
// exporters leave behind (reshape chains, identity transposes, full slices)
// and multiplications by one. Folds that would change a result's bits, such
// as x + 0.0 (wrong for -0.0), are deliberately absent.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

/// True when every value of float type `narrow` is exactly a value of
/// `wide`: bf16 and f16 in f32, all three in f64.
static bool holdsExactly(Type wide, Type narrow) {
  auto w = dyn_cast<FloatType>(wide), n = dyn_cast<FloatType>(narrow);
  return w && n && (w.isF32() || w.isF64()) && w.getWidth() > n.getWidth();
}

bool CastOp::widensExactly() {
  return holdsExactly(
      getType().getElementType(),
      cast<RankedTensorType>(getInput().getType()).getElementType());
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // Widening and narrowing back restores the value exactly.
  if (auto producer = getInput().getDefiningOp<CastOp>())
    if (producer.getInput().getType() == getType() && producer.widensExactly())
      return producer.getInput();
  return {};
}

/// True when `value` is a splat constant equal to `number`.
static bool isSplatOf(Attribute value, double number) {
  auto splat = dyn_cast_if_present<SplatElementsAttr>(value);
  if (!splat)
    return false;
  Type elementType = splat.getElementType();
  if (isa<FloatType>(elementType))
    return splat.getSplatValue<APFloat>().convertToDouble() == number;
  if (isa<IntegerType>(elementType) && !elementType.isInteger(1))
    return splat.getSplatValue<APInt>().getSExtValue() ==
           static_cast<int64_t>(number);
  return false;
}

/// `x op c` folds to `x` when `c` is the identity of the op and broadcasting
/// does not change the shape.
template <typename OpTy>
static OpFoldResult foldRightIdentity(OpTy op, Attribute rhs, double identity) {
  if (op.getLhs().getType() == op.getType() && isSplatOf(rhs, identity))
    return op.getLhs();
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  // Only integers: for floats x + 0.0 turns -0.0 into +0.0.
  if (isa<IntegerType>(getType().getElementType()))
    return foldRightIdentity(*this, adaptor.getRhs(), 0.0);
  return {};
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldRightIdentity(*this, adaptor.getRhs(), 1.0);
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldRightIdentity(*this, adaptor.getRhs(), 1.0);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, dim] : llvm::enumerate(getPermutation()))
    if (static_cast<int64_t>(i) != dim)
      return {};
  return getInput();
}

namespace {
/// transpose(transpose(x, p), q) -> transpose(x, p o q).
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto producer = op.getInput().getDefiningOp<TransposeOp>();
    if (!producer)
      return rewriter.notifyMatchFailure(op, "input is not a transpose");
    SmallVector<int64_t> composed;
    for (int64_t dim : op.getPermutation())
      composed.push_back(producer.getPermutation()[dim]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, producer.getInput(), composed);
    return success();
  }
};
/// Whether `op` swaps the last two dimensions and no other: the transpose of
/// the matrices of a batch.
bool swapsMatrices(TransposeOp op) {
  ArrayRef<int64_t> permutation = op.getPermutation();
  int64_t rank = permutation.size();
  for (int64_t i = 0; i < rank; ++i)
    if (permutation[i] != (i < rank - 2 ? i : 2 * rank - 3 - i))
      return false;
  return rank >= 2;
}
/// transpose(matmul(a, b)) over the last two dimensions -> matmul(b, a) with
/// the operands' transposes swapped: (op(A) op(B))^T = op(B)^T op(A)^T, the
/// same sums, stored in the order the transpose reads them.
struct TransposedProduct : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto product = op.getInput().getDefiningOp<MatmulOp>();
    if (!product || !product->hasOneUse())
      return rewriter.notifyMatchFailure(op, "input is not a product alone");
    if (!swapsMatrices(op))
      return rewriter.notifyMatchFailure(op, "not the last two dimensions");
    rewriter.replaceOpWithNewOp<MatmulOp>(
        op, op.getType(), product.getRhs(), product.getLhs(),
        !product.getTransposeRhs(), !product.getTransposeLhs(),
        product.getAccumulateAttr());
    rewriter.eraseOp(product);
    return success();
  }
};
/// matmul(transpose(a), b) with a transpose of the matrices -> matmul(a, b)
/// with `transpose_lhs` toggled, and likewise for b: the product reads the
/// operand as it is stored (a Linear layer's weight, exported as W^T), the
/// same sums, and no transpose is computed (nor, once a precision pass
/// narrows the weight, a transposed 16-bit copy of it).
struct TransposedOperand : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto unswapped = [](Value operand) -> Value {
      auto transpose = operand.getDefiningOp<TransposeOp>();
      return transpose && swapsMatrices(transpose) ? transpose.getInput()
                                                   : Value();
    };
    Value lhs = unswapped(op.getLhs()), rhs = unswapped(op.getRhs());
    if (!lhs && !rhs)
      return rewriter.notifyMatchFailure(op, "no operand is a transpose");
    rewriter.replaceOpWithNewOp<MatmulOp>(
        op, op.getType(), lhs ? lhs : op.getLhs(), rhs ? rhs : op.getRhs(),
        op.getTransposeLhs() != bool(lhs), op.getTransposeRhs() != bool(rhs),
        op.getAccumulateAttr());
    return success();
  }
};
/// gather(x, c) along an axis, with constant indices c that step evenly
/// through it (x[:, 0], a traced loop's x[:, t], a constant [2, 1, 0]) ->
/// reshape(slice(x)): the same elements, an index map that fuses into the
/// kernel reading it, whose gradient is an insert_slice where a gather's is
/// a scatter. Indices out of range stay a gather, an error at run time.
struct GatherAtConstantIndices : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    DenseIntElementsAttr indices;
    if (!matchPattern(op.getIndices(), m_Constant(&indices)))
      return rewriter.notifyMatchFailure(op, "indices are not constant");
    auto dataType = cast<RankedTensorType>(op.getData().getType());
    int64_t axis = op.getAxis(), extent = dataType.getDimSize(axis);
    SmallVector<int64_t> positions;
    for (const APInt &index : indices.getValues<APInt>()) {
      int64_t position = index.getSExtValue();
      position += position < 0 ? extent : 0;
      if (position < 0 || position >= extent)
        return rewriter.notifyMatchFailure(op, "an index is out of range");
      positions.push_back(position);
    }
    if (positions.empty())
      return rewriter.notifyMatchFailure(op, "no indices");
    int64_t step = positions.size() > 1 ? positions[1] - positions[0] : 1;
    for (size_t i = 1; i < positions.size(); ++i)
      if (step == 0 || positions[i] - positions[i - 1] != step)
        return rewriter.notifyMatchFailure(op, "indices do not step evenly");
    SmallVector<int64_t> start(dataType.getRank(), 0);
    SmallVector<int64_t> stride(dataType.getRank(), 1);
    SmallVector<int64_t> shape(dataType.getShape());
    start[axis] = positions.front();
    stride[axis] = step;
    shape[axis] = positions.size();
    Value slice = rewriter.create<SliceOp>(op.getLoc(), dataType.clone(shape),
                                           op.getData(), start, stride);
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), slice);
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<ComposeTransposes, TransposedProduct>(context);
}

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<TransposedOperand>(context);
}

void GatherOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<GatherAtConstantIndices>(context);
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto splat = dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return splat.resizeSplat(getType());
  return {};
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() != getType())
    return {};
  for (auto [start, stride] : llvm::zip(getStart(), getStride()))
    if (start != 0 || stride != 1)
      return {};
  return getInput();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}
