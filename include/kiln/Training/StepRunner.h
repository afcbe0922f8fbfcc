//===- StepRunner.h - one training loop, two executors ----------*- C++ -*-===//
//
// kiln-run (and kiln.GpuTrainer) train with the same loop, options,
// progress line, JSON log and checkpoints on the reference interpreter (a
// model's .onnx or .mlir) and on a GPU (a compiled .kiln artifact). A
// StepRunner is what differs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRAINING_STEPRUNNER_H
#define KILN_TRAINING_STEPRUNNER_H

#include "kiln/Interpreter/Tensor.h"
#include "kiln/Training/Checkpoint.h"
#include "kiln/Training/Trainer.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// One input of the model's forward function, per micro-batch step.
struct InputSpec {
  std::string name;
  DType type;
  std::vector<int64_t> shape;
};

class StepRunner {
public:
  virtual ~StepRunner() = default;
  /// The batch inputs, in order.
  virtual const std::vector<InputSpec> &inputs() const = 0;
  /// The size of the token vocabulary (0: unknown), to check data files.
  virtual int64_t vocabulary() const = 0;
  /// Runs the next step on `batch` with learning rate `lr`. With `report`,
  /// returns its loss and gradient norm, which a GPU then reads back.
  virtual llvm::Expected<std::optional<StepReport>>
  step(llvm::ArrayRef<Tensor> batch, bool report) = 0;
  virtual int64_t completedSteps() const = 0;
  /// Parameters and state, in the model's shapes.
  virtual llvm::Expected<CheckpointContents> contents() = 0;
  virtual llvm::Error restore(const CheckpointContents &contents) = 0;
  /// d(loss)/d(parameter) on `batch` (--save-gradients).
  virtual llvm::Expected<NamedTensors>
  gradients(llvm::ArrayRef<Tensor> batch) = 0;
  /// Whether --export-onnx can rewrite the model's initializers.
  virtual bool hasOnnxModel() const = 0;
};

} // namespace kiln

#endif // KILN_TRAINING_STEPRUNNER_H
