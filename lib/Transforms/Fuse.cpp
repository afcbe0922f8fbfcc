//===- Fuse.cpp - elementwise fusion --------------------------------------===//
//
// Groups chains of elementwise ops (with broadcasting) and the data
// movement between them into kiln.fusion regions, one kernel each, so that
// their intermediate values are never stored. Ops join the group of a producer
// when the move keeps every use of the group's values dominated: values used
// outside the group must only be used after the group's last op, where the
// fusion is placed.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Fuse.h"

#include "Outline.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/StridedViews.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

namespace kiln {
#define GEN_PASS_DEF_KILNFUSE
#define GEN_PASS_DEF_KILNFUSEPARAMETERCOPIES
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

bool isElementwise(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>() ||
         isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, RemainderOp,
             AndOp, OrOp, XorOp, ShiftLeftOp, ShiftRightOp, CompareOp, WhereOp,
             FakeQuantizeOp>(op);
}

/// Data movement that a kernel computes as index arithmetic on its inputs:
/// fused with what produces or reads it, the moved tensor is never stored
/// (GPT-2's split of the fused q/k/v product into heads: slice, reshape,
/// transpose and cast in one kernel; backward, the heads' gradients moved
/// back into one tensor; the rotary embedding's rotate_half, a concatenation
/// of a query's halves swapped, in the kernel that multiplies it by the
/// sines). A broadcast joins only its readers (startsGroupOnly).
static bool isIndexMap(Operation *op) {
  return isa<ReshapeOp, TransposeOp, SliceOp, InsertSliceOp, ConcatOp,
             BroadcastOp>(op);
}

/// Whether `op` joins no producer's group but may start one that its
/// readers join: a broadcast, which fused with what computes its input
/// would recompute that once per copy, reads its stored input instead (a
/// reduction's gradient spread over the reduced axis, in the kernel that
/// reads the spread).
static bool startsGroupOnly(Operation *op) { return isa<BroadcastOp>(op); }

/// The concatenation of parameters (merged projections' weights) that
/// `value` is and only its copy reads, if it is one.
static ConcatOp parametersSideBySide(Value value) {
  auto concat = value.getDefiningOp<ConcatOp>();
  if (!concat || !value.hasOneUse() ||
      !llvm::all_of(concat.getInputs(), [](Value input) {
        return input.getDefiningOp<ParameterOp>();
      }))
    return {};
  return concat;
}

bool usesFollow(ArrayRef<Operation *> group,
                const DenseSet<Operation *> &members, Operation *last) {
  for (Operation *op : group)
    for (Operation *user : op->getUsers())
      if (!members.contains(user) && !last->isBeforeInBlock(user))
        return false;
  return true;
}

/// A splat constant (a scalar such as GELU's 0.5) is copied into the fusion,
/// where a kernel holds it as an immediate, rather than read from memory.
static bool isImmediate(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  return constant && constant.getValue().isSplat();
}

bool isFusedReduction(Operation *op) {
  return isa<CrossEntropyOp, NllLossOp, LayerNormOp, RmsNormOp, SoftmaxOp,
             LogSoftmaxOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp,
             ReduceMinOp>(op);
}

/// Whether `op` sums what it reads: a reduction that ends a fusion, or a
/// norm's gradient (whose scale and bias gradients sum over rows).
static bool reduces(Operation *op) {
  return isFusedReduction(op) || isa<LayerNormGradOp, RmsNormGradOp>(op);
}

/// A loss before `grad` over the rows of the logits it reads (or of them
/// widened, which changes no value) with the same classes: the gradient's
/// kernel, which computes each row's log-sum-exp, adds up the loss on the
/// way.
static CrossEntropyOp lossBeside(CrossEntropyGradOp grad) {
  SmallVector<Value> logits = {grad.getInput()};
  for (Operation *user : grad.getInput().getUsers())
    if (auto cast = dyn_cast<CastOp>(user); cast && cast.widensExactly())
      logits.push_back(cast);
  for (Value value : logits)
    for (Operation *user : value.getUsers())
      if (auto loss = dyn_cast<CrossEntropyOp>(user);
          loss && loss.getInput() == value && loss->isBeforeInBlock(grad) &&
          loss.getReduction() != LossReduction::None &&
          loss.getNumClasses() == grad.getNumClasses())
        return loss;
  return {};
}

FusionOp outline(ArrayRef<Operation *> group) {
  DenseSet<Operation *> members(group.begin(), group.end());
  llvm::SetVector<Value> inputs, immediates;
  SmallVector<Value> outputs;
  for (Operation *op : group) {
    for (Value operand : op->getOperands())
      if (isImmediate(operand))
        immediates.insert(operand);
      else if (!members.contains(operand.getDefiningOp()))
        inputs.insert(operand);
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !members.contains(user);
          }))
        outputs.push_back(result);
  }
  OpBuilder builder(group.back());
  SmallVector<Type> resultTypes;
  for (Value output : outputs)
    resultTypes.push_back(output.getType());
  // Named after its first reduction, the op whose kernel it is (a norm's or
  // its gradient's, not the cast or the bias gradient after it), in
  // profiles and errors; or after its last op.
  auto named = llvm::find_if(group, reduces);
  Location loc = (named != group.end() ? *named : group.back())->getLoc();
  auto fusion = builder.create<FusionOp>(loc, resultTypes,
                                         inputs.getArrayRef());
  Block *body = builder.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  for (Value immediate : immediates)
    builder.clone(*immediate.getDefiningOp(), mapping);
  for (Operation *op : group)
    builder.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value output : outputs)
    yielded.push_back(mapping.lookup(output));
  builder.create<YieldOp>(fusion.getLoc(), yielded);
  for (auto [output, result] : llvm::zip(outputs, fusion.getResults()))
    output.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !members.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(group))
    op->erase();
  for (Value immediate : immediates)
    if (immediate.use_empty())
      immediate.getDefiningOp()->erase();
  return fusion;
}

