//===- KilnBase.td - kiln dialect definition and enums ----*- tablegen -*-===//
//
// The `kiln` dialect: tensor-level, value-semantics ops for Transformer
// training on ranked, statically shaped tensors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNBASE_TD
#define KILN_DIALECT_KILN_IR_KILNBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Tensor ops for compiling Transformer training steps";
  let description = [{
    The `kiln` dialect holds what a Transformer training step computes, at the
    level of whole tensors: elementwise math, matrix products, reductions,
    normalizations, data movement, losses and (later) gradients and optimizer
    updates. All tensors are ranked with static shapes; the ONNX importer
    specializes dynamic axes before any op is built. Ops have value semantics
    and no side effects, so that every rewrite can be checked by running the
    function on the reference interpreter before and after it.

    ```mlir
    func.func @mlp(%x: tensor<8x64xf32>) -> tensor<8x256xf32> {
      %w = kiln.parameter "fc.weight" : tensor<64x256xf32>
      %h = kiln.matmul %x, %w : (tensor<8x64xf32>, tensor<64x256xf32>) -> tensor<8x256xf32>
      %y = kiln.gelu %h {approximation = tanh} : tensor<8x256xf32>
      return %y : tensor<8x256xf32>
    }
    ```
  }];
  let hasConstantMaterializer = 1;
}

def Kiln_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu evaluates the Gaussian CDF", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Tanh", 1, "tanh">]> {
  let cppNamespace = "::kiln";
}

def Kiln_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "elementwise comparison", [
      I32EnumAttrCase<"EQ", 0, "eq">,
      I32EnumAttrCase<"NE", 1, "ne">,
      I32EnumAttrCase<"LT", 2, "lt">,
      I32EnumAttrCase<"LE", 3, "le">,
      I32EnumAttrCase<"GT", 4, "gt">,
      I32EnumAttrCase<"GE", 5, "ge">]> {
  let cppNamespace = "::kiln";
}

def Kiln_LossReduction : I32EnumAttr<"LossReduction",
    "how per-element losses combine", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Sum", 1, "sum">,
      I32EnumAttrCase<"Mean", 2, "mean">]> {
  let cppNamespace = "::kiln";
}

def Kiln_ScatterReduction : I32EnumAttr<"ScatterReduction",
    "how scattered values combine with the ones in place", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Add", 1, "add">,
      I32EnumAttrCase<"Mul", 2, "mul">,
      I32EnumAttrCase<"Max", 3, "max">,
      I32EnumAttrCase<"Min", 4, "min">]> {
  let cppNamespace = "::kiln";
}

def Kiln_PadMode : I32EnumAttr<"PadMode", "values placed in padding", [
      I32EnumAttrCase<"Constant", 0, "constant">,
      I32EnumAttrCase<"Reflect", 1, "reflect">,
      I32EnumAttrCase<"Edge", 2, "edge">,
      I32EnumAttrCase<"Wrap", 3, "wrap">]> {
  let cppNamespace = "::kiln";
}

#endif // KILN_DIALECT_KILN_IR_KILNBASE_TD
