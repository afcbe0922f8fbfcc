//===- MergedParameters.cpp - one initializer for parameters of one value -===//
//
// The dynamo exporter's optimizer (torch.onnx.export(dynamo=True), whose
// `optimize` is on by default) merges initializers of equal value. On a
// model as PyTorch initializes it, every norm's unit weight and every zero
// bias then becomes one initializer that all those norms read, and its
// constant folding drops zero biases from their products altogether. kiln
// trains what the graph says, one parameter where PyTorch trains many; this
// says so. The graph cannot tell such a merge from a genuine share (ALBERT's
// layer, read once per repetition), except that a share holds weights of
// random values too, read as often: so only a parameter of one value that
// more ops read than any other parameter is suspect.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"

#include "StoredBytes.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln {

/// Whether `op`'s initial value holds one value in each of its two or more
/// elements; false where it has no value (a graph without weights).
static bool holdsOneValue(ParameterOp op) {
  std::optional<ElementsAttr> value = op.getInitialValue();
  if (!value || value->getNumElements() < 2)
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(*value);
      dense && dense.isSplat())
    return true;
  ArrayRef<char> bytes = storedBytes(*value);
  return !bytes.empty() &&
         holdsOneValue(bytes, bytes.size() / value->getNumElements());
}

void warnAboutMergedParameters(ArrayRef<ParameterOp> parameters) {
  // Uses add up over the parameters of one name.
  llvm::StringMap<unsigned> uses;
  for (ParameterOp op : parameters)
    uses[op.getName()] += std::distance(op->use_begin(), op->use_end());
  unsigned mostRead = 0;
  SmallVector<ParameterOp> suspects;
  llvm::StringSet<> seen;
  for (ParameterOp op : parameters) {
    if (!seen.insert(op.getName()).second)
      continue;
    if (holdsOneValue(op))
      suspects.push_back(op);
    else
      mostRead = std::max(mostRead, uses[op.getName()]);
  }
  for (ParameterOp op : suspects) {
    unsigned reads = uses[op.getName()];
    if (reads < 2 || reads <= mostRead)
      continue;
    op.emitWarning()
        << "parameter '" << op.getName()
        << "' holds one value in all its elements and is read by " << reads
        << " ops, more than any parameter of varied values, and kiln trains "
           "it as one parameter: if these are parameters PyTorch trains "
           "apart (fresh norm weights, zero biases), the exporter merged "
           "initializers of equal value (torch.onnx.export(dynamo=True) "
           "optimizes the graph so by default, and drops zero biases): export "
           "with optimize=False";
  }
}

} // namespace kiln
