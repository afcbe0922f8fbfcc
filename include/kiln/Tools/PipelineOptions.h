//===- PipelineOptions.h - the pipeline's command-line options -*- C++ -*-===//
//
// The options that choose how the training step is compiled, shared by
// kiln-compile and kiln-run so that both spell and check them alike.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_PIPELINEOPTIONS_H
#define KILN_TOOLS_PIPELINEOPTIONS_H

#include "kiln/Transforms/Pipeline.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace kiln {

/// The category of the options that shape the compiled step: --precision,
/// --optimizer and its hyperparameters, --micro-batches, --loss, --freeze,
/// --fuse, --rewrite-attention, --merge-projections, --pad-max-overhead,
/// --recompute.
llvm::cl::OptionCategory &pipelineOptions();

/// The pipeline those options ask for, the optimizer with torch.optim's
/// defaults; an error naming the option on a bad value.
llvm::Expected<TrainingPipelineConfig> pipelineConfigFromOptions();

/// Adagrad's initial accumulator value (--initial-accumulator-value).
double initialAccumulatorFromOptions();

/// The options as text, for checks that two runs compiled the same step.
std::string pipelineOptionsIdentity();

} // namespace kiln

#endif // KILN_TOOLS_PIPELINEOPTIONS_H
