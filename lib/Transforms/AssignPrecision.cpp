//===- AssignPrecision.cpp - mixed-precision assignment -------------------===//
//
// The policy table, as PyTorch's autocast keeps one: GEMMs run in the 16-bit
// type with fp32 accumulation; every other op class (softmax, norms,
// reductions, exp/log, the loss, optimizer updates) computes in fp32, and
// parameters and optimizer state stay fp32 master copies. The pass runs on
// a training step after autodiff, so backward GEMMs follow the same policy.
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

std::optional<Precision> parsePrecision(StringRef text) {
  if (text == "fp32")
    return Precision::FP32;
  if (text == "bf16")
    return Precision::BF16;
  return std::nullopt;
}

StringRef precisionName(Precision precision) {
  return precision == Precision::BF16 ? "bf16" : "fp32";
}

void assignPrecision(func::FuncOp function, Precision precision) {
  if (precision == Precision::FP32)
    return;
  OpBuilder builder(function.getContext());
  Type bf16 = builder.getBF16Type(), f32 = builder.getF32Type();
  // One cast per value, at its first product (later products of the same
  // block come after it), so a weight read twice is rounded once.
  DenseMap<Value, Value> narrowed;
  auto narrow = [&](Value value, Operation *user) {
    Value &narrowedValue = narrowed[value];
    if (!narrowedValue || narrowedValue.getParentBlock() != user->getBlock()) {
      builder.setInsertionPoint(user);
      narrowedValue = builder.create<CastOp>(
          user->getLoc(), cast<RankedTensorType>(value.getType()).clone(bf16),
          value);
    }
    return narrowedValue;
  };
  function.walk([&](MatmulOp op) {
    Type element = op.getLhs().getType().getElementType();
    if (element != f32 || op.getAccumulate())
      return;
    op.getLhsMutable().assign(narrow(op.getLhs(), op));
    op.getRhsMutable().assign(narrow(op.getRhs(), op));
    op.setAccumulateAttr(TypeAttr::get(f32));
  });
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
                                 << precision << "' (fp32 or bf16)";
      return signalPassFailure();
    }
    getOperation().walk(
        [&](func::FuncOp function) { kiln::assignPrecision(function, *parsed); });
  }
};
} // namespace
