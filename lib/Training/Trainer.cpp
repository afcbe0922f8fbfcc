//===- Trainer.cpp - training on the reference interpreter ----------------===//
//
// Parameters start from the model's initializers; parameters declared
// without values (graph-only exports) start GPT-2 style, as on the GPU
// (InitialValues.h). A step whose loss is not finite is refused before it
// changes anything.
//
//===----------------------------------------------------------------------===//

#include "kiln/Training/Trainer.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Interpreter/TensorAttr.h"
#include "kiln/Support/InitialValues.h"
#include "kiln/Transforms/Pipeline.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;

namespace kiln {

double LearningRateSchedule::at(int64_t step, int64_t totalSteps) const {
  if (warmup > 0 && step <= warmup)
    return lr * static_cast<double>(step) / warmup;
  if (kind == ScheduleKind::Constant || totalSteps <= warmup)
    return lr;
  double progress = static_cast<double>(step - warmup) / (totalSteps - warmup);
  progress = std::clamp(progress, 0.0, 1.0);
  double factor = kind == ScheduleKind::Linear
                      ? 1.0 - progress
                      : 0.5 * (1.0 + std::cos(M_PI * progress));
  return minLr + (lr - minLr) * factor;
}

/// A value for a parameter declared without one, in its logical shape.
static Tensor initialValue(ParameterOp op, uint64_t seed) {
  RankedTensorType type = op.getType();
  if (std::optional<ArrayRef<int64_t>> logical = op.getLogicalShape())
    type = type.clone(*logical);
  Tensor tensor(*dtypeOf(type.getElementType()), type.getShape());
  ParameterStart start(seed, op.getName(), type.getRank());
  parallelChunks(tensor.getNumElements(), kElementsPerThread,
                 [&](int64_t begin, int64_t end) {
                   start.fill(begin, end, [&](int64_t i, double value) {
                     tensor.setFromDouble(i, value);
                   });
                 });
  return tensor;
}

LogicalResult Trainer::initialize(func::FuncOp forward) {
  WalkResult walk = forward.walk([&](ParameterOp op) {
    std::string name = op.getName().str();
    if (parameterValues.count(name))
      return WalkResult::advance();
    Tensor value;
    if (std::optional<ElementsAttr> initial = op.getInitialValue()) {
      FailureOr<Tensor> decoded = tensorFromAttr(*initial);
      if (failed(decoded)) {
        op.emitOpError() << "cannot read the value of parameter '" << name << "'";
        return WalkResult::interrupt();
      }
      value = std::move(*decoded);
    } else {
      value = initialValue(op, trainingSpec.seed);
    }
    if (std::optional<ArrayRef<int64_t>> logical = op.getLogicalShape()) {
      logicalShapes[name].assign(logical->begin(), logical->end());
      value = value.resized(op.getType().getShape());
    }
    parameterOrder.push_back(name);
    parameterValues[name] = std::move(value);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  for (unsigned i = 0; i < gradientFn.getNumResults(); ++i)
    if (auto name = gradientFn.getResultAttrOfType<StringAttr>(i, kGradientOfAttr))
      trained.push_back(name.str());
  for (unsigned i = 0; i < stepFn.getNumResults(); ++i)
    if (auto name =
            stepFn.getResultAttrOfType<StringAttr>(i, kBufferUpdateOfAttr))
      updatedBuffers.push_back(name.str());
  double fill = trainingSpec.pipeline.optimizer.kind == OptimizerKind::Adagrad
                    ? trainingSpec.initialAccumulator
                    : 0.0;
  for (const std::string &name : trained) {
    const Tensor &param = parameterValues[name];
    for (const std::string &slot : optimizerSlots(trainingSpec.pipeline.optimizer.kind)) {
      Tensor tensor(param.getDType(), param.getShape());
      for (int64_t i = 0; i < tensor.getNumElements(); ++i)
        tensor.setFromDouble(i, fill);
      // Padding is zero in every slot, Adagrad's accumulator included: the
      // gradient there is 0, so its update, 0 / (sqrt(0) + eps), is too.
      if (auto it = logicalShapes.find(name); it != logicalShapes.end()) {
        tensor = tensor.resized(it->second).resized(param.getShape());
        logicalShapes[name + "." + slot] = it->second;
      }
      stateValues.emplace_back(name + "." + slot, std::move(tensor));
    }
  }
  // State the step declares with its own initial value: the loss scaler's.
  for (unsigned i = 0; i < stepFn.getNumArguments(); ++i)
    if (auto init = stepFn.getArgAttrOfType<FloatAttr>(i, kStateInitAttr)) {
      auto type = cast<RankedTensorType>(stepFn.getArgumentTypes()[i]);
      Tensor tensor(*dtypeOf(type.getElementType()), type.getShape());
      tensor.setFromDouble(0, init.getValueAsDouble());
      auto owner = stepFn.getArgAttrOfType<StringAttr>(i, kStateOfAttr);
      auto slot = stepFn.getArgAttrOfType<StringAttr>(i, kSlotAttr);
      stateValues.emplace_back((owner.getValue() + "." + slot.getValue()).str(),
                               std::move(tensor));
    }
  return success();
}

FailureOr<std::unique_ptr<Trainer>> Trainer::create(ModuleOp module,
                                                    func::FuncOp forward,
                                                    const TrainingSpec &spec) {
  std::unique_ptr<Trainer> trainer(new Trainer(spec));
  TrainingPipelineConfig config = spec.pipeline;
  config.function = forward.getSymName().str();
  FailureOr<TrainingFunctions> functions = runTrainingPipeline(module, config);
  if (failed(functions))
    return failure();
  func::FuncOp gradient = functions->gradient, step = functions->step;
  if (gradient.getNumResults() == forward.getNumResults())
    return forward.emitError("no parameter is trained: none reaches the loss "
                             "or all are frozen");
  trainer->gradientFn = gradient;
  trainer->stepFn = step;
  if (failed(trainer->initialize(forward)))
    return failure();
  return trainer;
}

FailureOr<StepReport> Trainer::step(ArrayRef<Tensor> inputs) {
  int64_t number = stepsDone + 1;
  double lr = trainingSpec.schedule.at(number, trainingSpec.totalSteps);
  SmallVector<Tensor> arguments(inputs.begin(), inputs.end());
  Tensor lrTensor(DType::F32, {}), stepTensor(DType::I64, {});
  lrTensor.setFromDouble(0, lr);
  stepTensor.ints()[0] = number;
  arguments.push_back(std::move(lrTensor));
  arguments.push_back(std::move(stepTensor));
  for (auto &entry : stateValues)
    arguments.push_back(entry.second);

  InterpreterOptions options;
  options.parameters = &parameterValues;
  FailureOr<SmallVector<Tensor>> results = interpret(stepFn, arguments, options);
  if (failed(results))
    return failure();
  double loss = (*results)[0].getAsDouble(0);
  double gradNorm = (*results)[1].getAsDouble(0);
  // With loss scaling, overflowing gradients are the scaler's business: the
  // step kept the parameters and lowered the scale.
  bool scaled = trainingSpec.pipeline.optimizer.lossScaling.enabled;
  if (!std::isfinite(loss) || (!scaled && !std::isfinite(gradNorm)))
    return stepFn.emitError() << "step " << number << ": the "
                              << (std::isfinite(loss) ? "gradient norm" : "loss")
                              << " is " << (std::isfinite(loss) ? gradNorm : loss)
                              << "; the parameters keep their values from step "
                              << stepsDone;
  unsigned next = 2;
  for (const std::string &name : trained)
    parameterValues[name] = std::move((*results)[next++]);
  for (auto &entry : stateValues)
    entry.second = std::move((*results)[next++]);
  for (const std::string &name : updatedBuffers)
    parameterValues[name] = std::move((*results)[next++]);
  stepsDone = number;
  StepReport report{loss, gradNorm, lr};
  if (scaled) {
    report.skipped = !std::isfinite(gradNorm);
    std::string scaleName = std::string(kLossScalerState) + ".scale";
    for (const auto &[name, value] : stateValues)
      if (name == scaleName)
        report.lossScale = value.floats()[0];
  }
  return report;
}

Tensor Trainer::logical(StringRef name, const Tensor &stored) const {
  auto it = logicalShapes.find(name);
  return it == logicalShapes.end() ? stored : stored.resized(it->second);
}

Tensor Trainer::stored(StringRef name, const Tensor &logical) const {
  auto it = logicalShapes.find(name);
  if (it == logicalShapes.end())
    return logical;
  StringRef parameter = parameterValues.count(name)
                            ? name
                            : name.rsplit('.').first; // "<parameter>.<slot>"
  return logical.resized(parameterValues.find(parameter)->second.getShape());
}

FailureOr<NamedTensors>
Trainer::gradients(ArrayRef<Tensor> inputs) {
  InterpreterOptions options;
  options.parameters = &parameterValues;
  FailureOr<SmallVector<Tensor>> results = interpret(gradientFn, inputs, options);
  if (failed(results))
    return failure();
  NamedTensors byName;
  for (unsigned i = 0; i < gradientFn.getNumResults(); ++i)
    if (auto name = gradientFn.getResultAttrOfType<StringAttr>(i, kGradientOfAttr))
      byName.emplace_back(name.str(), logical(name, (*results)[i]));
  return byName;
}

} // namespace kiln
