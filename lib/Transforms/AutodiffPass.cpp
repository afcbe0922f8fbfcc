//===- AutodiffPass.cpp - the kiln-autodiff pass --------------------------===//
//
// Runs buildGradientFunction on the named function of the module.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"
#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNAUTODIFF
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct AutodiffPass : kiln::impl::KilnAutodiffBase<AutodiffPass> {
  using KilnAutodiffBase::KilnAutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    if (!forward) {
      module.emitError() << "kiln-autodiff: no function @" << function;
      return signalPassFailure();
    }
    kiln::AutodiffOptions options{loss, train, freeze};
    if (failed(kiln::buildGradientFunction(forward, options)))
      signalPassFailure();
  }
};
} // namespace
