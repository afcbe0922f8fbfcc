//===- PyOptions.h - kiln-run's training options as keywords ----*- C++ -*-===//
//
// kiln.Trainer and kiln.compile take kiln-run's and kiln-compile's training
// options as keyword arguments, their names with underscores
// (docs/python.md).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_PYOPTIONS_H
#define KILN_PYTHON_PYOPTIONS_H

#include "kiln/Training/Trainer.h"

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

namespace kiln::python {

/// The training options, as given.
struct TrainerOptions {
  std::string loss, optimizer = "adamw", precision = "fp32";
  double lr = 1e-3;
  std::string schedule = "constant";
  int64_t warmup = 0;
  double minLr = 0.0;
  int64_t steps = 1;
  std::optional<double> weightDecay, eps;
  std::pair<double, double> betas = {0.9, 0.999};
  double momentum = 0.0, dampening = 0.0;
  bool nesterov = false;
  double lrDecay = 0.0, initialAccumulator = 0.0;
  bool noDecayBiasesNorms = false;
  double clipGradNorm = 0.0;
  std::string train, freeze;
  int64_t microBatches = 1;
  uint64_t seed = 0;
  bool narrowNorms = false, rewriteAttention = true, fuse = true,
       mergeProjections = true;
  double padMaxOverhead = 0.01;
  bool recompute = false;
};

/// Which options a call takes: those that shape the step (the pipeline's),
/// those of a run (the learning rate, its schedule, the steps, the seed),
/// or both.
enum class OptionKinds { Step, Run, Both };

/// The options named in `keywords` of the `kinds` a call takes (kiln.compile
/// the step's, kiln.GpuTrainer a run's, kiln.Trainer both). Raises
/// kiln.Error on an unknown name, an option of another kind or a value of
/// the wrong type.
TrainerOptions trainerOptions(const pybind11::dict &keywords,
                              OptionKinds kinds);

/// The training spec `options` ask for; raises kiln.Error naming the
/// argument on a bad value.
TrainingSpec trainingSpecFrom(const TrainerOptions &options);

/// Everything in `options` that changes the numbers, as text: what a
/// checkpoint must agree with to resume (the total steps may change).
std::string identityOf(const TrainerOptions &options);

} // namespace kiln::python

#endif // KILN_PYTHON_PYOPTIONS_H
