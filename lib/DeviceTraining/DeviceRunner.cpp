//===- DeviceRunner.cpp - training steps of an artifact on a GPU ----------===//
//
// The StepRunner over the runtime's Session. Host tensors cross to the
// arena in the artifact's element types; padded parameters are read and
// written in their logical shapes, as checkpoints hold them.
//
//===----------------------------------------------------------------------===//

#include "kiln/DeviceTraining/DeviceRunner.h"

#include "kiln/Target/ArtifactTensors.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace llvm;

namespace kiln {

static Error deviceError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

static std::vector<int64_t> shapeOf(const flatbuffers::Vector<int64_t> *shape) {
  return shape ? std::vector<int64_t>(shape->begin(), shape->end())
               : std::vector<int64_t>();
}

namespace {

/// Reads and writes the session's tensors as host Tensors.
class SessionTensors {
public:
  explicit SessionTensors(runtime::Session &session) : session(session) {}

  Error write(const std::string &name, const Tensor &value) {
    const artifact::Tensor *t = session.tensor(name);
    if (!t)
      return deviceError("the artifact has no tensor '" + name + "'");
    std::vector<int64_t> shape = shapeOf(t->shape());
    Tensor stored = value.getShape() == ArrayRef<int64_t>(shape)
                        ? value
                        : value.resized(shape);
    std::vector<uint8_t> bytes = encodeTensor(stored, t->element_type());
    std::string error;
    if (!session.write(name, bytes.data(), bytes.size(), error))
      return deviceError(error);
    return Error::success();
  }

  /// The tensor in its logical shape (without tensor-core padding).
  Expected<Tensor> read(const std::string &name) {
    const artifact::Tensor *t = session.tensor(name);
    if (!t)
      return deviceError("the artifact has no tensor '" + name + "'");
    std::vector<int64_t> shape = shapeOf(t->shape());
    std::vector<uint8_t> bytes(artifact::elementCount(t->shape()) *
                               artifact::elementBytes(t->element_type()));
    std::string error;
    if (!session.read(name, bytes.data(), bytes.size(), error))
      return deviceError(error);
    Tensor value = decodeTensor(bytes.data(), t->element_type(), shape);
    std::vector<int64_t> logical = shapeOf(t->logical_shape());
    return logical.empty() ? value : value.resized(logical);
  }

private:
  runtime::Session &session;
};

class SessionRunner : public StepRunner {
public:
  SessionRunner(runtime::Session &session, const TrainingSpec &spec)
      : session(session), tensors(session), spec(spec) {
    for (const artifact::Tensor *t : *session.artifact().tensors()) {
      std::string name = t->name()->str();
      if (t->role() == artifact::Role::Input && name != "lr" && name != "step")
        specs.push_back(
            {name, dtypeOf(t->element_type()), shapeOf(t->shape())});
      if (t->role() == artifact::Role::Parameter)
        parameters.push_back(name);
      if (t->role() == artifact::Role::State)
        state.push_back(name);
    }
  }

  const std::vector<InputSpec> &inputs() const override { return specs; }
  int64_t vocabulary() const override {
    return session.artifact().vocabulary();
  }

  Expected<std::optional<StepReport>> step(ArrayRef<Tensor> batch,
                                           bool report) override {
    int64_t number = done + 1;
    double lr = spec.schedule.at(number, spec.totalSteps);
    for (auto [input, value] : llvm::zip(specs, batch))
      if (Error error = tensors.write(input.name, value))
        return std::move(error);
    Tensor lrTensor(DType::F32, {}), stepTensor(DType::I64, {});
    lrTensor.setFromDouble(0, lr);
    stepTensor.ints()[0] = number;
    if (Error error = tensors.write("lr", lrTensor))
      return std::move(error);
    if (Error error = tensors.write("step", stepTensor))
      return std::move(error);
    std::string message;
    if (!session.step(message))
      return deviceError(message);
    done = number;
    if (!report)
      return std::optional<StepReport>();
    Expected<Tensor> loss = tensors.read("loss");
    if (!loss)
      return loss.takeError();
    Expected<Tensor> norm = tensors.read("grad_norm");
    if (!norm)
      return norm.takeError();
    StepReport result{loss->getAsDouble(0), norm->getAsDouble(0), lr};
    std::string scaleName = std::string(kLossScalerState) + ".scale";
    bool scaled = session.tensor(scaleName) != nullptr;
    if (scaled) {
      Expected<Tensor> scale = tensors.read(scaleName);
      if (!scale)
        return scale.takeError();
      result.lossScale = scale->getAsDouble(0);
      result.skipped = !std::isfinite(result.gradNorm);
    }
    if (!std::isfinite(result.loss) ||
        (!scaled && !std::isfinite(result.gradNorm)))
      return deviceError(
          formatv("step {0}: the {1} is {2} (on the GPU the "
                  "update of this step is already applied)",
                  number, std::isfinite(result.loss) ? "gradient norm" : "loss",
                  std::isfinite(result.loss) ? result.gradNorm : result.loss));
    return std::optional<StepReport>(result);
  }

  int64_t completedSteps() const override { return done; }

  Expected<CheckpointContents> contents() override {
    CheckpointContents contents;
    for (auto [names, target] : {std::pair{&parameters, &contents.parameters},
                                 std::pair{&state, &contents.state}})
      for (const std::string &name : *names) {
        Expected<Tensor> value = tensors.read(name);
        if (!value)
          return value.takeError();
        target->emplace_back(name, std::move(*value));
      }
    contents.step = done;
    contents.seed = spec.seed;
    return contents;
  }

  Error restore(const CheckpointContents &contents) override {
    for (const NamedTensors *group : {&contents.parameters, &contents.state})
      for (const auto &[name, value] : *group)
        if (Error error = tensors.write(name, value))
          return error;
    done = contents.step;
    return Error::success();
  }

  Expected<NamedTensors> gradients(ArrayRef<Tensor>) override {
    return deviceError("--save-gradients runs on the CPU only (--device=cpu "
                       "with the model's .onnx or .mlir)");
  }
  bool hasOnnxModel() const override { return false; }

private:
  runtime::Session &session;
  SessionTensors tensors;
  TrainingSpec spec;
  std::vector<InputSpec> specs;
  std::vector<std::string> parameters, state;
  int64_t done = 0;
};

} // namespace

std::unique_ptr<StepRunner> makeDeviceRunner(runtime::Session &session,
                                             const TrainingSpec &spec) {
  return std::make_unique<SessionRunner>(session, spec);
}

Error writeSessionTensor(runtime::Session &session, const std::string &name,
                         const Tensor &value) {
  return SessionTensors(session).write(name, value);
}

Expected<Tensor> readSessionTensor(runtime::Session &session,
                                   const std::string &name) {
  return SessionTensors(session).read(name);
}

} // namespace kiln
