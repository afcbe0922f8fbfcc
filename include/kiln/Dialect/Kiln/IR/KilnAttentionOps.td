//===- KilnAttentionOps.td - fused attention ---------------*- tablegen -*-===//
//
// Attention as one op, so that no batch x heads x T x T tensor is stored:
// the forward keeps only the log-sum-exp of each score row, and the
// gradient recomputes the probabilities from it (FlashAttention).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNATTENTIONOPS_TD
#define KILN_DIALECT_KILN_IR_KILNATTENTIONOPS_TD

class Kiln_AttentionFamilyOp<string mnemonic> : Kiln_Op<mnemonic,
    [Pure, AttrSizedOperandSegments]> {
  // Shared by the forward and the gradient: what the probabilities are.
  dag attentionAttributes = (ins F64Attr:$scale, UnitAttr:$causal,
      OptionalAttr<DenseI64ArrayAttr>:$window,
      OptionalAttr<F64Attr>:$softcap,
      DefaultValuedAttr<F64Attr, "0.0">:$dropout_ratio,
      DefaultValuedAttr<I64Attr, "0">:$seed);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The keys query row `i` may attend to, `[first, last)` of `keys`,
    /// before the mask: `causal` and `window` (possibly empty).
    std::pair<int64_t, int64_t> keyRange(int64_t i, int64_t keys) {
      return attentionKeyRange(getCausal(), getWindow(), i, keys);
    }
  }];
}

def Kiln_AttentionOp : Kiln_AttentionFamilyOp<"attention"> {
  let summary = "scaled dot-product attention, masked, with dropout";
  let description = [{
    For query `[B, Hq, Tq, D]`, key `[B, Hkv, Tk, D]` and value
    `[B, Hkv, Tk, Dv]` (grouped-query heads: query head `h` reads key/value
    head `h / (Hq / Hkv)`), computes per query row `i`

      `s_j = cap(round32(round32(q_i . k_j) * scale)) + mask_ij`,
      `p = softmax(s)` over the keys `j` that take part,
      `output_i = sum_j dropout(p)_j v_j`.

    where `cap(x) = x` or, with `softcap = c` (Gemma 2's logit soft-capping),
    `round32(round32(tanh(round32(x / c))) * c)`.

    Scores, probabilities and `logsumexp` are f32 whatever the operand type
    (16-bit operands accumulate in f32), or f64 for f64 operands. A key takes part unless `causal` and
    `j > i` (top-left aligned, as PyTorch's `is_causal`), or a boolean `mask`
    is false there; a float `mask` is added to the scores. `mask` broadcasts
    to `[B, Hq, Tq, Tk]`. With `window = [left, right]` a key takes part
    only if `i - left <= j <= i + right` (a negative bound is none): a
    sliding window (Mistral's, Gemma's local layers) or a band (ModernBERT's
    local attention), whose kernels skip the tiles outside it. A row in
    which no key takes part, or whose scores
    are all -inf, gives 0. Dropout (`dropout_ratio` > 0) draws its mask
    exactly as `kiln.dropout` does over the `[B, Hq, Tq, Tk]` probabilities,
    from `seed` and `offset`. `logsumexp [B, Hq, Tq]` is the log of each
    row's softmax denominator (including its maximum), which is all the
    gradient needs to recompute the probabilities.

    ```mlir
    %o, %lse = kiln.attention %q, %k, %v {scale = 0.125 : f64, causal}
        : (tensor<2x12x1024x64xbf16>, tensor<2x12x1024x64xbf16>, tensor<2x12x1024x64xbf16>)
        -> (tensor<2x12x1024x64xbf16>, tensor<2x12x1024xf32>)
    ```
  }];
  let arguments = !con((ins Kiln_FloatTensor:$query, Kiln_FloatTensor:$key,
                            Kiln_FloatTensor:$value,
                            Optional<AnyRankedTensor>:$mask,
                            Optional<0DTensorOf<[I64]>>:$offset),
                       attentionAttributes);
  let results = (outs Kiln_FloatTensor:$output,
                      RankedTensorOf<[F32, F64]>:$logsumexp);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`offset` $offset^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

def Kiln_AttentionGradOp : Kiln_AttentionFamilyOp<"attention_grad"> {
  let summary = "gradients of attention, recomputing the probabilities";
  let description = [{
    From the forward operands, the forward `output` and `logsumexp` and the
    gradient of the output, computes the gradients of query, key and value
    (key and value gradients summed over the query heads that share them).
    With `p` recomputed as `exp(s - logsumexp)` and `d` the dropout factor:
    `dv_j = sum_i p_ij d_ij do_i`, `ds_ij = p_ij (d_ij do_i . v_j - do_i . o_i)`,
    `dq_i = scale sum_j ds_ij c_ij k_j`, `dk_j = scale sum_i ds_ij c_ij q_i`,
    with `c_ij` the soft cap's slope `1 - tanh^2` (1 without one) and the
    products rounded to the score type before the scale and after it (as the
    softmax's, the cap's and the scale's gradients round in the ops
    attention replaces). With `mask_grad` (a float mask that is trained, such as T5's
    learned position bias), it is the gradient of the additive mask: `ds`
    before the scale, summed over the positions the mask broadcasts to, in
    the mask's shape and type. Without it the mask gets no gradient.

    ```mlir
    %dq, %dk, %dv, %dbias = kiln.attention_grad %q, %k, %v mask %bias
        output %o, %lse, %do {scale = 1.0 : f64}
        : (..., tensor<1x8x128x128xf32>, ...)
        -> (tensor<4x8x128x64xbf16>, ..., tensor<1x8x128x128xf32>)
    ```
  }];
  let arguments = !con((ins Kiln_FloatTensor:$query, Kiln_FloatTensor:$key,
                            Kiln_FloatTensor:$value,
                            Optional<AnyRankedTensor>:$mask,
                            Optional<0DTensorOf<[I64]>>:$offset,
                            Kiln_FloatTensor:$output,
                            RankedTensorOf<[F32, F64]>:$logsumexp,
                            Kiln_FloatTensor:$output_grad),
                       attentionAttributes);
  let results = (outs Kiln_FloatTensor:$query_grad, Kiln_FloatTensor:$key_grad,
                      Kiln_FloatTensor:$value_grad,
                      Optional<Kiln_FloatTensor>:$mask_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`offset` $offset^)? `output`
    $output `,` $logsumexp `,` $output_grad attr-dict
    `:` functional-type(operands, results)
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNATTENTIONOPS_TD
