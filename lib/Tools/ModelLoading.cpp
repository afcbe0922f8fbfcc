//===- ModelLoading.cpp - what kiln's command-line tools share ------------===//
//
// Model loading and diagnostic printing for kiln-translate and kiln-run.
//
//===----------------------------------------------------------------------===//

#include "kiln/Tools/ModelLoading.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

std::string formatDiagnostic(Diagnostic &diagnostic) {
  std::string text;
  llvm::raw_string_ostream os(text);
  const char *severity =
      diagnostic.getSeverity() == DiagnosticSeverity::Error     ? "error"
      : diagnostic.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                                : "note";
  if (auto file = dyn_cast<FileLineColLoc>(diagnostic.getLocation()))
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn() << ": ";
  else if (auto name = dyn_cast<NameLoc>(diagnostic.getLocation()))
    os << "'" << name.getName().getValue() << "': ";
  os << severity << ": " << diagnostic.str();
  return text;
}

ToolDiagnostics::ToolDiagnostics(MLIRContext *context) : context(context) {
  id = context->getDiagEngine().registerHandler([](Diagnostic &diagnostic) {
    llvm::errs() << formatDiagnostic(diagnostic) << "\n";
    return success();
  });
}

ToolDiagnostics::~ToolDiagnostics() {
  context->getDiagEngine().eraseHandler(id);
}

void registerKilnDialects(MLIRContext &context) {
  context.loadDialect<KilnDialect, func::FuncDialect>();
}

OwningOpRef<ModuleOp> loadModel(StringRef path, MLIRContext *context,
                                const ImportOptions &options,
                                llvm::SourceMgr &sourceManager) {
  if (path.ends_with(".onnx"))
    return importONNXModel(path, context, options);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file =
      mlir::openInputFile(path, &error);
  if (!file) {
    emitError(UnknownLoc::get(context)) << path << ": " << error;
    return nullptr;
  }
  sourceManager.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceManager, context);
}

FailureOr<func::FuncOp> findFunction(ModuleOp module, StringRef name) {
  auto functions = llvm::to_vector(module.getOps<func::FuncOp>());
  if (!name.empty()) {
    for (func::FuncOp function : functions)
      if (function.getSymName() == name)
        return function;
    return module.emitError() << "the model has no function @" << name;
  }
  if (functions.size() != 1)
    return module.emitError() << "the model has " << functions.size()
                              << " functions; choose one with --function";
  return functions.front();
}

std::string argumentName(func::FuncOp function, unsigned i) {
  if (auto name = function.getArgAttrOfType<StringAttr>(i, "kiln.name"))
    return name.str();
  return "arg" + std::to_string(i);
}

std::string resultName(func::FuncOp function, unsigned i) {
  if (auto name = function.getResultAttrOfType<StringAttr>(i, "kiln.name"))
    return name.str();
  return "result" + std::to_string(i);
}

int64_t tokenVocabulary(mlir::func::FuncOp forward) {
  int64_t vocabulary = 0;
  forward.walk([&](GatherOp op) {
    if (!vocabulary && forward.getNumArguments() &&
        op.getIndices() == forward.getArgument(0))
      vocabulary = op.getData().getType().getDimSize(op.getAxis());
  });
  return vocabulary;
}

} // namespace kiln