/// Whether `value` is a row normalized by its own statistics, element for
/// element: a layer or RMS norm's output or input gradient, a softmax along
/// the last axis.
static bool isNormalizedRow(Value value) {
  Operation *op = value.getDefiningOp();
  if (isa_and_nonnull<LayerNormOp, RmsNormOp, LayerNormGradOp, RmsNormGradOp>(
          op))
    return value == op->getResult(0);
  auto lastAxis = [&](int64_t axis) {
    return axis == cast<RankedTensorType>(value.getType()).getRank() - 1;
  };
  if (auto softmax = dyn_cast_or_null<SoftmaxOp>(op))
    return lastAxis(softmax.getAxis());
  if (auto softmax = dyn_cast_or_null<LogSoftmaxOp>(op))
    return lastAxis(softmax.getAxis());
  return false;
}

bool sumsColumns(Operation *op) {
  if (!isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>(op))
    return false;
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
  return rank >= 2 && llvm::equal(axes, llvm::seq<int64_t>(0, rank - 1));
}

/// Whether `op` reads `operand`, a normalized row, element for element: it
/// is then computed in the norm's kernel, where each row's statistics are
/// at hand (the 16-bit cast of a norm's output for the next product, which
/// the f32 output then never is stored for).
static bool readsNormalizedRow(Operation *op, Value operand) {
  return isNormalizedRow(operand) &&
         (isElementwise(op) || isa<ReshapeOp>(op)) &&
         cast<RankedTensorType>(op->getResult(0).getType()).getNumElements() ==
             cast<RankedTensorType>(operand.getType()).getNumElements();
}

/// Whether `op` is computed in the kernel of `operand`, a normalized row: it
/// reads it element for element, or sums its columns (which the kernel
/// adds up as it goes).
static bool joinsNormalizedRow(Operation *op, Value operand) {
  return readsNormalizedRow(op, operand) ||
         (sumsColumns(op) && isNormalizedRow(operand));
}

