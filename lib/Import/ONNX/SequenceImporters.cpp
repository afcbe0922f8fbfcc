//===- SequenceImporters.cpp - ONNX sequences of tensors ------------------===//
//
// Sequences exist only at import: a sequence is the list of the tensors it
// holds, which its ops build, read and concatenate, so that a model that
// splits a tensor into a sequence (TorchScript's list of chunks) and
// concatenates it again imports as slices and a concat. Positions must be
// known at compile time; a sequence cannot be a graph input or output.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

using namespace mlir;

namespace kiln {

/// Position input `i` of a sequence of `size` tensors (a constant; negative
/// counts from the end), in [0, size] with `end` (an insertion), else in
/// [0, size); `fallback` if absent.
static FailureOr<int64_t> position(NodeContext &node, unsigned i, size_t size,
                                   bool end, int64_t fallback) {
  if (!node.hasInput(i))
    return fallback;
  FailureOr<SmallVector<int64_t>> given = node.constantInts(i, "position");
  if (failed(given))
    return failure();
  if (given->size() != 1)
    return node.error("position must be a scalar");
  int64_t count = static_cast<int64_t>(size);
  int64_t at = given->front() < 0 ? given->front() + count : given->front();
  if (at < 0 || at > count || (!end && at == count))
    return node.error("position ")
           << given->front() << " is outside a sequence of " << size
           << " tensors";
  return at;
}

static LogicalResult importSequenceEmpty(NodeContext &node) {
  FailureOr<Type> element = node.typeAttr("dtype", node.builder.getF32Type());
  if (failed(element))
    return failure();
  node.setSequenceOutput(0, {});
  return success();
}

static LogicalResult importSequenceConstruct(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  SmallVector<Value> values;
  for (int i = 0; i < node.node.input_size(); ++i) {
    values.push_back(node.input(i));
    if (node.inputType(i).getElementType() !=
        node.inputType(0).getElementType())
      return node.error("the tensors of a sequence share one element type");
  }
  node.setSequenceOutput(0, values);
  return success();
}

static LogicalResult importSequenceAt(NodeContext &node) {
  FailureOr<ArrayRef<Value>> sequence = node.sequenceInput(0);
  if (failed(node.requireInputs(2)) || failed(sequence))
    return failure();
  FailureOr<int64_t> at = position(node, 1, sequence->size(), /*end=*/false, 0);
  if (failed(at))
    return failure();
  node.setOutput(0, (*sequence)[*at]);
  return success();
}

/// SequenceInsert: the tensor at `position`, the end by default.
static LogicalResult importSequenceInsert(NodeContext &node) {
  FailureOr<ArrayRef<Value>> sequence = node.sequenceInput(0);
  if (failed(node.requireInputs(2)) || failed(sequence))
    return failure();
  FailureOr<int64_t> at =
      position(node, 2, sequence->size(), /*end=*/true, sequence->size());
  if (failed(at))
    return failure();
  if (!sequence->empty() &&
      node.inputType(1).getElementType() !=
          cast<RankedTensorType>(sequence->front().getType()).getElementType())
    return node.error("the tensors of a sequence share one element type");
  SmallVector<Value> values(*sequence);
  values.insert(values.begin() + *at, node.input(1));
  node.setSequenceOutput(0, values);
  return success();
}

/// SequenceErase: without the tensor at `position`, the last by default.
static LogicalResult importSequenceErase(NodeContext &node) {
  FailureOr<ArrayRef<Value>> sequence = node.sequenceInput(0);
  if (failed(sequence))
    return failure();
  if (sequence->empty())
    return node.error("erases from an empty sequence");
  FailureOr<int64_t> at =
      position(node, 1, sequence->size(), /*end=*/false, sequence->size() - 1);
  if (failed(at))
    return failure();
  SmallVector<Value> values(*sequence);
  values.erase(values.begin() + *at);
  node.setSequenceOutput(0, values);
  return success();
}

static LogicalResult importSequenceLength(NodeContext &node) {
  FailureOr<ArrayRef<Value>> sequence = node.sequenceInput(0);
  if (failed(sequence))
    return failure();
  node.setOutput(
      0, node.int64Constant({}, {static_cast<int64_t>(sequence->size())}));
  return success();
}

/// SplitToSequence: chunks of `split`'s sizes along `axis` (one size: all
/// of it, the last chunk shorter), or of size 1 without `split`, squeezed
/// unless `keepdims`.
static LogicalResult importSplitToSequence(NodeContext &node) {
  FailureOr<int64_t> axisAttr = node.intAttr("axis", 0);
  FailureOr<int64_t> keepdims = node.intAttr("keepdims", 1);
  if (failed(node.requireInputs(1)) || failed(axisAttr) || failed(keepdims))
    return failure();
  RankedTensorType type = node.inputType(0);
  FailureOr<int64_t> axis = node.normalizeAxis(*axisAttr, type.getRank());
  if (failed(axis))
    return failure();
  int64_t extent = type.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (!node.hasInput(1)) {
    sizes.assign(extent, 1);
    squeeze = *keepdims == 0;
  } else {
    FailureOr<Tensor> split = node.constantInput(1, "split");
    if (failed(split))
      return failure();
    if (split->getRank() == 0) {
      int64_t size = split->ints()[0];
      if (size <= 0)
        return node.error("split size must be positive, got ") << size;
      for (int64_t start = 0; start < extent; start += size)
        sizes.push_back(std::min(size, extent - start));
    } else {
      sizes.assign(split->ints().begin(), split->ints().end());
      int64_t total = 0;
      for (int64_t size : sizes)
        total += size;
      if (total != extent ||
          llvm::any_of(sizes, [](int64_t s) { return s < 0; }))
        return node.error("split sizes do not add up to ")
               << extent << " along axis " << *axis;
    }
  }
  SmallVector<Value> chunks;
  SmallVector<int64_t> start(type.getRank(), 0), stride(type.getRank(), 1);
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = size;
    FailureOr<Value> chunk = node.slice(node.input(0), start, stride, shape);
    if (succeeded(chunk) && squeeze) {
      shape.erase(shape.begin() + *axis);
      chunk = node.reshape(*chunk, shape);
    }
    if (failed(chunk))
      return failure();
    chunks.push_back(*chunk);
    start[*axis] += size;
  }
  node.setSequenceOutput(0, chunks);
  return success();
}

