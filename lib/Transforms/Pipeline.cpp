//===- Pipeline.cpp - the training pipeline -------------------------------===//
//
// The order of kiln's passes. GELU and norm recognition, the attention
// rewrite, merging projections (which sees what attention reads in place)
// and tensor-core padding run on the imported forward function, so that
// autodiff differentiates kiln.gelu, the norms and kiln.attention with
// their own gradients and gives the padding zero gradients; the step adds
// the optimizer; precision assignment follows so that backward GEMMs obey
// the same policy; fusion then takes in the casts precision added; the memory
// plan comes last, on the final ops.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Pipeline.h"

#include "kiln/Transforms/Passes.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace kiln {

void buildTrainingPipeline(OpPassManager &manager,
                           const TrainingPipelineConfig &config) {
  manager.addNestedPass<func::FuncOp>(createKilnRecognizeGelu(
      KilnRecognizeGeluOptions{config.autodiff.train, config.autodiff.freeze}));
  manager.addNestedPass<func::FuncOp>(
      createKilnRecognizeNorms(KilnRecognizeNormsOptions{
          config.autodiff.train, config.autodiff.freeze}));
  if (config.rewriteAttention)
    manager.addNestedPass<func::FuncOp>(createKilnRewriteAttention(
        KilnRewriteAttentionOptions{config.autodiff.train,
                                    config.autodiff.freeze}));
  if (config.mergeProjections)
    manager.addNestedPass<func::FuncOp>(
        createKilnMergeProjections(KilnMergeProjectionsOptions{
            config.autodiff.train, config.autodiff.freeze}));
  if (config.padMaxOverhead > 0)
    manager.addNestedPass<func::FuncOp>(createKilnPadTensorCores(
        KilnPadTensorCoresOptions{config.padMaxOverhead}));
  manager.addPass(createKilnAutodiff(
      KilnAutodiffOptions{config.function, config.autodiff.loss,
                          config.autodiff.train, config.autodiff.freeze}));
  manager.addPass(
      createKilnBuildTrainingStep(config.function, config.optimizer));
  bool recomputes = config.recompute || config.recomputeProducts;
  // Unfused, a GELU reads its product as stored: there is no epilogue.
  manager.addPass(createKilnAssignPrecision(KilnAssignPrecisionOptions{
      precisionName(config.precision).str(), config.narrowNorms,
      config.geluEpilogue && config.fuse && !recomputes}));
  if (config.fuse)
    manager.addNestedPass<func::FuncOp>(createKilnFuse());
  if (recomputes)
    manager.addNestedPass<func::FuncOp>(
        createKilnRecompute(KilnRecomputeOptions{
            config.recomputeProducts, config.maxRecomputedProducts}));
  if (config.fuse)
    manager.addNestedPass<func::FuncOp>(createKilnFuseParameterCopies());
  manager.addNestedPass<func::FuncOp>(createKilnPlanMemory());
}

FailureOr<TrainingFunctions>
runTrainingPipeline(ModuleOp module, const TrainingPipelineConfig &config) {
  PassManager manager(module.getContext());
  buildTrainingPipeline(manager, config);
  if (failed(manager.run(module)))
    return failure();
  TrainingFunctions functions;
  functions.gradient =
      module.lookupSymbol<func::FuncOp>(config.function + "_grad");
  functions.step = module.lookupSymbol<func::FuncOp>(config.function + "_step");
  return functions;
}

