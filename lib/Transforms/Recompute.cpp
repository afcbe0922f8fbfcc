//===- Recompute.cpp - recompute cheap activations in the backward pass ---===//
//
// The forward pass computes values that the backward pass reads much later
// (GELU's output, for the gradient of the projection after it). Keeping
// them costs memory for the whole distance; recomputing them costs one
// elementwise kernel. An elementwise op (or a fusion of them) is recomputed
// right before its late uses when all its operands are live there anyway,
// so recomputing extends no other lifetime and only shortens this one. The
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
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNRECOMPUTE
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

/// Uses this many ops apart are "late": the value would otherwise stay
/// alive across at least that much of the step.
static constexpr int64_t kLateDistance = 16;

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

/// Whether `op` computes a matrix product (alone or with its epilogue).
static bool isProduct(Operation &op) {
  if (auto fusion = dyn_cast<FusionOp>(op))
    return fusion.getBody()
        .walk([](MatmulOp) { return WalkResult::interrupt(); })
        .wasInterrupted();
  return isa<MatmulOp>(op);
}

static bool isRecomputable(Operation &op, bool products) {
  if (isProduct(op))
    return products;
  return isa<FusionOp>(op) || isElementwise(&op);
}

int recomputeActivations(func::FuncOp function, bool products) {
  if (!function.getBody().hasOneBlock())
    return 0;
  Block &block = function.getBody().front();
  SmallVector<Operation *> candidates;
  for (Operation &op : block)
    if (isRecomputable(op, products))
      candidates.push_back(&op);
  int recomputed = 0;
  // Readers before what they read: a value recomputed for its own late
  // uses (the bf16 copy of a weight) is then still live for the late
  // recomputation of its reader (the product of that weight).
  for (Operation *op : llvm::reverse(candidates)) {
    // Positions change as clones are inserted: take them afresh.
    BlockPositions positions(block);
    int64_t defined = positions.of(op);
    SmallVector<OpOperand *> uses;
    for (OpResult result : op->getResults())
      for (OpOperand &use : result.getUses())
        uses.push_back(&use);
    llvm::sort(uses, [&](OpOperand *a, OpOperand *b) {
      return positions.of(a->getOwner()) < positions.of(b->getOwner());
    });
    // The first use far after the previous one starts the late uses.
    int64_t previous = defined;
    auto late = llvm::find_if(uses, [&](OpOperand *use) {
      int64_t at = positions.of(use->getOwner());
      bool far = at - previous > kLateDistance;
      previous = at;
      return far;
    });
    if (late == uses.begin() || late == uses.end())
      continue; // no early use to keep, or none late
    Operation *firstLate = (*late)->getOwner();
    while (firstLate->getBlock() != &block)
      firstLate = firstLate->getParentOp();
    int64_t at = positions.of(firstLate);
    if (!llvm::all_of(op->getOperands(),
                      [&](Value v) { return positions.liveAt(v, at); }))
      continue;
    OpBuilder builder(firstLate);
    Operation *clone = builder.clone(*op);
    for (OpOperand *use : llvm::make_range(late, uses.end()))
      use->set(clone->getResult(cast<OpResult>(use->get()).getResultNumber()));
    ++recomputed;
  }
  return recomputed;
}

namespace {
struct RecomputePass : kiln::impl::KilnRecomputeBase<RecomputePass> {
  using KilnRecomputeBase::KilnRecomputeBase;
  void runOnOperation() override {
    recomputeActivations(getOperation(), products);
  }
};
} // namespace

} // namespace kiln
