//===- ModelLoading.h - what kiln's command-line tools share -----*- C++ -*-===//
//
// Loading a model given on the command line (an ONNX file to import or kiln
// IR to parse) and printing diagnostics the way the tools report errors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_MODELLOADING_H
#define KILN_TOOLS_MODELLOADING_H

#include "kiln/Import/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

namespace kiln {

/// A diagnostic as the tools print it: "error: message", prefixed by its
/// file location or the ONNX node it names.
std::string formatDiagnostic(mlir::Diagnostic &diagnostic);

/// Prints diagnostics (formatDiagnostic) for as long as it lives.
class ToolDiagnostics {
public:
  explicit ToolDiagnostics(mlir::MLIRContext *context);
  ~ToolDiagnostics();

private:
  mlir::MLIRContext *context;
  mlir::DiagnosticEngine::HandlerID id;
};

/// Registers the dialects kiln IR uses.
void registerKilnDialects(mlir::MLIRContext &context);

/// Imports `path` when it ends in .onnx, else parses it as kiln IR.
mlir::OwningOpRef<mlir::ModuleOp> loadModel(llvm::StringRef path,
                                            mlir::MLIRContext *context,
                                            const ImportOptions &options,
                                            llvm::SourceMgr &sourceManager);

/// The function to run: @`name` if given, else the module's only function.
mlir::FailureOr<mlir::func::FuncOp> findFunction(mlir::ModuleOp module,
                                                 llvm::StringRef name);

/// The user-facing name of argument or result `i`: its `kiln.name`
/// attribute (the ONNX name), else `arg<i>` / `result<i>`.
std::string argumentName(mlir::func::FuncOp function, unsigned i);
/// The rows of the table the first argument (the tokens of a language
/// model) is looked up in, or 0 when it is not looked up.
int64_t tokenVocabulary(mlir::func::FuncOp forward);
std::string resultName(mlir::func::FuncOp function, unsigned i);

} // namespace kiln

#endif // KILN_TOOLS_MODELLOADING_H
