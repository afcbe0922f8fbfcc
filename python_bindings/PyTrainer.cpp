//===- PyTrainer.cpp - kiln.Trainer: training on the CPU ------------------===//

#include "PyTrainer.h"

#include "Errors.h"
#include "NumpyTensors.h"

#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/TensorIO/ModelExport.h"
#include "kiln/Training/Safetensors.h"

#include "llvm/Support/MemoryBuffer.h"

namespace py = pybind11;

namespace kiln::python {

PyTrainer::PyTrainer(Model &model, const TrainerOptions &options)
    : model(model) {
  TrainingSpec spec = trainingSpecFrom(options);
  mlir::func::FuncOp original = model.getForward();
  for (unsigned r = 0; r < original.getNumResults(); ++r)
    if (original.getResultAttr(r, kUpdateOfAttr))
      raise("'" + model.getPath() +
            "' trains itself (TrainingInfoProto): run it with kiln-run "
            "--train");
  // The trainer adds its functions to a copy: a model may have several.
  module = model.getModule().clone();
  forward = module->lookupSymbol<mlir::func::FuncOp>(original.getSymName());
  DiagnosticCapture diagnostics(model.getContext());
  mlir::FailureOr<std::unique_ptr<Trainer>> created =
      Trainer::create(*module, forward, spec);
  diagnostics.check(created, "cannot build the training step");
  trainer = std::move(*created);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> bytes =
      llvm::MemoryBuffer::getFile(model.getPath());
  identity = {digest((bytes ? (*bytes)->getBuffer() : llvm::StringRef()).str() +
                     "|" + model.getImportIdentity()),
              digest(identityOf(options))};
}

py::dict PyTrainer::step(const py::dict &feeds) {
  std::vector<Tensor> inputs =
      argumentsFrom(feeds, forward, trainer->stepFunction());
  DiagnosticCapture diagnostics(model.getContext());
  mlir::FailureOr<StepReport> report = trainer->step(inputs);
  diagnostics.check(report);
  py::dict result;
  result["loss"] = report->loss;
  result["grad_norm"] = report->gradNorm;
  result["lr"] = report->lr;
  if (trainer->spec().pipeline.optimizer.lossScaling.enabled) {
    result["skipped"] = report->skipped;
    result["loss_scale"] = report->lossScale;
  }
  return result;
}

py::dict PyTrainer::gradients(const py::dict &feeds) {
  // The gradient function reads one batch, as the forward function does.
  std::vector<Tensor> inputs = argumentsFrom(feeds, forward, forward);
  DiagnosticCapture diagnostics(model.getContext());
  mlir::FailureOr<NamedTensors> gradients = trainer->gradients(inputs);
  diagnostics.check(gradients);
  return toDict(*gradients);
}

py::dict PyTrainer::parameters() {
  return toDict(checkpointContents(*trainer).parameters);
}

py::dict PyTrainer::state() {
  return toDict(checkpointContents(*trainer).state);
}

void PyTrainer::saveCheckpoint(const std::string &directory) {
  check(writeCheckpoint(directory, checkpointContents(*trainer), identity));
}

void PyTrainer::loadCheckpoint(const std::string &directory) {
  CheckpointContents restored =
      check(readCheckpoint(directory, checkpointContents(*trainer), identity));
  restoreCheckpointContents(*trainer, restored);
}

void PyTrainer::exportOnnx(const std::string &path) {
  if (!llvm::StringRef(model.getPath()).ends_with(".onnx"))
    raise("export_onnx needs a model imported from ONNX, not '" +
          model.getPath() + "'");
  llvm::StringMap<Tensor> values;
  for (auto &[name, tensor] : checkpointContents(*trainer).parameters)
    values[name] = tensor;
  check(exportONNXWithInitializers(model.getPath(), path, values));
}

void PyTrainer::exportSafetensors(const std::string &path) {
  check(writeSafetensors(path, checkpointContents(*trainer).parameters,
                         {{"format", "pt"}}));
}

} // namespace kiln::python