namespace {
/// The textual options; the optimizer gets torch.optim's defaults.
struct TrainingPipelineOptions : PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> function{*this, "function",
                               llvm::cl::desc("The forward function"),
                               llvm::cl::init("main")};
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("The result that is the loss")};
  Option<std::string> train{*this, "train",
                            llvm::cl::desc("Train only parameters matching")};
  Option<std::string> freeze{*this, "freeze",
                             llvm::cl::desc("Freeze parameters matching")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw, sgd or adagrad"),
                                llvm::cl::init("adamw")};
  Option<int64_t> microBatches{*this, "micro-batches",
                               llvm::cl::desc("Micro-batches per step"),
                               llvm::cl::init(1)};
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("fp32, tf32, bf16 or fp16"),
                                llvm::cl::init("fp32")};
  Option<bool> narrowNorms{*this, "narrow-norms",
                           llvm::cl::desc("Norms read and write 16 bits"),
                           llvm::cl::init(false)};
  Option<bool> geluEpilogue{
      *this, "gelu-epilogue",
      llvm::cl::desc("A tanh GELU of a biased product computes on the f32 "
                     "sum, as the GEMM's epilogue (off when recomputing)"),
      llvm::cl::init(true)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse ops into kernels (false: one kernel "
                                   "per op)"),
                    llvm::cl::init(true)};
  Option<bool> mergeProjections{
      *this, "merge-projections",
      llvm::cl::desc("Merge the query, key and value projections of one "
                     "input that attention reads into one product by the "
                     "weights stacked"),
      llvm::cl::init(true)};
  Option<bool> rewriteAttention{*this, "rewrite-attention",
                         llvm::cl::desc("Rewrite attention into kiln.attention"),
                         llvm::cl::init(true)};
  Option<double> padMaxOverhead{
      *this, "pad-max-overhead",
      llvm::cl::desc("Tensor-core padding: the largest fraction of extra "
                     "GEMM work (0: no padding)"),
      llvm::cl::init(0.01)};
  Option<bool> recompute{
      *this, "recompute",
      llvm::cl::desc("Recompute cheap activations in the backward pass"),
      llvm::cl::init(false)};
  Option<bool> recomputeProducts{
      *this, "recompute-products",
      llvm::cl::desc("Also recompute matrix products with their epilogues"),
      llvm::cl::init(false)};
  Option<int64_t> maxRecomputedProducts{
      *this, "max-recomputed-products",
      llvm::cl::desc("With recompute-products: at most this many, the latest "
                     "first (-1: all that qualify)"),
      llvm::cl::init(-1)};
};
} // namespace

void registerTrainingPipeline() {
  PassPipelineRegistration<TrainingPipelineOptions>(
      "kiln-training-pipeline",
      "GELU and norm recognition, attention rewrite, tensor-core "
      "padding, autodiff, training step, "
      "precision, fusion, recomputation and memory plan",
      [](OpPassManager &manager, const TrainingPipelineOptions &options) {
        // A name that does not parse: run only the pass that reports it.
        std::optional<OptimizerKind> kind =
            parseOptimizerKind(options.optimizer);
        if (!kind)
          return manager.addPass(
              createKilnBuildTrainingStep(KilnBuildTrainingStepOptions{
                  options.function, options.optimizer, options.microBatches}));
        std::optional<Precision> precision = parsePrecision(options.precision);
        if (!precision)
          return manager.addPass(createKilnAssignPrecision(
              KilnAssignPrecisionOptions{options.precision, false}));
        TrainingPipelineConfig config;
        config.function = options.function;
        config.autodiff = {options.loss, options.train, options.freeze};
        config.optimizer = torchDefaults(*kind);
        config.optimizer.microBatches = options.microBatches;
        config.precision = *precision;
        config.narrowNorms = options.narrowNorms;
        config.geluEpilogue = options.geluEpilogue;
        config.fuse = options.fuse;
        config.optimizer.lossScaling.enabled = needsLossScaling(*precision);
        config.rewriteAttention = options.rewriteAttention;
        config.mergeProjections = options.mergeProjections;
        config.padMaxOverhead = options.padMaxOverhead;
        config.recompute = options.recompute;
        config.recomputeProducts = options.recomputeProducts;
        config.maxRecomputedProducts = options.maxRecomputedProducts;
        buildTrainingPipeline(manager, config);
      });
}

} // namespace kiln
