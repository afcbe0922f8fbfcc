//===- Trainer.h - training on the reference interpreter ---------*- C++ -*-===//
//
// The CPU training loop: builds the gradient and step functions of a
// forward model, holds parameters and optimizer state, and runs steps on
// the reference interpreter with the learning rate of a schedule.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRAINING_TRAINER_H
#define KILN_TRAINING_TRAINER_H

#include "kiln/Interpreter/Tensor.h"
#include "kiln/Training/Safetensors.h"
#include "kiln/Transforms/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {

enum class ScheduleKind { Constant, Linear, Cosine };

struct LearningRateSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  double lr = 1e-3;
  /// Steps of linear warmup from 0 (all schedules).
  int64_t warmup = 0;
  /// The learning rate that linear and cosine decay reach at the last step.
  double minLr = 0.0;
  /// The learning rate of step `step` (1-based) out of `totalSteps`.
  double at(int64_t step, int64_t totalSteps) const;
};

struct TrainingSpec {
  /// How the step is compiled: what is trained, the optimizer, precision,
  /// the attention rewrite. Its `function` is set from the forward function.
  TrainingPipelineConfig pipeline;
  LearningRateSchedule schedule;
  int64_t totalSteps = 1;
  /// Seeds the initialization of parameters declared without values.
  uint64_t seed = 0;
  /// Adagrad's initial accumulator value.
  double initialAccumulator = 0.0;
};

struct StepReport {
  double loss, gradNorm, lr;
  /// Loss scaling skipped the update: the gradients overflowed, and the
  /// scale was lowered (`lossScale` is the new one; 0 without scaling).
  bool skipped = false;
  double lossScale = 0.0;
};

class Trainer {
public:
  /// Adds the gradient and step functions to `module` (whose function
  /// `forward` computes the loss) and initializes parameters and state.
  static mlir::FailureOr<std::unique_ptr<Trainer>>
  create(mlir::ModuleOp module, mlir::func::FuncOp forward,
         const TrainingSpec &spec);

  /// Runs the next step on `inputs` (the forward function's arguments; with
  /// micro-batches, concatenated along the first dimension). Errors are
  /// emitted on the module's context.
  mlir::FailureOr<StepReport> step(llvm::ArrayRef<Tensor> inputs);

  /// d(loss)/d(parameter) at the current parameters, by parameter name.
  mlir::FailureOr<NamedTensors>
  gradients(llvm::ArrayRef<Tensor> inputs);

  /// Current values of the trained and the frozen parameters, by name, as
  /// the step stores them: a padded parameter (and its optimizer state)
  /// includes its zero padding. Checkpoints and exports hold `logical`.
  llvm::StringMap<Tensor> &parameters() { return parameterValues; }
  /// A parameter's or state entry's `stored` value without its padding.
  Tensor logical(llvm::StringRef name, const Tensor &stored) const;
  /// A parameter's or state entry's `logical` value padded as stored.
  Tensor stored(llvm::StringRef name, const Tensor &logical) const;
  /// Parameter names in the order the model declares them.
  llvm::ArrayRef<std::string> parameterNames() const { return parameterOrder; }
  /// Optimizer state by "<parameter>.<slot>", in step order.
  NamedTensors &state() { return stateValues; }
  int64_t completedSteps() const { return stepsDone; }
  void setCompletedSteps(int64_t steps) { stepsDone = steps; }
  const TrainingSpec &spec() const { return trainingSpec; }
  /// Names of the trained parameters, in step order.
  llvm::ArrayRef<std::string> trainedParameters() const { return trained; }
  mlir::func::FuncOp stepFunction() const { return stepFn; }

private:
  Trainer(const TrainingSpec &spec) : trainingSpec(spec) {}
  mlir::LogicalResult initialize(mlir::func::FuncOp forward);

  TrainingSpec trainingSpec;
  mlir::func::FuncOp gradientFn, stepFn;
  llvm::StringMap<Tensor> parameterValues;
  llvm::SmallVector<std::string> parameterOrder;
  NamedTensors stateValues;
  llvm::SmallVector<std::string> trained;
  /// Buffers the step writes back (the forward pass's updates, after the
  /// state in its results).
  llvm::SmallVector<std::string> updatedBuffers;
  /// The logical shapes of padded parameters and state entries.
  llvm::StringMap<llvm::SmallVector<int64_t>> logicalShapes;
  int64_t stepsDone = 0;
};

} // namespace kiln

#endif // KILN_TRAINING_TRAINER_H
