//===- WindowImporters.cpp - ONNX ops over sliding windows ----------------===//
//
// Conv, ConvTranspose (a convolution of the input spread out by its
// strides), AveragePool and MaxPool gather their input's windows (im2col): a
// strided slice of the padded input per kernel position, stacked as
// [N, C, K, O] (K kernel positions, O output positions, each flattened
// row-major). A convolution is then a matrix product of its weights with the
// windows, one batched kiln.matmul per group, which kiln's GEMMs, fusion and
// autodiff treat as any product; a pool is a reduction over K. When the
// kernel tiles the input (stride equal to the kernel, no dilation or
// padding: a vision Transformer's patch embedding) the windows are a
// reshape and a transpose of the input rather than one slice per position.
//
//===----------------------------------------------------------------------===//

#include "Sampling.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln {

namespace {
/// Where the windows of one node lie along its spatial dimensions.
struct WindowShape {
  SmallVector<int64_t> kernel, strides, dilations, padBegin, padEnd, output;
  /// Padding past `padEnd` that ceil_mode's last windows reach into: it
  /// counts neither as input nor as padding.
  SmallVector<int64_t> overhang;

  /// Whether the windows tile the input without overlap, gaps or padding.
  bool tiles() const {
    for (size_t d = 0; d < kernel.size(); ++d)
      if (strides[d] != kernel[d] || dilations[d] != 1 || padBegin[d] != 0 ||
          padEnd[d] != 0 || overhang[d] != 0)
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

namespace {
/// The attributes every windowed op has, per spatial dimension.
struct WindowAttributes {
  SmallVector<int64_t> strides, dilations, pads;
  std::string autoPad;
};
} // namespace

/// Reads a windowed node's strides, dilations, pads and auto_pad.
static FailureOr<WindowAttributes> windowAttributes(NodeContext &node,
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

/// Reads the strides, dilations, pads, auto_pad and (for pools) ceil_mode
/// of a node with `kernel` over `input` and places its windows.
static FailureOr<WindowShape> windowShape(NodeContext &node,
                                          RankedTensorType input,
                                          ArrayRef<int64_t> kernel,
                                          bool ceilMode) {
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
  for (size_t d = 0; d < spatial; ++d) {
    int64_t size = input.getDimSize(d + 2), stride = shape.strides[d];
    if (kernel[d] < 1)
      return node.error("kernel sizes must be positive");
    int64_t extent = shape.dilations[d] * (kernel[d] - 1) + 1;
    int64_t begin = pads[d], end = pads[spatial + d];
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
    int64_t padded = size + begin + end;
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

/// The windows of `input` [N, C, spatial...] as [N, C, K, O]: the input
/// padded with `padding`, then with `overhang` past that.
static FailureOr<Value> windows(NodeContext &node, Value input,
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

/// Checks that `node`'s input 0 is [N, C, spatial...].
static LogicalResult requireSpatial(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  if (node.inputRank(0) < 3)
    return node.error("input of rank ")
           << node.inputRank(0) << " is not [N, C, spatial...]";
  return success();
}

/// The product of `patches` [N, C, K, O] (each output position's window)
/// with `weights` [M, C/groups, kernel...], per group, plus `bias` [M] if
/// given: [N, M, output...].
static FailureOr<Value> contract(NodeContext &node, Value patches,
                                 Value weights, ArrayRef<int64_t> output,
                                 int64_t groups, Value bias) {
  ArrayRef<int64_t> p = cast<RankedTensorType>(patches.getType()).getShape();
  int64_t batch = p[0], channels = p[1], outputs = p[3];
  int64_t maps = cast<RankedTensorType>(weights.getType()).getDimSize(0);
  int64_t contracted = channels / groups * p[2];
  FailureOr<Value> filters =
      node.reshape(weights, {groups, maps / groups, contracted});
  if (failed(filters))
    return failure();
  FailureOr<Value> result;
  if (groups == 1) {
    // [M, CK] x [N, CK, O]: one weight matrix for the whole batch.
    FailureOr<Value> columns =
        node.reshape(patches, {batch, contracted, outputs});
    if (failed(columns))
      return failure();
    result = node.create1<MatmulOp>({*filters, *columns});
  } else {
    // [g, M/g, CK] x [g, CK, N * O]: a batch of one product per group, the
    // samples side by side (a GEMM batch cannot broadcast the weights over
    // the samples and step through the groups).
    FailureOr<Value> grouped =
        node.reshape(patches, {batch, groups, contracted, outputs});
    if (succeeded(grouped))
      grouped = node.transpose(*grouped, {1, 2, 0, 3});
    if (succeeded(grouped))
      grouped = node.reshape(*grouped, {groups, contracted, batch * outputs});
    if (failed(grouped))
      return failure();
    result = node.create1<MatmulOp>({*filters, *grouped});
    if (succeeded(result))
      result = node.reshape(*result, {groups, maps / groups, batch, outputs});
    if (succeeded(result))
      result = node.transpose(*result, {2, 0, 1, 3});
  }
  if (failed(result))
    return failure();
  SmallVector<int64_t> resultShape = {batch, maps};
  llvm::append_range(resultShape, output);
  result = node.reshape(*result, resultShape);
  if (failed(result) || !bias)
    return result;
  // The bias, one per output channel, broadcast over the spatial positions.
  SmallVector<int64_t> biasShape(resultShape.size(), 1);
  biasShape[1] = maps;
  FailureOr<Value> spread = node.reshape(bias, biasShape);
  if (failed(spread))
    return failure();
  return node.create1<AddOp>({*result, *spread});
}

/// The convolution of `input` [N, C, spatial...] with `weights` [M,
/// C/groups, kernel...] over the windows `shape`, plus `bias` [M] if given.
static FailureOr<Value> convolve(NodeContext &node, Value input, Value weights,
                                 const WindowShape &shape, int64_t groups,
                                 Value bias) {
  FailureOr<Value> patches = windows(node, input, shape, 0.0, 0.0);
  if (failed(patches))
    return failure();
  return contract(node, *patches, weights, shape.output, groups, bias);
}

/// The group count of a Conv or ConvTranspose, checked against its
/// `channels` input and `maps` output channels and the weights' `perGroup`
/// channels (input ones for Conv, output ones for ConvTranspose).
static FailureOr<int64_t> groupCount(NodeContext &node, int64_t channels,
                                     int64_t maps, int64_t perGroup,
                                     bool transposed) {
  FailureOr<int64_t> groups = node.intAttr("group", 1);
  if (failed(groups))
    return failure();
  if (*groups < 1 || channels % *groups != 0 || maps % *groups != 0 ||
      perGroup * *groups != (transposed ? maps : channels))
    return node.error("group ")
           << *groups << " does not divide " << channels
           << " input channels and " << maps
           << " output channels with weights of " << perGroup << " channels";
  return groups;
}

/// The weights' kernel size, which kernel_shape, if given, must repeat.
static FailureOr<SmallVector<int64_t>>
kernelOf(NodeContext &node, RankedTensorType input, RankedTensorType weights) {
  if (weights.getRank() != input.getRank())
    return node.error("weights of rank ")
           << weights.getRank() << " do not fit an input of rank "
           << input.getRank();
  SmallVector<int64_t> kernel(weights.getShape().drop_front(2));
  FailureOr<SmallVector<int64_t>> given =
      perDimension(node, "kernel_shape", kernel.size(), 0);
  if (failed(given))
    return failure();
  if (node.attribute("kernel_shape") && *given != kernel)
    return node.error("kernel_shape does not match the weights' shape");
  return kernel;
}

FailureOr<Value> importConvolution(NodeContext &node, Value input,
                                   Value weights, Value bias) {
  if (failed(requireSpatial(node)))
    return failure();
  auto inputType = cast<RankedTensorType>(input.getType());
  auto weightsType = cast<RankedTensorType>(weights.getType());
  FailureOr<SmallVector<int64_t>> kernel =
      kernelOf(node, inputType, weightsType);
  if (failed(kernel))
    return failure();
  FailureOr<int64_t> groups =
      groupCount(node, inputType.getDimSize(1), weightsType.getDimSize(0),
                 weightsType.getDimSize(1), /*transposed=*/false);
  if (failed(groups))
    return failure();
  FailureOr<WindowShape> shape =
      windowShape(node, inputType, *kernel, /*ceilMode=*/false);
  if (failed(shape))
    return failure();
  return convolve(node, input, weights, *shape, *groups, bias);
}

static LogicalResult importConv(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  return node.setResult(
      importConvolution(node, node.input(0), node.input(1),
                        node.hasInput(2) ? node.input(2) : Value()));
}

/// DeformConv (opset 19, 2-D): a convolution whose kernel taps read X
/// bilinearly (zeros outside) at their places moved by `offset`
/// [N, offset_group * kH * kW * 2 (dy, dx), oH, oW] and are weighted by
/// `mask` [N, offset_group * kH * kW, oH, oW], if given; each offset group
/// moves the taps of its share of the channels.
static LogicalResult importDeformConv(NodeContext &node) {
  FailureOr<int64_t> offsetGroups = node.intAttr("offset_group", 1);
  if (failed(node.requireInputs(3)) || failed(offsetGroups))
    return failure();
  RankedTensorType input = node.inputType(0), weights = node.inputType(1);
  RankedTensorType offsets = node.inputType(2);
  if (input.getRank() != 4)
    return node.error("X must be [N, C, H, W] (kiln deforms 2-D "
                      "convolutions), got ")
           << input;
  FailureOr<SmallVector<int64_t>> kernel = kernelOf(node, input, weights);
  if (failed(kernel))
    return failure();
  int64_t batch = input.getDimSize(0), channels = input.getDimSize(1);
  FailureOr<int64_t> groups =
      groupCount(node, channels, weights.getDimSize(0), weights.getDimSize(1),
                 /*transposed=*/false);
  FailureOr<WindowShape> shape =
      windowShape(node, input, *kernel, /*ceilMode=*/false);
  if (failed(groups) || failed(shape))
    return failure();
  int64_t taps = product(*kernel), rows = shape->output[0],
          columns = shape->output[1];
  int64_t perGroup = *offsetGroups > 0 ? channels / *offsetGroups : 0;
  if (*offsetGroups < 1 || channels % *offsetGroups != 0 ||
      offsets.getShape() !=
          ArrayRef<int64_t>{batch, *offsetGroups * taps * 2, rows, columns})
    return node.error("offset ")
           << offsets << " is not [N, offset_group * " << taps << " * 2, "
           << rows << ", " << columns << "] for offset_group " << *offsetGroups
           << " dividing " << channels << " channels";
  bool masked = node.hasInput(4);
  if (masked &&
      node.inputType(4).getShape() !=
          ArrayRef<int64_t>{batch, *offsetGroups * taps, rows, columns})
    return node.error("mask ") << node.inputType(4) << " does not match offset";
  OpChain ops(node, input.getElementType());
  // Channel `c` of a [N, C', oH, oW] tensor as [N, oH, oW].
  auto plane = [&](Value x, int64_t c) {
    return ops.reshape(
        ops.slice(x, {0, c, 0, 0}, {1, 1, 1, 1}, {batch, 1, rows, columns}),
        {batch, rows, columns});
  };
  // Where a tap at kernel position `k` of output (i, j) reads along one axis
  // without offsets: i * stride - pad_begin + k * dilation.
  auto base = [&](int64_t axis, int64_t k) {
    int64_t count = shape->output[axis];
    Tensor at(*dtypeOf(input.getElementType()),
              axis == 0 ? SmallVector<int64_t>{1, count, 1}
                        : SmallVector<int64_t>{1, 1, count});
    for (int64_t i = 0; i < count; ++i)
      at.setFromDouble(i, i * shape->strides[axis] - shape->padBegin[axis] +
                              k * shape->dilations[axis]);
    return node.constant(at);
  };
  SmallVector<Value> groupPatches;
  for (int64_t g = 0; g < *offsetGroups; ++g) {
    Value image =
        ops.slice(node.input(0), {0, g * perGroup, 0, 0}, {1, 1, 1, 1},
                  {batch, perGroup, input.getDimSize(2), input.getDimSize(3)});
    if (!image)
      return failure();
    Sampler sampler(node, ops, image, Interpolation::Linear, Padding::Zeros,
                    /*alignCorners=*/true);
    SmallVector<Value> tapColumns;
    for (int64_t k = 0; k < taps; ++k) {
      int64_t ky = k / (*kernel)[1], kx = k % (*kernel)[1];
      int64_t at = (g * taps + k) * 2;
      Value y = ops.add(base(0, ky), plane(node.input(2), at));
      Value x = ops.add(base(1, kx), plane(node.input(2), at + 1));
      Value sampled = sampler.at(x, y);
      if (masked)
        sampled =
            ops.mul(sampled, ops.reshape(plane(node.input(4), g * taps + k),
                                         {batch, 1, rows, columns}));
      tapColumns.push_back(
          ops.reshape(sampled, {batch, perGroup, 1, rows * columns}));
    }
    groupPatches.push_back(ops.concat(tapColumns, 2));
  }
  Value patches = ops.concat(groupPatches, 1);
  if (!patches)
    return failure();
  return node.setResult(contract(node, patches, node.input(1), shape->output,
                                 *groups,
                                 node.hasInput(3) ? node.input(3) : Value()));
}

/// ConvTranspose: the convolution, with stride 1, of the input spread
/// `strides` apart (zeros between) and padded by the kernel's extent less
/// `pads` (cropped where that is negative; `output_padding` more at the
/// end), with each group's weights transposed (input and output channels
/// swapped) and flipped along every spatial dimension.
static LogicalResult importConvTranspose(NodeContext &node) {
  if (failed(requireSpatial(node)) || failed(node.requireInputs(2)))
    return failure();
  RankedTensorType input = node.inputType(0), weights = node.inputType(1);
  FailureOr<SmallVector<int64_t>> kernel = kernelOf(node, input, weights);
  FailureOr<int64_t> groupAttr = node.intAttr("group", 1);
  if (failed(kernel) || failed(groupAttr))
    return failure();
  size_t spatial = kernel->size();
  int64_t batch = input.getDimSize(0), channels = input.getDimSize(1);
  int64_t perGroup = weights.getDimSize(1);
  int64_t maps = perGroup * std::max<int64_t>(*groupAttr, 1);
  FailureOr<int64_t> groups =
      groupCount(node, channels, maps, perGroup, /*transposed=*/true);
  FailureOr<WindowAttributes> attributes = windowAttributes(node, spatial);
  FailureOr<SmallVector<int64_t>> outputPadding =
      perDimension(node, "output_padding", spatial, 0);
  FailureOr<std::optional<SmallVector<int64_t>>> outputShape =
      node.intsAttr("output_shape");
  if (failed(groups) || failed(attributes) || failed(outputPadding) ||
      failed(outputShape))
    return failure();
  const std::string &autoPad = attributes->autoPad;
  // output_shape gives the spatial sizes (some exporters write all of
  // [N, M, spatial...]).
  SmallVector<int64_t> wanted;
  if (*outputShape) {
    if ((*outputShape)->size() < spatial)
      return node.error("output_shape has fewer entries than spatial "
                        "dimensions");
    wanted.assign((*outputShape)->end() - spatial, (*outputShape)->end());
  }
  WindowShape shape;
  shape.kernel = *kernel;
  SmallVector<int64_t> spread = {batch, channels}, low = {0, 0}, high = {0, 0};
  for (size_t d = 0; d < spatial; ++d) {
    int64_t size = input.getDimSize(d + 2), stride = attributes->strides[d];
    int64_t dilation = attributes->dilations[d], extra = (*outputPadding)[d];
    if (extra < 0)
      return node.error("output_padding must not be negative");
    int64_t extent = dilation * ((*kernel)[d] - 1) + 1;
    int64_t full = stride * (size - 1) + extra + extent;
    int64_t begin = attributes->pads[d], end = attributes->pads[spatial + d];
    if (autoPad == "VALID") {
      begin = end = 0;
    } else if (*outputShape || autoPad != "NOTSET") {
      // The padding that gives the output size asked for (by default the
      // input's times the stride); the odd element at the end for
      // SAME_UPPER, at the beginning otherwise. A negative total (an output
      // larger than the full one) adds zeros the same way.
      int64_t total = full - (*outputShape ? wanted[d] : size * stride);
      int64_t half = llvm::divideFloorSigned(total, int64_t(2));
      begin = autoPad == "SAME_UPPER" ? half : total - half;
      end = total - begin;
    }
    int64_t output = full - begin - end;
    if (output < 1)
      return node.error("the output would have size ")
             << output << " along spatial dimension " << d;
    spread.push_back(stride * (size - 1) + 1);
    low.push_back(extent - 1 - begin);
    high.push_back(extent - 1 - end + extra);
    shape.strides.push_back(1);
    shape.dilations.push_back(dilation);
    shape.padBegin.push_back(0);
    shape.padEnd.push_back(0);
    shape.overhang.push_back(0);
    shape.output.push_back(output);
  }
  // The input spread out: inserted `strides` apart into zeros.
  SmallVector<int64_t> origin(input.getRank(), 0), every = {1, 1};
  llvm::append_range(every, attributes->strides);
  FailureOr<Value> spaced = node.create1<InsertSliceOp>(
      {node.splat(0.0, input.clone(spread)), node.input(0)},
      {node.builder.getNamedAttr("start",
                                 node.builder.getDenseI64ArrayAttr(origin)),
       node.builder.getNamedAttr("stride",
                                 node.builder.getDenseI64ArrayAttr(every))});
  if (failed(spaced))
    return failure();
  FailureOr<Value> padded = node.padConstant(*spaced, low, high, 0.0);
  if (failed(padded))
    return failure();
  // [C, M/g, k...] -> [g, C/g, M/g, k...] -> [g, M/g, C/g, k...] ->
  // [M, C/g, k...], each kernel reversed.
  SmallVector<int64_t> split = {*groups, channels / *groups, perGroup};
  llvm::append_range(split, *kernel);
  SmallVector<int64_t> swap = {0, 2, 1};
  for (size_t d = 0; d < spatial; ++d)
    swap.push_back(3 + d);
  SmallVector<int64_t> regrouped = {maps, channels / *groups};
  llvm::append_range(regrouped, *kernel);
  SmallVector<int64_t> last = {0, 0}, backwards = {1, 1};
  for (int64_t size : *kernel) {
    last.push_back(size - 1);
    backwards.push_back(-1);
  }
  FailureOr<Value> filters = node.reshape(node.input(1), split);
  if (succeeded(filters))
    filters = node.transpose(*filters, swap);
  if (succeeded(filters))
    filters = node.reshape(*filters, regrouped);
  if (succeeded(filters))
    filters = node.slice(*filters, last, backwards, regrouped);
  if (failed(filters))
    return failure();
  return node.setResult(convolve(node, *padded, *filters, shape, *groups,
                                 node.hasInput(2) ? node.input(2) : Value()));
}

/// The windows of a pool's input, their geometry and the reduced result's
/// shape.
struct PoolWindows {
  WindowShape shape;
  SmallVector<int64_t> resultShape;
};

static FailureOr<PoolWindows> poolWindows(NodeContext &node) {
  if (failed(requireSpatial(node)))
    return failure();
  RankedTensorType input = node.inputType(0);
  size_t spatial = input.getRank() - 2;
  FailureOr<std::optional<SmallVector<int64_t>>> kernel =
      node.intsAttr("kernel_shape");
  FailureOr<int64_t> ceilMode = node.intAttr("ceil_mode", 0);
  if (failed(kernel) || failed(ceilMode))
    return failure();
  if (!*kernel || (*kernel)->size() != spatial)
    return node.error("needs kernel_shape with one size per spatial "
                      "dimension (")
           << spatial << ")";
  FailureOr<WindowShape> shape = windowShape(node, input, **kernel, *ceilMode);
  if (failed(shape))
    return failure();
  PoolWindows pool{*shape, {input.getDimSize(0), input.getDimSize(1)}};
  llvm::append_range(pool.resultShape, shape->output);
  return pool;
}

/// `op` over the kernel positions of `windows` [N, C, K, O], reshaped to
/// `shape`.
template <typename ReduceOp>
static FailureOr<Value> reduceWindows(NodeContext &node, Value windows,
                                      ArrayRef<int64_t> shape) {
  FailureOr<Value> reduced = node.create1<ReduceOp>(
      {windows}, {node.builder.getNamedAttr(
                     "axes", node.builder.getDenseI64ArrayAttr(2))});
  if (failed(reduced))
    return failure();
  return node.reshape(*reduced, shape);
}

/// For each kernel position k and output position o of `shape` over
/// `input`, the element of an input plane (one sample's channel) under that
/// window's position k, flattened row-major (or column-major): [K, O].
static SmallVector<int64_t> windowElements(RankedTensorType input,
                                           const WindowShape &shape,
                                           bool columnMajor) {
  ArrayRef<int64_t> sizes = input.getShape().drop_front(2);
  size_t spatial = sizes.size();
  SmallVector<int64_t> weight(spatial, 1);
  for (size_t d = 1; d < spatial; ++d) {
    size_t fast = columnMajor ? d : spatial - 1 - d;
    size_t previous = columnMajor ? d - 1 : spatial - d;
    weight[fast] = weight[previous] * sizes[previous];
  }
  int64_t kernelPositions = product(shape.kernel);
  int64_t outputs = product(shape.output);
  SmallVector<int64_t> elements;
  for (int64_t k = 0; k < kernelPositions; ++k)
    for (int64_t o = 0; o < outputs; ++o) {
      int64_t element = 0;
      for (int64_t d = spatial - 1, kRest = k, oRest = o; d >= 0; --d) {
        int64_t at = oRest % shape.output[d] * shape.strides[d] -
                     shape.padBegin[d] +
                     kRest % shape.kernel[d] * shape.dilations[d];
        element += at * weight[d];
        kRest /= shape.kernel[d];
        oRest /= shape.output[d];
      }
      elements.push_back(element);
    }
  return elements;
}

/// MaxPool's Indices: where in the whole input each window's first maximum
/// is, flattened row-major (storage_order 0) or with the spatial dimensions
/// column-major (1).
static FailureOr<Value> maxIndices(NodeContext &node, Value patches,
                                   const PoolWindows &pool) {
  FailureOr<int64_t> order = node.intAttr("storage_order", 0);
  if (failed(order))
    return failure();
  RankedTensorType input = node.inputType(0);
  int64_t batch = input.getDimSize(0), channels = input.getDimSize(1);
  int64_t kernelPositions = product(pool.shape.kernel);
  int64_t outputs = product(pool.shape.output);
  FailureOr<Value> first = node.create1<ArgMaxOp>(
      {patches},
      {node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(2)),
       node.builder.getNamedAttr("keep_dims", node.builder.getUnitAttr())});
  if (failed(first))
    return failure();
  FailureOr<Value> hot = node.isIndexAlong(*first, kernelPositions, 2);
  if (failed(hot))
    return failure();
  Type i64 = IntegerType::get(node.builder.getContext(), 64);
  Value elements =
      node.int64Constant({1, 1, kernelPositions, outputs},
                         windowElements(input, pool.shape, *order == 1));
  FailureOr<Value> picked =
      node.create1<WhereOp>({*hot, elements, node.scalar(0.0, i64)});
  if (failed(picked))
    return failure();
  FailureOr<Value> inPlane =
      reduceWindows<ReduceSumOp>(node, *picked, {batch, channels, outputs});
  if (failed(inPlane))
    return failure();
  // Plus where each sample's channel starts.
  int64_t plane = product(input.getShape().drop_front(2));
  SmallVector<int64_t> starts;
  for (int64_t i = 0; i < batch * channels; ++i)
    starts.push_back(i * plane);
  FailureOr<Value> indices = node.create1<AddOp>(
      {*inPlane, node.int64Constant({batch, channels, 1}, starts)});
  if (failed(indices))
    return failure();
  return node.reshape(*indices, pool.resultShape);
}

/// MaxPool: the largest element of each window (padding never wins), and
/// where it is.
static LogicalResult importMaxPool(NodeContext &node) {
  FailureOr<PoolWindows> pool = poolWindows(node);
  if (failed(pool))
    return failure();
  Type element = node.inputType(0).getElementType();
  double lowest = -std::numeric_limits<double>::infinity();
  if (auto integer = dyn_cast<IntegerType>(element))
    lowest =
        integer.isUnsigned() ? 0.0 : -std::ldexp(1.0, integer.getWidth() - 1);
  FailureOr<Value> patches =
      windows(node, node.input(0), pool->shape, lowest, lowest);
  if (failed(patches))
    return failure();
  if (node.hasOutput(1)) {
    FailureOr<Value> indices = maxIndices(node, *patches, *pool);
    if (failed(indices))
      return failure();
    node.setOutput(1, *indices);
  }
  return node.setResult(
      reduceWindows<ReduceMaxOp>(node, *patches, pool->resultShape));
}

/// AveragePool: each window's sum over the elements it covers, counting the
/// padding with count_include_pad but never what ceil_mode adds past it.
static LogicalResult importAveragePool(NodeContext &node) {
  FailureOr<PoolWindows> pool = poolWindows(node);
  FailureOr<int64_t> includePad = node.intAttr("count_include_pad", 0);
  if (failed(pool) || failed(includePad))
    return failure();
  RankedTensorType type = node.inputType(0);
  FailureOr<Value> patches = windows(node, node.input(0), pool->shape, 0, 0);
  if (failed(patches))
    return failure();
  FailureOr<Value> sums =
      reduceWindows<ReduceSumOp>(node, *patches, pool->resultShape);
  if (failed(sums))
    return failure();
  // The elements each window averages: the same windows over ones (a
  // constant the import folds).
  SmallVector<int64_t> single(type.getShape());
  single[0] = single[1] = 1;
  FailureOr<Value> counted = windows(node, node.splat(1.0, type.clone(single)),
                                     pool->shape, *includePad ? 1.0 : 0.0, 0.0);
  if (failed(counted))
    return failure();
  SmallVector<int64_t> countShape(pool->resultShape);
  countShape[0] = countShape[1] = 1;
  FailureOr<Value> counts =
      reduceWindows<ReduceSumOp>(node, *counted, countShape);
  if (failed(counts))
    return failure();
  return node.setResult(node.create1<DivOp>({*sums, *counts}));
}

/// MaxUnpool: zeros of the shape a pool of `kernel_shape`, `strides` and
/// `pads` would have pooled from, each input element written where its
/// index (into that whole shape, flattened, as MaxPool's Indices give it)
/// points; then zeros past the end of each dimension up to `output_shape`,
/// if given (as ONNX's reference places them).
static LogicalResult importMaxUnpool(NodeContext &node) {
  if (failed(requireSpatial(node)) || failed(node.requireInputs(2)))
    return failure();
  RankedTensorType input = node.inputType(0);
  size_t spatial = input.getRank() - 2;
  if (node.inputType(1).getShape() != input.getShape())
    return node.error("indices of shape [")
           << node.inputType(1).getShape() << "] differ from the input's ["
           << input.getShape() << "]";
  FailureOr<SmallVector<int64_t>> kernel =
      perDimension(node, "kernel_shape", spatial, 0);
  FailureOr<WindowAttributes> window = windowAttributes(node, spatial);
  if (failed(kernel) || failed(window))
    return failure();
  if (!node.attribute("kernel_shape") ||
      llvm::any_of(*kernel, [](int64_t k) { return k < 1; }))
    return node.error("needs a positive kernel_shape per spatial dimension");
  SmallVector<int64_t> pooled(input.getShape().take_front(2));
  for (size_t d = 0; d < spatial; ++d)
    pooled.push_back((input.getDimSize(2 + d) - 1) * window->strides[d] +
                     (*kernel)[d] - window->pads[d] -
                     window->pads[spatial + d]);
  if (llvm::any_of(pooled, [](int64_t size) { return size < 1; }))
    return node.error("unpools to the empty shape [") << pooled << "]";
  SmallVector<int64_t> shape = pooled;
  if (node.hasInput(2)) {
    FailureOr<SmallVector<int64_t>> given =
        node.constantInts(2, "output_shape");
    if (failed(given))
      return failure();
    bool fits = given->size() == shape.size() && (*given)[0] == shape[0] &&
                (*given)[1] == shape[1];
    for (size_t d = 2; fits && d < shape.size(); ++d)
      fits = (*given)[d] >= shape[d];
    if (!fits)
      return node.error("output_shape [")
             << *given << "] does not hold the unpooled [" << pooled << "]";
    shape = *given;
  }
  OpChain ops(node, input.getElementType());
  int64_t count = input.getNumElements();
  Value zeros = node.splat(0.0, input.clone({product(pooled)}));
  Value scattered = ops.build<ScatterElementsOp>(
      {zeros,
       ops.cast(ops.reshape(node.input(1), {count}), node.builder.getI64Type()),
       ops.reshape(node.input(0), {count})},
      {node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(0)),
       node.builder.getNamedAttr(
           "reduction", ScatterReductionAttr::get(node.builder.getContext(),
                                                  ScatterReduction::None))},
      {zeros.getType()});
  Value unpooled = ops.reshape(scattered, pooled);
  if (!unpooled)
    return failure();
  SmallVector<int64_t> low(shape.size(), 0), high;
  for (auto [size, covered] : llvm::zip(shape, pooled))
    high.push_back(size - covered);
  return node.setResult(node.padConstant(unpooled, low, high, 0.0));
}

/// Col2Im (opset 18): the adjoint of a convolution's windows. Input
/// [N, C * prod(block), L] holds, per kernel position, the columns of the
/// L blocks; each position's columns are added into zeros of the padded
/// image at the blocks' strided, dilated places, and the padding is cut.
static LogicalResult importCol2Im(NodeContext &node) {
  if (failed(node.requireInputs(3)))
    return failure();
  FailureOr<SmallVector<int64_t>> image = node.constantInts(1, "image_shape");
  FailureOr<SmallVector<int64_t>> block = node.constantInts(2, "block_shape");
  if (failed(image) || failed(block))
    return failure();
  size_t spatial = image->size();
  FailureOr<WindowAttributes> window = windowAttributes(node, spatial);
  if (failed(window))
    return failure();
  RankedTensorType type = node.inputType(0);
  int64_t positions = product(*block);
  if (block->size() != spatial || type.getRank() != 3 ||
      llvm::any_of(*block, [](int64_t k) { return k < 1; }) ||
      type.getDimSize(1) % positions != 0)
    return node.error("input ")
           << type << " is not [N, C * prod(block_shape), L] for block_shape ["
           << *block << "] of " << spatial << " dimensions";
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1) / positions;
  SmallVector<int64_t> padded = {batch, channels}, blocks = {batch, channels};
  for (size_t d = 0; d < spatial; ++d) {
    padded.push_back((*image)[d] + window->pads[d] + window->pads[spatial + d]);
    int64_t extent = window->dilations[d] * ((*block)[d] - 1) + 1;
    blocks.push_back((padded.back() - extent) / window->strides[d] + 1);
    if (blocks.back() < 1)
      return node.error("block_shape [")
             << *block << "] does not fit the padded image";
  }
  if (product(ArrayRef<int64_t>(blocks).drop_front(2)) != type.getDimSize(2))
    return node.error("input has ")
           << type.getDimSize(2) << " blocks, the image holds "
           << product(ArrayRef<int64_t>(blocks).drop_front(2));
  OpChain ops(node, type.getElementType());
  Value columns = ops.reshape(node.input(0),
                              {batch, channels, positions, type.getDimSize(2)});
  Value zeros = node.splat(0.0, type.clone(padded));
  SmallVector<int64_t> stride = {1, 1};
  llvm::append_range(stride, window->strides);
  Value sum;
  SmallVector<int64_t> offset(spatial, 0);
  for (int64_t k = 0; k < positions; ++k) {
    Value column =
        ops.reshape(ops.slice(columns, {0, 0, k, 0}, {1, 1, 1, 1},
                              {batch, channels, 1, type.getDimSize(2)}),
                    blocks);
    SmallVector<int64_t> start = {0, 0};
    for (size_t d = 0; d < spatial; ++d)
      start.push_back(offset[d] * window->dilations[d]);
    Value placed = ops.build<InsertSliceOp>(
        {zeros, column},
        {node.builder.getNamedAttr("start",
                                   node.builder.getDenseI64ArrayAttr(start)),
         node.builder.getNamedAttr("stride",
                                   node.builder.getDenseI64ArrayAttr(stride))},
        {zeros.getType()});
    sum = sum ? ops.add(sum, placed) : placed;
    for (int64_t d = spatial - 1; d >= 0; --d) {
      if (++offset[d] < (*block)[d])
        break;
      offset[d] = 0;
    }
  }
  SmallVector<int64_t> start = {0, 0}, unit(spatial + 2, 1),
                       shape = {batch, channels};
  llvm::append_range(start,
                     ArrayRef<int64_t>(window->pads).take_front(spatial));
  llvm::append_range(shape, *image);
  Value result = ops.slice(sum, start, unit, shape);
  return result ? node.setResult(result) : failure();
}

/// LpPool's and GlobalLpPool's exponent: the integer attribute `p`, at
/// least 1.
static FailureOr<int64_t> lpExponent(NodeContext &node) {
  FailureOr<int64_t> p = node.intAttr("p", 2);
  if (failed(p))
    return failure();
  if (*p < 1)
    return node.error("p must be at least 1, got ") << *p;
  return p;
}

/// LpPool: the Lp norm of each window, (sum |x|^p)^(1/p), the padding
/// counting as zeros.
static LogicalResult importLpPool(NodeContext &node) {
  FailureOr<PoolWindows> pool = poolWindows(node);
  FailureOr<int64_t> p = lpExponent(node);
  if (failed(pool) || failed(p))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  Value powers = ops.powerOfMagnitude(node.input(0), *p);
  if (!powers)
    return failure();
  FailureOr<Value> patches = windows(node, powers, pool->shape, 0, 0);
  if (failed(patches))
    return failure();
  FailureOr<Value> sums =
      reduceWindows<ReduceSumOp>(node, *patches, pool->resultShape);
  Value result = succeeded(sums) ? ops.root(*sums, *p) : Value();
  return result ? node.setResult(result) : failure();
}

/// GlobalLpPool: the Lp norm over every spatial dimension, kept as size 1.
static LogicalResult importGlobalLpPool(NodeContext &node) {
  FailureOr<int64_t> p = lpExponent(node);
  if (failed(requireSpatial(node)) || failed(p))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  auto spatial = llvm::to_vector(llvm::seq<int64_t>(2, node.inputRank(0)));
  Value sums = ops.build<ReduceSumOp>(
      {ops.powerOfMagnitude(node.input(0), *p)},
      {node.builder.getNamedAttr("axes",
                                 node.builder.getDenseI64ArrayAttr(spatial)),
       node.builder.getNamedAttr("keep_dims", node.builder.getUnitAttr())});
  Value result = ops.root(sums, *p);
  return result ? node.setResult(result) : failure();
}

void registerWindowImporters(OpImporterTable &table) {
  table.add("LpPool", importLpPool);
  table.add("MaxUnpool", importMaxUnpool);
  table.add("Col2Im", importCol2Im);
  table.add("DeformConv", importDeformConv);
  table.add("GlobalLpPool", importGlobalLpPool);
  table.add("Conv", importConv);
  table.add("ConvTranspose", importConvTranspose);
  table.add("MaxPool", importMaxPool);
  table.add("AveragePool", importAveragePool);
}

} // namespace kiln
