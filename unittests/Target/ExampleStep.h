//===- ExampleStep.h - the example's training step for tests ----*- C++ -*-===//
//
// The training step of examples/gpt2_tiny in bf16 GEMMs, built by the
// Trainer as kiln-compile builds it, for tests of what the target makes of
// a whole step.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_UNITTESTS_TARGET_EXAMPLESTEP_H
#define KILN_UNITTESTS_TARGET_EXAMPLESTEP_H

#include "kiln/Tools/ModelLoading.h"
#include "kiln/Training/Trainer.h"

#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

namespace kiln::testing {

/// The step and what keeps it alive; `step` is null (and a test failure
/// recorded) when the example does not load.
struct ExampleStep {
  explicit ExampleStep(mlir::MLIRContext &context) {
    module = loadModel(std::string(KILN_SOURCE_DIR) +
                           "/examples/gpt2_tiny/model.onnx",
                       &context, {}, sources);
    if (!module) {
      ADD_FAILURE() << "cannot load the example";
      return;
    }
    mlir::FailureOr<mlir::func::FuncOp> forward = findFunction(*module, "");
    if (mlir::failed(forward)) {
      ADD_FAILURE() << "the example has no function";
      return;
    }
    TrainingSpec spec;
    spec.pipeline.precision = Precision::BF16;
    auto created = Trainer::create(*module, *forward, spec);
    if (mlir::failed(created)) {
      ADD_FAILURE() << "cannot build the example's step";
      return;
    }
    trainer = std::move(*created);
    step = trainer->stepFunction();
  }

  llvm::SourceMgr sources;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<Trainer> trainer;
  mlir::func::FuncOp step;
};

} // namespace kiln::testing

#endif // KILN_UNITTESTS_TARGET_EXAMPLESTEP_H
