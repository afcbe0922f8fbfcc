//===- Subgraphs.h - inlining If branches and Loop bodies -------*- C++ -*-===//
//
// Internal to the ONNX importer. kiln's functions have static shapes and no
// control flow: an If whose condition is known at compile time imports the
// branch it takes, and a Loop whose trip count and condition are known
// imports its body once per iteration, each time as nodes of the graph.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_SUBGRAPHS_H
#define KILN_LIB_IMPORT_ONNX_SUBGRAPHS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include "onnx/onnx_pb.h"

#include <string>
#include <vector>

namespace kiln {

/// The nodes of one inlining of subgraph `body`, and the names its outputs
/// then have.
struct InlinedSubgraph {
  std::vector<onnx::NodeProto> nodes;
  std::vector<std::string> outputs;
};

/// A copy of `original` named under `scope`, its inputs and outputs
/// renamed by `rename`: the step every inlining (of a subgraph, of a
/// model-local function) takes for each node.
onnx::NodeProto
scopedCopy(const onnx::NodeProto &original, const std::string &scope,
           llvm::function_ref<std::string(const std::string &)> rename);

/// Renames `body` for one inlining under `scope`: its inputs become the
/// values named `inputs`, every value it defines is prefixed with `scope`
/// (so that iterations and branches do not collide), and names of the outer
/// graphs stay as they are, in nested subgraphs too.
InlinedSubgraph inlineSubgraph(const onnx::GraphProto &body,
                               llvm::ArrayRef<std::string> inputs,
                               const std::string &scope);

} // namespace kiln

#endif // KILN_LIB_IMPORT_ONNX_SUBGRAPHS_H
