//===- BuildTrainingStepPass.cpp - the kiln-build-training-step pass ------===//
//
// Runs buildTrainingStep on `@<function>_grad`.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNBUILDTRAININGSTEP
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct BuildTrainingStepPass
    : kiln::impl::KilnBuildTrainingStepBase<BuildTrainingStepPass> {
  using KilnBuildTrainingStepBase::KilnBuildTrainingStepBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto gradient = module.lookupSymbol<func::FuncOp>(function + "_grad");
    if (!gradient) {
      module.emitError() << "kiln-build-training-step: no function @"
                         << function << "_grad (run kiln-autodiff first)";
      return signalPassFailure();
    }
    std::optional<kiln::OptimizerKind> kind = kiln::parseOptimizerKind(optimizer);
    if (!kind) {
      module.emitError() << "kiln-build-training-step: unknown optimizer '"
                         << optimizer << "' (adamw, sgd or adagrad)";
      return signalPassFailure();
    }
    kiln::OptimizerOptions options;
    options.kind = *kind;
    options.microBatches = microBatches;
    if (failed(kiln::buildTrainingStep(gradient, options)))
      signalPassFailure();
  }
};
} // namespace
