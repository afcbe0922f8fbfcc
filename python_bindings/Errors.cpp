//===- Errors.cpp - kiln's failures as Python exceptions ------------------===//

#include "Errors.h"

#include "kiln/Tools/ModelLoading.h"

#include "mlir/IR/Diagnostics.h"

#include <pybind11/pybind11.h>

namespace kiln::python {

DiagnosticCapture::DiagnosticCapture(mlir::MLIRContext &context)
    : context(context) {
  id = context.getDiagEngine().registerHandler([this](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      messages += (messages.empty() ? "" : "\n") + formatDiagnostic(d);
    else if (d.getSeverity() != mlir::DiagnosticSeverity::Note)
      warnings.push_back(formatDiagnostic(d));
    return mlir::success();
  });
}

DiagnosticCapture::~DiagnosticCapture() {
  context.getDiagEngine().eraseHandler(id);
}

void DiagnosticCapture::check(mlir::LogicalResult result,
                              const std::string &fallback) {
  for (const std::string &warning : warnings)
    if (PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) < 0)
      throw pybind11::error_already_set(); // warnings are errors
  warnings.clear();
  if (mlir::succeeded(result))
    return;
  std::string message = messages.empty() ? fallback : messages;
  messages.clear();
  raise(message);
}

} // namespace kiln::python