void fuse(func::FuncOp function) {
  // A transpose of a product, which a kernel would read column by column
  // (the tied embedding's gradient from the output projection's), becomes
  // the product of the swapped operands, stored in the transposed order:
  // the transposes' canonicalization, applied to them alone.
  SmallVector<Operation *> transposes;
  function.walk([&](TransposeOp op) { transposes.push_back(op); });
  MLIRContext *context = function.getContext();
  RewritePatternSet patterns(context);
  TransposeOp::getCanonicalizationPatterns(patterns, context);
  GreedyRewriteConfig config;
  config.strictMode = GreedyRewriteStrictness::ExistingOps;
  (void)applyOpPatternsAndFold(transposes, std::move(patterns), config);
  fuseGemmEpilogues(function);
  fuseElementwise(function);
  fuseBiasGradients(function);
  fuseScalarReductions(function);
  fuseOptimizerUpdates(function);
}

/// Replaces `run` (fusions in block order, none reading another's results,
/// every other reader after the last) by one fusion at its last, which
/// computes what each did.
static void mergeFusions(MutableArrayRef<FusionOp> run) {
  llvm::SetVector<Value> inputs;
  SmallVector<Type> resultTypes;
  for (FusionOp fusion : run) {
    inputs.insert(fusion->getOperands().begin(), fusion->getOperands().end());
    llvm::append_range(resultTypes, fusion->getResultTypes());
  }
  OpBuilder builder(run.back());
  auto merged = builder.create<FusionOp>(run.front().getLoc(), resultTypes,
                                         inputs.getArrayRef());
  Block *body = builder.createBlock(&merged.getBody());
  DenseMap<Value, Value> argumentOf;
  for (Value input : inputs)
    argumentOf[input] = body->addArgument(input.getType(), input.getLoc());
  SmallVector<Value> yielded;
  for (FusionOp fusion : run) {
    IRMapping mapping;
    Block &inner = fusion.getBody().front();
    for (auto [argument, operand] :
         llvm::zip(inner.getArguments(), fusion->getOperands()))
      mapping.map(argument, argumentOf.lookup(operand));
    for (Operation &op : inner.without_terminator())
      builder.clone(op, mapping);
    for (Value value : inner.getTerminator()->getOperands())
      yielded.push_back(mapping.lookupOrDefault(value));
  }
  builder.create<YieldOp>(merged.getLoc(), yielded);
  unsigned next = 0;
  for (FusionOp fusion : run)
    for (Value result : fusion->getResults())
      result.replaceAllUsesWith(merged->getResult(next++));
  for (FusionOp fusion : run)
    fusion->erase();
}

int fuseScalarReductions(func::FuncOp function) {
  auto scalars = [](Operation &op) {
    auto fusion = dyn_cast<FusionOp>(op);
    return fusion && llvm::all_of(fusion->getResultTypes(), [](Type type) {
             return cast<RankedTensorType>(type).getRank() == 0;
           });
  };
  SmallVector<SmallVector<FusionOp>> runs(1);
  DenseSet<Operation *> inRun;
  for (Operation &op : function.getBody().front()) {
    bool readsRun = llvm::any_of(op.getOperands(), [&](Value operand) {
      return inRun.contains(operand.getDefiningOp());
    });
    // Views between the fusions (parts of a gradient computed together)
    // are no kernels: the merged fusion, at the run's last, follows them.
    if (auto slice = dyn_cast<SliceOp>(op);
        slice && !readsRun && slicesContiguousBlock(slice, function))
      continue;
    if (!scalars(op) || readsRun) {
      if (runs.back().size() > 1)
        runs.emplace_back();
      runs.back().clear();
      inRun.clear();
      if (!scalars(op))
        continue;
    }
    runs.back().push_back(cast<FusionOp>(op));
    inRun.insert(&op);
  }
  if (runs.back().size() < 2)
    runs.pop_back();
  for (MutableArrayRef<FusionOp> run : runs)
    mergeFusions(run);
  return runs.size();
}

