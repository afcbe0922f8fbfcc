//===- Pipeline.h - the training pipeline ------------------------*- C++ -*-===//
//
// All of kiln's passes in their order, as one pipeline, for kiln-opt's
// --kiln-training-pipeline. (kiln-compile calls the same steps on the step
// function alone, since it needs the MemoryPlan itself, not its attributes.)
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PIPELINE_H
#define KILN_TRANSFORMS_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace kiln {

struct TrainingPipelineOptions
    : mlir::PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> function{*this, "function",
                               llvm::cl::desc("The forward function"),
                               llvm::cl::init("main")};
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("The result that is the loss")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw, sgd or adagrad"),
                                llvm::cl::init("adamw")};
  Option<int64_t> microBatches{*this, "micro-batches",
                               llvm::cl::desc("Micro-batches per step"),
                               llvm::cl::init(1)};
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("fp32 or bf16"),
                                llvm::cl::init("fp32")};
};

/// autodiff -> training step -> precision -> memory plan.
void buildTrainingPipeline(mlir::OpPassManager &manager,
                           const TrainingPipelineOptions &options);

/// Registers --kiln-training-pipeline.
void registerTrainingPipeline();

} // namespace kiln

#endif // KILN_TRANSFORMS_PIPELINE_H
