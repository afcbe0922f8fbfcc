//===- NormalizationImporters.cpp - ONNX normalizations -------------------===//
//
// LayerNormalization and RMSNormalization become kiln's norm ops, whose
// kernels and gradients are written once; InstanceNormalization is a layer
// norm over the spatial dimensions and GroupNormalization one over each
// group; BatchNormalization, MeanVarianceNormalization, LpNormalization and
// LRN are spelled out in reductions and arithmetic, which autodiff, fusion
// and the kernels already know.
//
//===----------------------------------------------------------------------===//

#include "OpChain.h"

using namespace mlir;

namespace kiln {

/// The attributes LayerNormalization and RMSNormalization share, as kiln
/// attributes: the first normalized axis and epsilon (statistics in f32 or
/// better, the only stash_type kiln has).
static FailureOr<SmallVector<NamedAttribute>>
normalizationAttributes(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", -1);
  FailureOr<double> epsilon = node.floatAttr("epsilon", 1e-5);
  FailureOr<int64_t> stashType = node.intAttr("stash_type", 1);
  if (failed(node.requireInputs(2)) || failed(axis) || failed(epsilon) ||
      failed(stashType))
    return failure();
  if (*stashType != onnx::TensorProto::FLOAT)
    return node.error("stash_type ")
           << *stashType << " is not supported (only 1, float)";
  FailureOr<int64_t> normalized = node.normalizeAxis(*axis, node.inputRank(0));
  if (failed(normalized))
    return failure();
  return SmallVector<NamedAttribute>{
      node.builder.getNamedAttr("axis",
                                node.builder.getI64IntegerAttr(*normalized)),
      node.builder.getNamedAttr("epsilon",
                                node.builder.getF64FloatAttr(*epsilon))};
}

static LogicalResult importLayerNormalization(NodeContext &node) {
  FailureOr<SmallVector<NamedAttribute>> attributes =
      normalizationAttributes(node);
  if (failed(attributes))
    return failure();
  SmallVector<Value> operands{node.input(0), node.input(1)};
  if (node.hasInput(2))
    operands.push_back(node.input(2));
  attributes->push_back(node.builder.getNamedAttr(
      "operandSegmentSizes",
      node.builder.getDenseI32ArrayAttr(
          {1, 1, static_cast<int32_t>(node.hasInput(2))})));
  FailureOr<SmallVector<Value>> results =
      node.create<LayerNormOp>(operands, *attributes);
  if (failed(results))
    return failure();
  for (unsigned i = 0; i < 3; ++i)
    node.setOutput(i, (*results)[i]);
  return success();
}

/// RMSNormalization (opset 23): kiln.rms_norm over [axis, rank), the scale
/// inside it when it has the input's type and broadcasts to the normalized
/// dimensions alone (after dropping leading 1s); otherwise the normalized
/// input, cast to the scale's type, times the scale (which may then vary
/// along leading dimensions too, as unidirectional broadcasting allows).
static LogicalResult importRMSNormalization(NodeContext &node) {
  FailureOr<SmallVector<NamedAttribute>> attributes =
      normalizationAttributes(node);
  if (failed(attributes))
    return failure();
  int64_t rank = node.inputRank(0);
  int64_t normalized =
      cast<IntegerAttr>(attributes->front().getValue()).getInt();
  RankedTensorType inputType = node.inputType(0), scaleType = node.inputType(1);
  ArrayRef<int64_t> scaleShape = scaleType.getShape();
  int64_t extra = scaleType.getRank() - (rank - normalized);
  int64_t leading = std::max<int64_t>(extra, 0);
  bool inside = scaleType.getElementType() == inputType.getElementType() &&
                llvm::all_of(scaleShape.take_front(leading),
                             [](int64_t size) { return size == 1; });
  SmallVector<Value> operands{node.input(0)};
  if (inside) {
    FailureOr<Value> scale =
        node.reshape(node.input(1), scaleShape.drop_front(leading));
    if (failed(scale))
      return failure();
    operands.push_back(*scale);
  }
  FailureOr<SmallVector<Value>> results =
      node.create<RmsNormOp>(operands, *attributes);
  if (failed(results))
    return failure();
  if (inside)
    return node.setResult(results->front());
  Value output = results->front();
  if (scaleType.getElementType() != inputType.getElementType()) {
    FailureOr<Value> cast = node.create1<CastOp>(
        {output}, {}, {inputType.clone(scaleType.getElementType())});
    if (failed(cast))
      return failure();
    output = *cast;
  }
  return node.setResult(node.create1<MulOp>({output, node.input(1)}));
}

/// InstanceNormalization: each channel of each sample normalized over its
/// spatial dimensions (a layer norm from axis 2, without its own scale),
/// then scaled and shifted per channel.
/// `x` [N, C or G, ...] normalized over every dimension from 2 on, without
/// scale or bias: kiln.layer_norm's first result.
static FailureOr<Value> standardized(NodeContext &node, Value x,
                                     double epsilon) {
  FailureOr<SmallVector<Value>> normalized = node.create<LayerNormOp>(
      {x},
      {node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(2)),
       node.builder.getNamedAttr("epsilon",
                                 node.builder.getF64FloatAttr(epsilon)),
       node.builder.getNamedAttr(
           "operandSegmentSizes",
           node.builder.getDenseI32ArrayAttr({1, 0, 0}))});
  if (failed(normalized))
    return failure();
  return normalized->front();
}

