//===- LocalFunctions.cpp - model-local ONNX functions --------------------===//
//
// Instantiation of a model-local function for one call site.
//
//===----------------------------------------------------------------------===//

#include "LocalFunctions.h"
#include "Subgraphs.h"

namespace kiln {

static std::string key(const std::string &domain, const std::string &name) {
  return domain + ":" + name;
}

LocalFunctions::LocalFunctions(const onnx::ModelProto &model) {
  for (const onnx::FunctionProto &function : model.functions())
    functions[key(function.domain(), function.name())] = &function;
}

const onnx::FunctionProto *
LocalFunctions::lookup(const onnx::NodeProto &call) const {
  return functions.lookup(key(call.domain(), call.op_type()));
}

int64_t functionOpset(const onnx::FunctionProto &function, int64_t fallback) {
  for (const onnx::OperatorSetIdProto &entry : function.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      return entry.version();
  return fallback;
}

/// The call's value for attribute reference `name`, or null: the attribute
/// is then left unset and takes the op's default. (Function-level attribute
/// defaults, `attribute_proto`, arrived after the libonnx 1.12 kiln builds
/// against.)
static const onnx::AttributeProto *
resolveReference(const onnx::NodeProto &call, const std::string &name) {
  for (const onnx::AttributeProto &attribute : call.attribute())
    if (attribute.name() == name)
      return &attribute;
  return nullptr;
}

std::vector<onnx::NodeProto>
instantiateFunction(const onnx::FunctionProto &function,
                    const onnx::NodeProto &call, const std::string &scope) {
  llvm::StringMap<std::string> renamed;
  for (int i = 0; i < function.input_size(); ++i)
    renamed[function.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < function.output_size(); ++i)
    renamed[function.output(i)] = i < call.output_size() ? call.output(i) : "";
  auto rename = [&](const std::string &name) -> std::string {
    if (name.empty())
      return name;
    auto it = renamed.find(name);
    return it != renamed.end() ? it->second : scope + name;
  };

  std::vector<onnx::NodeProto> nodes;
  for (const onnx::NodeProto &original : function.node()) {
    onnx::NodeProto node = scopedCopy(original, scope, rename);
    node.clear_attribute();
    for (const onnx::AttributeProto &attribute : original.attribute()) {
      if (attribute.ref_attr_name().empty()) {
        *node.add_attribute() = attribute;
        continue;
      }
      if (const onnx::AttributeProto *value =
              resolveReference(call, attribute.ref_attr_name())) {
        onnx::AttributeProto *copy = node.add_attribute();
        *copy = *value;
        copy->set_name(attribute.name());
      }
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

} // namespace kiln
