//===- DataMovementRules.cpp - gradients of ops that move elements --------===//
//
// The gradient of a data movement moves the gradient back: reshape and
// transpose invert, broadcast sums, slices insert into zeros, gathers
// scatter-add.
//
//===----------------------------------------------------------------------===//

#include "GradientRules.h"

using namespace mlir;

namespace kiln {

/// `source` inserted into zeros of `type` at a strided window.
static Value insertIntoZeros(GradientBuilder &b, Type type, Value source,
                             ArrayRef<int64_t> start, ArrayRef<int64_t> stride) {
  return b.create<InsertSliceOp>(type, b.splat(0.0, type), source, start, stride)
      .getResult();
}

/// The gradient of a constant pad (negative amounts crop): the part of the
/// output gradient that came from the input, placed where the input was.
static LogicalResult padGradient(PadOp op, ArrayRef<Value> grads,
                                 GradientBuilder &b, SmallVectorImpl<Value> &g) {
  if (op.getMode() != PadMode::Constant)
    return op.emitOpError("gradients of reflect, edge and wrap padding are "
                          "not supported");
  RankedTensorType input = op.getInput().getType();
  SmallVector<int64_t> readStart, writeStart, size, unit(input.getRank(), 1);
  bool whole = true;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t low = op.getLow()[d], high = op.getHigh()[d];
    int64_t first = std::max<int64_t>(0, -low); // first input index kept
    int64_t last = input.getDimSize(d) - std::max<int64_t>(0, -high);
    size.push_back(std::max<int64_t>(last - first, 0));
    writeStart.push_back(size.back() ? first : 0);
    readStart.push_back(size.back() ? first + low : 0);
    whole &= first == 0 && last == input.getDimSize(d);
  }
  Value window = b.create<SliceOp>(input.clone(size), grads[0], readStart, unit);
  g.push_back(whole ? window
                    : insertIntoZeros(b, input, window, writeStart, unit));
  return success();
}

void registerDataMovementGradients(GradientRuleTable &table) {
  using B = GradientBuilder;
  table.add<ReshapeOp>([](ReshapeOp op, ArrayRef<Value> grads, B &b,
                          SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.reshape(grads[0], op.getInput().getType().getShape()));
    return success();
  });
  table.add<TransposeOp>([](TransposeOp op, ArrayRef<Value> grads, B &b,
                            SmallVectorImpl<Value> &g) -> LogicalResult {
    SmallVector<int64_t> inverse(op.getPermutation().size());
    for (auto [i, dim] : llvm::enumerate(op.getPermutation()))
      inverse[dim] = i;
    g.push_back(b.create<TransposeOp>(grads[0], inverse));
    return success();
  });
  table.add<BroadcastOp>([](BroadcastOp op, ArrayRef<Value> grads, B &b,
                            SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.unbroadcast(grads[0], op.getInput().getType()));
    return success();
  });
  table.add<SliceOp>([](SliceOp op, ArrayRef<Value> grads, B &b,
                        SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(insertIntoZeros(b, op.getInput().getType(), grads[0],
                                op.getStart(), op.getStride()));
    return success();
  });
  table.add<InsertSliceOp>([](InsertSliceOp op, ArrayRef<Value> grads, B &b,
                              SmallVectorImpl<Value> &g) -> LogicalResult {
    // The window's gradient goes to the source, the rest to the destination.
    RankedTensorType source = op.getSource().getType();
    g.push_back(b.create<InsertSliceOp>(op.getType(), grads[0],
                                        b.splat(0.0, source), op.getStart(),
                                        op.getStride()));
    g.push_back(b.create<SliceOp>(source, grads[0], op.getStart(),
                                  op.getStride()));
    return success();
  });
  table.add<ConcatOp>([](ConcatOp op, ArrayRef<Value> grads, B &b,
                         SmallVectorImpl<Value> &g) -> LogicalResult {
    int64_t axis = op.getAxis(), offset = 0;
    for (Value input : op.getInputs()) {
      auto type = cast<RankedTensorType>(input.getType());
      SmallVector<int64_t> start(type.getRank(), 0), unit(type.getRank(), 1);
      start[axis] = offset;
      g.push_back(b.create<SliceOp>(type, grads[0], start, unit));
      offset += type.getDimSize(axis);
    }
    return success();
  });
  table.add<PadOp>(padGradient);
  table.add<TriluOp>([](TriluOp op, ArrayRef<Value> grads, B &b,
                        SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.create<TriluOp>(grads[0], op.getUpper(), op.getDiagonal()));
    return success();
  });
  table.add<GatherOp>([](GatherOp op, ArrayRef<Value> grads, B &b,
                         SmallVectorImpl<Value> &g) -> LogicalResult {
    g.push_back(b.create<GatherGradOp>(op.getData().getType(), grads[0],
                                       op.getIndices(), op.getAxis()));
    return success();
  });
  table.add<GatherElementsOp>([](GatherElementsOp op, ArrayRef<Value> grads,
                                 B &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    Type data = op.getData().getType();
    g.push_back(b.create<ScatterElementsOp>(
        data, b.splat(0.0, data), op.getIndices(), grads[0], op.getAxis(),
        ScatterReduction::Add));
    return success();
  });
  table.add<ScatterElementsOp>([](ScatterElementsOp op, ArrayRef<Value> grads,
                                  B &b, SmallVectorImpl<Value> &g) -> LogicalResult {
    ScatterReduction reduction = op.getReduction();
    if (reduction != ScatterReduction::None &&
        reduction != ScatterReduction::Add)
      return op.emitOpError("gradients of mul, max and min scatters are not "
                            "supported");
    Value grad = grads[0];
    // Overwritten elements of the destination get no gradient.
    Value dataGrad =
        reduction == ScatterReduction::Add
            ? grad
            : b.create<ScatterElementsOp>(
                   op.getType(), grad, op.getIndices(),
                   b.splat(0.0, op.getUpdates().getType()), op.getAxis(),
                   ScatterReduction::None)
                  .getResult();
    g.push_back(dataGrad);
    g.push_back(nullptr);
    g.push_back(b.create<GatherElementsOp>(grad, op.getIndices(), op.getAxis()));
    return success();
  });
}

} // namespace kiln
