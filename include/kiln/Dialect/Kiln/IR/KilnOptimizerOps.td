//===- KilnOptimizerOps.td - parameter updates -------------*- tablegen -*-===//
//
// One optimizer update of one parameter, with PyTorch's semantics, as ops of
// the training step. The learning rate and the step number are operands so
// that a schedule can change them between steps without recompiling; the
// other hyperparameters are attributes. Arithmetic is in fp32 like
// PyTorch's (the interpreter computes each expression in fp64 and rounds
// the stored results).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNOPTIMIZEROPS_TD
#define KILN_DIALECT_KILN_IR_KILNOPTIMIZEROPS_TD

def Kiln_AdamWOp : Kiln_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "new_param",
                   "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "one AdamW update (torch.optim.AdamW)";
  let description = [{
    With `t = step` (1 for the first update) and `lr`:
    ```
    param      = param * (1 - lr * weight_decay)
    exp_avg    = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
    param      = param - (lr / (1 - beta1^t)) * exp_avg
                 / (sqrt(exp_avg_sq) / sqrt(1 - beta2^t) + epsilon)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$exp_avg, Kiln_FloatTensor:$exp_avg_sq,
                       0DTensorOf<[F32]>:$lr, 0DTensorOf<[I64]>:$step,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       F64Attr:$weight_decay);
  let results = (outs Kiln_FloatTensor:$new_param,
                      Kiln_FloatTensor:$new_exp_avg,
                      Kiln_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step attr-dict
    `:` type($param) `,` type($lr) `,` type($step)
  }];
}

def Kiln_SgdOp : Kiln_Op<"sgd", [Pure,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param",
                   "new_momentum_buffer"]>]> {
  let summary = "one SGD update with momentum (torch.optim.SGD)";
  let description = [{
    ```
    g = grad + weight_decay * param
    buf = step == 1 ? g : momentum * buf + (1 - dampening) * g
    g = nesterov ? g + momentum * buf : buf      (g alone when momentum = 0)
    param = param - lr * g
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$momentum_buffer,
                       0DTensorOf<[F32]>:$lr, 0DTensorOf<[I64]>:$step,
                       F64Attr:$momentum, F64Attr:$dampening,
                       F64Attr:$weight_decay, UnitAttr:$nesterov);
  let results = (outs Kiln_FloatTensor:$new_param,
                      Kiln_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr `,` $step attr-dict `:`
    type($param) `,` type($lr) `,` type($step)
  }];
}

def Kiln_AdagradOp : Kiln_Op<"adagrad", [Pure,
    AllTypesMatch<["param", "grad", "sum", "new_param", "new_sum"]>]> {
  let summary = "one Adagrad update (torch.optim.Adagrad)";
  let description = [{
    ```
    g = grad + weight_decay * param
    sum = sum + g^2
    param = param - lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + epsilon)
    ```
    The accumulator starts at PyTorch's `initial_accumulator_value`, which the
    caller chooses.
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$sum, 0DTensorOf<[F32]>:$lr,
                       0DTensorOf<[I64]>:$step, F64Attr:$lr_decay,
                       F64Attr:$weight_decay, F64Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$new_param, Kiln_FloatTensor:$new_sum);
  let assemblyFormat = [{
    $param `,` $grad `,` $sum `,` $lr `,` $step attr-dict `:` type($param)
    `,` type($lr) `,` type($step)
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNOPTIMIZEROPS_TD
