//===- PyModel.h - kiln.Model: an imported model ----------------*- C++ -*-===//
//
// A model imported from ONNX (or parsed from kiln IR) with its symbolic
// dimensions bound, run forward on the reference interpreter. It owns the
// MLIR context that trainers made from it share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_PYMODEL_H
#define KILN_PYTHON_PYMODEL_H

#include "kiln/Interpreter/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::python {

class Model {
public:
  Model(const std::string &path, const std::map<std::string, int64_t> &dims,
        const std::string &function);

  /// Each input as (name, element type, shape).
  pybind11::list inputs() const { return describeValues(true); }
  pybind11::list outputs() const { return describeValues(false); }
  /// The forward function's results by output name, for `feeds`, a dict of
  /// every input by name.
  pybind11::dict run(const pybind11::dict &feeds);
  /// The model as kiln IR.
  std::string ir() const;

  mlir::MLIRContext &getContext() { return *context; }
  mlir::ModuleOp getModule() { return *module; }
  mlir::func::FuncOp getForward() { return forward; }
  const std::string &getPath() const { return path; }
  /// What, beyond the file, decides the imported function: the dimensions.
  const std::string &getImportIdentity() const { return importIdentity; }

private:
  pybind11::list describeValues(bool inputs) const;

  std::string path, importIdentity;
  std::unique_ptr<mlir::MLIRContext> context;
  llvm::SourceMgr sources;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp forward;
};

/// The arguments of `function` (whose first arguments are named as
/// `forward`'s inputs) from `feeds`: every input present, none unknown.
std::vector<Tensor> argumentsFrom(const pybind11::dict &feeds,
                                  mlir::func::FuncOp forward,
                                  mlir::func::FuncOp function);

} // namespace kiln::python

#endif // KILN_PYTHON_PYMODEL_H
