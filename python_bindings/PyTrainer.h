//===- PyTrainer.h - kiln.Trainer: training on the CPU ----------*- C++ -*-===//
//
// Training a kiln.Model on the reference interpreter, as `kiln-run --train`
// does: the same pipeline and options, checkpoints in the same format, and
// the trained weights exported as ONNX or safetensors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_PYTRAINER_H
#define KILN_PYTHON_PYTRAINER_H

#include "PyModel.h"
#include "PyOptions.h"

#include "kiln/Training/Checkpoint.h"
#include "kiln/Training/Trainer.h"

namespace kiln::python {

class PyTrainer {
public:
  PyTrainer(Model &model, const TrainerOptions &options);

  /// One step on `feeds` (every model input; with micro-batches, the
  /// micro-batches concatenated along the first dimension): a dict of the
  /// loss, the gradient norm before clipping, the learning rate, and with
  /// loss scaling whether the update was skipped and the new scale.
  pybind11::dict step(const pybind11::dict &feeds);
  /// d(loss)/d(parameter) at the current parameters, by name, for one
  /// batch of the model's shapes (not micro-batches concatenated).
  pybind11::dict gradients(const pybind11::dict &feeds);
  /// Parameters and optimizer state in the model's shapes (no padding).
  pybind11::dict parameters();
  pybind11::dict state();
  int64_t completedSteps() const { return trainer->completedSteps(); }

  /// A checkpoint directory as kiln-run writes it (written aside and
  /// renamed, so an existing one is never half replaced), and back.
  void saveCheckpoint(const std::string &directory);
  void loadCheckpoint(const std::string &directory);
  /// The model file with the trained initializers (ONNX models only).
  void exportOnnx(const std::string &path);
  void exportSafetensors(const std::string &path);

private:
  Model &model;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp forward;
  std::unique_ptr<Trainer> trainer;
  CheckpointIdentity identity;
};

} // namespace kiln::python

#endif // KILN_PYTHON_PYTRAINER_H
