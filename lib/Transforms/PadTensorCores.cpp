//===- PadTensorCores.cpp - GEMM dimensions padded for tensor cores -------===//
//
// Tensor cores read 16-bit GEMM operands in tiles of 8 (and full speed
// needs 64 or 128), so a GEMM whose M or N is odd (GPT-2's 50257-word
// vocabulary) runs on slow paths. A weight that gives a GEMM such a
// dimension is stored padded with zeros (kiln.parameter's logical_shape),
// and the padding flows through the ops that keep it exact:
//
//   transpose, reshape and slice that leave the padded dimension whole;
//   matmul, where it stays M or N (the padded rows or columns of the
//   product are 0);
//   gather along it (the indices never reach the padding);
//   cross_entropy / nll_loss over it as the class dimension, which then
//   ignore the padding classes (num_classes).
//
// Any other use reads a slice of the logical size. So the padded function
// computes exactly what it did, and autodiff, run after, gives the padding
// zero gradients, which keep it zero through every optimizer.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/PadTensorCores.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPADTENSORCORES
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

int64_t paddedSize(int64_t size, double maxOverhead) {
  if (size % 8 == 0)
    return size;
  for (int64_t alignment : {128, 64, 32, 16, 8}) {
    int64_t padded = (size + alignment - 1) / alignment * alignment;
    if (padded - size <= maxOverhead * size)
      return padded;
  }
  return size;
}

namespace {
/// A value whose dimension `dim` is padded from `size` elements.
struct PaddedValue {
  Value value;
  int64_t dim, size;
};
} // namespace

static RankedTensorType withDim(Type type, int64_t dim, int64_t size) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape[dim] = size;
  return ranked.clone(shape);
}

/// The dimension of a product's operand `use` that is its M (lhs
/// [.., M, K] or [.., K, M]) or its N (rhs [.., K, N] or [.., N, K]).
static int64_t outerDimOf(MatmulOp matmul, OpOperand &use) {
  int64_t rank = cast<RankedTensorType>(use.get().getType()).getRank();
  if (use.getOperandNumber() == 0)
    return matmul.getTransposeLhs() ? rank - 1 : rank - 2;
  return matmul.getTransposeRhs() ? rank - 2 : rank - 1;
}

/// Where a transpose puts dimension `dim` of its input.
static int64_t transposedDim(TransposeOp transpose, int64_t dim) {
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  return llvm::find(permutation, dim) - permutation.begin();
}

/// Whether dimension `dim` of a weight becomes a GEMM's M or N (not its
/// contraction) in `use`, looking through transposes.
static bool becomesOuterGemmDim(OpOperand &use, int64_t dim) {
  Operation *user = use.getOwner();
  if (auto transpose = dyn_cast<TransposeOp>(user))
    return llvm::any_of(transpose.getResult().getUses(), [&](OpOperand &next) {
      return becomesOuterGemmDim(next, transposedDim(transpose, dim));
    });
  auto matmul = dyn_cast<MatmulOp>(user);
  return matmul && dim == outerDimOf(matmul, use);
}

