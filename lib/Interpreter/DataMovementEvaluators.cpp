//===- DataMovementEvaluators.cpp - reshape, transpose, slice, gather... --===//
//
// Ops that move elements without arithmetic. Indices supplied at run time
// (gather) are checked and reported, never trusted.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;

namespace kiln {

static void copyElement(const Tensor &from, int64_t source, Tensor &to,
                        int64_t destination) {
  if (to.isFloat())
    to.floats()[destination] = from.floats()[source];
  else
    to.ints()[destination] = from.ints()[source];
}

/// Fills `result` by reading `input` at offsets given by `strides` (one per
/// result dimension) from `base`.
static void gatherStrided(const Tensor &input, Tensor &result, int64_t base,
                          ArrayRef<int64_t> strides) {
  forEachIndex<1>(result.getShape(), {strides},
                  [&](int64_t i, const std::array<int64_t, 1> &at) {
                    copyElement(input, base + at[0], result, i);
                  });
}

static LogicalResult evaluateReshape(ReshapeOp op,
                                     const EvaluationContext &context,
                                     SmallVectorImpl<Tensor> &results) {
  results.push_back(context.operand(0).reshaped(op.getType().getShape()));
  return success();
}

static LogicalResult evaluateTranspose(TransposeOp op,
                                       const EvaluationContext &context,
                                       SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  SmallVector<int64_t> inputStrides = stridesOf(input.getShape());
  SmallVector<int64_t> strides;
  for (int64_t dim : op.getPermutation())
    strides.push_back(inputStrides[dim]);
  gatherStrided(input, result, 0, strides);
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateBroadcast(BroadcastOp op,
                                       const EvaluationContext &context,
                                       SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  gatherStrided(input, result, 0,
                broadcastStrides(input.getShape(), result.getShape()));
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateSlice(SliceOp op, const EvaluationContext &context,
                                   SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  SmallVector<int64_t> inputStrides = stridesOf(input.getShape());
  SmallVector<int64_t> strides;
  int64_t base = 0;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    base += op.getStart()[d] * inputStrides[d];
    strides.push_back(op.getStride()[d] * inputStrides[d]);
  }
  gatherStrided(input, result, base, strides);
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateConcat(ConcatOp op,
                                    const EvaluationContext &context,
                                    SmallVectorImpl<Tensor> &results) {
  Tensor result = makeTensor(op.getResult());
  int64_t axis = op.getAxis();
  int64_t outer = product(result.getShape().take_front(axis));
  int64_t resultRow = product(result.getShape().drop_front(axis));
  int64_t column = 0;
  for (const Tensor *input : context.operands) {
    int64_t row = product(input->getShape().drop_front(axis));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < row; ++i)
        copyElement(*input, o * row + i, result, o * resultRow + column + i);
    column += row;
  }
  results.push_back(std::move(result));
  return success();
}

/// The input coordinate that output coordinate `c` (already shifted by the
/// low padding) reads under `mode`, or -1 for the constant value.
static int64_t padSource(PadMode mode, int64_t c, int64_t size) {
  if (c >= 0 && c < size)
    return c;
  switch (mode) {
  case PadMode::Constant:
    return -1;
  case PadMode::Edge:
    return c < 0 ? 0 : size - 1;
  case PadMode::Wrap:
    return ((c % size) + size) % size;
  case PadMode::Reflect: {
    if (size == 1)
      return 0;
    int64_t period = 2 * (size - 1);
    int64_t m = ((c % period) + period) % period;
    return m < size ? m : period - m;
  }
  }
  return -1;
}

static LogicalResult evaluatePad(PadOp op, const EvaluationContext &context,
                                 SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  SmallVector<int64_t> inputStrides = stridesOf(input.getShape());
  SmallVector<int64_t> resultStrides = stridesOf(result.getShape());
  double value = op.getValue().convertToDouble();
  for (int64_t i = 0; i < result.getNumElements(); ++i) {
    int64_t source = 0;
    for (int64_t d = 0; d < result.getRank() && source >= 0; ++d) {
      int64_t c = (i / resultStrides[d]) % result.getShape()[d] - op.getLow()[d];
      int64_t s = padSource(op.getMode(), c, input.getShape()[d]);
      source = s < 0 ? -1 : source + s * inputStrides[d];
    }
    if (source < 0)
      result.setFromDouble(i, value);
    else
      copyElement(input, source, result, i);
  }
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateTrilu(TriluOp op, const EvaluationContext &context,
                                   SmallVectorImpl<Tensor> &results) {
  const Tensor &input = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  int64_t rank = input.getRank();
  int64_t rows = input.getShape()[rank - 2], columns = input.getShape()[rank - 1];
  int64_t diagonal = op.getDiagonal();
  for (int64_t i = 0; i < input.getNumElements(); ++i) {
    int64_t column = i % columns, row = (i / columns) % rows;
    bool keep = op.getUpper() ? column - row >= diagonal
                              : column - row <= diagonal;
    if (keep)
      copyElement(input, i, result, i);
  }
  results.push_back(std::move(result));
  return success();
}

/// Resolves a possibly negative index along an axis of `size`.
static std::optional<int64_t> resolveIndex(int64_t index, int64_t size) {
  if (index < 0)
    index += size;
  if (index < 0 || index >= size)
    return std::nullopt;
  return index;
}

/// Calls `fn(dataOffset, gatheredOffset)` for every element that a gather of
/// `indices` along `axis` of a tensor of `dataShape` takes; reports an index
/// out of range on `op`.
template <typename Fn>
static LogicalResult forEachGathered(Operation *op, const Tensor &indices,
                                     ArrayRef<int64_t> dataShape, int64_t axis,
                                     Fn &&fn) {
  int64_t outer = product(dataShape.take_front(axis));
  int64_t size = dataShape[axis];
  int64_t inner = product(dataShape.drop_front(axis + 1));
  int64_t count = indices.getNumElements();
  for (int64_t n = 0; n < count; ++n) {
    std::optional<int64_t> index = resolveIndex(indices.ints()[n], size);
    if (!index)
      return op->emitOpError() << "index " << indices.ints()[n]
                               << " is out of range for axis " << axis
                               << " of size " << size;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        fn((o * size + *index) * inner + i, (o * count + n) * inner + i);
  }
  return success();
}

static LogicalResult evaluateGather(GatherOp op,
                                    const EvaluationContext &context,
                                    SmallVectorImpl<Tensor> &results) {
  const Tensor &data = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  if (failed(forEachGathered(op, context.operand(1), data.getShape(),
                             op.getAxis(), [&](int64_t from, int64_t to) {
                               copyElement(data, from, result, to);
                             })))
    return failure();
  results.push_back(std::move(result));
  return success();
}

/// Calls `fn(position, element)` for every position of `indices`, where
/// `element` is the data element (of a tensor of `dataShape`) that the
/// position addresses: its own coordinates with the one along `axis`
/// replaced by the index there. Returns false on an index out of range.
template <typename Fn>
static bool forEachAddressedElement(const Tensor &indices,
                                    ArrayRef<int64_t> dataShape, int64_t axis,
                                    Fn &&fn) {
  SmallVector<int64_t> dataStrides = stridesOf(dataShape);
  int64_t axisStride = dataStrides[axis], size = dataShape[axis];
  dataStrides[axis] = 0;
  bool inRange = true;
  forEachIndex<1>(indices.getShape(), {dataStrides},
                  [&](int64_t i, const std::array<int64_t, 1> &at) {
                    std::optional<int64_t> index =
                        resolveIndex(indices.ints()[i], size);
                    if (!index) {
                      inRange = false;
                      return;
                    }
                    fn(i, at[0] + *index * axisStride);
                  });
  return inRange;
}

template <typename OpTy>
static InFlightDiagnostic indexOutOfRange(OpTy op, ArrayRef<int64_t> shape) {
  return op.emitOpError() << "an index is out of range for axis "
                          << op.getAxis() << " of size "
                          << shape[op.getAxis()];
}

static LogicalResult evaluateGatherElements(GatherElementsOp op,
                                            const EvaluationContext &context,
                                            SmallVectorImpl<Tensor> &results) {
  const Tensor &data = context.operand(0), &indices = context.operand(1);
  Tensor result = makeTensor(op.getResult());
  if (!forEachAddressedElement(indices, data.getShape(), op.getAxis(),
                               [&](int64_t i, int64_t element) {
                                 copyElement(data, element, result, i);
                               }))
    return indexOutOfRange(op, data.getShape());
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateGatherGrad(GatherGradOp op,
                                        const EvaluationContext &context,
                                        SmallVectorImpl<Tensor> &results) {
  const Tensor &grad = context.operand(0);
  Tensor result = makeTensor(op.getResult());
  // Accumulate in fp64 and round once, as a reduction does.
  std::vector<double> sums(result.getNumElements(), 0.0);
  if (failed(forEachGathered(op, context.operand(1), result.getShape(),
                             op.getAxis(), [&](int64_t to, int64_t from) {
                               sums[to] += grad.floats()[from];
                             })))
    return failure();
  for (int64_t i = 0; i < result.getNumElements(); ++i)
    result.setFromDouble(i, sums[i]);
  results.push_back(std::move(result));
  return success();
}

static LogicalResult evaluateInsertSlice(InsertSliceOp op,
                                         const EvaluationContext &context,
                                         SmallVectorImpl<Tensor> &results) {
  Tensor result = context.operand(0);
  const Tensor &source = context.operand(1);
  SmallVector<int64_t> destStrides = stridesOf(result.getShape());
  SmallVector<int64_t> strides;
  int64_t base = 0;
  for (int64_t d = 0; d < result.getRank(); ++d) {
    base += op.getStart()[d] * destStrides[d];
    strides.push_back(op.getStride()[d] * destStrides[d]);
  }
  forEachIndex<1>(source.getShape(), {strides},
                  [&](int64_t i, const std::array<int64_t, 1> &at) {
                    copyElement(source, i, result, base + at[0]);
                  });
  results.push_back(std::move(result));
  return success();
}

static double combineScattered(ScatterReduction reduction, double current,
                               double update) {
  switch (reduction) {
  case ScatterReduction::Add: return current + update;
  case ScatterReduction::Mul: return current * update;
  case ScatterReduction::Max: return std::max(current, update);
  case ScatterReduction::Min: return std::min(current, update);
  case ScatterReduction::None: return update;
  }
  return update;
}

static LogicalResult evaluateScatterElements(ScatterElementsOp op,
                                             const EvaluationContext &context,
                                             SmallVectorImpl<Tensor> &results) {
  const Tensor &indices = context.operand(1), &updates = context.operand(2);
  Tensor result = context.operand(0);
  ScatterReduction reduction = op.getReduction();
  auto scatter = [&](int64_t i, int64_t element) {
    if (reduction == ScatterReduction::None)
      copyElement(updates, i, result, element);
    else
      result.setFromDouble(element,
                           combineScattered(reduction,
                                            result.getAsDouble(element),
                                            updates.getAsDouble(i)));
  };
  if (!forEachAddressedElement(indices, result.getShape(), op.getAxis(),
                               scatter))
    return indexOutOfRange(op, result.getShape());
  results.push_back(std::move(result));
  return success();
}

void registerDataMovementEvaluators(EvaluatorTable &table) {
  table.add<ScatterElementsOp>(evaluateScatterElements);
  table.add<GatherGradOp>(evaluateGatherGrad);
  table.add<InsertSliceOp>(evaluateInsertSlice);
  table.add<ReshapeOp>(evaluateReshape);
  table.add<TransposeOp>(evaluateTranspose);
  table.add<BroadcastOp>(evaluateBroadcast);
  table.add<SliceOp>(evaluateSlice);
  table.add<ConcatOp>(evaluateConcat);
  table.add<PadOp>(evaluatePad);
  table.add<TriluOp>(evaluateTrilu);
  table.add<GatherOp>(evaluateGather);
  table.add<GatherElementsOp>(evaluateGatherElements);
}

} // namespace kiln
