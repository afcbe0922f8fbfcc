//===- PyTrainer.cpp - kiln.Trainer: training on the CPU ------------------===//

#include "PyTrainer.h"

#include "Errors.h"
#include "NumpyTensors.h"

#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/TensorIO/ModelExport.h"
#include "kiln/Training/Safetensors.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

namespace py = pybind11;

namespace kiln::python {

TrainingSpec trainingSpecFrom(const TrainerOptions &o) {
  TrainingSpec spec;
  TrainingPipelineConfig &pipeline = spec.pipeline;
  std::optional<OptimizerKind> kind = parseOptimizerKind(o.optimizer);
  if (!kind)
    raise("unknown optimizer '" + o.optimizer + "' (adamw, sgd or adagrad)");
  OptimizerOptions &optimizer = pipeline.optimizer = torchDefaults(*kind);
  auto [beta1, beta2] = o.betas;
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1)
    raise("betas must lie in [0, 1)");
  optimizer.beta1 = beta1;
  optimizer.beta2 = beta2;
  if (o.weightDecay)
    optimizer.weightDecay = *o.weightDecay;
  if (o.eps)
    optimizer.epsilon = *o.eps;
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    raise("nesterov needs momentum > 0 and no dampening");
  optimizer.momentum = o.momentum;
  optimizer.dampening = o.dampening;
  optimizer.nesterov = o.nesterov;
  optimizer.lrDecay = o.lrDecay;
  optimizer.exemptBiasesAndNorms = o.noDecayBiasesNorms;
  if (o.clipGradNorm < 0)
    raise("clip_grad_norm must not be negative");
  optimizer.clipGradNorm = o.clipGradNorm;
  if (o.microBatches < 1)
    raise("micro_batches must be at least 1");
  optimizer.microBatches = o.microBatches;
  std::optional<Precision> precision = parsePrecision(o.precision);
  if (!precision)
    raise("unknown precision '" + o.precision + "' (fp32, tf32, bf16 or fp16)");
  if (o.narrowNorms && *precision != Precision::BF16 &&
      *precision != Precision::FP16)
    raise("narrow_norms needs precision 'bf16' or 'fp16'");
  pipeline.precision = *precision;
  pipeline.narrowNorms = o.narrowNorms;
  optimizer.lossScaling.enabled = needsLossScaling(*precision);
  pipeline.autodiff = {o.loss, o.train, o.freeze};
  pipeline.rewriteAttention = o.rewriteAttention;
  pipeline.fuse = o.fuse;
  if (o.padMaxOverhead < 0)
    raise("pad_max_overhead must not be negative");
  pipeline.padMaxOverhead = o.padMaxOverhead;
  pipeline.recompute = o.recompute;
  static const std::map<std::string, ScheduleKind> schedules = {
      {"constant", ScheduleKind::Constant},
      {"linear", ScheduleKind::Linear},
      {"cosine", ScheduleKind::Cosine}};
  auto schedule = schedules.find(o.schedule);
  if (schedule == schedules.end())
    raise("unknown schedule '" + o.schedule + "' (constant, linear or cosine)");
  if (o.lr <= 0 || o.warmup < 0 || o.minLr < 0)
    raise("lr must be positive, warmup and min_lr not negative");
  if (o.steps < 1)
    raise("steps must be at least 1");
  spec.schedule = {schedule->second, o.lr, o.warmup, o.minLr};
  spec.totalSteps = o.steps;
  spec.seed = o.seed;
  spec.initialAccumulator = o.initialAccumulator;
  return spec;
}

/// Everything in `o` that changes the numbers: what a checkpoint must agree
/// with to resume (the total number of steps may change).
static std::string identityOf(const TrainerOptions &o) {
  return llvm::formatv(
             "python|{0}|{1}|{2}|{3:e16}|{4}|{5}|{6:e16}|{7:e16}|{8:e16}|"
             "{9:e16}|{10:e16}|{11:e16}|{12:e16}|{13}|{14:e16}|{15:e16}|{16}|"
             "{17:e16}|{18}|{19}|{20}|{21}|{22}|{23}|{24}|{25:e16}|{26}",
             o.loss, o.optimizer, o.precision, o.lr, o.schedule, o.warmup,
             o.minLr, o.weightDecay.value_or(-1), o.eps.value_or(-1),
             o.betas.first, o.betas.second, o.momentum, o.dampening, o.nesterov,
             o.lrDecay, o.initialAccumulator, o.noDecayBiasesNorms,
             o.clipGradNorm, o.train, o.freeze, o.microBatches, o.seed,
             o.narrowNorms, o.rewriteAttention, o.fuse, o.padMaxOverhead,
             o.recompute)
      .str();
}

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
