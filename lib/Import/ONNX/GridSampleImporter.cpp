//===- GridSampleImporter.cpp - sampling at computed points ---------------===//
//
// Sampler (Sampling.h), and GridSample and AffineGrid built on it. GridSample
// reads X [N, C, H, W] at the points of grid [N, Ho, Wo, 2] (x then y, in
// [-1, 1]), which the model computes (deformable attention's sampling
// offsets): the taps cannot be known at import as Resize's are. The padding
// mode applies to the taps' indices: zeros drops those outside, border
// clamps them, reflection reflects them at the image's edges, which samples
// what reflecting the coordinate would. Gradients reach X through the
// gathers and the grid through the weights, as in PyTorch.
//
//===----------------------------------------------------------------------===//

#include "Sampling.h"

#include <cmath>

using namespace mlir;

namespace kiln {

Sampler::Sampler(NodeContext &node, OpChain &ops, Value image,
                 Interpolation interpolation, Padding padding,
                 bool alignCorners)
    : node(node), ops(ops), interpolation(interpolation), padding(padding),
      alignCorners(alignCorners) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(image.getType()).getShape();
  batch = shape[0];
  channels = shape[1];
  height = shape[2];
  width = shape[3];
  flat = ops.reshape(image, {batch, channels, height * width});
}

Value Sampler::unnormalize(Value g, int64_t size) {
  Value shifted = ops.add(g, ops.constant(1.0));
  if (alignCorners)
    return ops.mul(shifted, ops.constant((size - 1) / 2.0));
  return ops.mul(
      ops.sub(ops.mul(shifted, ops.constant(size)), ops.constant(1.0)),
      ops.constant(0.5));
}

SmallVector<Sampler::Tap> Sampler::taps(Value x) {
  if (interpolation == Interpolation::Nearest)
    return {{ops.unary<RoundOp>(x), ops.constant(1.0)}};
  Value floor = ops.unary<FloorOp>(x);
  Value t = ops.sub(x, floor);
  if (interpolation == Interpolation::Linear)
    return {{floor, ops.sub(ops.constant(1.0), t)},
            {ops.add(floor, ops.constant(1.0)), t}};
  // Cubic convolution with A = -0.75 over the taps at -1, 0, 1 and 2.
  constexpr double a = -0.75;
  auto near = [&](Value d) { // |d| <= 1: ((a + 2) d - (a + 3)) d^2 + 1
    Value inner = ops.sub(ops.mul(ops.constant(a + 2), d), ops.constant(a + 3));
    return ops.add(ops.mul(ops.mul(inner, d), d), ops.constant(1.0));
  };
  auto far = [&](Value d) { // 1 < |d| < 2: ((a d - 5a) d + 8a) d - 4a
    Value inner = ops.sub(ops.mul(ops.constant(a), d), ops.constant(5 * a));
    return ops.sub(ops.mul(ops.add(ops.mul(inner, d), ops.constant(8 * a)), d),
                   ops.constant(4 * a));
  };
  Value one = ops.constant(1.0);
  return {
      {ops.sub(floor, one), far(ops.add(t, one))},
      {floor, near(t)},
      {ops.add(floor, one), near(ops.sub(one, t))},
      {ops.add(floor, ops.constant(2.0)), far(ops.sub(ops.constant(2.0), t))}};
}

Value Sampler::reflect(Value index, int64_t size) {
  // A triangle wave between the edges: low + range - |(i - low) mod 2 range
  // - range|.
  double low = alignCorners ? 0.0 : -0.5;
  double range = alignCorners ? size - 1.0 : size;
  if (range == 0.0)
    return ops.mul(index, ops.constant(0.0));
  Value offset = ops.sub(index, ops.constant(low));
  Value wrapped = ops.build<RemainderOp>(
      {offset, ops.constant(2 * range)},
      {node.builder.getNamedAttr("floored", node.builder.getUnitAttr())});
  Value folded = ops.unary<AbsOp>(ops.sub(wrapped, ops.constant(range)));
  return ops.sub(ops.constant(low + range), folded);
}

Value Sampler::padded(Value index, int64_t size, Value &inside) {
  inside = Value();
  if (padding == Padding::Zeros)
    inside = ops.build<AndOp>(
        {ops.compare(ComparePredicate::GE, index, ops.constant(0.0)),
         ops.compare(ComparePredicate::LE, index, ops.constant(size - 1.0))});
  if (padding == Padding::Reflection)
    index = reflect(index, size);
  return ops.min(ops.max(index, ops.constant(0.0)), ops.constant(size - 1.0));
}

