//===- AssignPrecision.cpp - mixed-precision assignment -------------------===//
//
// The policy table, as PyTorch's autocast keeps one: GEMMs and attention
// read their operands in the narrow type (tf32, bf16 or fp16) with fp32
// accumulation, and a GEMM stores its result (after its bias) in bf16 or
// fp16, except weight gradients; every other op class (softmax, norms,
// reductions, exp/log, the loss, optimizer updates) computes in fp32, and
// parameters and optimizer state stay fp32 master copies. Optionally, norms
// read and write 16 bits (their statistics and gradients stay fp32). The
// pass runs on a training step after autodiff, so backward GEMMs follow the
// same policy.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/AssignPrecision.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Fuse.h"
#include "kiln/Transforms/GemmEpilogues.h"
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
static bool isLossGrad(Operation *op) {
  return isa<CrossEntropyGradOp, NllLossGradOp>(op);
}

/// Whether `use` reads its value in the type it is stored in, whatever
/// that is: attention's gradient its output, a norm's gradient the output's
/// gradient.
static bool readsAsStored(OpOperand &use) {
  Operation *user = use.getOwner();
  if (auto gradient = dyn_cast<AttentionGradOp>(user))
    return use.get() == gradient.getOutput();
  if (auto gradient = dyn_cast<LayerNormGradOp>(user))
    return use.get() == gradient.getGrad();
  if (auto gradient = dyn_cast<RmsNormGradOp>(user))
    return use.get() == gradient.getGrad();
  return false;
}

/// Gives `value` the element type `narrow` and keeps its users consistent:
/// views and loss gradients (whose result has their input's type) follow,
/// casts to `narrow` disappear, anything else (the loss, which returns its
/// input's type) reads a cast back to the old type, which the CUDA target
/// fuses into the loss kernel; a reader that reads it as stored keeps it.
static void narrowInPlace(Value value, Type narrow);

/// Makes the readers of `value`, just narrowed from the type `wide`,
/// consistent with it (as narrowInPlace describes).
static void readNarrowed(Value value, RankedTensorType wide) {
  Type narrow = getElementTypeOrSelf(value);
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
    } else if (!readsAsStored(*use)) {
      OpBuilder builder(user);
      use->set(builder.create<CastOp>(user->getLoc(), wide, value));
    }
  }
}

static void narrowInPlace(Value value, Type narrow) {
  auto type = cast<RankedTensorType>(value.getType());
  value.setType(type.clone(narrow));
  readNarrowed(value, type);
}

/// Whether `value` becomes, through views and elementwise ops (unscaling,
/// accumulation), what an optimizer update reads or the function returns,
/// unless it is rounded to 16 bits on the way: weight gradients stay f32,
/// as the master weights they update, and so do a function's f32 results.
static bool becomesF32Result(Value value, DenseMap<Value, bool> &memo) {
  if (auto known = memo.find(value); known != memo.end())
    return known->second;
  memo[value] = false; // cut cycles through the graph's regions
  bool result = llvm::any_of(value.getUsers(), [&](Operation *user) {
    if (isa<AdamWOp, SgdOp, AdagradOp, func::ReturnOp>(user))
      return true;
    if (auto cast = dyn_cast<CastOp>(user);
        cast && (cast.getType().getElementType().isBF16() ||
                 cast.getType().getElementType().isF16()))
      return false;
    return (isView(user) || isElementwise(user)) &&
           llvm::any_of(user->getResults(), [&](Value next) {
             return becomesF32Result(next, memo);
           });
  });
  return memo[value] = result;
}

/// Whether every reader of `value` could read it rounded to 16 bits
/// without the widened copy being stored: fusion computes the widening in
/// the kernel of an elementwise reader, of data movement (the heads'
/// gradients moved into one tensor) or of a reduction (a norm, softmax, the
/// loss); views follow, casts to 16 bits go, and the gradients of attention
/// and norms read their output (gradient) as stored.
static bool readableNarrowed(Value value) {
  return llvm::all_of(value.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isView(user) || (isLossGrad(user) && use.getOperandNumber() == 0))
      return llvm::all_of(user->getResults(), readableNarrowed);
    return isa<CastOp, InsertSliceOp>(user) || isElementwise(user) ||
           readsAsStored(use) ||
           (isFusedReduction(user) && use.getOperandNumber() == 0);
  });
}

