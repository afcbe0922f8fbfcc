//===- Windows.cpp - the sliding windows of convolutions and pools --------===//

#include "Windows.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace kiln {

FailureOr<SmallVector<int64_t>> perDimension(NodeContext &node, StringRef name,
                                             size_t count, int64_t fallback) {
  FailureOr<std::optional<SmallVector<int64_t>>> given = node.intsAttr(name);
  if (failed(given))
    return failure();
  if (!*given)
    return SmallVector<int64_t>(count, fallback);
  if ((*given)->size() != count)
    return node.error("attribute '") << name << "' has " << (*given)->size()
                                     << " entries, expected " << count;
  return **given;
}

FailureOr<WindowAttributes> windowAttributes(NodeContext &node,
                                             size_t spatial) {
  FailureOr<SmallVector<int64_t>> strides =
      perDimension(node, "strides", spatial, 1);
  FailureOr<SmallVector<int64_t>> dilations =
      perDimension(node, "dilations", spatial, 1);
  FailureOr<SmallVector<int64_t>> pads =
      perDimension(node, "pads", 2 * spatial, 0);
  FailureOr<std::string> autoPad = node.stringAttr("auto_pad", "NOTSET");
  if (failed(strides) || failed(dilations) || failed(pads) || failed(autoPad))
    return failure();
  if (*autoPad != "NOTSET" && *autoPad != "SAME_UPPER" &&
      *autoPad != "SAME_LOWER" && *autoPad != "VALID")
    return node.error("auto_pad '") << *autoPad << "' is not supported";
  for (size_t d = 0; d < spatial; ++d)
    if ((*strides)[d] < 1 || (*dilations)[d] < 1 || (*pads)[d] < 0 ||
        (*pads)[spatial + d] < 0)
      return node.error("strides and dilations must be positive, pads not "
                        "negative");
  return WindowAttributes{*strides, *dilations, *pads, *autoPad};
}

FailureOr<WindowShape> windowShape(NodeContext &node, RankedTensorType input,
                                   ArrayRef<int64_t> kernel, bool ceilMode) {
  size_t spatial = input.getRank() - 2;
  FailureOr<WindowAttributes> attributes = windowAttributes(node, spatial);
  if (failed(attributes))
    return failure();
  const SmallVector<int64_t> &pads = attributes->pads;
  const std::string &autoPad = attributes->autoPad;
  WindowShape shape;
  shape.kernel.assign(kernel.begin(), kernel.end());
  shape.strides = attributes->strides;
  shape.dilations = attributes->dilations;
  // windows() takes one slice per kernel position: no real kernel comes
  // near this many, and a mistaken one would build ops for hours.
  constexpr int64_t kMaxPositions = 1 << 16;
  int64_t positions = 1;
  for (size_t d = 0; d < spatial; ++d) {
    int64_t size = input.getDimSize(d + 2), stride = shape.strides[d];
    if (kernel[d] < 1)
      return node.error("kernel sizes must be positive");
    if (llvm::MulOverflow(positions, kernel[d], positions) ||
        positions > kMaxPositions)
      return node.error("the kernel has more than ")
             << kMaxPositions << " positions, the most kiln imports";
    int64_t extent, begin = pads[d], end = pads[spatial + d], padded;
    if (llvm::MulOverflow(shape.dilations[d], kernel[d] - 1, extent) ||
        llvm::AddOverflow(begin, end, padded) ||
        llvm::AddOverflow(padded, size, padded) || extent == INT64_MAX)
      return node.error("the kernel's extent or the padded input's size "
                        "along spatial dimension ")
             << d << " overflows 64 bits";
    ++extent;
    if (autoPad == "VALID") {
      begin = end = 0;
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      // As many outputs as strides fit; the odd padding element goes at the
      // end (SAME_UPPER) or the beginning (SAME_LOWER).
      int64_t outputs = (size + stride - 1) / stride;
      int64_t total =
          std::max<int64_t>(0, (outputs - 1) * stride + extent - size);
      begin = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    }
    padded = size + begin + end;
    if (padded < extent)
      return node.error("the kernel (extent ")
             << extent << ") is larger than the padded input (" << padded
             << ") along spatial dimension " << d;
    int64_t outputs = (padded - extent) / stride + 1;
    // ceil_mode adds a last window that starts inside the input or its
    // leading padding but runs past the end (as PyTorch does).
    if (ceilMode && (padded - extent) % stride != 0 &&
        outputs * stride < size + begin)
      ++outputs;
    shape.padBegin.push_back(begin);
    shape.padEnd.push_back(end);
    shape.output.push_back(outputs);
    shape.overhang.push_back(
        std::max<int64_t>(0, (outputs - 1) * stride + extent - padded));
  }
  return shape;
}