Value Sampler::sample(const Tap &x, const Tap &y, int64_t rows,
                      int64_t columns) {
  Value insideX, insideY;
  Value column = padded(x.index, width, insideX);
  Value row = padded(y.index, height, insideY);
  Value weight = ops.mul(x.weight, y.weight);
  if (insideX) {
    Value inside = ops.build<AndOp>({insideX, insideY});
    weight = ops.select(inside, weight, ops.constant(0.0));
  }
  // The flat pixel index of every point, for every channel, in integers (a
  // 16-bit float holds few).
  Type i64 = node.builder.getI64Type();
  Value index =
      ops.reshape(ops.add(ops.mul(ops.cast(row, i64), node.scalar(width, i64)),
                          ops.cast(column, i64)),
                  {batch, 1, rows * columns});
  if (index)
    index = ops.build<BroadcastOp>(
        {index}, {},
        {RankedTensorType::get({batch, channels, rows * columns}, i64)});
  Value gathered = ops.build<GatherElementsOp>(
      {flat, index},
      {node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(2))});
  return ops.mul(ops.reshape(gathered, {batch, channels, rows, columns}),
                 ops.reshape(weight, {batch, 1, rows, columns}));
}

SmallVector<Value> Sampler::terms(Value x, Value y) {
  if (!x || !y)
    return {};
  ArrayRef<int64_t> points = cast<RankedTensorType>(x.getType()).getShape();
  SmallVector<Tap> columnTaps = taps(x), rowTaps = taps(y);
  SmallVector<Value> products;
  for (const Tap &row : rowTaps)
    for (const Tap &column : columnTaps)
      products.push_back(sample(column, row, points[1], points[2]));
  return products;
}

Value Sampler::at(Value x, Value y) {
  Value sum;
  for (Value term : terms(x, y))
    sum = sum ? ops.add(sum, term) : term;
  return sum;
}

/// GridSample: X [N, C, H, W] at the normalized points of grid
/// [N, Ho, Wo, 2] (x then y).
static LogicalResult importGridSample(NodeContext &node) {
  FailureOr<std::string> mode = node.stringAttr("mode", "bilinear");
  FailureOr<std::string> paddingMode = node.stringAttr("padding_mode", "zeros");
  FailureOr<int64_t> align = node.intAttr("align_corners", 0);
  if (failed(node.requireInputs(2)) || failed(mode) || failed(paddingMode) ||
      failed(align))
    return failure();
  // Opset 20 renamed bilinear and bicubic to linear and cubic.
  Interpolation interpolation;
  if (*mode == "nearest")
    interpolation = Interpolation::Nearest;
  else if (*mode == "bilinear" || *mode == "linear")
    interpolation = Interpolation::Linear;
  else if (*mode == "bicubic" || *mode == "cubic")
    interpolation = Interpolation::Cubic;
  else
    return node.error("unknown mode '") << *mode << "'";
  Padding padding;
  if (*paddingMode == "zeros")
    padding = Padding::Zeros;
  else if (*paddingMode == "border")
    padding = Padding::Border;
  else if (*paddingMode == "reflection")
    padding = Padding::Reflection;
  else
    return node.error("unknown padding_mode '") << *paddingMode << "'";
  RankedTensorType xType = node.inputType(0), gridType = node.inputType(1);
  if (xType.getRank() != 4 || !isa<FloatType>(xType.getElementType()))
    return node.error("X must be a 4-D float tensor [N, C, H, W] (kiln "
                      "samples 2-D images), got ")
           << xType;
  int64_t batch = xType.getDimSize(0);
  if (gridType.getRank() != 4 || gridType.getDimSize(0) != batch ||
      gridType.getDimSize(3) != 2 ||
      gridType.getElementType() != xType.getElementType())
    return node.error("grid must be [")
           << batch << ", Ho, Wo, 2] of X's element type, got " << gridType;
  int64_t rows = gridType.getDimSize(1), columns = gridType.getDimSize(2);
  OpChain ops(node, xType.getElementType());
  Sampler sampler(node, ops, node.input(0), interpolation, padding,
                  *align != 0);
  auto coordinate = [&](int64_t axis, int64_t size) {
    Value g = ops.reshape(ops.slice(node.input(1), {0, 0, 0, axis},
                                    {1, 1, 1, 1}, {batch, rows, columns, 1}),
                          {batch, rows, columns});
    return sampler.unnormalize(g, size);
  };
  Value result = sampler.at(coordinate(0, xType.getDimSize(3)),
                            coordinate(1, xType.getDimSize(2)));
  return result ? node.setResult(result) : failure();
}