bool fuseParameterCopies(func::FuncOp function) {
  Block &body = function.getBody().front();
  // The first copy of each parameter (or parameters concatenated) in each
  // type: later ones are recomputations, placed where the backward pass
  // reads them.
  SmallVector<Operation *> copies;
  DenseSet<std::pair<Value, Type>> copied;
  for (Operation &op : body)
    if (auto cast = dyn_cast<CastOp>(op);
        cast &&
        (cast.getInput().getDefiningOp<ParameterOp>() ||
         parametersSideBySide(cast.getInput())) &&
        copied.insert({cast.getInput(), cast.getType()}).second)
      copies.push_back(cast);
  // The fusion goes before the first reader of a copy; copies of parameters
  // defined only after it (the step's update section) stay out.
  Operation *firstReader = nullptr;
  for (Operation *copy : copies)
    for (Operation *user : copy->getUsers())
      if (Operation *reader = body.findAncestorOpInBlock(*user);
          !firstReader || reader->isBeforeInBlock(firstReader))
        firstReader = reader;
  if (!firstReader)
    return false;
  auto definedBefore = [&](Value parameter) {
    return parameter.getDefiningOp()->isBeforeInBlock(firstReader);
  };
  llvm::erase_if(copies, [&](Operation *copy) {
    Value input = copy->getOperand(0);
    if (ConcatOp concat = parametersSideBySide(input))
      return !llvm::all_of(concat.getInputs(), definedBefore);
    return !definedBefore(input);
  });
  if (copies.size() < 2)
    return false;
  // Copies of one type next to each other, in the order the types first
  // appear (deterministic): the CUDA target batches their launches.
  DenseMap<Type, unsigned> firstOfType;
  for (Operation *copy : copies)
    firstOfType.try_emplace(copy->getResult(0).getType(), firstOfType.size());
  llvm::stable_sort(copies, [&](Operation *a, Operation *b) {
    return firstOfType.lookup(a->getResult(0).getType()) <
           firstOfType.lookup(b->getResult(0).getType());
  });
  // A concatenation goes into the fusion with its copy, just before it.
  SmallVector<Operation *> group;
  for (Operation *copy : copies) {
    if (ConcatOp concat = parametersSideBySide(copy->getOperand(0))) {
      concat->moveBefore(firstReader);
      group.push_back(concat);
    }
    copy->moveBefore(firstReader);
    group.push_back(copy);
  }
  FusionOp fusion = outline(group);
  // Named for what it does in profiles, not after one parameter's product.
  fusion->setLoc(
      NameLoc::get(StringAttr::get(function.getContext(), "parameter copies")));
  return true;
}

bool fuseOptimizerUpdates(func::FuncOp function) {
  SmallVector<Operation *> updates;
  for (Operation &op : function.getBody().front())
    if (isa<AdamWOp, SgdOp, AdagradOp>(op))
      updates.push_back(&op);
  DenseSet<Operation *> members(updates.begin(), updates.end());
  if (updates.size() < 2 || !usesFollow(updates, members, updates.back()))
    return false;
  outline(updates);
  return true;
}

/// Moves each slice or reshape of a reduction's result to just before its
/// first reader. Autodiff puts the slices of a bias gradient that merged
/// projections summed together right after the sum; there they would read
/// the sum's group before the cast of the summed gradient (which the GEMMs
/// read) could join that group, whose uses must all follow it.
static void sinkReductionViews(Block &body) {
  SmallVector<Operation *> views;
  for (Operation &op : body)
    if (isa<SliceOp, ReshapeOp>(op))
      if (Operation *producer = op.getOperand(0).getDefiningOp();
          producer && isFusedReduction(producer))
        views.push_back(&op);
  for (Operation *view : views) {
    Operation *firstReader = nullptr;
    for (Operation *user : view->getUsers())
      if (Operation *reader = body.findAncestorOpInBlock(*user);
          !firstReader || reader->isBeforeInBlock(firstReader))
        firstReader = reader;
    if (firstReader)
      view->moveBefore(firstReader);
  }
}

