//===- ConvolutionImporters.cpp - ONNX convolutions -----------------------===//
//
// Conv, ConvTranspose (a convolution of the input spread out by its
// strides), DeformConv (windows whose taps are sampled at offset places)
// and Col2Im (the windows' adjoint), on the windows of Windows.h: a
// convolution is a matrix product of its weights with the windows, one
// batched kiln.matmul per group, which kiln's GEMMs, fusion and autodiff
// treat as any product.
//
//===----------------------------------------------------------------------===//

#include "Sampling.h"
#include "Windows.h"

using namespace mlir;

namespace kiln {

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

void registerConvolutionImporters(OpImporterTable &table) {
  table.add("Conv", importConv);
  table.add("ConvTranspose", importConvTranspose);
  table.add("DeformConv", importDeformConv);
  table.add("Col2Im", importCol2Im);
}

} // namespace kiln
