//===- AssignPrecision.cpp - mixed-precision assignment -------------------===//
//
// The policy table, as PyTorch's autocast keeps one: GEMMs and attention
// read their operands in the narrow type (tf32, bf16 or fp16) with fp32
// accumulation; every other op class (softmax, norms,
// reductions, exp/log, the loss, optimizer updates) computes in fp32, and
// parameters and optimizer state stay fp32 master copies. Optionally, norms
// read and write 16 bits (their statistics and gradients stay fp32). The
// pass runs on a training step after autodiff, so backward GEMMs follow the
// same policy.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/AssignPrecision.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"


namespace kiln {
#define GEN_PASS_DEF_KILNASSIGNPRECISION
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

static constexpr std::pair<Precision, StringLiteral> kPrecisionNames[] = {
    {Precision::FP32, "fp32"},
    {Precision::TF32, "tf32"},
    {Precision::BF16, "bf16"},
    {Precision::FP16, "fp16"}};

std::optional<Precision> parsePrecision(StringRef text) {
  for (auto [precision, name] : kPrecisionNames)
    if (text == name)
      return precision;
  return std::nullopt;
}

StringRef precisionName(Precision precision) {
  for (auto [candidate, name] : kPrecisionNames)
    if (candidate == precision)
      return name;
  llvm_unreachable("unknown precision");
}

/// The type operands are narrowed to; null for fp32.
static Type narrowType(Precision precision, MLIRContext *context) {
  Builder builder(context);
  switch (precision) {
  case Precision::FP32: return {};
  case Precision::TF32: return builder.getTF32Type();
  case Precision::BF16: return builder.getBF16Type();
  case Precision::FP16: return builder.getF16Type();
  }
  llvm_unreachable("unknown precision");
}

/// Data movement, whose result has its input's element type.
static bool isView(Operation *op) {
  return isa<ReshapeOp, SliceOp, TransposeOp>(op);
}
static bool isLoss(Operation *op) { return isa<CrossEntropyOp, NllLossOp>(op); }
static bool isLossGrad(Operation *op) {
  return isa<CrossEntropyGradOp, NllLossGradOp>(op);
}

/// Whether `value` reaches only casts to `narrow`, losses (as their input),
/// their gradients' inputs, and views whose results do the same.
static bool readOnlyNarrow(Value value, Type narrow) {
  return llvm::all_of(value.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isView(user))
      return readOnlyNarrow(user->getResult(0), narrow);
    if (auto cast = dyn_cast<CastOp>(user))
      return cast.getType().getElementType() == narrow;
    return (isLoss(user) || isLossGrad(user)) && use.getOperandNumber() == 0;
  });
}

/// Gives `value` the element type `narrow` and keeps its users consistent:
/// views and loss gradients (whose result has their input's type) follow,
/// casts to `narrow` disappear, anything else (the loss, which returns its
/// input's type) reads a cast back to the old type, which the CUDA target
/// fuses into the loss kernel.
static void narrowInPlace(Value value, Type narrow) {
  auto type = cast<RankedTensorType>(value.getType());
  value.setType(type.clone(narrow));
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : value.getUses())
    uses.push_back(&use);
  for (OpOperand *use : uses) {
    Operation *user = use->getOwner();
    if (auto cast = dyn_cast<CastOp>(user);
        cast && cast.getType().getElementType() == narrow) {
      cast.getResult().replaceAllUsesWith(value);
      cast.erase();
    } else if (isView(user) || (isLossGrad(user) && use->getOperandNumber() == 0)) {
      narrowInPlace(user->getResult(0), narrow);
    } else {
      OpBuilder builder(user);
      use->set(builder.create<CastOp>(user->getLoc(), type, value));
    }
  }
}

/// Stores in the narrow type the products that are only read narrowed or
/// by a loss, as autocast stores them: GPT-2's logits (the loss computes in
/// f32 or better from them anyway, and the loss gradient, which the
/// backward GEMMs read narrowed, is then produced narrow too: the largest
/// activations of a language model halve, and their f32 copies disappear),
/// and backward, the gradient of attention's output, which attention reads
/// narrowed. The product is rounded once, from its f32 accumulation,
/// instead of to f32 and then to the narrow type.
static void storeNarrowReadProductsNarrow(func::FuncOp function) {
  SmallVector<MatmulOp> products;
  function.walk([&](MatmulOp op) {
    if (op.getAccumulate() &&
        readOnlyNarrow(op.getResult(), op.getLhs().getType().getElementType()))
      products.push_back(op);
  });
  for (MatmulOp op : products) {
    op.removeAccumulateAttr();
    narrowInPlace(op.getResult(), op.getLhs().getType().getElementType());
  }
}