static LogicalResult importInstanceNormalization(NodeContext &node) {
  FailureOr<double> epsilon = node.floatAttr("epsilon", 1e-5);
  if (failed(node.requireInputs(3)) || failed(epsilon))
    return failure();
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  if (rank < 3)
    return node.error("input of rank ")
           << rank << " has no spatial dimensions to normalize over";
  FailureOr<Value> normalized = standardized(node, node.input(0), *epsilon);
  if (failed(normalized))
    return failure();
  SmallVector<int64_t> perChannel(rank, 1);
  perChannel[1] = type.getDimSize(1);
  FailureOr<Value> scale = node.reshape(node.input(1), perChannel);
  FailureOr<Value> bias = node.reshape(node.input(2), perChannel);
  if (failed(scale) || failed(bias))
    return failure();
  FailureOr<Value> scaled = node.create1<MulOp>({*normalized, *scale});
  if (failed(scaled))
    return failure();
  return node.setResult(node.create1<AddOp>({*scaled, *bias}));
}

/// GroupNormalization (opset 18): the channels in `num_groups` groups, each
/// sample's group normalized over its channels and positions, then scaled
/// and shifted per group (opsets 18-20) or per channel (21 on, which fixed
/// the specification). Built as a layer norm of [N, G, C / G * spatial].
static LogicalResult importGroupNormalization(NodeContext &node) {
  FailureOr<double> epsilon = node.floatAttr("epsilon", 1e-5);
  FailureOr<int64_t> groups = node.intAttr("num_groups", std::nullopt);
  if (failed(node.requireInputs(3)) || failed(epsilon) || failed(groups))
    return failure();
  RankedTensorType type = node.inputType(0);
  if (type.getRank() < 2)
    return node.error("input of rank ") << type.getRank() << " has no channels";
  int64_t channels = type.getDimSize(1);
  if (*groups <= 0 || channels % *groups != 0)
    return node.error("num_groups ")
           << *groups << " does not divide the " << channels << " channels";
  bool perChannel = node.opset >= 21;
  int64_t affine = perChannel ? channels : *groups;
  for (unsigned i : {1u, 2u})
    if (node.inputType(i).getShape() != ArrayRef<int64_t>{affine})
      return node.error(i == 1 ? "scale" : "bias")
             << " must have " << affine << " elements (one per "
             << (perChannel ? "channel" : "group") << " at opset " << node.opset
             << "), got " << node.inputType(i);
  int64_t samples = type.getDimSize(0);
  FailureOr<Value> grouped =
      node.reshape(node.input(0), {samples, *groups,
                                   type.getNumElements() / samples / *groups});
  if (failed(grouped))
    return failure();
  FailureOr<Value> normalized = standardized(node, *grouped, *epsilon);
  if (failed(normalized))
    return failure();
  // The scale and bias broadcast over [N, G, rest] per group, or over the
  // input's shape per channel.
  Value y = *normalized;
  SmallVector<int64_t> affineShape = {1, *groups, 1};
  if (perChannel) {
    FailureOr<Value> restored = node.reshape(y, type.getShape());
    if (failed(restored))
      return failure();
    y = *restored;
    affineShape.assign(type.getRank(), 1);
    affineShape[1] = channels;
  }
  FailureOr<Value> scale = node.reshape(node.input(1), affineShape);
  FailureOr<Value> bias = node.reshape(node.input(2), affineShape);
  if (failed(scale) || failed(bias))
    return failure();
  FailureOr<Value> scaled = node.create1<MulOp>({y, *scale});
  if (failed(scaled))
    return failure();
  FailureOr<Value> shifted = node.create1<AddOp>({*scaled, *bias});
  if (failed(shifted))
    return failure();
  return node.setResult(node.reshape(*shifted, type.getShape()));
}

