//===- KilnGradientOps.td - fused gradient ops -------------*- tablegen -*-===//
//
// Gradients that are cheaper fused than composed from forward ops. The
// autodiff pass (lib/Autodiff) emits them; every one is checked against
// finite differences of its forward op.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNGRADIENTOPS_TD
#define KILN_DIALECT_KILN_IR_KILNGRADIENTOPS_TD

class Kiln_SoftmaxGradFamilyOp<string mnemonic, string formula>
    : Kiln_Op<mnemonic, [Pure, AllTypesMatch<["output", "grad", "result"]>]> {
  let summary = "gradient of " # mnemonic # " from its output";
  let description = "Given `output` of the forward op and the gradient `grad` "
    # "with respect to it, computes `" # formula # "` along `axis`, the "
    # "gradient with respect to the forward input, without keeping that "
    # "input.";
  let arguments = (ins Kiln_FloatTensor:$output, Kiln_FloatTensor:$grad,
                       I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::kiln::verifyAxis(*this, getAxis(), getType().getRank());
    }
  }];
}

def Kiln_SoftmaxGradOp : Kiln_SoftmaxGradFamilyOp<"softmax_grad",
    "output * (grad - sum(grad * output))">;
def Kiln_LogSoftmaxGradOp : Kiln_SoftmaxGradFamilyOp<"log_softmax_grad",
    "grad - exp(output) * sum(grad)">;

def Kiln_GeluGradOp : Kiln_Op<"gelu_grad",
    [Pure, Elementwise, AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "gradient of gelu";
  let description = [{
    `grad * gelu'(input)`, with the derivative of the form `approximation`
    names: `Phi(x) + x phi(x)` exactly, or, for the tanh form with
    `t = tanh(k (x + c x^3))`, `0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)`.
    One op, so that a GEMM producing `grad` can apply it in its epilogue
    (cuBLASLt's DGELU); the interpreter computes it in fp64.

    ```mlir
    %dx = kiln.gelu_grad %x, %dy approximation = tanh : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$grad,
                       Kiln_GeluApproximation:$approximation);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `approximation` `=` $approximation attr-dict `:` type($result)
  }];
}

def Kiln_LayerNormGradOp : Kiln_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradients of layer_norm";
  let description = [{
    From the forward input, its saved `mean` and `inv_std_dev`, the `scale`
    (absent: 1) and the gradient of the output, computes the gradients of the
    input and, over the normalized dimensions `[axis, rank)`, of scale and
    bias (`scale_grad` and `bias_grad`, summed over the leading dimensions).
    With `x^ = (x - mean) * inv_std_dev` and `g = grad * scale` over the N
    normalized elements: `dx = inv_std_dev * (g - mean(g) - x^ * mean(g * x^))`,
    `scale_grad = sum(grad * x^)`, `bias_grad = sum(grad)`. The computed
    gradients share one type; the input and `grad` may be stored in a
    narrower float type (the 16-bit copy that narrow norms keep for the
    backward pass, a product's gradient stored in 16 bits).
  }];
  let arguments = (ins Kiln_FloatTensor:$input, RankedTensorOf<[F32]>:$mean,
                       RankedTensorOf<[F32]>:$inv_std_dev,
                       Kiln_FloatTensor:$grad, Optional<Kiln_FloatTensor>:$scale,
                       I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$input_grad,
                      Kiln_FloatTensor:$scale_grad,
                      Kiln_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $mean `,` $inv_std_dev `,` $grad (`scale` $scale^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_RmsNormGradOp : Kiln_Op<"rms_norm_grad", [Pure]> {
  let summary = "gradients of rms_norm";
  let description = [{
    With `x^ = x * inv_rms` and `g = grad * scale` over the normalized
    dimensions: `dx = inv_rms * (g - x^ * mean(g * x^))`,
    `scale_grad = sum(grad * x^)` over the leading dimensions. As for
    layer_norm_grad, the input and `grad` may be narrower than the computed
    gradients.
  }];
  let arguments = (ins Kiln_FloatTensor:$input, RankedTensorOf<[F32]>:$inv_rms,
                       Kiln_FloatTensor:$grad, Optional<Kiln_FloatTensor>:$scale,
                       I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$input_grad,
                      Kiln_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $input `,` $inv_rms `,` $grad (`scale` $scale^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class Kiln_ClassificationLossGradOp<string mnemonic, string forward,
                                    string perClass>
    : Kiln_Op<mnemonic, [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "gradient of " # forward # " with respect to its input";
  let description = "For the forward op's `input`, `labels` and `weight`, "
    # "and `grad`, the gradient of its result (shaped like that result), "
    # "computes the gradient with respect to `input`: for a counted element "
    # "with label `y` and weight `w`, `" # perClass # "` times `w` and the "
    # "element's share of `grad` (its own entry for `none`, `grad` for `sum`, "
    # "`grad` divided by the total weight for `mean`); ignored elements get 0, "
    # "and so do padding classes (at or after `num_classes`).";
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_IntegerTensor:$labels,
                       Kiln_FloatTensor:$grad, Optional<Kiln_FloatTensor>:$weight,
                       Kiln_LossReduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<I64Attr>:$num_classes);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels `,` $grad (`weight` $weight^)? `reduction` `=` $reduction
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::kiln::verifyClassificationLossGrad(*this);
    }
  }];
}

def Kiln_CrossEntropyGradOp : Kiln_ClassificationLossGradOp<
    "cross_entropy_grad", "cross_entropy", "softmax(input) - onehot(y)">;
def Kiln_NllLossGradOp : Kiln_ClassificationLossGradOp<
    "nll_loss_grad", "nll_loss", "-onehot(y)">;

def Kiln_GatherGradOp : Kiln_Op<"gather_grad", [Pure]> {
  let summary = "gradient of gather: scatter-add into zeros";
  let description = [{
    The gradient of `kiln.gather` with respect to its data: a zero tensor of
    the result's type into which every slice of `grad` is added at the data
    slice its index selected. Rows selected several times (a token repeated
    in a batch) receive the sum. For an embedding table this is the
    embedding gradient.

    ```mlir
    %dw = kiln.gather_grad %dy, %ids {axis = 0 : i64}
        : (tensor<2x32x64xf32>, tensor<2x32xi64>) -> tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_IntegerTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
    "$grad `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kiln_InsertSliceOp : Kiln_Op<"insert_slice",
    [Pure, AllTypesMatch<["dest", "result"]>]> {
  let summary = "a tensor with a strided window replaced";
  let description = [{
    `dest` with the window that `kiln.slice` with the same `start` and
    `stride` would read replaced by `source`. The gradient of a slice, a pad
    or a concat inserts into zeros.

    ```mlir
    %y = kiln.insert_slice %zeros, %g {start = array<i64: 0, 4>, stride = array<i64: 1, 1>}
        : (tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$dest, AnyRankedTensor:$source,
                       DenseI64ArrayAttr:$start, DenseI64ArrayAttr:$stride);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat =
    "$dest `,` $source attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // KILN_DIALECT_KILN_IR_KILNGRADIENTOPS_TD
