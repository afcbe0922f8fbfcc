//===- DeviceRunner.h - training steps of an artifact on a GPU --*- C++ -*-===//
//
// The GPU side of training: a StepRunner over a loaded artifact (kiln-run
// with a .kiln model, kiln.GpuTrainer), and the session's tensors as host
// Tensors, padded parameters in their logical shapes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DEVICETRAINING_DEVICERUNNER_H
#define KILN_DEVICETRAINING_DEVICERUNNER_H

#include "kiln/Runtime/Session.h"
#include "kiln/Training/StepRunner.h"

#include <memory>

namespace kiln {

/// Steps of `session`'s training step with `spec`'s schedule; the loss is
/// read back only for the steps asked to report it.
std::unique_ptr<StepRunner> makeDeviceRunner(runtime::Session &session,
                                             const TrainingSpec &spec);

/// Writes `value` (in the tensor's logical shape) into tensor `name`.
llvm::Error writeSessionTensor(runtime::Session &session,
                               const std::string &name, const Tensor &value);
/// Tensor `name` in its logical shape (without tensor-core padding).
llvm::Expected<Tensor> readSessionTensor(runtime::Session &session,
                                         const std::string &name);

} // namespace kiln

#endif // KILN_DEVICETRAINING_DEVICERUNNER_H