FailureOr<Value> windows(NodeContext &node, Value input,
                         const WindowShape &shape, double padding,
                         double overhang) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1);
  size_t spatial = shape.kernel.size();
  int64_t kernelPositions = product(shape.kernel);
  int64_t outputs = product(shape.output);
  if (shape.tiles()) {
    // [N, C, O1*k1, ...] -> [N, C, O1, k1, ...] -> [N, C, k1, ..., O1, ...].
    SmallVector<int64_t> covered = {batch, channels}, split = {batch, channels};
    SmallVector<int64_t> permutation = {0, 1};
    for (size_t d = 0; d < spatial; ++d) {
      covered.push_back(shape.output[d] * shape.kernel[d]);
      split.append({shape.output[d], shape.kernel[d]});
    }
    for (size_t d = 0; d < spatial; ++d)
      permutation.push_back(3 + 2 * d);
    for (size_t d = 0; d < spatial; ++d)
      permutation.push_back(2 + 2 * d);
    SmallVector<int64_t> start(type.getRank(), 0), stride(type.getRank(), 1);
    FailureOr<Value> cropped = node.slice(input, start, stride, covered);
    if (failed(cropped))
      return failure();
    FailureOr<Value> blocks = node.reshape(*cropped, split);
    if (failed(blocks))
      return failure();
    FailureOr<Value> moved = node.transpose(*blocks, permutation);
    if (failed(moved))
      return failure();
    return node.reshape(*moved, {batch, channels, kernelPositions, outputs});
  }
  SmallVector<int64_t> low = {0, 0}, high = {0, 0}, none(type.getRank(), 0),
                       past = {0, 0};
  llvm::append_range(low, shape.padBegin);
  llvm::append_range(high, shape.padEnd);
  llvm::append_range(past, shape.overhang);
  FailureOr<Value> padded = node.padConstant(input, low, high, padding);
  if (failed(padded))
    return failure();
  padded = node.padConstant(*padded, none, past, overhang);
  if (failed(padded))
    return failure();
  // One strided slice per kernel position, in row-major order.
  SmallVector<Value> columns;
  SmallVector<int64_t> position(spatial, 0);
  SmallVector<int64_t> sliceShape = {batch, channels};
  llvm::append_range(sliceShape, shape.output);
  SmallVector<int64_t> stride = {1, 1};
  llvm::append_range(stride, shape.strides);
  for (int64_t k = 0; k < kernelPositions; ++k) {
    SmallVector<int64_t> start = {0, 0};
    for (size_t d = 0; d < spatial; ++d)
      start.push_back(position[d] * shape.dilations[d]);
    FailureOr<Value> taken = node.slice(*padded, start, stride, sliceShape);
    if (failed(taken))
      return failure();
    FailureOr<Value> column =
        node.reshape(*taken, {batch, channels, 1, outputs});
    if (failed(column))
      return failure();
    columns.push_back(*column);
    for (int64_t d = spatial - 1; d >= 0; --d) {
      if (++position[d] < shape.kernel[d])
        break;
      position[d] = 0;
    }
  }
  if (columns.size() == 1)
    return columns.front();
  return node.concat(columns, 2);
}

LogicalResult requireSpatial(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  if (node.inputRank(0) < 3)
    return node.error("input of rank ")
           << node.inputRank(0) << " is not [N, C, spatial...]";
  return success();
}

} // namespace kiln
