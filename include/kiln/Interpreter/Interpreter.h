//===- Interpreter.h - the reference interpreter -----------------*- C++ -*-===//
//
// Runs kiln functions on the CPU. It is the oracle of every test: fp32
// storage, fp64 accumulation in matrix products and reductions, and exact
// emulation of narrower float types through Tensor's rounding hook.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_INTERPRETER_INTERPRETER_H
#define KILN_INTERPRETER_INTERPRETER_H

#include "kiln/Interpreter/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

namespace kiln {

struct InterpreterOptions {
  /// Parameter values by name; they take precedence over a kiln.parameter's
  /// initial value and are required for parameters declared without one.
  const llvm::StringMap<Tensor> *parameters = nullptr;
};

/// Runs `function` on `arguments`. On failure (a wrong argument, an op the
/// interpreter cannot run, an out-of-range index) an error is emitted at the
/// offending op or function and failure is returned.
mlir::FailureOr<llvm::SmallVector<Tensor>>
interpret(mlir::func::FuncOp function, llvm::ArrayRef<Tensor> arguments,
          const InterpreterOptions &options = {});

/// Evaluates one kiln op on concrete operands. The importer folds constant
/// subgraphs with it.
mlir::LogicalResult evaluateOp(mlir::Operation *op,
                               llvm::ArrayRef<const Tensor *> operands,
                               llvm::SmallVectorImpl<Tensor> &results,
                               const InterpreterOptions &options = {});

/// True when the interpreter can run ops named `name` (e.g. "kiln.add").
bool canEvaluate(mlir::OperationName name);

} // namespace kiln

#endif // KILN_INTERPRETER_INTERPRETER_H
