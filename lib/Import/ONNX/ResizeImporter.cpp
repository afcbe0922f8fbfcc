//===- ResizeImporter.cpp - ONNX Resize as gathers and weighted sums ------===//
//
// Resize interpolates each resized axis on its own (nearest, n-linear and
// cubic interpolation are all separable): with static shapes and constant
// scales, every output coordinate's taps (input indices, clamped to the
// edge) and weights are known at import. One axis at a time, the input is
// gathered at the taps and the taps are summed with their weights; outputs
// that tf_crop_and_resize places outside the input take the extrapolation
// value.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "kiln/Support/Shapes.h"

#include <algorithm>
#include <array>
#include <cmath>

using namespace mlir;

namespace kiln {

namespace {
/// How one axis is resampled: for each output coordinate, `taps` input
/// indices with their weights, and whether it lies outside the input
/// (tf_crop_and_resize's extrapolation).
struct AxisTaps {
  int64_t taps = 1;
  SmallVector<int64_t> indices;
  SmallVector<double> weights;
  SmallVector<bool> outside;
};

/// The attributes that decide where an output coordinate reads.
struct Sampling {
  std::string mode, coordinates, nearest;
  double cubicA = -0.75;
  bool excludeOutside = false;
};
} // namespace

/// The input coordinate output coordinate `x` of `outputs` maps to along
/// an axis of `size` resized by `scale`; `roi` is the axis' [start, end]
/// for tf_crop_and_resize. The resized length in the formulas is `scale`
/// times `size`, which a scale can make fractional, as ONNX's reference
/// computes it.
static double sourceCoordinate(const std::string &mode, double x,
                               int64_t size, int64_t outputs, double scale,
                               std::pair<double, double> roi) {
  double resized = scale * size;
  if (mode == "half_pixel")
    return (x + 0.5) / scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    double center = size / 2.0;
    return center * (1 - outputs / resized) + (x + 0.5) / scale - 0.5;
  }
  if (mode == "pytorch_half_pixel")
    return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners")
    return resized == 1 ? 0.0 : x * (size - 1) / (resized - 1);
  if (mode == "tf_half_pixel_for_nn")
    return (x + 0.5) / scale;
  if (mode == "tf_crop_and_resize")
    return resized > 1 ? roi.first * (size - 1) + x * (roi.second - roi.first) *
                                                      (size - 1) / (resized - 1)
                       : 0.5 * (roi.first + roi.second) * (size - 1);
  return x / scale; // asymmetric
}

/// The nearest input index to `x` as `mode` rounds it.
static int64_t nearestIndex(const std::string &mode, double x) {
  if (mode == "floor")
    return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil")
    return static_cast<int64_t>(std::ceil(x));
  bool half = x - std::floor(x) == 0.5;
  if (half)
    return static_cast<int64_t>(mode == "round_prefer_ceil" ? std::ceil(x)
                                                            : std::floor(x));
  return static_cast<int64_t>(std::round(x));
}

