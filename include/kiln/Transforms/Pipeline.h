//===- Pipeline.h - the training pipeline -----------------------*- C++ -*-===//
//
// All of kiln's passes in their order, as one pipeline: kiln-opt's
// --kiln-training-pipeline, kiln-compile and kiln-run's trainer run it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PIPELINE_H
#define KILN_TRANSFORMS_PIPELINE_H

#include "kiln/Autodiff/Autodiff.h"
#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/Transforms/AssignPrecision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

namespace kiln {

/// What the pipeline builds: the step of `@function` with these settings.
struct TrainingPipelineConfig {
  std::string function = "main";
  AutodiffOptions autodiff;
  OptimizerOptions optimizer;
  Precision precision = Precision::FP32;
  /// Norms read and write 16 bits (bf16 and fp16; statistics stay f32).
  bool narrowNorms = false;
  /// A tanh GELU of a biased product computes on the f32 sum, as the GEMM's
  /// GELU epilogue does (bf16 and fp16), instead of on the stored 16-bit
  /// sum. Off whenever the pipeline recomputes: only a GELU of the stored
  /// sum can be recomputed alone, bit for bit.
  bool geluEpilogue = true;
  /// Fuse elementwise chains, GEMM epilogues and the multi-tensor update
  /// into kernels; off, every op is its own kernel (the ablation's
  /// baseline).
  bool fuse = true;
  /// Replace spelled-out attention with kiln.attention (FlashAttention).
  bool rewriteAttention = true;
  /// Merge products of one input by several weights (query, key and value
  /// projections) into one product by the weights concatenated.
  bool mergeProjections = true;
  /// Pad weights to tensor-core friendly GEMM sizes (vocabulary 50304),
  /// allowing at most this fraction of extra GEMM work; 0 turns it off.
  double padMaxOverhead = 0.01;
  /// Recompute cheap activations in the backward pass instead of keeping
  /// them (less memory, a few more elementwise kernels).
  bool recompute = false;
  /// Also recompute matrix products with their epilogues (implies
  /// `recompute`): less memory still, for a GEMM more per product.
  bool recomputeProducts = false;
  /// With `recomputeProducts`: at most this many products, the latest
  /// first (negative: every one that qualifies).
  int64_t maxRecomputedProducts = -1;
};

/// GELU recognition -> norm recognition -> attention rewrite ->
/// [merged projections] -> tensor-core padding -> autodiff -> training step
/// -> precision -> [fusion] -> [recompute] -> [parameter copies] -> memory
/// plan.
void buildTrainingPipeline(mlir::OpPassManager &manager,
                           const TrainingPipelineConfig &config);

/// The functions the pipeline added to a module.
struct TrainingFunctions {
  mlir::func::FuncOp gradient, step;
};

/// Runs the pipeline on `module`; errors are emitted on its context.
mlir::FailureOr<TrainingFunctions>
runTrainingPipeline(mlir::ModuleOp module,
                    const TrainingPipelineConfig &config);

/// Registers --kiln-training-pipeline.
void registerTrainingPipeline();

} // namespace kiln

#endif // KILN_TRANSFORMS_PIPELINE_H