/// LpNormalization: x divided by its L1 or L2 norm along `axis` (no
/// epsilon, as ONNX defines it: a zero vector gives NaN).
static LogicalResult importLpNormalization(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", -1);
  FailureOr<int64_t> p = node.intAttr("p", 2);
  if (failed(node.requireInputs(1)) || failed(axis) || failed(p))
    return failure();
  if (*p != 1 && *p != 2)
    return node.error("p must be 1 or 2, got ") << *p;
  Value x = node.input(0);
  FailureOr<int64_t> normalized = node.normalizeAxis(*axis, node.inputRank(0));
  if (failed(normalized))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  Value sum = ops.build<ReduceSumOp>(
      {ops.powerOfMagnitude(x, *p)},
      {node.builder.getNamedAttr(
           "axes", node.builder.getDenseI64ArrayAttr({*normalized})),
       node.builder.getNamedAttr("keep_dims", node.builder.getUnitAttr())});
  Value result = ops.div(x, ops.root(sum, *p));
  return result ? node.setResult(result) : failure();
}

/// LRN: x / (bias + alpha / size * the sum of squares over the `size`
/// channels around each)^beta, the window cut at the first and last
/// channels: the squares padded with zeros along the channels and summed
/// over `size` shifted slices.
static LogicalResult importLRN(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 1e-4);
  FailureOr<double> beta = node.floatAttr("beta", 0.75);
  FailureOr<double> bias = node.floatAttr("bias", 1.0);
  FailureOr<int64_t> size = node.intAttr("size", std::nullopt);
  if (failed(node.requireInputs(1)) || failed(alpha) || failed(beta) ||
      failed(bias) || failed(size))
    return failure();
  RankedTensorType type = node.inputType(0);
  if (type.getRank() < 3 || *size < 1)
    return node.error("needs an input [N, C, ...] and a positive size, got ")
           << type << " and " << *size;
  OpChain ops(node, type.getElementType());
  Value x = node.input(0);
  int64_t rank = type.getRank();
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  low[1] = (*size - 1) / 2;
  high[1] = *size - 1 - low[1];
  Value padded =
      OpChain::orNull(node.padConstant(ops.mul(x, x), low, high, 0.0));
  SmallVector<int64_t> start(rank, 0), stride(rank, 1);
  Value sum;
  for (int64_t i = 0; i < *size; ++i) {
    start[1] = i;
    Value shifted = ops.slice(padded, start, stride, type.getShape());
    sum = sum ? ops.add(sum, shifted) : shifted;
  }
  Value base =
      ops.add(ops.mul(sum, ops.constant(*alpha / *size)), ops.constant(*bias));
  Value y = ops.div(x, ops.build<PowOp>({base, ops.constant(*beta)}));
  if (!y)
    return failure();
  node.setOutput(0, y);
  return success();
}

/// `value` as a tensor of `elementType` (a cast where it is of another).
static FailureOr<Value> castTo(NodeContext &node, Value value,
                               Type elementType) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == elementType)
    return value;
  return node.create1<CastOp>({value}, {}, {type.clone(elementType)});
}

