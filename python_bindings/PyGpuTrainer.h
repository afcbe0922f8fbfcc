//===- PyGpuTrainer.h - kiln.GpuTrainer: an artifact on a GPU ---*- C++ -*-===//
//
// Training a compiled artifact (kiln.compile, kiln-compile) on the GPU as
// `kiln-run MODEL.kiln --train` does: the runtime's session, the same
// learning-rate schedule, checkpoints in the same format.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_PYGPUTRAINER_H
#define KILN_PYTHON_PYGPUTRAINER_H

#include "PyOptions.h"

#include "kiln/Runtime/Session.h"
#include "kiln/Training/Checkpoint.h"
#include "kiln/Training/StepRunner.h"

#include <pybind11/pybind11.h>

#include <memory>

namespace kiln::python {

class PyGpuTrainer {
public:
  /// Loads `artifact` on GPU `device`; `keywords` are the run's options
  /// and the session's (tune_gemms, gemm_bias_gradients, cuda_graph).
  PyGpuTrainer(const std::string &artifact, int device,
               const pybind11::kwargs &keywords);

  /// One step on `feeds`; with `report` (reading the loss back, which
  /// waits for the GPU) its loss, gradient norm and learning rate, else
  /// None.
  pybind11::object step(const pybind11::dict &feeds, bool report);
  pybind11::dict parameters();
  pybind11::dict state();
  int64_t completedSteps() const { return runner->completedSteps(); }
  std::string deviceName() const { return session->deviceName(); }
  size_t deviceBytes() const { return session->deviceBytes(); }

  void saveCheckpoint(const std::string &directory);
  void loadCheckpoint(const std::string &directory);
  void exportSafetensors(const std::string &path);

private:
  CheckpointContents contents();

  std::unique_ptr<runtime::Session> session;
  std::unique_ptr<StepRunner> runner;
  CheckpointIdentity identity;
};

} // namespace kiln::python

#endif // KILN_PYTHON_PYGPUTRAINER_H