void assignPrecision(func::FuncOp function, Precision precision,
                     bool narrowNorms) {
  OpBuilder builder(function.getContext());
  Type narrowElement = narrowType(precision, function.getContext());
  if (!narrowElement)
    return;
  Type f32 = builder.getF32Type();
  // One cast per value, at its first product (later products of the same
  // block come after it), so a weight read twice is rounded once. A reshape
  // of a value that already has a copy is narrowed as the same reshape of
  // that copy, which is exact: a backward GEMM reading a forward activation
  // flattened shares the forward product's copy instead of keeping the f32
  // value alive to round it again.
  DenseMap<Value, Value> narrowed;
  auto copyBefore = [&](Value value, Operation *user) -> Value {
    Value copy = narrowed.lookup(value);
    if (copy && copy.getParentBlock() == user->getBlock() &&
        copy.getDefiningOp()->isBeforeInBlock(user))
      return copy;
    return {};
  };
  auto narrow = [&](Value value, Operation *user) {
    if (Value copy = copyBefore(value, user))
      return copy;
    auto type = cast<RankedTensorType>(value.getType()).clone(narrowElement);
    builder.setInsertionPoint(user);
    Value copy;
    auto reshape = value.getDefiningOp<ReshapeOp>();
    if (Value input = reshape ? copyBefore(reshape.getInput(), user) : Value())
      copy = builder.create<ReshapeOp>(user->getLoc(), type, input);
    else
      copy = builder.create<CastOp>(user->getLoc(), type, value);
    narrowed[value] = copy;
    return copy;
  };
  function.walk([&](MatmulOp op) {
    Type element = op.getLhs().getType().getElementType();
    if (element != f32 || op.getAccumulate())
      return;
    op.getLhsMutable().assign(narrow(op.getLhs(), op));
    op.getRhsMutable().assign(narrow(op.getRhs(), op));
    op.setAccumulateAttr(TypeAttr::get(f32));
  });
  // Attention's products read q, k, v (and, backward, the output gradient)
  // narrowed; its scores, probabilities and results stay f32.
  auto narrowAll = [&](Operation *op, ArrayRef<OpOperand *> operands) {
    for (OpOperand *operand : operands)
      if (getElementTypeOrSelf(operand->get()) == f32)
        operand->set(narrow(operand->get(), op));
  };
  function.walk([&](AttentionOp op) {
    narrowAll(op, {&op.getQueryMutable(), &op.getKeyMutable(),
                   &op.getValueMutable()});
  });
  function.walk([&](AttentionGradOp op) {
    narrowAll(op, {&op.getQueryMutable(), &op.getKeyMutable(),
                   &op.getValueMutable(), &op.getOutputGradMutable()});
  });
  // Narrow norms read their input rounded once, and their gradients read
  // the same rounded copy: the backward pass keeps half the bytes. The
  // output is stored narrow too (the next product reads it so anyway).
  if (narrowNorms && narrowElement != builder.getTF32Type()) {
    auto narrowNorm = [&](Operation *op, OpOperand &input, Value output) {
      if (getElementTypeOrSelf(input.get()) != f32)
        return;
      input.set(narrow(input.get(), op));
      if (output)
        narrowInPlace(output, narrowElement);
    };
    SmallVector<Operation *> norms;
    function.walk([&](Operation *op) {
      if (isa<LayerNormOp, RmsNormOp, LayerNormGradOp, RmsNormGradOp>(op))
        norms.push_back(op);
    });
    for (Operation *op : norms) {
      if (auto norm = dyn_cast<LayerNormOp>(op))
        narrowNorm(op, norm.getInputMutable(), norm.getOutput());
      else if (auto norm = dyn_cast<RmsNormOp>(op))
        narrowNorm(op, norm.getInputMutable(), norm.getOutput());
      else if (auto grad = dyn_cast<LayerNormGradOp>(op))
        narrowNorm(op, grad.getInputMutable(), Value());
      else if (auto grad = dyn_cast<RmsNormGradOp>(op))
        narrowNorm(op, grad.getInputMutable(), Value());
    }
  }
  storeNarrowReadProductsNarrow(function);
  // Fold casts that undo each other (bf16 -> f32 -> bf16).
  RewritePatternSet patterns(function.getContext());
  CastOp::getCanonicalizationPatterns(patterns, function.getContext());
  (void)applyPatternsAndFoldGreedily(function, std::move(patterns));
}

} // namespace kiln

namespace {
struct AssignPrecisionPass
    : kiln::impl::KilnAssignPrecisionBase<AssignPrecisionPass> {
  using KilnAssignPrecisionBase::KilnAssignPrecisionBase;

  void runOnOperation() override {
    std::optional<kiln::Precision> parsed = kiln::parsePrecision(precision);
    if (!parsed) {
      getOperation().emitError() << "kiln-assign-precision: unknown precision '"
                                 << precision << "' (fp32, tf32, bf16 or fp16)";
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp function) {
      kiln::assignPrecision(function, *parsed, narrowNorms);
    });
  }
};
} // namespace
