//===- Passes.td - kiln passes -----------------------------*- tablegen -*-===//
//
// Ordering: kiln-autodiff runs on the imported forward function and adds its
// gradient function; kiln-build-training-step then adds the optimizer
// update. Later passes (precision, fusion, memory) run on the step.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PASSES_TD
#define KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // KILN_TRANSFORMS_PASSES_TD