/// Moves `use` onto the padding: updates its owner's result type in place
/// and returns the padded result to follow, or slices the value back to its
/// logical size for this use.
static std::optional<PaddedValue> propagate(OpOperand &use,
                                            const PaddedValue &padded) {
  Operation *user = use.getOwner();
  int64_t dim = padded.dim;
  auto keepType = [&](Value result, int64_t resultDim) -> PaddedValue {
    int64_t stored =
        cast<RankedTensorType>(padded.value.getType()).getDimSize(dim);
    result.setType(withDim(result.getType(), resultDim, stored));
    return {result, resultDim, padded.size};
  };
  if (auto transpose = dyn_cast<TransposeOp>(user))
    return keepType(transpose.getResult(), transposedDim(transpose, dim));
  if (auto matmul = dyn_cast<MatmulOp>(user);
      matmul && dim == outerDimOf(matmul, use)) {
    // M is the result's second-to-last dimension, N its last.
    int64_t resultRank = matmul.getType().getRank();
    return keepType(matmul.getResult(), use.getOperandNumber() == 0
                                            ? resultRank - 2
                                            : resultRank - 1);
  }
  if (auto reshape = dyn_cast<ReshapeOp>(user)) {
    auto from = cast<RankedTensorType>(padded.value.getType());
    RankedTensorType to = reshape.getType();
    if (dim == from.getRank() - 1 && to.getRank() > 0 &&
        to.getShape().back() == padded.size)
      return keepType(reshape.getResult(), to.getRank() - 1);
  }
  if (auto slice = dyn_cast<SliceOp>(user)) {
    if (slice.getStart()[dim] == 0 && slice.getStride()[dim] == 1 &&
        slice.getType().getDimSize(dim) == padded.size)
      return keepType(slice.getResult(), dim);
  }
  if (auto gather = dyn_cast<GatherOp>(user);
      gather && use.getOperandNumber() == 0 &&
      static_cast<int64_t>(gather.getAxis()) == dim)
    return std::nullopt; // reads only logical rows
  if (isa<CrossEntropyOp, NllLossOp>(user) && use.getOperandNumber() == 0 &&
      dim == 1 && user->getNumOperands() == 2 &&
      !user->hasAttr("num_classes")) {
    user->setAttr("num_classes",
                  OpBuilder(user).getI64IntegerAttr(padded.size));
    return std::nullopt;
  }
  // Anything else reads the logical slice.
  OpBuilder builder(user);
  auto type = cast<RankedTensorType>(padded.value.getType());
  SmallVector<int64_t> start(type.getRank(), 0), stride(type.getRank(), 1);
  Value logical =
      builder.create<SliceOp>(user->getLoc(), withDim(type, dim, padded.size),
                              padded.value, start, stride);
  use.set(logical);
  return std::nullopt;
}

/// Pads `parameter`'s dimension `dim` to `size` and carries the padding
/// through its uses.
static void padParameter(ParameterOp parameter, int64_t dim, int64_t size) {
  RankedTensorType stored = parameter.getType();
  if (!parameter.getLogicalShape())
    parameter.setLogicalShapeAttr(
        DenseI64ArrayAttr::get(parameter.getContext(), stored.getShape()));
  int64_t logical = (*parameter.getLogicalShape())[dim];
  parameter.getResult().setType(withDim(stored, dim, size));
  SmallVector<PaddedValue> work = {{parameter.getResult(), dim, logical}};
  while (!work.empty()) {
    PaddedValue padded = work.pop_back_val();
    // Uses change while they are visited: take them first.
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : padded.value.getUses())
      uses.push_back(&use);
    for (OpOperand *use : uses)
      if (std::optional<PaddedValue> next = propagate(*use, padded))
        work.push_back(*next);
  }
}

int padTensorCores(func::FuncOp function, double maxOverhead) {
  // A parameter read in several places may be imported as several ops of
  // one name; they hold one value, so they are padded alike.
  llvm::MapVector<StringRef, SmallVector<ParameterOp>> byName;
  function.walk([&](ParameterOp op) {
    if (op.getType().getRank() == 2 && !op.getLogicalShape() &&
        isa<FloatType>(op.getType().getElementType()))
      byName[op.getName()].push_back(op);
  });
  int padded = 0;
  for (auto &[name, ops] : byName)
    for (int64_t dim = 0; dim < 2; ++dim) {
      int64_t size = ops.front().getType().getDimSize(dim);
      int64_t target = paddedSize(size, maxOverhead);
      bool feedsGemm = llvm::any_of(ops, [&](ParameterOp op) {
        return llvm::any_of(op->getUses(), [&](OpOperand &use) {
          return becomesOuterGemmDim(use, dim);
        });
      });
      if (target == size || !feedsGemm)
        continue;
      for (ParameterOp op : ops)
        padParameter(op, dim, target);
      ++padded;
    }
  return padded;
}

namespace {
struct PadTensorCoresPass
    : kiln::impl::KilnPadTensorCoresBase<PadTensorCoresPass> {
  using Base::Base;
  void runOnOperation() override {
    padTensorCores(getOperation(), maxOverhead);
  }
};
} // namespace

} // namespace kiln