/// ConcatFromSequence: the tensors concatenated along `axis`, or stacked
/// along a new one with `new_axis`.
static LogicalResult importConcatFromSequence(NodeContext &node) {
  FailureOr<ArrayRef<Value>> sequence = node.sequenceInput(0);
  FailureOr<int64_t> axisAttr = node.intAttr("axis", std::nullopt);
  FailureOr<int64_t> newAxis = node.intAttr("new_axis", 0);
  if (failed(sequence) || failed(axisAttr) || failed(newAxis))
    return failure();
  if (sequence->empty())
    return node.error("concatenates an empty sequence");
  int64_t rank = cast<RankedTensorType>(sequence->front().getType()).getRank();
  FailureOr<int64_t> axis =
      node.normalizeAxis(*axisAttr, rank + (*newAxis ? 1 : 0));
  if (failed(axis))
    return failure();
  if (*newAxis)
    return node.setResult(node.stack(*sequence, *axis));
  return node.setResult(sequence->size() == 1
                            ? FailureOr<Value>(sequence->front())
                            : node.concat(*sequence, *axis));
}

void registerSequenceImporters(OpImporterTable &table) {
  table.add("SequenceEmpty", importSequenceEmpty);
  table.add("SequenceConstruct", importSequenceConstruct);
  table.add("SequenceAt", importSequenceAt);
  table.add("SequenceInsert", importSequenceInsert);
  table.add("SequenceErase", importSequenceErase);
  table.add("SequenceLength", importSequenceLength);
  table.add("SplitToSequence", importSplitToSequence);
  table.add("ConcatFromSequence", importConcatFromSequence);
}

} // namespace kiln
