//===- Pipeline.cpp - the training pipeline -------------------------------===//
//
// The order of kiln's passes. Autodiff differentiates the imported forward
// function; the step adds the optimizer; precision assignment follows so
// that backward GEMMs obey the same policy; the memory plan comes last, on
// the final types. (Attention rewriting, padding and fusion are to come,
// between the step and precision.)
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Pipeline.h"

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"

namespace kiln {

void buildTrainingPipeline(mlir::OpPassManager &manager,
                           const TrainingPipelineOptions &options) {
  manager.addPass(createKilnAutodiff(
      KilnAutodiffOptions{options.function, options.loss, "", ""}));
  manager.addPass(createKilnBuildTrainingStep(KilnBuildTrainingStepOptions{
      options.function, options.optimizer, options.microBatches}));
  manager.addPass(
      createKilnAssignPrecision(KilnAssignPrecisionOptions{options.precision}));
  manager.addNestedPass<mlir::func::FuncOp>(createKilnPlanMemory());
}

void registerTrainingPipeline() {
  mlir::PassPipelineRegistration<TrainingPipelineOptions>(
      "kiln-training-pipeline",
      "autodiff, training step, precision and memory plan, in order",
      buildTrainingPipeline);
}

} // namespace kiln
