//===- Training.h - kiln-run --train -----------------------------*- C++ -*-===//
//
// The training mode of kiln-run: its options live in Training.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_TRAINING_H
#define KILN_TOOLS_KILN_RUN_TRAINING_H

#include "kiln/Interpreter/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"

namespace kiln {

/// The training options, for --help.
llvm::cl::OptionCategory &trainingOptions();

/// True when `--train` was given.
bool trainingRequested();
/// True when `--train=REGEX` chose the parameters to train.
bool trainingSelectsParameters();

/// Trains `forward` of `module` (imported from `modelPath`, with `identity`
/// describing the import options) on the CPU. `inputs` holds the tensors
/// given with --input, by input name. Returns the exit code.
int runTraining(mlir::ModuleOp module, mlir::func::FuncOp forward,
                llvm::StringRef modelPath, llvm::StringRef importIdentity,
                const llvm::StringMap<Tensor> &inputs);

class StepRunner;
struct CheckpointIdentity;
struct TrainingSpec;

/// The training spec the options give (schedule, seed, optimizer, ...).
llvm::Expected<TrainingSpec> trainingSpecFromOptions();
/// The options that must match for a checkpoint to resume, as text.
std::string trainingSpecIdentity();
/// --steps.
int64_t trainingSteps();

/// Trains with `runner` for --steps steps, on --data or the --input
/// tensors, with the progress line, JSON log, checkpoints and exports the
/// options ask for. Losses are read back every `reportEvery` steps (and at
/// the first, the last and every checkpoint). Returns the exit code.
int runTrainingLoop(StepRunner &runner, llvm::StringRef modelPath,
                    const CheckpointIdentity &identity,
                    const llvm::StringMap<Tensor> &inputs, int64_t microBatches,
                    int64_t reportEvery);

} // namespace kiln

#endif // KILN_TOOLS_KILN_RUN_TRAINING_H