/// The most times a kernel of `members` would compute one of them per
/// element. A kernel computes a value where each reader inside needs it,
/// not once: an op read twice inside is computed twice, and its operands
/// as often as it is. A value stored for readers outside counts once, and
/// so does a value read by a reduction or a row kernel (a norm's
/// gradient), which keep what they compute.
static int64_t mostEvaluations(const DenseSet<Operation *> &members) {
  DenseMap<Operation *, int64_t> evaluations;
  std::function<int64_t(Operation *)> count = [&](Operation *op) {
    if (auto it = evaluations.find(op); it != evaluations.end())
      return it->second;
    int64_t total = 0;
    bool stored = false;
    for (Operation *user : op->getUsers()) {
      if (!members.contains(user))
        stored = true;
      else
        total += isElementwise(user) || isIndexMap(user) ? count(user) : 1;
    }
    return evaluations[op] = std::max<int64_t>(total + stored, 1);
  };
  int64_t most = 0;
  for (Operation *op : members)
    most = std::max(most, count(op));
  return most;
}

/// The most evaluations per element (mostEvaluations) a fusion may take.
/// Every group of GPT-2 and BERT stays within 4 and those of the test
/// models within 67 (GridSample's four bilinear corners of computed
/// coordinates; a convolution's windows read each input once per kernel
/// position); a recurrence traced step by step (the Mamba-style scan) had
/// each step recompute every step before it, 262 evaluations, a kernel that
/// took NVRTC a minute and ran in time quadratic in the steps.
static constexpr int64_t kMaxEvaluations = 128;