/// The mean over `axes` of `value`, the reduced dimensions kept.
static FailureOr<Value> meanOver(NodeContext &node, Value value,
                                 ArrayRef<int64_t> axes) {
  return node.create1<ReduceMeanOp>(
      {value},
      {node.builder.getNamedAttr("axes",
                                 node.builder.getDenseI64ArrayAttr(axes)),
       node.builder.getNamedAttr("keep_dims", node.builder.getUnitAttr())});
}

/// (X - mean) / sqrt(variance + epsilon), the statistics broadcasting.
static FailureOr<Value> standardize(NodeContext &node, Value x, Value mean,
                                    Value variance, double epsilon) {
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  FailureOr<Value> centered = node.create1<SubOp>({x, mean});
  FailureOr<Value> shifted =
      node.create1<AddOp>({variance, node.scalar(epsilon, element)});
  if (failed(centered) || failed(shifted))
    return failure();
  FailureOr<Value> deviation = node.create1<SqrtOp>({*shifted});
  if (failed(deviation))
    return failure();
  return node.create1<DivOp>({*centered, *deviation});
}

/// The population variance over `axes` of `x` whose mean there is `mean`.
static FailureOr<Value> varianceOver(NodeContext &node, Value x, Value mean,
                                     ArrayRef<int64_t> axes) {
  FailureOr<Value> centered = node.create1<SubOp>({x, mean});
  if (failed(centered))
    return failure();
  FailureOr<Value> squares = node.create1<MulOp>({*centered, *centered});
  if (failed(squares))
    return failure();
  return meanOver(node, *squares, axes);
}

/// A running statistic updated with a batch's (BatchNormalization's
/// training mode): running * momentum + batch * (1 - momentum), in the
/// running statistic's shape [C] and type.
static FailureOr<Value> updatedStatistic(NodeContext &node, Value running,
                                         Value batch, double momentum) {
  auto type = cast<RankedTensorType>(running.getType());
  FailureOr<Value> perChannel = node.reshape(batch, type.getShape());
  if (failed(perChannel))
    return failure();
  FailureOr<Value> current = castTo(node, *perChannel, type.getElementType());
  if (failed(current))
    return failure();
  FailureOr<Value> kept = node.create1<MulOp>(
      {running, node.scalar(momentum, type.getElementType())});
  FailureOr<Value> added = node.create1<MulOp>(
      {*current, node.scalar(1 - momentum, type.getElementType())});
  if (failed(kept) || failed(added))
    return failure();
  return node.create1<AddOp>({*kept, *added});
}

/// BatchNormalization: per channel (dimension 1),
///   Y = (X - mean) / sqrt(var + epsilon) * scale + B,
/// with the given running statistics (inference), or in training mode
/// (`training_mode`, opset 14) with the batch's mean and population variance
/// over every other dimension, when the running statistics also come out
/// updated (and, initializers, are written back after each step: buffers
/// the forward pass updates). Before opset 14, training mode was asked for
/// by optional outputs whose meaning differed (saved statistics): refused.
static LogicalResult importBatchNormalization(NodeContext &node) {
  FailureOr<double> epsilon = node.floatAttr("epsilon", 1e-5);
  FailureOr<double> momentum = node.floatAttr("momentum", 0.9);
  FailureOr<int64_t> trainingMode = node.intAttr("training_mode", 0);
  if (failed(node.requireInputs(5)) || failed(epsilon) || failed(momentum) ||
      failed(trainingMode))
    return failure();
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  if (rank < 2)
    return node.error("input of rank ") << rank << " has no channel dimension";
  bool statistics = false;
  for (unsigned i = 1; i < node.numOutputs(); ++i)
    statistics |= node.hasOutput(i);
  if (node.opset < 14 && statistics)
    return node.error("training mode before opset 14 (the mean, variance and "
                      "saved statistics outputs) is not supported: export "
                      "with opset 14 or later");
  bool training = *trainingMode != 0;
  if (statistics && !training)
    return node.error("the running mean and variance outputs need "
                      "training_mode=1");
  SmallVector<int64_t> perChannel(rank, 1), axes;
  perChannel[1] = type.getDimSize(1);
  for (int64_t d = 0; d < rank; ++d)
    if (d != 1)
      axes.push_back(d);
  // The per-channel inputs as [1, C, 1, ...] of X's type.
  SmallVector<Value, 4> channelwise;
  for (unsigned i = 1; i < 5; ++i) {
    FailureOr<Value> value = castTo(node, node.input(i), type.getElementType());
    if (succeeded(value))
      value = node.reshape(*value, perChannel);
    if (failed(value))
      return failure();
    channelwise.push_back(*value);
  }
  Value x = node.input(0), mean = channelwise[2], variance = channelwise[3];
  if (training) {
    FailureOr<Value> batchMean = meanOver(node, x, axes);
    if (failed(batchMean))
      return failure();
    FailureOr<Value> batchVariance = varianceOver(node, x, *batchMean, axes);
    if (failed(batchVariance))
      return failure();
    mean = *batchMean;
    variance = *batchVariance;
  }
  FailureOr<Value> normalized = standardize(node, x, mean, variance, *epsilon);
  if (failed(normalized))
    return failure();
  FailureOr<Value> scaled = node.create1<MulOp>({*normalized, channelwise[0]});
  if (failed(scaled) ||
      failed(node.setResult(node.create1<AddOp>({*scaled, channelwise[1]}))))
    return failure();
  if (!training)
    return success();
  // The running statistics: outputs where the graph reads them, and written
  // back by the step where they are initializers, as PyTorch updates them.
  for (auto [output, batch] : {std::pair{1u, mean}, {2u, variance}}) {
    unsigned input = output + 2;
    if (!node.hasOutput(output) && !node.isInitializer(input))
      continue;
    FailureOr<Value> updated =
        updatedStatistic(node, node.input(input), batch, *momentum);
    if (failed(updated) ||
        (node.isInitializer(input) &&
         failed(node.updateBuffer(input, *updated))))
      return failure();
    node.setOutput(output, *updated);
  }
  return success();
}