/// Keys' cubic convolution weights of the four taps around a coordinate
/// `t` past the second one.
static std::array<double, 4> cubicWeights(double t, double a) {
  auto far = [&](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
  auto near = [&](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

/// The taps of every output coordinate of an axis of `size` resized to
/// `outputs` by `scale`.
static AxisTaps axisTaps(const Sampling &sampling, int64_t size,
                         int64_t outputs, double scale,
                         std::pair<double, double> roi) {
  AxisTaps axis;
  axis.taps = sampling.mode == "nearest" ? 1 : sampling.mode == "linear" ? 2 : 4;
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, size - 1); };
  for (int64_t x = 0; x < outputs; ++x) {
    double source =
        sourceCoordinate(sampling.coordinates, x, size, outputs, scale, roi);
    axis.outside.push_back(sampling.coordinates == "tf_crop_and_resize" &&
                           (source < 0 || source > size - 1));
    if (sampling.mode == "nearest") {
      axis.indices.push_back(clamp(nearestIndex(sampling.nearest, source)));
      axis.weights.push_back(1.0);
      continue;
    }
    auto first = static_cast<int64_t>(std::floor(source));
    double t = source - first;
    if (sampling.mode == "linear") {
      axis.indices.append({clamp(first), clamp(first + 1)});
      axis.weights.append({1 - t, t});
      continue;
    }
    std::array<double, 4> weights = cubicWeights(t, sampling.cubicA);
    double kept = 0;
    for (int64_t k = 0; k < 4; ++k) {
      int64_t at = first - 1 + k;
      if (sampling.excludeOutside && (at < 0 || at >= size))
        weights[k] = 0;
      kept += weights[k];
      axis.indices.push_back(clamp(at));
    }
    for (double weight : weights)
      axis.weights.push_back(sampling.excludeOutside ? weight / kept : weight);
  }
  return axis;
}

/// `value` resampled along `axis` by `taps`.
static FailureOr<Value> resampleAxis(NodeContext &node, Value value,
                                     int64_t axis, const AxisTaps &taps) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t outputs = taps.outside.size();
  FailureOr<Value> gathered = node.create1<GatherOp>(
      {value, node.int64Constant({outputs * taps.taps}, taps.indices)},
      {node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(axis))});
  if (failed(gathered) || taps.taps == 1)
    return gathered;
  SmallVector<int64_t> split(type.getShape());
  split[axis] = outputs;
  split.insert(split.begin() + axis + 1, taps.taps);
  FailureOr<Value> grouped = node.reshape(*gathered, split);
  if (failed(grouped))
    return failure();
  SmallVector<int64_t> weightShape(split.size(), 1);
  weightShape[axis] = outputs;
  weightShape[axis + 1] = taps.taps;
  Tensor weights(*dtypeOf(type.getElementType()), weightShape);
  for (auto [i, weight] : llvm::enumerate(taps.weights))
    weights.setFromDouble(i, weight);
  FailureOr<Value> weighted =
      node.create1<MulOp>({*grouped, node.constant(weights)});
  if (failed(weighted))
    return failure();
  return node.create1<ReduceSumOp>(
      {*weighted},
      {node.builder.getNamedAttr("axes",
                                 node.builder.getDenseI64ArrayAttr(axis + 1))});
}

