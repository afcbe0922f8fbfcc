//===- kiln-translate.cpp - translations into kiln IR ---------------------===//
//
// `kiln-translate --import-onnx MODEL.onnx [--dim NAME=SIZE ...]` prints the
// kiln IR of an ONNX model.
//
//===----------------------------------------------------------------------===//

#include "kiln/Tools/ModelLoading.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace llvm;

static cl::OptionCategory category("kiln-translate options");

static cl::opt<std::string> inputPath(cl::Positional, cl::cat(category),
                                      cl::desc("<model.onnx>"), cl::Required);
static cl::opt<bool> importOnnx(cl::cat(category), "import-onnx",
                                cl::desc("Import an ONNX model as kiln IR"));
static cl::list<std::string>
    dims(cl::cat(category), "dim",
         cl::desc("Size of a symbolic dimension, NAME=SIZE"),
         cl::value_desc("NAME=SIZE"));
static cl::opt<std::string> outputPath(cl::cat(category), "o",
                                       cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"));
static cl::opt<bool> elideWeights(
    cl::cat(category), "elide-weights",
    cl::desc("Print parameter values as dense_resource handles only"));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "kiln translation driver\n");
  if (!importOnnx) {
    errs() << "kiln-translate: error: choose a translation (--import-onnx)\n";
    return 1;
  }
  kiln::ImportOptions options;
  for (const std::string &dim : dims)
    if (!kiln::parseDimensionOption(dim, options)) {
      errs() << "kiln-translate: error: --dim expects NAME=SIZE with a "
                "positive SIZE, got '"
             << dim << "'\n";
      return 1;
    }

  mlir::MLIRContext context;
  kiln::registerKilnDialects(context);
  kiln::ToolDiagnostics diagnostics(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      kiln::importONNXModel(inputPath, &context, options);
  if (!module)
    return 1;

  std::string error;
  std::unique_ptr<ToolOutputFile> output =
      mlir::openOutputFile(outputPath, &error);
  if (!output) {
    errs() << "kiln-translate: error: " << error << "\n";
    return 1;
  }
  mlir::OpPrintingFlags flags;
  if (elideWeights)
    flags.elideLargeResourceString(0);
  module->print(output->os(), flags);
  output->keep();
  return 0;
}
