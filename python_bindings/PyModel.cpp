//===- PyModel.cpp - kiln.Model: an imported model ------------------------===//

#include "PyModel.h"

#include "Errors.h"
#include "NumpyTensors.h"

#include "kiln/Import/ONNXImporter.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Tools/ModelLoading.h"

namespace py = pybind11;

namespace kiln::python {

Model::Model(const std::string &path,
             const std::map<std::string, int64_t> &dims,
             const std::string &function)
    : path(path), context(std::make_unique<mlir::MLIRContext>()) {
  registerKilnDialects(*context);
  ImportOptions options;
  for (const auto &[name, size] : dims) {
    if (size < 1)
      raise("dimension '" + name + "' must be positive, got " +
            std::to_string(size));
    options.dimensions[name] = size;
    importIdentity +=
        (importIdentity.empty() ? "" : ",") + name + "=" + std::to_string(size);
  }
  DiagnosticCapture diagnostics(*context);
  module = loadModel(path, context.get(), options, sources);
  diagnostics.check(mlir::success(bool(module)), "cannot load " + path);
  mlir::FailureOr<mlir::func::FuncOp> found = findFunction(*module, function);
  diagnostics.check(found);
  forward = *found;
}

py::list Model::describeValues(bool inputs) const {
  py::list result;
  mlir::func::FuncOp function = forward;
  unsigned count =
      inputs ? function.getNumArguments() : function.getNumResults();
  for (unsigned i = 0; i < count; ++i) {
    auto type = llvm::cast<mlir::RankedTensorType>(
        inputs ? function.getArgumentTypes()[i] : function.getResultTypes()[i]);
    std::optional<DType> dtype = dtypeOf(type.getElementType());
    py::tuple shape(type.getRank());
    for (int64_t d = 0; d < type.getRank(); ++d)
      shape[d] = type.getDimSize(d);
    result.append(py::make_tuple(
        inputs ? argumentName(function, i) : resultName(function, i),
        dtype ? dtypeName(*dtype).str() : std::string("?"), shape));
  }
  return result;
}

std::vector<Tensor> argumentsFrom(const py::dict &feeds,
                                  mlir::func::FuncOp forward,
                                  mlir::func::FuncOp function) {
  std::vector<InputSpec> specs;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    std::string name = argumentName(forward, i);
    auto type =
        llvm::cast<mlir::RankedTensorType>(function.getArgumentTypes()[i]);
    std::optional<DType> dtype = dtypeOf(type.getElementType());
    if (!dtype)
      raise("input '" + name + "' has a type kiln cannot read");
    specs.push_back(
        {name, *dtype, {type.getShape().begin(), type.getShape().end()}});
  }
  return tensorsFrom(feeds, specs);
}

py::dict Model::run(const py::dict &feeds) {
  std::vector<Tensor> arguments = argumentsFrom(feeds, forward, forward);
  DiagnosticCapture diagnostics(*context);
  mlir::FailureOr<llvm::SmallVector<Tensor>> results =
      interpret(forward, arguments);
  diagnostics.check(results);
  py::dict outputs;
  for (auto [i, tensor] : llvm::enumerate(*results))
    outputs[py::str(resultName(forward, i))] = toNumpy(tensor);
  return outputs;
}

std::string Model::ir() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.get()->print(os);
  return text;
}

} // namespace kiln::python
