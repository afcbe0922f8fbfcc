//===- LocalFunctions.h - model-local ONNX functions ------------*- C++ -*-===//
//
// Internal to the ONNX importer. Exporters may wrap submodules in functions
// of the model (`ModelProto.functions`), called like ops of a custom domain.
// The importer inlines each call: it imports the function's nodes as if they
// stood in the graph.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_LOCALFUNCTIONS_H
#define KILN_LIB_IMPORT_ONNX_LOCALFUNCTIONS_H

#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

#include <string>
#include <vector>

namespace kiln {

/// The functions of a model by "domain:name".
class LocalFunctions {
public:
  explicit LocalFunctions(const onnx::ModelProto &model);
  const onnx::FunctionProto *lookup(const onnx::NodeProto &call) const;

private:
  llvm::StringMap<const onnx::FunctionProto *> functions;
};

/// The nodes of `function` instantiated for `call`: the function's inputs
/// and outputs renamed to the call's, every other value name prefixed with
/// `scope` so that calls do not collide, and attribute references
/// (`ref_attr_name`) replaced by the call's attributes.
std::vector<onnx::NodeProto>
instantiateFunction(const onnx::FunctionProto &function,
                    const onnx::NodeProto &call, const std::string &scope);

/// The function's opset of the default domain, or `fallback`.
int64_t functionOpset(const onnx::FunctionProto &function, int64_t fallback);

} // namespace kiln

#endif // KILN_LIB_IMPORT_ONNX_LOCALFUNCTIONS_H
