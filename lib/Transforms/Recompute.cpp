//===- Recompute.cpp - recompute cheap activations in the backward pass ---===//
//
// The forward pass computes values that the backward pass reads much later
// (GELU's output, for the gradient of the projection after it). Keeping
// them costs memory where the step's live buffers weigh most (the memory
// plan's peak, where the backward pass starts); recomputing them costs one
// elementwise kernel. An elementwise op (or a fusion of them) whose value
// is kept across the peak, or read again long after its previous read, is
// recomputed right before its late uses, when all its operands are live
// there anyway, so recomputing extends no other lifetime and only shortens
// this one; the peak may then move, and the step is planned again until
// nothing more is recomputed. The
// ops are deterministic (dropout draws from its seed and offset), so the
// step computes bit for bit what it did. Optionally, a fusion that computes
// a matrix product is recomputed too: a GEMM more, where the product's
// epilogue result is a large activation (GPT-2's MLP pre-activation, kept
// for GELU's gradient: 192 MiB a layer in f32 at batch 16).
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Recompute.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Fuse.h"
#include "kiln/Transforms/MemoryPlan.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNRECOMPUTE
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

namespace {
/// Positions of the ops of one block, and of the last use of each value.
class BlockPositions {
public:
  explicit BlockPositions(Block &block) {
    for (Operation &op : block)
      position[&op] = position.size();
  }
  /// The position of the op of the block that holds `op`.
  int64_t of(Operation *op) const {
    while (!position.count(op))
      op = op->getParentOp();
    return position.lookup(op);
  }
  /// Whether `value` is available at `at` without extending its lifetime:
  /// it lives outside the arena (argument, constant, parameter) or is used
  /// at or after `at` anyway.
  bool liveAt(Value value, int64_t at) const {
    Operation *producer = value.getDefiningOp();
    if (!producer || isa<ConstantOp, ParameterOp>(producer))
      return true;
    return llvm::any_of(value.getUsers(),
                        [&](Operation *user) { return of(user) >= at; });
  }

private:
  DenseMap<Operation *, int64_t> position;
};
} // namespace

/// Uses this many ops apart are "late" too: the value would otherwise stay
/// alive across that much of the step, which first-fit placement may not
/// fit around as tightly as the peak suggests.
static constexpr int64_t kLateDistance = 16;

/// Whether `op` computes a matrix product (alone or with its epilogue).
static bool isProduct(Operation &op) {
  if (auto fusion = dyn_cast<FusionOp>(op))
    return fusion.getBody()
        .walk([](MatmulOp) { return WalkResult::interrupt(); })
        .wasInterrupted();
  return isa<MatmulOp>(op);
}

/// Whether recomputing `op` costs as little as an elementwise kernel: it is
/// one, a fusion of them, or data movement (a transpose copies as cheaply).
static bool isRecomputable(Operation &op, bool products) {
  if (isProduct(op))
    return products;
  return isa<FusionOp, TransposeOp, SliceOp>(op) || isElementwise(&op);
}

namespace {
/// A use of a candidate's result, maybe through views of it (reshapes,
/// which share their input's buffer): recomputing for it recomputes the
/// views too.
struct ViewedUse {
  OpOperand *use;
  SmallVector<Operation *> views;
};
} // namespace

/// The uses of `value`, looking through the reshapes of `block` that view
/// it.
static void collectUses(Value value, Block &block,
                        SmallVector<Operation *> &views,
                        SmallVectorImpl<ViewedUse> &uses) {
  for (OpOperand &use : value.getUses()) {
    auto view = dyn_cast<ReshapeOp>(use.getOwner());
    if (!view || view->getBlock() != &block) {
      uses.push_back({&use, views});
      continue;
    }
    views.push_back(view);
    collectUses(view.getResult(), block, views, uses);
    views.pop_back();
  }
}

