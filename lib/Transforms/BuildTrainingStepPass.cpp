//===- BuildTrainingStepPass.cpp - the kiln-build-training-step pass ------===//
//
// Runs buildTrainingStep on `@<function>_grad`. From the command line the
// optimizer has torch.optim's defaults; C++ callers can set all of them.
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
  BuildTrainingStepPass(StringRef function,
                        const kiln::OptimizerOptions &optimizer)
      : configured(optimizer) {
    this->function = function.str();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<kiln::OptimizerOptions> options = configured;
    if (!options) {
      std::optional<kiln::OptimizerKind> kind =
          kiln::parseOptimizerKind(optimizer);
      if (!kind) {
        module.emitError() << "kiln-build-training-step: unknown optimizer '"
                           << optimizer << "' (adamw, sgd or adagrad)";
        return signalPassFailure();
      }
      options = kiln::torchDefaults(*kind);
      options->microBatches = microBatches;
    }
    auto gradient = module.lookupSymbol<func::FuncOp>(function + "_grad");
    if (!gradient) {
      module.emitError() << "kiln-build-training-step: no function @"
                         << function << "_grad (run kiln-autodiff first)";
      return signalPassFailure();
    }
    if (failed(kiln::buildTrainingStep(gradient, *options)))
      signalPassFailure();
  }

  /// Set by C++ callers; overrides the textual options.
  std::optional<kiln::OptimizerOptions> configured;
};
} // namespace

std::unique_ptr<Pass>
kiln::createKilnBuildTrainingStep(StringRef function,
                                  const OptimizerOptions &optimizer) {
  return std::make_unique<BuildTrainingStepPass>(function, optimizer);
}
