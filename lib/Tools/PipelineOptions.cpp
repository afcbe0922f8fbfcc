//===- PipelineOptions.cpp - the pipeline's command-line options ----------===//

#include "kiln/Tools/PipelineOptions.h"

#include "llvm/ADT/SmallVector.h"
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
static cl::opt<bool> narrowNorms(
    "narrow-norms", cl::cat(pipelineOptions()),
    cl::desc("With --precision=bf16 or fp16: layer and RMS norms read their "
             "input and write their output in that type (the backward pass "
             "keeps half the bytes); statistics and gradients stay fp32"));
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
static cl::opt<bool> mergeProjections(
    "merge-projections", cl::init(true), cl::cat(pipelineOptions()),
    cl::desc("Merge the query, key and value projections of one input that "
             "attention reads (Linear weights) into one product by the "
             "weights stacked (=false keeps one product per weight)"));
static cl::opt<bool>
    fuse("fuse", cl::init(true), cl::cat(pipelineOptions()),
         cl::desc("Fuse elementwise chains, GEMM epilogues and the optimizer's "
                  "updates into kernels (=false: one kernel per op, the "
                  "ablation's baseline)"));

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

static cl::opt<bool> recomputeProducts(
    "recompute-products", cl::cat(pipelineOptions()),
    cl::desc("With --recompute, also recompute matrix products with their "
             "epilogues (GPT-2's MLP pre-activations): less memory still, "
             "for one more GEMM per recomputed product"));

static cl::opt<int64_t> maxRecomputedProducts(
    "max-recomputed-products", cl::init(-1), cl::cat(pipelineOptions()),
    cl::value_desc("N"),
    cl::desc("Recompute at most N matrix products, the latest first (implies "
             "--recompute-products; kiln-compile --max-memory with a given "
             "batch picks the fewest that fit)"));

static cl::opt<double> weightDecay(
    "weight-decay", cl::init(-1.0), cl::cat(pipelineOptions()),
    cl::desc("Weight decay (default: 0.01 for adamw, 0 for sgd and adagrad, "
             "as in torch.optim)"));
static cl::opt<std::string> betas("betas", cl::init("0.9,0.999"),
                                  cl::cat(pipelineOptions()),
                                  cl::desc("AdamW's beta1,beta2"));
static cl::opt<double> eps("eps", cl::init(-1.0), cl::cat(pipelineOptions()),
                           cl::desc("Epsilon (default: 1e-8 for adamw, 1e-10 "
                                    "for adagrad)"));
static cl::opt<double> momentum("momentum", cl::init(0.0), cl::cat(pipelineOptions()),
                                cl::desc("SGD momentum"));
static cl::opt<double> dampening("dampening", cl::init(0.0), cl::cat(pipelineOptions()),
                                 cl::desc("SGD dampening"));
static cl::opt<bool> nesterov("nesterov", cl::cat(pipelineOptions()),
                              cl::desc("SGD with Nesterov momentum"));
static cl::opt<double> lrDecay("lr-decay", cl::init(0.0), cl::cat(pipelineOptions()),
                               cl::desc("Adagrad learning-rate decay"));
static cl::opt<double> initialAccumulator(
    "initial-accumulator-value", cl::init(0.0), cl::cat(pipelineOptions()),
    cl::desc("Adagrad's initial accumulator value"));
static cl::opt<bool> noDecayBiasesNorms(
    "no-decay-biases-norms", cl::cat(pipelineOptions()),
    cl::desc("Exempt biases and norm weights (parameters of rank 0 or 1) "
             "from weight decay"));
static cl::opt<double> clipGradNorm("clip-grad-norm", cl::init(0.0),
                                    cl::cat(pipelineOptions()),
                                    cl::desc("Clip gradients to this global "
                                             "norm (0: off)"));
static cl::opt<std::string> freeze("freeze", cl::cat(pipelineOptions()),
                                   cl::desc("Do not train parameters matching"),
                                   cl::value_desc("REGEX"));

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
  OptimizerOptions &o = config.optimizer;
  SmallVector<StringRef> parts;
  StringRef(betas).split(parts, ',');
  if (parts.size() != 2 || parts[0].trim().getAsDouble(o.beta1) ||
      parts[1].trim().getAsDouble(o.beta2) || o.beta1 < 0 || o.beta1 >= 1 ||
      o.beta2 < 0 || o.beta2 >= 1)
    return bad("--betas expects two numbers in [0, 1), got '" + betas + "'");
  if (weightDecay >= 0)
    o.weightDecay = weightDecay;
  if (eps >= 0)
    o.epsilon = eps;
  o.momentum = momentum;
  o.dampening = dampening;
  o.nesterov = nesterov;
  if (nesterov && (momentum <= 0 || dampening != 0))
    return bad("--nesterov needs --momentum > 0 and no --dampening");
  o.lrDecay = lrDecay;
  o.exemptBiasesAndNorms = noDecayBiasesNorms;
  o.clipGradNorm = clipGradNorm;
  if (clipGradNorm < 0)
    return bad("--clip-grad-norm must not be negative");
  config.autodiff.freeze = freeze;
  if (microBatches < 1)
    return bad("--micro-batches must be at least 1");
  config.optimizer.microBatches = microBatches;
  std::optional<Precision> parsed = parsePrecision(precision);
  if (!parsed)
    return bad("unknown --precision '" + precision +
               "' (fp32, tf32, bf16 or fp16)");
  config.precision = *parsed;
  if (narrowNorms && *parsed != Precision::BF16 && *parsed != Precision::FP16)
    return bad("--narrow-norms needs --precision=bf16 or fp16");
  config.narrowNorms = narrowNorms;
  config.optimizer.lossScaling.enabled = needsLossScaling(*parsed);
  config.autodiff.loss = loss;
  config.rewriteAttention = rewriteAttention;
  config.mergeProjections = mergeProjections;
  config.fuse = fuse;
  if (padMaxOverhead < 0)
    return bad("--pad-max-overhead must not be negative");
  config.padMaxOverhead = padMaxOverhead;
  if (maxRecomputedProducts < -1)
    return bad("--max-recomputed-products must not be negative");
  bool products = recomputeProducts || maxRecomputedProducts >= 0;
  config.recompute = recompute || products;
  config.recomputeProducts = products;
  config.maxRecomputedProducts = maxRecomputedProducts;
  return config;
}

double initialAccumulatorFromOptions() { return initialAccumulator; }

std::string pipelineOptionsIdentity() {
  // The attention rewrite changes rounding (SDPA's scale), so it counts;
  // so does merging projections (the input gradient's).
  // Doubles in full ({N:e16}): formatv's default keeps two decimals.
  return formatv("{0}|{1}|{2}|{3}|{4}|{5}|{6:e16}|{7}|{8:e16}|{9}|{10:e16}|"
                 "{11:e16}|{12:e16}|{13}|{14:e16}|{15:e16}|{16}|{17:e16}|{18}|"
                 "{19}|{20}|{21}|{22}",
                 precision, narrowNorms, optimizer, microBatches, loss,
                 rewriteAttention, double(padMaxOverhead), recompute,
                 double(weightDecay), betas, double(eps), double(momentum),
                 double(dampening), nesterov, double(lrDecay),
                 double(initialAccumulator), noDecayBiasesNorms,
                 double(clipGradNorm), freeze, recomputeProducts,
                 maxRecomputedProducts, fuse, mergeProjections)
      .str();
}

} // namespace kiln
