//===- TrainingStep.h - a whole training step as one function ----*- C++ -*-===//
//
// Builds, from a gradient function (see Autodiff.h), the function that runs
// one optimizer step: forward, backward, optional gradient clipping and
// accumulation over micro-batches, and the optimizer update of every
// trainable parameter, as kiln ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_AUTODIFF_TRAININGSTEP_H
#define KILN_AUTODIFF_TRAININGSTEP_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

enum class OptimizerKind { AdamW, SGD, Adagrad };

/// Dynamic loss scaling, decided inside the step as torch.amp.GradScaler
/// decides it on the host: the backward pass starts from `scale` instead of
/// 1; a step whose gradients overflow is skipped (parameters, state and the
/// optimizer's step count keep their values) and multiplies the scale by
/// `backoff`; `growthInterval` good steps in a row multiply it by `growth`.
struct LossScaling {
  bool enabled = false;
  double initialScale = 65536.0;
  double growth = 2.0, backoff = 0.5;
  int64_t growthInterval = 2000;
};

/// Hyperparameters with torch.optim's defaults.
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::AdamW;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  /// torch.optim.AdamW's default; SGD and Adagrad default to 0 in PyTorch,
  /// which the command line applies.
  double weightDecay = 0.01;
  double momentum = 0.0, dampening = 0.0;
  bool nesterov = false;
  double lrDecay = 0.0;
  /// Exempt parameters of rank 0 or 1 (biases, norm weights) from weight
  /// decay, as GPT-2 and BERT recipes do.
  bool exemptBiasesAndNorms = false;
  /// Clip gradients to this global L2 norm (0: no clipping).
  double clipGradNorm = 0.0;
  /// Accumulate gradients over this many micro-batches per step: inputs
  /// are split along their first dimension.
  int64_t microBatches = 1;
  LossScaling lossScaling;
};

/// Parses "adamw", "sgd" or "adagrad".
std::optional<OptimizerKind> parseOptimizerKind(llvm::StringRef name);
llvm::StringRef optimizerKindName(OptimizerKind kind);

/// torch.optim's defaults for `kind` (weight decay 0.01 for AdamW and 0
/// otherwise; epsilon 1e-10 for Adagrad and 1e-8 otherwise).
OptimizerOptions torchDefaults(OptimizerKind kind);

/// The optimizer state slots of `kind`, e.g. {"exp_avg", "exp_avg_sq"}.
std::vector<std::string> optimizerSlots(OptimizerKind kind);

/// Adds `@<forward>_step` next to the gradient function `gradient`.
/// Arguments: the model inputs (micro-batches concatenated along dimension
/// 0), then `lr` (tensor<f32>) and `step` (tensor<i64>, 1 for the first
/// update), then the optimizer state: for each trainable parameter, one
/// tensor per slot, marked `kiln.state_of` and `kiln.slot`. Results: the loss
/// (mean over micro-batches), the global gradient norm before clipping
/// (`grad_norm`), the updated parameters (`kiln.update_of`), then the new
/// state in the order of the arguments, then the forward pass's buffer
/// updates (`kiln.buffer_update_of`). With loss scaling, three more state
/// arguments and results of `kiln.state_of = "loss_scaler"` follow: the
/// scale (f32), the good steps in a row and the optimizer steps taken (i64),
/// each argument with its initial value in `kiln.state_init`; `grad_norm` is
/// then not finite for a skipped step.
mlir::FailureOr<mlir::func::FuncOp>
buildTrainingStep(mlir::func::FuncOp gradient, const OptimizerOptions &options);

constexpr const char *kUpdateOfAttr = "kiln.update_of";
/// On a forward function's result and the step's: the new value of a
/// buffer the forward pass updates (BatchNormalization's running
/// statistics), written over it after each step; the buffer is not trained.
/// With micro-batches, each micro-batch's forward pass reads the value the
/// previous one wrote, as PyTorch's would.
constexpr const char *kBufferUpdateOfAttr = "kiln.buffer_update_of";
constexpr const char *kStateOfAttr = "kiln.state_of";
constexpr const char *kSlotAttr = "kiln.slot";
constexpr const char *kStateInitAttr = "kiln.state_init";
/// Whether result `i` of a step is written over what it updates: a
/// parameter, a buffer or optimizer state.
inline bool writesBack(mlir::func::FuncOp step, unsigned i) {
  return step.getResultAttr(i, kUpdateOfAttr) ||
         step.getResultAttr(i, kBufferUpdateOfAttr) ||
         step.getResultAttr(i, kStateOfAttr);
}

/// The `kiln.state_of` of the loss scaler's state.
constexpr const char *kLossScalerState = "loss_scaler";

} // namespace kiln

#endif // KILN_AUTODIFF_TRAININGSTEP_H
