//===- ConvImporter.cpp - ONNX Conv as patches and one batched matmul ------===//
//
// A convolution is a matrix product of its weights with the input's patches
// (im2col): every kernel position's strided slice of the padded input, the
// channels of a group then the kernel positions flattened into the
// contracted dimension, one batched kiln.matmul per group. kiln's GEMMs,
// fusion and autodiff then apply as to any product. When the kernel tiles
// the input (stride equal to the kernel, no dilation or padding: a vision
// Transformer's patch embedding) the patches are a reshape and a transpose
// of the input rather than one slice per kernel position.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

using namespace mlir;

namespace kiln {

namespace {
/// The geometry of one Conv node along its spatial dimensions.
struct ConvShape {
  SmallVector<int64_t> kernel, strides, dilations, padBegin, padEnd, output;
  int64_t groups = 1;

  /// Whether the patches tile the input without overlap or gaps.
  bool tiles() const {
    for (size_t d = 0; d < kernel.size(); ++d)
      if (strides[d] != kernel[d] || dilations[d] != 1 || padBegin[d] != 0 ||
          padEnd[d] != 0)
        return false;
    return true;
  }
};
} // namespace

/// `name`'s integers, one per spatial dimension, or `fallback` for each.
static FailureOr<SmallVector<int64_t>>
perDimension(NodeContext &node, StringRef name, size_t count, int64_t fallback) {
  FailureOr<std::optional<SmallVector<int64_t>>> given = node.intsAttr(name);
  if (failed(given))
    return failure();
  if (!*given)
    return SmallVector<int64_t>(count, fallback);
  if ((*given)->size() != count)
    return node.error("attribute '")
           << name << "' has " << (*given)->size() << " entries, expected "
           << count;
  return **given;
}

/// Reads the attributes of a Conv over `input` with `weights` and computes
/// its padding and output size per spatial dimension.
static FailureOr<ConvShape> convShape(NodeContext &node,
                                      RankedTensorType input,
                                      RankedTensorType weights) {
  size_t spatial = input.getRank() - 2;
  ConvShape shape;
  shape.kernel.assign(weights.getShape().drop_front(2).begin(),
                      weights.getShape().drop_front(2).end());
  FailureOr<SmallVector<int64_t>> kernel =
      perDimension(node, "kernel_shape", spatial, 0);
  FailureOr<SmallVector<int64_t>> strides =
      perDimension(node, "strides", spatial, 1);
  FailureOr<SmallVector<int64_t>> dilations =
      perDimension(node, "dilations", spatial, 1);
  FailureOr<SmallVector<int64_t>> pads =
      perDimension(node, "pads", 2 * spatial, 0);
  FailureOr<int64_t> groups = node.intAttr("group", 1);
  FailureOr<std::string> autoPad = node.stringAttr("auto_pad", "NOTSET");
  if (failed(kernel) || failed(strides) || failed(dilations) || failed(pads) ||
      failed(groups) || failed(autoPad))
    return failure();
  if (node.attribute("kernel_shape") && *kernel != shape.kernel)
    return node.error("kernel_shape does not match the weights' shape");
  for (size_t d = 0; d < spatial; ++d)
    if ((*strides)[d] < 1 || (*dilations)[d] < 1 || (*pads)[d] < 0 ||
        (*pads)[spatial + d] < 0)
      return node.error("strides and dilations must be positive, pads not "
                        "negative");
  shape.strides = *strides;
  shape.dilations = *dilations;
  shape.groups = *groups;
  for (size_t d = 0; d < spatial; ++d) {
    int64_t size = input.getDimSize(d + 2), stride = shape.strides[d];
    int64_t extent = shape.dilations[d] * (shape.kernel[d] - 1) + 1;
    int64_t begin = (*pads)[d], end = (*pads)[spatial + d];
    if (*autoPad == "VALID") {
      begin = end = 0;
    } else if (*autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER") {
      // As many outputs as strides fit; the odd padding element goes at the
      // end (SAME_UPPER) or the beginning (SAME_LOWER).
      int64_t outputs = (size + stride - 1) / stride;
      int64_t total =
          std::max<int64_t>(0, (outputs - 1) * stride + extent - size);
      begin = *autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (*autoPad != "NOTSET") {
      return node.error("auto_pad '") << *autoPad << "' is not supported";
    }
    int64_t padded = size + begin + end;
    if (padded < extent)
      return node.error("the kernel (extent ")
             << extent << ") is larger than the padded input (" << padded
             << ") along spatial dimension " << d;
    shape.padBegin.push_back(begin);
    shape.padEnd.push_back(end);
    shape.output.push_back((padded - extent) / stride + 1);
  }
  return shape;
}

/// The patches of `input` (padded): [N, C * K, O], K the kernel's positions
/// and O the output positions, each flattened row-major.
static FailureOr<Value> patches(NodeContext &node, Value input,
                                const ConvShape &conv) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1);
  size_t spatial = conv.kernel.size();
  int64_t kernelPositions = product(conv.kernel);
  int64_t outputs = product(conv.output);
  if (conv.tiles()) {
    // [N, C, O1*k1, ...] -> [N, C, O1, k1, ...] -> [N, C, k1, ..., O1, ...].
    SmallVector<int64_t> covered = {batch, channels}, split = {batch, channels};
    SmallVector<int64_t> permutation = {0, 1};
    for (size_t d = 0; d < spatial; ++d) {
      covered.push_back(conv.output[d] * conv.kernel[d]);
      split.append({conv.output[d], conv.kernel[d]});
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
    return node.reshape(*moved, {batch, channels * kernelPositions, outputs});
  }
  SmallVector<int64_t> low = {0, 0}, high = {0, 0};
  llvm::append_range(low, conv.padBegin);
  llvm::append_range(high, conv.padEnd);
  FailureOr<Value> padded = node.padWithZeros(input, low, high);
  if (failed(padded))
    return failure();
  // One strided slice per kernel position, in row-major order.
  SmallVector<Value> columns;
  SmallVector<int64_t> position(spatial, 0);
  SmallVector<int64_t> sliceShape = {batch, channels};
  llvm::append_range(sliceShape, conv.output);
  SmallVector<int64_t> stride = {1, 1};
  llvm::append_range(stride, conv.strides);
  for (int64_t k = 0; k < kernelPositions; ++k) {
    SmallVector<int64_t> start = {0, 0};
    for (size_t d = 0; d < spatial; ++d)
      start.push_back(position[d] * conv.dilations[d]);
    FailureOr<Value> taken = node.slice(*padded, start, stride, sliceShape);
    if (failed(taken))
      return failure();
    FailureOr<Value> column = node.reshape(*taken, {batch, channels, 1, outputs});
    if (failed(column))
      return failure();
    columns.push_back(*column);
    for (int64_t d = spatial - 1; d >= 0; --d) {
      if (++position[d] < conv.kernel[d])
        break;
      position[d] = 0;
    }
  }
  FailureOr<Value> stacked =
      columns.size() == 1 ? FailureOr<Value>(columns.front())
                          : node.concat(columns, 2);
  if (failed(stacked))
    return failure();
  return node.reshape(*stacked, {batch, channels * kernelPositions, outputs});
}

static LogicalResult importConv(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  RankedTensorType input = node.inputType(0), weights = node.inputType(1);
  if (input.getRank() < 3 || weights.getRank() != input.getRank())
    return node.error("input of rank ")
           << input.getRank() << " and weights of rank " << weights.getRank()
           << " are not a convolution's [N, C, spatial...] and [M, C/group, "
              "kernel...]";
  FailureOr<ConvShape> conv = convShape(node, input, weights);
  if (failed(conv))
    return failure();
  int64_t batch = input.getDimSize(0), channels = input.getDimSize(1);
  int64_t maps = weights.getDimSize(0), groups = conv->groups;
  if (groups < 1 || channels % groups != 0 || maps % groups != 0 ||
      weights.getDimSize(1) * groups != channels)
    return node.error("group ")
           << groups << " does not divide " << channels
           << " input channels and " << maps
           << " output channels with weights of " << weights.getDimSize(1)
           << " channels";
  int64_t kernelPositions = product(conv->kernel);
  int64_t outputs = product(conv->output);
  int64_t contracted = channels / groups * kernelPositions;
  FailureOr<Value> columns = patches(node, node.input(0), *conv);
  if (failed(columns))
    return failure();
  FailureOr<Value> grouped =
      node.reshape(*columns, {batch, groups, contracted, outputs});
  FailureOr<Value> filters =
      node.reshape(node.input(1), {groups, maps / groups, contracted});
  if (failed(grouped) || failed(filters))
    return failure();
  FailureOr<Value> product = node.create1<MatmulOp>({*filters, *grouped});
  if (failed(product))
    return failure();
  SmallVector<int64_t> shape = {batch, maps};
  llvm::append_range(shape, conv->output);
  FailureOr<Value> result = node.reshape(*product, shape);
  if (failed(result) || !node.hasInput(2))
    return node.setResult(result);
  // The bias, one per output channel, broadcast over the spatial positions.
  SmallVector<int64_t> biasShape(shape.size(), 1);
  biasShape[1] = maps;
  FailureOr<Value> bias = node.reshape(node.input(2), biasShape);
  if (failed(bias))
    return failure();
  return node.setResult(node.create1<AddOp>({*result, *bias}));
}

void registerConvImporter(OpImporterTable &table) {
  table.add("Conv", importConv);
}

} // namespace kiln
