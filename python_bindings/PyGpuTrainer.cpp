//===- PyGpuTrainer.cpp - kiln.GpuTrainer: an artifact on a GPU -----------===//

#include "PyGpuTrainer.h"

#include "Errors.h"
#include "NumpyTensors.h"

#include "kiln/DeviceTraining/DeviceRunner.h"
#include "kiln/Training/Safetensors.h"

#include <map>

namespace py = pybind11;

namespace kiln::python {

PyGpuTrainer::PyGpuTrainer(const std::string &artifact, int device,
                           const py::kwargs &keywords) {
  // The session's options, then the run's.
  runtime::SessionOptions sessionOptions;
  sessionOptions.device = device;
  std::map<std::string, bool *> switches = {
      {"tune_gemms", &sessionOptions.tuneGemms},
      {"gemm_bias_gradients", &sessionOptions.gemmBiasGradients},
      {"cuda_graph", &sessionOptions.cudaGraph},
      {"device_grids", &sessionOptions.deviceGrids}};
  py::dict run;
  for (const auto &[key, value] : keywords) {
    auto option = switches.find(py::str(key).cast<std::string>());
    if (option == switches.end())
      run[key] = value;
    else if (py::isinstance<py::bool_>(value))
      *option->second = value.cast<bool>();
    else
      raise("option '" + option->first + "' cannot take " +
            py::repr(value).cast<std::string>() + " (docs/python.md)");
  }
  TrainerOptions options = trainerOptions(run, OptionKinds::Run);
  TrainingSpec spec = trainingSpecFrom(options);
  spec.totalSteps = options.steps;
  sessionOptions.seed = spec.seed;
  std::string error;
  session = runtime::Session::load(artifact, sessionOptions, error);
  if (!session)
    raise(error);
  runner = makeDeviceRunner(*session, spec);
  const artifact::Artifact &model = session->artifact();
  identity = {digest(model.model_hash()->str() + "|" + model.options()->str()),
              digest("python-gpu|" + identityOf(options))};
}

py::object PyGpuTrainer::step(const py::dict &feeds, bool report) {
  std::vector<Tensor> batch = tensorsFrom(feeds, runner->inputs());
  std::optional<StepReport> done = check(runner->step(batch, report));
  if (!done)
    return py::none();
  py::dict result;
  result["loss"] = done->loss;
  result["grad_norm"] = done->gradNorm;
  result["lr"] = done->lr;
  if (done->lossScale > 0) {
    result["skipped"] = done->skipped;
    result["loss_scale"] = done->lossScale;
  }
  return std::move(result);
}

CheckpointContents PyGpuTrainer::contents() {
  return check(runner->contents());
}

py::dict PyGpuTrainer::parameters() { return toDict(contents().parameters); }

py::dict PyGpuTrainer::state() { return toDict(contents().state); }

void PyGpuTrainer::saveCheckpoint(const std::string &directory) {
  check(writeCheckpoint(directory, contents(), identity));
}

void PyGpuTrainer::loadCheckpoint(const std::string &directory) {
  check(
      runner->restore(check(readCheckpoint(directory, contents(), identity))));
}

void PyGpuTrainer::exportSafetensors(const std::string &path) {
  check(writeSafetensors(path, contents().parameters, {{"format", "pt"}}));
}

} // namespace kiln::python