/// AffineGrid (opset 20): the points theta [N, 2, 3] (or [N, 3, 4]) maps an
/// H x W (or D x H x W) grid of normalized coordinates in [-1, 1] to, as
/// [N, H, W, 2] (or [N, D, H, W, 3]) x, y (, z) for GridSample: a product
/// with the constant grid of homogeneous points (x, y (, z), 1), x along
/// the last dimension, at the pixels' centres or, with align_corners,
/// their corners.
static LogicalResult importAffineGrid(NodeContext &node) {
  FailureOr<int64_t> alignCorners = node.intAttr("align_corners", 0);
  if (failed(node.requireInputs(2)) || failed(alignCorners))
    return failure();
  FailureOr<SmallVector<int64_t>> size = node.constantInts(1, "size");
  if (failed(size))
    return failure();
  RankedTensorType theta = node.inputType(0);
  int64_t spatial = static_cast<int64_t>(size->size()) - 2;
  if ((spatial != 2 && spatial != 3) ||
      theta.getShape() != ArrayRef<int64_t>{(*size)[0], spatial, spatial + 1})
    return node.error("theta ")
           << theta << " and size [" << *size
           << "] are not [N, 2, 3] and [N, C, H, W] or [N, 3, 4] and "
              "[N, C, D, H, W]";
  ArrayRef<int64_t> extent = ArrayRef<int64_t>(*size).drop_front(2);
  if (llvm::any_of(extent, [](int64_t d) { return d < 1; }))
    return node.error("size [") << *size << "] has an empty dimension";
  // Each point's coordinates, the last dimension's first, then 1.
  int64_t points = product(extent);
  Tensor grid(*dtypeOf(theta.getElementType()), {1, points, spatial + 1});
  auto normalized = [&](int64_t i, int64_t n) {
    if (*alignCorners)
      return n == 1 ? -1.0 : -1.0 + 2.0 * i / (n - 1);
    return -1.0 + (2.0 * i + 1.0) / n;
  };
  for (int64_t p = 0; p < points; ++p) {
    int64_t rest = p;
    for (int64_t d = spatial - 1; d >= 0; --d) {
      int64_t n = extent[d];
      // Column spatial - 1 - d: x (the last dimension) first.
      grid.setFromDouble(p * (spatial + 1) + (spatial - 1 - d),
                         normalized(rest % n, n));
      rest /= n;
    }
    grid.setFromDouble(p * (spatial + 1) + spatial, 1.0);
  }
  OpChain ops(node, theta.getElementType());
  Value mapped = ops.productTransposed(node.constant(grid), node.input(0));
  SmallVector<int64_t> shape{(*size)[0]};
  llvm::append_range(shape, extent);
  shape.push_back(spatial);
  Value result = ops.reshape(mapped, shape);
  return result ? node.setResult(result) : failure();
}

