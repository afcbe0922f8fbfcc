//===- kiln-opt.cpp - the kiln optimizer driver ---------------------------===//
//
// mlir-opt for kiln: parses kiln IR, runs passes, prints the result. Only the
// dialects kiln IR uses are registered, which keeps the tool small to build.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  kiln::registerKilnPasses();
  kiln::registerTrainingPipeline();

  mlir::DialectRegistry registry;
  registry.insert<kiln::KilnDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kiln optimizer driver\n", registry));
}
