//===- Errors.h - kiln's failures as Python exceptions ----------*- C++ -*-===//
//
// Every failure reaches Python as `kiln.Error` with the message the command
// line tools would print: MLIR diagnostics (import, pipeline, interpreter)
// are collected while a call runs and raised if it fails.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_ERRORS_H
#define KILN_PYTHON_ERRORS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/Error.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::python {

/// Raised in Python as kiln.Error.
class KilnError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void raise(const std::string &message) {
  throw KilnError(message);
}

/// Raises `error`'s message if it is one.
inline void check(llvm::Error error) {
  if (error)
    raise(llvm::toString(std::move(error)));
}

template <typename T> T check(llvm::Expected<T> value) {
  if (!value)
    raise(llvm::toString(value.takeError()));
  return std::move(*value);
}

/// Collects the errors emitted on a context while it lives; warnings and
/// remarks go to Python's warnings (UserWarning) when the call ends.
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(mlir::MLIRContext &context);
  ~DiagnosticCapture();
  DiagnosticCapture(const DiagnosticCapture &) = delete;
  DiagnosticCapture &operator=(const DiagnosticCapture &) = delete;

  /// Raises the collected errors (or `fallback` when none was emitted) if
  /// `result` failed.
  void check(mlir::LogicalResult result,
             const std::string &fallback = "kiln failed");

private:
  mlir::MLIRContext &context;
  mlir::DiagnosticEngine::HandlerID id;
  std::string messages;
  std::vector<std::string> warnings;
};

} // namespace kiln::python

#endif // KILN_PYTHON_ERRORS_H