static LogicalResult importResize(NodeContext &node) {
  FailureOr<std::string> mode = node.stringAttr("mode", "nearest");
  FailureOr<std::string> coordinates =
      node.stringAttr("coordinate_transformation_mode", "half_pixel");
  FailureOr<std::string> nearest =
      node.stringAttr("nearest_mode", "round_prefer_floor");
  FailureOr<double> cubicA = node.floatAttr("cubic_coeff_a", -0.75);
  FailureOr<int64_t> excludeOutside = node.intAttr("exclude_outside", 0);
  FailureOr<double> extrapolation = node.floatAttr("extrapolation_value", 0.0);
  FailureOr<int64_t> antialias = node.intAttr("antialias", 0);
  FailureOr<std::string> policy =
      node.stringAttr("keep_aspect_ratio_policy", "stretch");
  FailureOr<std::optional<SmallVector<int64_t>>> axesAttr =
      node.intsAttr("axes");
  if (failed(node.requireInputs(1)) || failed(mode) || failed(coordinates) ||
      failed(nearest) || failed(cubicA) || failed(excludeOutside) ||
      failed(extrapolation) || failed(antialias) || failed(policy) ||
      failed(axesAttr))
    return failure();
  if (*mode != "nearest" && *mode != "linear" && *mode != "cubic")
    return node.error("mode '") << *mode << "' is not supported";
  if (*antialias)
    return node.error("antialias is not supported");
  if (*policy != "stretch" && *policy != "not_larger" &&
      *policy != "not_smaller")
    return node.error("keep_aspect_ratio_policy '")
           << *policy << "' is not supported";
  Sampling sampling{*mode, *coordinates, *nearest, *cubicA,
                    *excludeOutside != 0};
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  if (*mode != "nearest" && !isa<FloatType>(type.getElementType()))
    return node.error("mode '") << *mode << "' needs a floating-point input";
  // The resized axes: `axes` (opset 18), else all.
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d)
    axes.push_back(d);
  if (*axesAttr) {
    axes.clear();
    for (int64_t given : **axesAttr) {
      FailureOr<int64_t> axis = node.normalizeAxis(given, rank);
      if (failed(axis))
        return failure();
      axes.push_back(*axis);
    }
  }
  size_t count = axes.size();
  // roi, scales and sizes: inputs 1 to 3, each maybe absent or empty.
  auto floats = [&](unsigned i, StringRef what) -> FailureOr<SmallVector<double>> {
    SmallVector<double> values;
    if (!node.hasInput(i))
      return values;
    FailureOr<Tensor> given = node.constantInput(i, what);
    if (failed(given))
      return failure();
    for (int64_t e = 0; e < given->getNumElements(); ++e)
      values.push_back(given->getAsDouble(e));
    return values;
  };
  FailureOr<SmallVector<double>> roi = floats(1, "roi");
  FailureOr<SmallVector<double>> scales = floats(2, "scales");
  FailureOr<SmallVector<double>> sizes = floats(3, "sizes");
  if (failed(roi) || failed(scales) || failed(sizes))
    return failure();
  if (scales->empty() == sizes->empty())
    return node.error("needs exactly one of scales and sizes");
  if ((!scales->empty() && scales->size() != count) ||
      (!sizes->empty() && sizes->size() != count))
    return node.error("scales or sizes must have one entry per resized axis (")
           << count << ")";
  bool crops = *coordinates == "tf_crop_and_resize";
  if (crops && roi->size() != 2 * count)
    return node.error("tf_crop_and_resize needs a roi of ")
           << 2 * count << " values";
  // The output size and scale of each resized axis.
  SmallVector<int64_t> outputs(count);
  SmallVector<double> factors(count);
  if (!sizes->empty() && *policy != "stretch") {
    double shared = *policy == "not_larger" ? INFINITY : 0.0;
    for (size_t i = 0; i < count; ++i) {
      double ratio = (*sizes)[i] / type.getDimSize(axes[i]);
      shared = *policy == "not_larger" ? std::min(shared, ratio)
                                       : std::max(shared, ratio);
    }
    // Rounded half to even, as ONNX's reference rounds.
    for (size_t i = 0; i < count; ++i) {
      factors[i] = shared;
      outputs[i] = static_cast<int64_t>(
          std::nearbyint(shared * type.getDimSize(axes[i])));
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      int64_t size = type.getDimSize(axes[i]);
      double extent = crops ? (*roi)[count + i] - (*roi)[i] : 1.0;
      if (!sizes->empty()) {
        outputs[i] = static_cast<int64_t>((*sizes)[i]);
        factors[i] = double(outputs[i]) / size;
      } else {
        factors[i] = (*scales)[i];
        outputs[i] =
            static_cast<int64_t>(std::floor(size * extent * factors[i]));
      }
    }
  }
  // Each output coordinate's taps become a table at import: a size beyond
  // these is a mistake, and its tables would not fit in memory.
  constexpr int64_t kMaxAxisOutputs = int64_t(1) << 26;
  SmallVector<int64_t> resized(type.getShape());
  for (size_t i = 0; i < count; ++i) {
    if (outputs[i] < 1 || factors[i] <= 0 || outputs[i] > kMaxAxisOutputs)
      return node.error("axis ")
             << axes[i] << " would be resized to " << outputs[i]
             << " elements (from 1 to 2^26 are supported)";
    resized[axes[i]] = outputs[i];
  }
  if (exceedsMaxElements(resized))
    return node.error("the result of shape ")
           << formatShape(resized) << " would have more than 2^44 elements";
  Value result = node.input(0);
  SmallVector<int64_t> shape(type.getShape());
  Value outside;
  for (size_t i = 0; i < count; ++i) {
    std::pair<double, double> bounds =
        crops ? std::make_pair((*roi)[i], (*roi)[count + i])
              : std::make_pair(0.0, 1.0);
    AxisTaps taps = axisTaps(sampling, type.getDimSize(axes[i]), outputs[i],
                             factors[i], bounds);
    FailureOr<Value> resampled = resampleAxis(node, result, axes[i], taps);
    if (failed(resampled))
      return failure();
    result = *resampled;
    shape[axes[i]] = outputs[i];
    if (!crops)
      continue;
    // Where this axis reads outside the input, broadcast over the others.
    SmallVector<int64_t> flagShape(rank, 1);
    flagShape[axes[i]] = outputs[i];
    Tensor flags(DType::Bool, flagShape);
    for (auto [x, out] : llvm::enumerate(taps.outside))
      flags.ints()[x] = out;
    Value here = node.constant(flags);
    if (!outside) {
      outside = here;
      continue;
    }
    FailureOr<Value> either = node.create1<OrOp>({outside, here});
    if (failed(either))
      return failure();
    outside = *either;
  }
  if (!outside)
    return node.setResult(result);
  return node.setResult(node.create1<WhereOp>(
      {outside, node.scalar(*extrapolation, type.getElementType()), result}));
}

void registerResizeImporter(OpImporterTable &table) {
  table.add("Resize", importResize);
}

} // namespace kiln