namespace {
/// Assigns one function's precision; holds the 16-bit copy of each value
/// it rounded, so that a value read by several products is rounded once.
class PrecisionAssignment {
public:
  PrecisionAssignment(MLIRContext *context, Type narrow)
      : builder(context), narrowElement(narrow), f32(builder.getF32Type()) {}

  void narrowProductOperands(func::FuncOp function);
  void narrowAttentionOperands(func::FuncOp function);
  void narrowNorms(func::FuncOp function);
  void storeProductsNarrow(func::FuncOp function, bool geluEpilogue);

private:
  /// The 16-bit copy of `value` rounded before `user`, made if needed.
  Value narrow(Value value, Operation *user);
  /// The copy of `value` made before `user`, if any.
  Value copyBefore(Value value, Operation *user);
  /// Rounds `stored` to the narrow type where it is computed; its readers
  /// read the rounded value (views of it, widened where they compute).
  /// Returns the rounded value.
  Value roundWhereComputed(Value stored);
  /// Makes the tanh GELUs that read `rounded` (maybe through reshapes)
  /// widened read `sum`, the value it rounds, instead.
  void geluReadsUnrounded(Value rounded, Value sum);

  OpBuilder builder;
  Type narrowElement, f32;
  DenseMap<Value, Value> narrowed;
};
} // namespace

Value PrecisionAssignment::copyBefore(Value value, Operation *user) {
  Value copy = narrowed.lookup(value);
  if (copy && copy.getParentBlock() == user->getBlock() &&
      copy.getDefiningOp()->isBeforeInBlock(user))
    return copy;
  return {};
}

// One cast per value, at its first product (later products of the same
// block come after it), so a weight read twice is rounded once. A reshape
// of a value that already has a copy is narrowed as the same reshape of
// that copy, which is exact: a backward GEMM reading a forward activation
// flattened shares the forward product's copy instead of keeping the f32
// value alive to round it again.
Value PrecisionAssignment::narrow(Value value, Operation *user) {
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
}

void PrecisionAssignment::narrowProductOperands(func::FuncOp function) {
  function.walk([&](MatmulOp op) {
    Type element = op.getLhs().getType().getElementType();
    if (element != f32 || op.getAccumulate())
      return;
    op.getLhsMutable().assign(narrow(op.getLhs(), op));
    op.getRhsMutable().assign(narrow(op.getRhs(), op));
    op.setAccumulateAttr(TypeAttr::get(f32));
  });
}

// Attention's products read q, k, v (and, backward, the output gradient)
// narrowed; its scores, probabilities and results stay f32.
void PrecisionAssignment::narrowAttentionOperands(func::FuncOp function) {
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
}

