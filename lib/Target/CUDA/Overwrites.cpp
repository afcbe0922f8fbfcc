//===- Overwrites.cpp - results written over the operands they consume ---===//
//
// A cross-entropy's gradient over the logits has the logits' shape and
// type, and the logits' last reader is the region computing the loss and
// its gradient: the gradient may be written over them (GPT-2 124M at batch
// 16: 1.5 GiB of the step's peak). That holds where the kernels read each
// row whole before they write it: one block-per-row kernel reads the
// logits, computes every row statistic and row term before its threads
// store the row's gradient (KernelPlan::rowsReadBeforeWritten), and once it
// stores reads the logits only at the element it stores, which is how the
// loss and its gradient read them. The memory plan asks here (Overwrites).
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Target/CUDATarget.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace kiln::cuda {

/// Whether every read of `logits`, a region's argument, is the input of a
/// cross-entropy or of its gradient, directly, reshaped (the same elements
/// at the same linear indices) or widened to f32.
static bool onlyLossesRead(Value logits) {
  SmallVector<Value> work = {logits};
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      auto cast = dyn_cast<CastOp>(user);
      if (isa<ReshapeOp>(user) ||
          (cast && getElementTypeOrSelf(cast.getType()).isF32())) {
        work.push_back(user->getResult(0));
        continue;
      }
      if (!isa<CrossEntropyOp, CrossEntropyGradOp>(user) ||
          use.getOperandNumber() != 0)
        return false;
    }
  }
  return true;
}

/// `value` before the reshapes that produced it.
static Value beforeReshapes(Value value) {
  while (auto reshape = value.getDefiningOp<ReshapeOp>())
    value = reshape.getInput();
  return value;
}

bool overwritesOperand(Operation *op, unsigned result, unsigned operand) {
  auto fusion = dyn_cast<FusionOp>(op);
  if (!fusion || getElementTypeOrSelf(op->getOperand(operand)) !=
                     getElementTypeOrSelf(op->getResult(result)))
    return false;
  Block &body = fusion.getRegion().front();
  Value logits = body.getArgument(operand);
  Value gradient = body.getTerminator()->getOperand(result);
  auto crossEntropyGrad =
      beforeReshapes(gradient).getDefiningOp<CrossEntropyGradOp>();
  if (!crossEntropyGrad ||
      beforeReshapes(crossEntropyGrad.getInput()) != logits ||
      !onlyLossesRead(logits))
    return false;
  // The kernels the region will have (the CUDA lowering plans the same),
  // without their diagnostics: an op they cannot compile fails the
  // lowering, which says so.
  ScopedDiagnosticHandler quiet(op->getContext(),
                                [](Diagnostic &) { return success(); });
  auto inMemory = [&](Value value) -> Value {
    return value.getParentRegion() == &fusion.getRegion() ? Value() : value;
  };
  FailureOr<SmallVector<KernelPlan>> kernels = planElementKernels(
      SmallVector<Value>(body.getTerminator()->getOperands()), inMemory, {});
  if (failed(kernels))
    return false;
  Value memory = op->getOperand(operand);
  SmallVector<const KernelPlan *> readers;
  for (const KernelPlan &kernel : *kernels)
    if (!kernel.combinesPartials && llvm::is_contained(kernel.operands, memory))
      readers.push_back(&kernel);
  return readers.size() == 1 && readers.front()->rowsReadBeforeWritten &&
         llvm::is_contained(readers.front()->results, gradient);
}

} // namespace kiln::cuda