/// MeanVarianceNormalization, as its ONNX function body computes it:
/// (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over `axes` (default the
/// batch and spatial dimensions of [N, C, H, W]).
static LogicalResult importMeanVarianceNormalization(NodeContext &node) {
  FailureOr<std::optional<SmallVector<int64_t>>> given = node.intsAttr("axes");
  if (failed(node.requireInputs(1)) || failed(given))
    return failure();
  int64_t rank = node.inputRank(0);
  SmallVector<int64_t> axes = given->value_or(SmallVector<int64_t>{0, 2, 3});
  for (int64_t &axis : axes) {
    FailureOr<int64_t> normalized = node.normalizeAxis(axis, rank);
    if (failed(normalized))
      return failure();
    axis = *normalized;
  }
  llvm::sort(axes);
  Value x = node.input(0);
  FailureOr<Value> squares = node.create1<MulOp>({x, x});
  FailureOr<Value> mean = meanOver(node, x, axes);
  if (failed(squares) || failed(mean))
    return failure();
  FailureOr<Value> meanOfSquares = meanOver(node, *squares, axes);
  FailureOr<Value> squaredMean = node.create1<MulOp>({*mean, *mean});
  if (failed(meanOfSquares) || failed(squaredMean))
    return failure();
  FailureOr<Value> variance =
      node.create1<SubOp>({*meanOfSquares, *squaredMean});
  if (failed(variance))
    return failure();
  FailureOr<Value> deviation = node.create1<SqrtOp>({*variance});
  if (failed(deviation))
    return failure();
  FailureOr<Value> shifted = node.create1<AddOp>(
      {*deviation, node.scalar(1e-9, node.inputType(0).getElementType())});
  FailureOr<Value> centered = node.create1<SubOp>({x, *mean});
  if (failed(shifted) || failed(centered))
    return failure();
  return node.setResult(node.create1<DivOp>({*centered, *shifted}));
}

void registerNormalizationImporters(OpImporterTable &table) {
  table.add("LayerNormalization", importLayerNormalization);
  table.add("RMSNormalization", importRMSNormalization);
  table.add("InstanceNormalization", importInstanceNormalization);
  table.add("GroupNormalization", importGroupNormalization);
  table.add("LpNormalization", importLpNormalization);
  table.add("LRN", importLRN);
  table.add("BatchNormalization", importBatchNormalization);
  table.add("MeanVarianceNormalization", importMeanVarianceNormalization);
}

} // namespace kiln
