//===- Passes.td - kiln passes -----------------------------*- tablegen -*-===//
//
// Ordering (lib/Transforms/Pipeline.cpp): GELU and norm recognition,
// the attention rewrite, merging projections and tensor-core padding run on
// the imported forward function; kiln-autodiff then adds its gradient
// function and the training step the optimizer update;
// kiln-assign-precision runs on the step, so that backward GEMMs follow the
// policy too; fusion, recomputation and the memory plan come last.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PASSES_TD
#define KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnMergeProjections : Pass<"kiln-merge-projections", "mlir::func::FuncOp"> {
  let summary = "Merge products of one input by several weights into one";
  let description = [{
    Replaces the products of one input by 2-D weight parameters (BERT's
    query, key and value projections; a gated MLP's gate and up) with one
    product by the weights stacked, as GPT-2's c_attn packs them
    (lib/Transforms/MergeProjections.cpp): the input is read once, and the
    backward pass computes its gradient and the weights' in one GEMM each
    instead of one per weight. Products merge when their weights are stored
    as Linear layers store theirs ([out, in], read transposed: each
    weight's gradient is then a contiguous block of the merged one),
    attention reads their results in place, they share the input and
    whether it is transposed, each adds a 1-D bias parameter (its only use)
    or none does, and their weights are all trained or all not (`train` and
    `freeze` are autodiff's). Readers read column slices of the merged
    product. The forward function computes exactly what it did; parameters
    stay apart. Run it on the forward function after the attention
    rewrite, before autodiff.
  }];
  let options = [
    Option<"train", "train", "std::string", "\"\"",
           "The parameters autodiff will train (its option)">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "The parameters autodiff will freeze (its option)">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnRecognizeGelu : Pass<"kiln-recognize-gelu", "mlir::func::FuncOp"> {
  let summary = "Replace GELU spelled out op by op with kiln.gelu";
  let description = [{
    Recognizes `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`
    (GPT-2) and `x * 0.5 * (1 + erf(x / sqrt(2)))` (BERT), in any order of
    their commutative ops, with constants or untrained scalar parameters as
    literals, and every intermediate used once
    (lib/Transforms/RecognizeGelu.cpp). kiln.gelu computes the formula in
    fp64 and rounds once, so results change by at most the rounding of the
    ops it replaces; its gradient needs only x.
  }];
  let options = [
    Option<"train", "train", "std::string", "\"\"",
           "The parameters autodiff will train (its option)">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "The parameters autodiff will freeze (its option)">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnRecognizeNorms : Pass<"kiln-recognize-norms", "mlir::func::FuncOp"> {
  let summary = "Replace RMS and layer norms spelled out op by op with one op";
  let description = [{
    Recognizes `x * (1 / sqrt(mean(x^2) + eps)) * scale` (Llama, T5, Gemma
    below opset 23) as kiln.rms_norm and `d / sqrt(mean(d^2) + eps) * scale
    + bias` with `d = x - mean(x)` (layer norms below opset 17, older BERT
    code) as kiln.layer_norm; the reciprocal also as kiln.reciprocal or a
    division, a square also as a product with itself, `d` also computed
    twice, the means over the same trailing axes, kept, the scale and bias
    optional and any tensors of the normalized dimensions, with constants
    or untrained scalar parameters as literals and no intermediate read
    elsewhere (lib/Transforms/RecognizeNorms.cpp). The norms compute in
    fp64 and round once, so results change by at most the rounding of the
    ops they replace; their gradients are one op too.
  }];
  let options = [
    Option<"train", "train", "std::string", "\"\"",
           "The parameters autodiff will train (its option)">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "The parameters autodiff will freeze (its option)">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnRewriteAttention : Pass<"kiln-rewrite-attention", "mlir::func::FuncOp"> {
  let summary = "Replace spelled-out attention with kiln.attention";
  let description = [{
    Matches the attention patterns that exporters emit (eager and SDPA;
    scale before or after the product, or a division; additive masks,
    `where` masks with -inf or the lowest float, SDPA's NaN guard, dropout on
    the probabilities, key/value heads repeated for grouped-query attention)
    and replaces each with one `kiln.attention`
    (lib/Transforms/RewriteAttention.cpp). Constant masks that keep
    everything disappear; exactly causal ones become the `causal` flag.
    Patterns that do not match exactly are left alone. Run it on the forward
    function, before autodiff, so that the backward pass uses
    `kiln.attention_grad`. `train` and `freeze` are autodiff's: scalar
    parameters that they do not train are read as literals (dynamo exports
    lift scales into them).
  }];
  let options = [
    Option<"train", "train", "std::string", "\"\"",
           "The parameters autodiff will train (its option)">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "The parameters autodiff will freeze (its option)">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnPadTensorCores : Pass<"kiln-pad-tensor-cores", "mlir::func::FuncOp"> {
  let summary = "Store weights padded so that GEMM dimensions suit tensor cores";
  let description = [{
    Pads each 2-D weight dimension that becomes a GEMM's M or N and is not a
    multiple of 8, to the widest alignment (128 down to 8) that costs at most
    `max-overhead` more work (lib/Transforms/PadTensorCores.cpp): GPT-2's
    vocabulary 50257 becomes 50304. The weight is stored padded with zeros
    (`logical_shape`); the padding flows through transposes, reshapes,
    slices, products and gathers, and losses over padded classes ignore
    them (`num_classes`); any other use reads the logical slice. The padded
    function computes exactly what it did. Run it on the forward function,
    before autodiff, so that the padding's gradients are zero.
  }];
  let options = [
    Option<"maxOverhead", "max-overhead", "double", "0.01",
           "The largest fraction of extra GEMM work padding may add">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnAutodiff : Pass<"kiln-autodiff", "mlir::ModuleOp"> {
  let summary = "Add the gradient function of a forward function";
  let description = [{
    Adds `@<function>_grad`: the forward results, then d(loss)/d(parameter)
    for every trainable parameter (a `kiln.parameter` of floating-point type
    that reaches the loss differentiably and matches `train` but not
    `freeze`), each result marked `kiln.gradient_of`. Reverse mode with one
    rule per op (lib/Autodiff); uses of one parameter add up; frozen
    parameters get no gradient work.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"main\"",
           "The forward function">,
    Option<"loss", "loss", "std::string", "\"\"",
           "The result that is the loss (its kiln.name); default: the first "
           "floating-point scalar result">,
    Option<"train", "train", "std::string", "\"\"",
           "Train only parameters whose name matches this regex">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "Do not train parameters whose name matches this regex">,
  ];
  let dependentDialects = ["kiln::KilnDialect", "mlir::func::FuncDialect"];
}

def KilnBuildTrainingStep : Pass<"kiln-build-training-step", "mlir::ModuleOp"> {
  let summary = "Add the training step of a gradient function";
  let description = [{
    Adds `@<function>_step` (lib/Autodiff/TrainingStep.cpp) next to the
    gradient function `@<function>_grad`: forward and backward per
    micro-batch, averaged, the global gradient norm, and one optimizer op
    per trainable parameter with torch.optim's defaults.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"main\"",
           "The forward function whose _grad function to use">,
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "adamw, sgd or adagrad">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnAssignPrecision : Pass<"kiln-assign-precision", "mlir::ModuleOp"> {
  let summary = "Compute GEMMs and attention in tf32, bf16 or fp16";
  let description = [{
    Applies the mixed-precision policy (lib/Transforms/AssignPrecision.cpp)
    to every function: with `precision=tf32|bf16|fp16`, each kiln.matmul of
    f32 operands reads them cast to that type and accumulates in f32
    (`accumulate = f32`), and so do kiln.attention and its gradient; all
    other ops, the parameters and the optimizer state stay f32. With
    `narrow-norms=true` (bf16, fp16), kiln.layer_norm and kiln.rms_norm read
    their input cast to 16 bits (the copy their gradients read) and store
    their output in 16 bits; statistics and gradients stay f32. A tanh GELU
    of a biased product reads the f32 sum, which the GEMM's GELU epilogue
    computes, and the sum is stored rounded for the GELU's gradient;
    `gelu-epilogue=false` reads the stored sum instead (what recomputation
    needs to recompute the GELU alone). Run it on a training step, after
    autodiff (fp16's loss scaling is the step's).
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"bf16\"",
           "fp32, tf32, bf16 or fp16">,
    Option<"narrowNorms", "narrow-norms", "bool", "false",
           "Norms read and write 16 bits (bf16 and fp16)">,
    Option<"geluEpilogue", "gelu-epilogue", "bool", "true",
           "A tanh GELU of a biased product reads the f32 sum, as the "
           "GEMM's GELU epilogue computes it (bf16 and fp16)">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnFuse : Pass<"kiln-fuse", "mlir::func::FuncOp"> {
  let summary = "Group elementwise chains into kiln.fusion regions";
  let description = [{
    Outlines connected elementwise ops (unary math, casts, broadcasting
    arithmetic, comparisons, where), the data movement between them
    (reshape, transpose, slice, insert_slice) and the reductions that end
    them into `kiln.fusion` ops, one kernel each, whose intermediate values
    are never stored (lib/Transforms/Fuse.cpp).
    An op joins its producer's fusion only where every outside use of the
    fusion's values follows it, so the rewrite never reorders a use before
    its definition. The function computes bit for bit what it did before.
  }];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnFuseParameterCopies
    : Pass<"kiln-fuse-parameter-copies", "mlir::func::FuncOp"> {
  let summary = "Make the parameters' 16-bit copies one fusion";
  let description = [{
    Moves the first copy of each parameter that no fusion computes (the
    bf16 weights and biases that GEMMs read) before the first reader of
    any, into one `kiln.fusion`, copies of one type next to each other: the
    CUDA target launches each type's copies once. Copies made later
    (recomputed for the backward pass) stay. Run it after recomputation:
    the copies' first reads are where they were computed before. The
    function computes bit for bit what it did.
  }];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnRecompute : Pass<"kiln-recompute", "mlir::func::FuncOp"> {
  let summary = "Recompute cheap activations in the backward pass";
  let description = [{
    Gradient checkpointing for what is cheap to recompute
    (lib/Transforms/Recompute.cpp): an elementwise op or fusion whose result
    is read again long after it was computed (the backward pass reading a
    forward activation) is cloned right before those late reads, when all
    its operands are live there anyway. The result then dies after its
    early reads; no other lifetime grows. Bit for bit the same step. Run it
    after fusion, before the memory plan. With `products`, fusions that
    compute a matrix product (a GEMM and its epilogue) are recomputed too:
    less memory for a GEMM more; `max-products` bounds how many.
  }];
  let options = [
    Option<"products", "products", "bool", /*default=*/"false",
           "Also recompute matrix products with their epilogues">,
    Option<"maxProducts", "max-products", "int64_t", /*default=*/"-1",
           "With products: recompute at most this many, the latest first "
           "(-1: every one that qualifies)">,
  ];
  let dependentDialects = ["kiln::KilnDialect"];
}

def KilnPlanMemory : Pass<"kiln-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Give every tensor of a step a static offset in one arena";
  let description = [{
    Plans the function's buffers (lib/Transforms/MemoryPlan.cpp): live ranges
    in op order, first-fit placement, in-place parameter and state updates,
    reshapes as views. Records the arena size (`kiln.arena_bytes`) and the
    largest live set (`kiln.peak_live_bytes`) on the function and, on every
    op of its body, the offset of each result (`kiln.offsets`; -1 for
    constants and parameters' reads, which live elsewhere or in their own
    buffer). Ops inside a kiln.fusion get none: their values stay in the
    fused kernel.
  }];
  let dependentDialects = ["kiln::KilnDialect"];
}

#endif // KILN_TRANSFORMS_PASSES_TD
