//===- LossImporters.cpp - ONNX classification losses ---------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

using namespace mlir;

namespace kiln {

template <typename OpTy> static LogicalResult importLoss(NodeContext &node) {
  FailureOr<std::string> reductionName = node.stringAttr("reduction", "mean");
  if (failed(node.requireInputs(2)) || failed(reductionName))
    return failure();
  std::optional<LossReduction> reduction = symbolizeLossReduction(*reductionName);
  if (!reduction)
    return node.error("reduction must be 'none', 'sum' or 'mean', got '")
           << *reductionName << "'";
  SmallVector<Value> operands{node.input(0), node.input(1)};
  if (node.hasInput(2))
    operands.push_back(node.input(2));
  SmallVector<NamedAttribute> attributes{node.builder.getNamedAttr(
      "reduction",
      LossReductionAttr::get(node.builder.getContext(), *reduction))};
  if (node.attribute("ignore_index")) {
    FailureOr<int64_t> index = node.intAttr("ignore_index", std::nullopt);
    if (failed(index))
      return failure();
    attributes.push_back(node.builder.getNamedAttr(
        "ignore_index", node.builder.getI64IntegerAttr(*index)));
  }
  if (failed(node.setResult(node.create1<OpTy>(operands, attributes))))
    return failure();
  // SoftmaxCrossEntropyLoss may also return the log-probabilities.
  if (node.hasOutput(1)) {
    if (node.inputRank(0) < 2)
      return node.error("scores must have shape [N, C, ...]");
    FailureOr<Value> logProbs = node.create1<LogSoftmaxOp>(
        {node.input(0)},
        {node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(1))},
        {node.inputType(0)});
    if (failed(logProbs))
      return failure();
    node.setOutput(1, *logProbs);
  }
  return success();
}

void registerLossImporters(OpImporterTable &table) {
  table.add("SoftmaxCrossEntropyLoss", importLoss<CrossEntropyOp>);
  table.add("NegativeLogLikelihoodLoss", importLoss<NllLossOp>);
}

} // namespace kiln
