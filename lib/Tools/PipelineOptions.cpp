//===- PipelineOptions.cpp - the pipeline's command-line options ----------===//

#include "kiln/Tools/PipelineOptions.h"

#include "llvm/Support/FormatVariadic.h"

using namespace llvm;

namespace kiln {

cl::OptionCategory &pipelineOptions() {
  static cl::OptionCategory category("Training-step compilation");
  return category;
}

static cl::opt<std::string> precision(
    "precision", cl::init("fp32"), cl::cat(pipelineOptions()),
    cl::desc("fp32, or tf32, bf16, fp16: GEMMs and attention read operands "
             "in that type and accumulate in fp32; the rest and the master "
             "weights stay fp32; fp16 scales the loss dynamically"));
static cl::opt<std::string> optimizer("optimizer", cl::init("adamw"),
                                      cl::cat(pipelineOptions()),
                                      cl::desc("adamw, sgd or adagrad"));
static cl::opt<int64_t> microBatches(
    "micro-batches", cl::init(1), cl::cat(pipelineOptions()),
    cl::desc("Split each batch into this many micro-batches and accumulate "
             "their gradients"));
static cl::opt<std::string> loss("loss", cl::cat(pipelineOptions()),
                                 cl::desc("The output to minimize (default: "
                                          "the first scalar output)"));
static cl::opt<bool> rewriteAttention(
    "rewrite-attention", cl::init(true), cl::cat(pipelineOptions()),
    cl::desc("Replace attention with kiln.attention, which stores no "
             "batch x heads x T x T tensor (=false keeps the exported ops)"));

static cl::opt<double> padMaxOverhead(
    "pad-max-overhead", cl::init(0.01), cl::cat(pipelineOptions()),
    cl::desc("Pad weights so that GEMM dimensions suit tensor cores (GPT-2's "
             "vocabulary 50257 -> 50304), adding at most this fraction of "
             "GEMM work; 0 turns padding off"));

static cl::opt<bool> recompute(
    "recompute", cl::cat(pipelineOptions()),
    cl::desc("Recompute cheap activations (elementwise results) in the "
             "backward pass instead of keeping them: less memory, a few more "
             "kernels"));

Expected<TrainingPipelineConfig> pipelineConfigFromOptions() {
  auto bad = [](const Twine &message) {
    return createStringError(inconvertibleErrorCode(), message);
  };
  TrainingPipelineConfig config;
  std::optional<OptimizerKind> kind = parseOptimizerKind(optimizer);
  if (!kind)
    return bad("unknown --optimizer '" + optimizer +
               "' (adamw, sgd or adagrad)");
  config.optimizer = torchDefaults(*kind);
  if (microBatches < 1)
    return bad("--micro-batches must be at least 1");
  config.optimizer.microBatches = microBatches;
  std::optional<Precision> parsed = parsePrecision(precision);
  if (!parsed)
    return bad("unknown --precision '" + precision +
               "' (fp32, tf32, bf16 or fp16)");
  config.precision = *parsed;
  config.optimizer.lossScaling.enabled = needsLossScaling(*parsed);
  config.autodiff.loss = loss;
  config.rewriteAttention = rewriteAttention;
  if (padMaxOverhead < 0)
    return bad("--pad-max-overhead must not be negative");
  config.padMaxOverhead = padMaxOverhead;
  config.recompute = recompute;
  return config;
}

std::string pipelineOptionsIdentity() {
  // The attention rewrite changes rounding (SDPA's scale), so it counts.
  return formatv("{0}|{1}|{2}|{3}|{4}|{5}|{6}", precision, optimizer,
                 microBatches, loss, rewriteAttention, padMaxOverhead,
                 recompute)
      .str();
}

} // namespace kiln