/// RoiAlign (opsets 10 and 16): each region of interest [x1, y1, x2, y2]
/// (times spatial_scale, less half a pixel with half_pixel) of its image
/// (batch_indices) cut into output_height x output_width bins, each the
/// average (or maximum) of sampling_ratio^2 bilinear samples at its
/// sub-bins' centres: a sample outside [-1, size] reads 0, one inside is
/// clamped into the image. A sample of max mode is its largest weighted
/// corner, as ONNX's reference computes it. The adaptive sampling ratio (0)
/// depends on the regions' sizes, which are data: refused.
static LogicalResult importRoiAlign(NodeContext &node) {
  FailureOr<std::string> transform =
      node.stringAttr("coordinate_transformation_mode", "half_pixel");
  FailureOr<std::string> mode = node.stringAttr("mode", "avg");
  FailureOr<int64_t> outputHeight = node.intAttr("output_height", 1);
  FailureOr<int64_t> outputWidth = node.intAttr("output_width", 1);
  FailureOr<int64_t> ratio = node.intAttr("sampling_ratio", 0);
  FailureOr<double> spatialScale = node.floatAttr("spatial_scale", 1.0);
  if (failed(node.requireInputs(3)) || failed(transform) || failed(mode) ||
      failed(outputHeight) || failed(outputWidth) || failed(ratio) ||
      failed(spatialScale))
    return failure();
  // Opset 10 had no coordinate_transformation_mode: its sampling is
  // output_half_pixel's.
  bool halfPixel = node.opset >= 16 && *transform == "half_pixel";
  if (*transform != "half_pixel" && *transform != "output_half_pixel")
    return node.error("unknown coordinate_transformation_mode '")
           << *transform << "'";
  if (*mode != "avg" && *mode != "max")
    return node.error("unknown mode '") << *mode << "'";
  if (*ratio <= 0)
    return node.error("sampling_ratio must be positive: the adaptive ratio "
                      "(0) follows the regions' sizes, which are data");
  if (*outputHeight < 1 || *outputWidth < 1)
    return node.error("output_height and output_width must be positive");
  RankedTensorType x = node.inputType(0), rois = node.inputType(1);
  if (x.getRank() != 4 || !isa<FloatType>(x.getElementType()))
    return node.error("X must be a 4-D float tensor [N, C, H, W], got ") << x;
  int64_t regions = rois.getRank() == 2 ? rois.getDimSize(0) : -1;
  if (rois.getShape() != ArrayRef<int64_t>{regions, 4} ||
      rois.getElementType() != x.getElementType() ||
      node.inputType(2).getShape() != ArrayRef<int64_t>{regions})
    return node.error("rois ")
           << rois << " and batch_indices " << node.inputType(2)
           << " are not [R, 4] of X's type and [R]";
  int64_t channels = x.getDimSize(1), height = x.getDimSize(2),
          width = x.getDimSize(3);
  int64_t rows = *outputHeight * *ratio, columns = *outputWidth * *ratio;
  OpChain ops(node, x.getElementType());
  Value images = ops.build<GatherOp>(
      {node.input(0), ops.cast(node.input(2), node.builder.getI64Type())},
      {node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(0))});
  // Column `c` of the regions, scaled and shifted, as [R, 1, 1].
  auto corner = [&](int64_t c) {
    Value v =
        ops.reshape(ops.slice(node.input(1), {0, c}, {1, 1}, {regions, 1}),
                    {regions, 1, 1});
    return ops.sub(ops.mul(v, ops.constant(*spatialScale)),
                   ops.constant(halfPixel ? 0.5 : 0.0));
  };
  // The samples along one axis: start + (bin + (k + 0.5) / ratio) * size /
  // bins, as [R, n, 1] or [R, 1, n].
  auto samples = [&](int64_t begin, int64_t end, int64_t bins, bool alongRows) {
    Value start = corner(begin);
    Value size = ops.sub(corner(end), start);
    if (!halfPixel)
      size = ops.max(size, ops.constant(1.0));
    int64_t n = bins * *ratio;
    Tensor fractions(*dtypeOf(x.getElementType()),
                     alongRows ? SmallVector<int64_t>{1, n, 1}
                               : SmallVector<int64_t>{1, 1, n});
    for (int64_t k = 0; k < n; ++k)
      fractions.setFromDouble(k, (k / *ratio + (k % *ratio + 0.5) / *ratio) /
                                     bins);
    return std::make_pair(
        ops.add(start, ops.mul(node.constant(fractions), size)), size);
  };
  auto grid =
      RankedTensorType::get({regions, rows, columns}, x.getElementType());
  Value y = ops.build<BroadcastOp>({samples(1, 3, *outputHeight, true).first},
                                   {}, {grid});
  Value xs = ops.build<BroadcastOp>({samples(0, 2, *outputWidth, false).first},
                                    {}, {grid});
  auto within = [&](Value v, int64_t size) {
    return ops.build<AndOp>(
        {ops.compare(ComparePredicate::GE, v, ops.constant(-1.0)),
         ops.compare(ComparePredicate::LE, v, ops.constant(size))});
  };
  Value inside = ops.build<AndOp>({within(y, height), within(xs, width)});
  auto clamped = [&](Value v, int64_t size) {
    return ops.min(ops.max(v, ops.constant(0.0)), ops.constant(size - 1.0));
  };
  Sampler sampler(node, ops, images, Interpolation::Linear, Padding::Border,
                  /*alignCorners=*/true);
  // A sample is the sum of its four weighted corners; for max, as ONNX's
  // reference and ONNX Runtime compute it, their largest.
  Value sampled;
  for (Value term : sampler.terms(clamped(xs, width), clamped(y, height)))
    sampled = !sampled         ? term
              : *mode == "avg" ? ops.add(sampled, term)
                               : ops.max(sampled, term);
  sampled = ops.select(ops.reshape(inside, {regions, 1, rows, columns}),
                       sampled, ops.constant(0.0));
  Value bins = ops.reshape(sampled, {regions, channels, *outputHeight, *ratio,
                                     *outputWidth, *ratio});
  NamedAttribute axes = node.builder.getNamedAttr(
      "axes", node.builder.getDenseI64ArrayAttr({3, 5}));
  Value result = *mode == "avg" ? ops.build<ReduceMeanOp>({bins}, {axes})
                                : ops.build<ReduceMaxOp>({bins}, {axes});
  return result ? node.setResult(result) : failure();
}

void registerGridSampleImporter(OpImporterTable &table) {
  table.add("RoiAlign", importRoiAlign);
  table.add("AffineGrid", importAffineGrid);
  table.add("GridSample", importGridSample);
}

} // namespace kiln