/// Recomputes, for its late uses, each candidate kept across `peak` or read
/// long after its previous read; returns how many, counting products in
/// `recomputedProducts`.
static int recomputeAcross(Operation *peak, ArrayRef<Operation *> candidates,
                           int64_t maxProducts, int &recomputedProducts) {
  Block &block = *peak->getBlock();
  int recomputed = 0;
  // Readers before what they read: a value recomputed for its own late
  // uses (the bf16 copy of a weight) is then still live for the late
  // recomputation of its reader (the product of that weight).
  for (Operation *op : llvm::reverse(candidates)) {
    // Every product kept alive weighs on the peak where the backward pass
    // starts: how many are recomputed matters more than which.
    bool product = isProduct(*op);
    if (product && maxProducts >= 0 && recomputedProducts >= maxProducts)
      continue;
    // Positions change as clones are inserted: take them afresh.
    BlockPositions positions(block);
    int64_t defined = positions.of(op), at = positions.of(peak);
    SmallVector<ViewedUse> uses;
    SmallVector<Operation *> views;
    for (OpResult result : op->getResults())
      collectUses(result, block, views, uses);
    auto position = [&](const ViewedUse &use) {
      return positions.of(use.use->getOwner());
    };
    llvm::sort(uses, [&](const ViewedUse &a, const ViewedUse &b) {
      return position(a) < position(b);
    });
    // The first use far after the previous one (or after the peak, when
    // the previous one is before it) starts the late uses.
    int64_t previous = defined;
    auto late = llvm::find_if(uses, [&](const ViewedUse &use) {
      int64_t next = position(use);
      bool far =
          next - previous > kLateDistance || (previous < at && at < next);
      previous = next;
      return far;
    });
    if (late == uses.begin() || late == uses.end())
      continue; // no early use to keep, or none late
    Operation *firstLate = late->use->getOwner();
    while (firstLate->getBlock() != &block)
      firstLate = firstLate->getParentOp();
    int64_t first = positions.of(firstLate);
    // An operand that is not live there may be recomputed too when it is
    // one elementwise op of live values: the 16-bit copy of a bias, which
    // only the product read.
    SmallVector<Operation *> operandsToRecompute;
    auto available = [&](Value v) {
      if (positions.liveAt(v, first))
        return true;
      Operation *producer = v.getDefiningOp();
      if (!producer || !isElementwise(producer) ||
          !llvm::all_of(producer->getOperands(),
                        [&](Value w) { return positions.liveAt(w, first); }))
        return false;
      operandsToRecompute.push_back(producer);
      return true;
    };
    if (!llvm::all_of(op->getOperands(), available))
      continue;
    OpBuilder builder(firstLate);
    IRMapping clones;
    for (Operation *producer : operandsToRecompute)
      builder.clone(*producer, clones);
    builder.clone(*op, clones);
    for (const ViewedUse &use : llvm::make_range(late, uses.end())) {
      for (Operation *view : use.views)
        if (!clones.contains(view->getResult(0)))
          builder.clone(*view, clones);
      use.use->set(clones.lookup(use.use->get()));
    }
    // Views left without readers, readers of views first.
    llvm::SetVector<Operation *> viewed;
    for (const ViewedUse &use : uses)
      viewed.insert(use.views.begin(), use.views.end());
    for (Operation *view : llvm::reverse(viewed))
      if (view->use_empty())
        view->erase();
    ++recomputed;
    recomputedProducts += product;
  }
  return recomputed;
}

int recomputeActivations(func::FuncOp function, bool products,
                         int64_t maxProducts) {
  if (!function.getBody().hasOneBlock())
    return 0;
  Block &block = function.getBody().front();
  int recomputed = 0, recomputedProducts = 0;
  // Each round recomputes what is kept across the peak, which lowers it or
  // moves it elsewhere; a round that recomputes nothing ends.
  for (;;) {
    int64_t peakPosition = planMemory(function).peakPosition;
    Operation *peak = nullptr;
    SmallVector<Operation *> candidates;
    for (auto [position, op] : llvm::enumerate(block)) {
      if (static_cast<int64_t>(position) == peakPosition)
        peak = &op;
      if (isRecomputable(op, products))
        candidates.push_back(&op);
    }
    int round = peak ? recomputeAcross(peak, candidates, maxProducts,
                                       recomputedProducts)
                     : 0;
    if (round == 0)
      return recomputed;
    recomputed += round;
  }
}

namespace {
struct RecomputePass : kiln::impl::KilnRecomputeBase<RecomputePass> {
  using KilnRecomputeBase::KilnRecomputeBase;
  void runOnOperation() override {
    recomputeActivations(getOperation(), products, maxProducts);
  }
};
} // namespace

} // namespace kiln