// Narrow norms read their input rounded once, and their gradients read the
// same rounded copy: the backward pass keeps half the bytes. The output is
// stored narrow too (the next product reads it so anyway).
void PrecisionAssignment::narrowNorms(func::FuncOp function) {
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

Value PrecisionAssignment::roundWhereComputed(Value stored) {
  auto type = cast<RankedTensorType>(stored.getType());
  builder.setInsertionPointAfterValue(stored);
  auto rounded = builder.create<CastOp>(stored.getLoc(),
                                        type.clone(narrowElement), stored);
  stored.replaceAllUsesExcept(rounded, rounded);
  readNarrowed(rounded, type);
  return rounded;
}

void PrecisionAssignment::geluReadsUnrounded(Value rounded, Value sum) {
  for (OpOperand &use : llvm::make_early_inc_range(rounded.getUses())) {
    Operation *user = use.getOwner();
    if (auto reshape = dyn_cast<ReshapeOp>(user)) {
      builder.setInsertionPointAfter(reshape);
      auto wide = builder.create<ReshapeOp>(reshape.getLoc(),
                                            reshape.getType().clone(f32), sum);
      geluReadsUnrounded(reshape.getResult(), wide);
      if (wide->use_empty())
        wide->erase();
      continue;
    }
    auto widen = dyn_cast<CastOp>(user);
    if (!widen || widen.getType() != sum.getType() || !widen->hasOneUse())
      continue;
    auto gelu = dyn_cast<GeluOp>(*widen->user_begin());
    if (gelu && gelu.getApproximation() == GeluApproximation::Tanh) {
      widen.replaceAllUsesWith(sum);
      widen.erase();
    }
  }
}

/// Stores products in the narrow type, as autocast stores a linear layer's
/// output: rounded once from the f32 accumulation, after the epilogue that
/// cuBLASLt applies as it stores (a bias along the rows, which is read
/// narrow, as autocast reads it; backward, the tanh GELU's derivative).
/// Readers that compute in f32 (softmax, norms, the residual stream, the
/// loss, the erf GELU's derivative) read the rounded value widened, except,
/// with `geluEpilogue`, a tanh GELU of a biased product: cuBLASLt's
/// GELU_AUX epilogue computes it from the f32 sum and stores both, rounded
/// once each (autocast would round the sum first). Activations, their
/// gradients and the logits halve; weight gradients stay f32, and so do
/// products whose readers would need the widened copy stored.
void PrecisionAssignment::storeProductsNarrow(func::FuncOp function,
                                              bool geluEpilogue) {
  SmallVector<MatmulOp> products;
  DenseMap<Value, bool> results;
  function.walk([&](MatmulOp op) {
    if (op.getAccumulate() &&
        op.getLhs().getType().getElementType() == narrowElement &&
        !becomesF32Result(op.getResult(), results))
      products.push_back(op);
  });
  for (MatmulOp op : products) {
    OpOperand *bias = nullptr;
    if (AddOp add = rowBiasAdd(op, bias);
        add && getElementTypeOrSelf(bias->get()) == f32) {
      if (!readableNarrowed(add.getResult()))
        continue;
      Value copy = narrow(bias->get(), add);
      builder.setInsertionPoint(add);
      bias->set(
          builder.create<CastOp>(add.getLoc(), bias->get().getType(), copy));
      Value rounded = roundWhereComputed(add.getResult());
      if (geluEpilogue)
        geluReadsUnrounded(rounded, add.getResult());
    } else if (GeluGradOp gelu = geluGradScaling(op)) {
      // The tanh derivative scales the f32 product, rounded once after
      // (cuBLASLt's DGELU epilogue). The erf derivative, which no epilogue
      // computes, reads the product stored in 16 bits, as autocast's GELU
      // backward reads it; both gradients are rounded where computed, so
      // that the products and the bias gradient after them read 16 bits.
      if (gelu.getApproximation() == GeluApproximation::None &&
          readableNarrowed(op.getResult())) {
        op.removeAccumulateAttr();
        narrowInPlace(op.getResult(), narrowElement);
      }
      if (readableNarrowed(gelu.getResult()))
        roundWhereComputed(gelu.getResult());
    } else if (readableNarrowed(op.getResult())) {
      op.removeAccumulateAttr();
      narrowInPlace(op.getResult(), narrowElement);
    }
  }
  // Attention's output and, backward, the gradients of its operands are
  // products too, stored as autocast's attention stores them.
  SmallVector<Value> attentionResults;
  function.walk([&](AttentionOp op) {
    if (getElementTypeOrSelf(op.getQuery()) == narrowElement)
      attentionResults.push_back(op.getOutput());
  });
  function.walk([&](AttentionGradOp op) {
    if (getElementTypeOrSelf(op.getQuery()) == narrowElement)
      llvm::append_range(
          attentionResults,
          ValueRange{op.getQueryGrad(), op.getKeyGrad(), op.getValueGrad()});
  });
  for (Value result : attentionResults)
    if (getElementTypeOrSelf(result) == f32 &&
        !becomesF32Result(result, results) && readableNarrowed(result))
      narrowInPlace(result, narrowElement);
}

void assignPrecision(func::FuncOp function, Precision precision,
                     bool narrowNorms, bool geluEpilogue) {
  Type narrowElement = narrowType(precision, function.getContext());
  if (!narrowElement)
    return;
  PrecisionAssignment assignment(function.getContext(), narrowElement);
  assignment.narrowProductOperands(function);
  assignment.narrowAttentionOperands(function);
  // tf32 is a way of computing products, not a type values are stored in.
  bool storesNarrow = !narrowElement.isTF32();
  if (narrowNorms && storesNarrow)
    assignment.narrowNorms(function);
  if (storesNarrow)
    assignment.storeProductsNarrow(function, geluEpilogue);
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
      kiln::assignPrecision(function, *parsed, narrowNorms, geluEpilogue);
    });
  }
};
} // namespace
