//===- PyOptions.cpp - kiln-run's training options as keywords ------------===//

#include "PyOptions.h"

#include "Errors.h"

#include "llvm/Support/FormatVariadic.h"

#include <pybind11/stl.h>

#include <functional>
#include <map>

namespace py = pybind11;

namespace kiln::python {

namespace {
/// How one keyword sets its option.
struct Keyword {
  std::function<void(TrainerOptions &, py::handle)> set;
  /// An option of a run rather than of the compiled step.
  bool ofRun = false;
};

template <typename T>
Keyword field(T TrainerOptions::*member, bool ofRun = false) {
  return {[member](TrainerOptions &o, py::handle value) {
            o.*member = value.cast<T>();
          },
          ofRun};
}
} // namespace

TrainerOptions trainerOptions(const py::dict &keywords, OptionKinds kinds) {
  using O = TrainerOptions;
  static const std::map<std::string, Keyword> table = {
      {"loss", field(&O::loss)},
      {"optimizer", field(&O::optimizer)},
      {"precision", field(&O::precision)},
      {"lr", field(&O::lr, true)},
      {"schedule", field(&O::schedule, true)},
      {"warmup", field(&O::warmup, true)},
      {"min_lr", field(&O::minLr, true)},
      {"steps", field(&O::steps, true)},
      {"seed", field(&O::seed, true)},
      {"weight_decay", field(&O::weightDecay)},
      {"eps", field(&O::eps)},
      {"betas", field(&O::betas)},
      {"momentum", field(&O::momentum)},
      {"dampening", field(&O::dampening)},
      {"nesterov", field(&O::nesterov)},
      {"lr_decay", field(&O::lrDecay)},
      {"initial_accumulator_value", field(&O::initialAccumulator)},
      {"no_decay_biases_norms", field(&O::noDecayBiasesNorms)},
      {"clip_grad_norm", field(&O::clipGradNorm)},
      {"train", field(&O::train)},
      {"freeze", field(&O::freeze)},
      {"micro_batches", field(&O::microBatches)},
      {"narrow_norms", field(&O::narrowNorms)},
      {"rewrite_attention", field(&O::rewriteAttention)},
      {"merge_projections", field(&O::mergeProjections)},
      {"fuse", field(&O::fuse)},
      {"pad_max_overhead", field(&O::padMaxOverhead)},
      {"recompute", field(&O::recompute)},
  };
  TrainerOptions options;
  for (const auto &[key, value] : keywords) {
    std::string name = py::str(key);
    auto keyword = table.find(name);
    if (keyword == table.end())
      raise("unknown option '" + name + "' (docs/python.md lists them)");
    if (keyword->second.ofRun && kinds == OptionKinds::Step)
      raise("'" + name +
            "' is an option of the run, which kiln-run takes "
            "with the compiled step");
    if (!keyword->second.ofRun && kinds == OptionKinds::Run)
      raise("'" + name +
            "' shapes the compiled step: give it to "
            "kiln.compile");
    try {
      keyword->second.set(options, value);
    } catch (const py::cast_error &) {
      raise("option '" + name + "' cannot take " +
            py::repr(value).cast<std::string>() + " (docs/python.md)");
    }
  }
  return options;
}

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
  pipeline.mergeProjections = o.mergeProjections;
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

std::string identityOf(const TrainerOptions &o) {
  return llvm::formatv(
             "python|{0}|{1}|{2}|{3:e16}|{4}|{5}|{6:e16}|{7:e16}|{8:e16}|"
             "{9:e16}|{10:e16}|{11:e16}|{12:e16}|{13}|{14:e16}|{15:e16}|{16}|"
             "{17:e16}|{18}|{19}|{20}|{21}|{22}|{23}|{24}|{25:e16}|{26}|{27}",
             o.loss, o.optimizer, o.precision, o.lr, o.schedule, o.warmup,
             o.minLr, o.weightDecay.value_or(-1), o.eps.value_or(-1),
             o.betas.first, o.betas.second, o.momentum, o.dampening, o.nesterov,
             o.lrDecay, o.initialAccumulator, o.noDecayBiasesNorms,
             o.clipGradNorm, o.train, o.freeze, o.microBatches, o.seed,
             o.narrowNorms, o.rewriteAttention, o.fuse, o.padMaxOverhead,
             o.recompute, o.mergeProjections)
      .str();
}

} // namespace kiln::python
