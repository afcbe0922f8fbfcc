//===- Subgraphs.cpp - inlining If branches and Loop bodies ---------------===//

#include "Subgraphs.h"

#include "llvm/ADT/StringMap.h"

namespace kiln {

/// Renames, in `graph` and the graphs nested in it, the references to names
/// that `renamed` maps, except where a graph defines the name itself.
static void renameReferences(onnx::GraphProto &graph,
                             llvm::StringMap<std::string> renamed) {
  for (const onnx::ValueInfoProto &input : graph.input())
    renamed.erase(input.name());
  for (const onnx::TensorProto &initializer : graph.initializer())
    renamed.erase(initializer.name());
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &output : node.output())
      renamed.erase(output);
  auto rename = [&](std::string &name) {
    auto it = renamed.find(name);
    if (it != renamed.end())
      name = it->second;
  };
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    for (std::string &input : *node.mutable_input())
      rename(input);
    for (onnx::AttributeProto &attribute : *node.mutable_attribute()) {
      if (attribute.has_g())
        renameReferences(*attribute.mutable_g(), renamed);
      for (onnx::GraphProto &nested : *attribute.mutable_graphs())
        renameReferences(nested, renamed);
    }
  }
  for (onnx::ValueInfoProto &output : *graph.mutable_output())
    rename(*output.mutable_name());
}

onnx::NodeProto
scopedCopy(const onnx::NodeProto &original, const std::string &scope,
           llvm::function_ref<std::string(const std::string &)> rename) {
  onnx::NodeProto node = original;
  node.set_name(scope + original.name());
  for (std::string &input : *node.mutable_input())
    input = rename(input);
  for (std::string &output : *node.mutable_output())
    output = rename(output);
  return node;
}

InlinedSubgraph inlineSubgraph(const onnx::GraphProto &body,
                               llvm::ArrayRef<std::string> inputs,
                               const std::string &scope) {
  llvm::StringMap<std::string> renamed;
  for (auto [i, input] : llvm::enumerate(body.input()))
    renamed[input.name()] = i < inputs.size() ? inputs[i] : "";
  for (const onnx::NodeProto &node : body.node())
    for (const std::string &output : node.output())
      if (!output.empty())
        renamed[output] = scope + output;
  auto rename = [&](const std::string &name) {
    auto it = renamed.find(name);
    return it != renamed.end() ? it->second : name;
  };
  InlinedSubgraph inlined;
  for (const onnx::NodeProto &original : body.node()) {
    onnx::NodeProto node = scopedCopy(original, scope, rename);
    for (onnx::AttributeProto &attribute : *node.mutable_attribute()) {
      if (attribute.has_g())
        renameReferences(*attribute.mutable_g(), renamed);
      for (onnx::GraphProto &nested : *attribute.mutable_graphs())
        renameReferences(nested, renamed);
    }
    inlined.nodes.push_back(std::move(node));
  }
  for (const onnx::ValueInfoProto &output : body.output())
    inlined.outputs.push_back(rename(output.name()));
  return inlined;
}

} // namespace kiln
