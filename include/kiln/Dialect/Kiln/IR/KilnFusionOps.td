//===- KilnFusionOps.td - fused regions --------------------*- tablegen -*-===//
//
// A fusion is one kernel's worth of ops: the CUDA target emits one kernel
// per kiln.fusion, so its intermediate values never reach memory.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNFUSIONOPS_TD
#define KILN_DIALECT_KILN_IR_KILNFUSIONOPS_TD

def Kiln_FusionOp : Kiln_Op<"fusion", [IsolatedFromAbove, Pure]> {
  let summary = "ops computed together, in one kernel";
  let description = [{
    Runs its body once: the entry block's arguments are the `inputs`, and
    the values `kiln.yield` returns are the results. Its meaning is exactly
    that of the body's ops run in order; only values the fusion yields are
    stored.

    ```mlir
    %r = kiln.fusion %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %s = kiln.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %g = kiln.gelu %s : tensor<4x8xf32>
      kiln.yield %g : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
    "$inputs attr-dict `:` functional-type($inputs, results) $body";
  let hasVerifier = 1;
}

def Kiln_YieldOp : Kiln_Op<"yield",
    [Pure, Terminator, HasParent<"FusionOp">]> {
  let summary = "the results of a fusion";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // KILN_DIALECT_KILN_IR_KILNFUSIONOPS_TD