int fuseElementwise(func::FuncOp function) {
  sinkReductionViews(function.getBody().front());
  SmallVector<SmallVector<Operation *>> groups;
  DenseMap<Operation *, unsigned> groupOf;
  DenseSet<unsigned> closed; // groups that end in a reduction
  // Groups whose kernel a block per row computes, for readers of a
  // normalized row: they take no more reductions or reindexing.
  DenseSet<unsigned> rowwise;
  // The reductions that reduce a value no group computes, and those left
  // alone (the group computing their input could not take them).
  DenseMap<Value, SmallVector<Operation *>> reducedBy;
  auto recordReduced = [&](Operation *op, bool alone) {
    if (!isFusedReduction(op) || isNormalizedRow(op->getResult(0)))
      return;
    Value reduced = op->getOperand(0);
    if (alone || !groupOf.count(reduced.getDefiningOp()))
      reducedBy[reduced].push_back(op);
  };
  auto groupProducing = [&](Value operand) -> std::optional<unsigned> {
    Operation *producer = operand.getDefiningOp();
    auto it = producer ? groupOf.find(producer) : groupOf.end();
    if (it == groupOf.end())
      return std::nullopt;
    return it->second;
  };
  for (Operation &op : function.getBody().front()) {
    // A norm's gradient is a block-per-row kernel: elementwise readers of
    // its input gradient (the residual gradient added to it) join it, where
    // each row's statistics are at hand; and it joins a group of
    // elementwise ops alone that computes its output gradient (a post-norm
    // block's, the residual's gradient plus the block's), whose operands
    // its kernel then reads instead of the sum stored (every value of the
    // group of that shape: nothing smaller to store beside the rows). Other
    // operands it reads from memory.
    if (isa<LayerNormGradOp, RmsNormGradOp>(op)) {
      Value grad = isa<LayerNormGradOp>(op)
                       ? cast<LayerNormGradOp>(op).getGrad()
                       : cast<RmsNormGradOp>(op).getGrad();
      std::optional<unsigned> producer = groupProducing(grad);
      auto elementForElement = [&](Operation *member) {
        return isElementwise(member) &&
               cast<ShapedType>(member->getResult(0).getType()).getShape() ==
                   cast<ShapedType>(grad.getType()).getShape();
      };
      unsigned target = groups.size();
      if (producer && !closed.contains(*producer) &&
          llvm::all_of(groups[*producer], elementForElement)) {
        DenseSet<Operation *> members(groups[*producer].begin(),
                                      groups[*producer].end());
        members.insert(&op);
        if (usesFollow(groups[*producer], members, &op))
          target = *producer;
      }
      if (target == groups.size())
        groups.emplace_back();
      groups[target].push_back(&op);
      groupOf[&op] = target;
      closed.insert(target);
      rowwise.insert(target);
      continue;
    }
    // A cross-entropy's gradient joins the loss over the same logits: one
    // kernel reads them once for both. Elementwise readers of the gradient
    // may join it too.
    if (auto grad = dyn_cast<CrossEntropyGradOp>(op)) {
      CrossEntropyOp loss = lossBeside(grad);
      if (!loss)
        continue;
      auto [it, alone] = groupOf.try_emplace(loss, groups.size());
      if (alone) {
        closed.insert(groups.size());
        groups.push_back({loss});
      }
      unsigned target = it->second;
      DenseSet<Operation *> members(groups[target].begin(),
                                    groups[target].end());
      members.insert(&op);
      if (!usesFollow(groups[target], members, &op))
        continue;
      groups[target].push_back(&op);
      groupOf[&op] = target;
      rowwise.insert(target);
      continue;
    }
    bool reduction = isFusedReduction(&op);
    if (!isElementwise(&op) && !isIndexMap(&op) && !reduction)
      continue;
    // A contiguous block of a buffer is a view of it (the part of a weight
    // gradient merged projections computed together, which the gradient
    // norm and the optimizer read): fused, it would be a copy, and each
    // reader's kernel one of its own.
    if (auto slice = dyn_cast<SliceOp>(op);
        slice && slicesContiguousBlock(slice, function))
      continue;
    // The parameter copies' fusion (fuseParameterCopies) takes the
    // parameters' concatenation with its copy.
    if (isa<ConcatOp>(op) && parametersSideBySide(op.getResult(0)))
      continue;
    // The groups of this op's producers (for a reduction, of its reduced
    // input only), each joined if uses stay dominated.
    // A group that ends in a reduction takes no reader of the reduction,
    // but still ops that read its other values (the cast of a gradient
    // whose bias gradient the group sums): its values are then computed in
    // each kernel that needs them instead of being stored.
    OperandRange joinable = op.getOperands();
    if (reduction)
      joinable = joinable.take_front();
    else if (startsGroupOnly(&op))
      joinable = joinable.take_front(0);
    SmallVector<unsigned> candidates;
    for (Value operand : joinable)
      if (std::optional<unsigned> group = groupProducing(operand))
        if (!reduces(operand.getDefiningOp()) ||
            joinsNormalizedRow(&op, operand))
          if (!llvm::is_contained(candidates, *group))
            candidates.push_back(*group);
    // An elementwise reader of what a reduction reduces joins its group
    // too (the bf16 copy of a gradient whose bias gradient is summed, when
    // the gradient comes from a kernel of its own, a norm's gradient): one
    // kernel then reads the gradient once.
    if (isElementwise(&op))
      for (Value operand : op.getOperands())
        for (Operation *sibling : reducedBy.lookup(operand)) {
          // A reduction alone has no group until a reader joins it.
          auto [it, alone] = groupOf.try_emplace(sibling, groups.size());
          if (alone) {
            closed.insert(groups.size());
            groups.push_back({sibling});
          }
          if (!llvm::is_contained(candidates, it->second))
            candidates.push_back(it->second);
        }
    llvm::erase_if(candidates, [&](unsigned candidate) {
      if (rowwise.contains(candidate) &&
          ((reduction && !sumsColumns(&op)) ||
           (isIndexMap(&op) && !isa<ReshapeOp>(op))))
        return true;
      return closed.contains(candidate) &&
             llvm::any_of(op.getOperands(), [&](Value operand) {
               return groupProducing(operand) == candidate &&
                      reduces(operand.getDefiningOp()) &&
                      !joinsNormalizedRow(&op, operand);
             });
    });
    DenseSet<Operation *> members{&op};
    SmallVector<unsigned> joined;
    for (unsigned candidate : candidates) {
      DenseSet<Operation *> extended = members;
      extended.insert(groups[candidate].begin(), groups[candidate].end());
      if (!usesFollow(groups[candidate], extended, &op) ||
          mostEvaluations(extended) > kMaxEvaluations)
        continue;
      members = std::move(extended);
      joined.push_back(candidate);
    }
    if (joined.empty()) {
      // A reduction alone is its own kernel already, until elementwise
      // readers of what it reduces join it; a norm alone may still take
      // readers of its rows.
      if (reduction && !llvm::any_of(op.getResults(), isNormalizedRow)) {
        recordReduced(&op, /*alone=*/true);
        continue;
      }
      groupOf[&op] = groups.size();
      if (reduction)
        closed.insert(groups.size());
      groups.push_back({&op});
      recordReduced(&op, /*alone=*/false);
      continue;
    }
    unsigned target = joined.front();
    for (unsigned other : llvm::drop_begin(joined)) {
      for (Operation *member : groups[other])
        groupOf[member] = target;
      groups[target].append(groups[other]);
      groups[other].clear();
      if (closed.contains(other))
        closed.insert(target);
      if (rowwise.contains(other))
        rowwise.insert(target);
    }
    groups[target].push_back(&op);
    groupOf[&op] = target;
    if (reduction)
      closed.insert(target);
    recordReduced(&op, /*alone=*/false);
    if (llvm::any_of(op.getOperands(), [&](Value operand) {
          return readsNormalizedRow(&op, operand) &&
                 groupOf.lookup(operand.getDefiningOp()) == target;
        }))
      rowwise.insert(target);
  }

  int fused = 0;
  for (SmallVector<Operation *> &group : groups) {
    // A reshape of a value the group reads is a view of it; read outside
    // the group too, it stays a view rather than become a copy the fusion
    // stores (the logits that both the loss and its gradient read). So is,
    // for the ops outside that read it, a reshape of a value the group
    // stores anyway (ops outside read it too): stored once, and viewed (a
    // head gradient put back in token order, which one product reads in 3-D
    // and another in 2-D); ops inside read the reshape inside.
    DenseSet<Operation *> members(group.begin(), group.end());
    SmallVector<Operation *> views;
    for (Operation *op : llvm::reverse(group)) {
      if (!isa<ReshapeOp>(op))
        continue;
      auto outside = [&](Operation *user) { return !members.contains(user); };
      Value input = op->getOperand(0);
      bool readOutside = llvm::any_of(op->getUsers(), outside);
      if (!members.contains(input.getDefiningOp())) {
        if (readOutside) {
          members.erase(op);
          views.push_back(op);
        }
        continue;
      }
      if (!readOutside || llvm::none_of(input.getUsers(), outside))
        continue;
      if (llvm::all_of(op->getUsers(), outside)) {
        members.erase(op);
        views.push_back(op);
        continue;
      }
      OpBuilder builder(op);
      Operation *view = builder.clone(*op);
      op->getResult(0).replaceUsesWithIf(
          view->getResult(0),
          [&](OpOperand &use) { return outside(use.getOwner()); });
      views.push_back(view);
    }
    llvm::erase_if(
        group, [&](Operation *op) { return llvm::is_contained(views, op); });
    // Reshapes alone are views of their input: no kernel at all.
    if (group.size() < 2 ||
        llvm::all_of(group, [](Operation *op) { return isa<ReshapeOp>(op); }))
      continue;
    llvm::sort(group, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    // A view of what the group computes follows the fusion, which is placed
    // at the group's last op (its readers come after that op). Views are
    // listed readers first, so each lands before its readers.
    DenseSet<Operation *> following;
    for (Operation *view : llvm::reverse(views))
      if (Operation *input = view->getOperand(0).getDefiningOp();
          members.contains(input) || following.contains(input))
        following.insert(view);
    for (Operation *view : views)
      if (following.contains(view))
        view->moveAfter(group.back());
    outline(group);
    ++fused;
  }
  return fused;
}

} // namespace kiln

namespace {
struct FusePass : kiln::impl::KilnFuseBase<FusePass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.getBody().hasOneBlock())
      kiln::fuse(function);
  }
};

struct FuseParameterCopiesPass
    : kiln::impl::KilnFuseParameterCopiesBase<FuseParameterCopiesPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.getBody().hasOneBlock())
      kiln::fuseParameterCopies(function);
  }
};
} // namespace
