//===- QuantizationImporters.cpp - ONNX linear quantization ---------------===//
//
// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: per tensor,
// per axis and (opset 21) per block, to and from 8- and 16-bit integers.
//
// Quantization-aware training exports each of PyTorch's FakeQuantize
// modules as a QuantizeLinear whose integers one DequantizeLinear with the
// same scale and zero point reads back. Composed from rounding and a cast
// to integers, that pair has no gradient, and the weights before it would
// silently stop training; imported as one kiln.fake_quantize, it has
// FakeQuantize's straight-through gradient.
//
//===----------------------------------------------------------------------===//

#include "OpChain.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace kiln {

/// The integers of `type` as doubles: [0, 2^w - 1] or [-2^(w-1), 2^(w-1) - 1].
static std::pair<double, double> integerRange(IntegerType type) {
  unsigned width = type.getWidth();
  if (type.isUnsigned())
    return {0.0, std::ldexp(1.0, width) - 1.0};
  return {-std::ldexp(1.0, width - 1), std::ldexp(1.0, width - 1) - 1.0};
}

/// Whether `type` is an integer type kiln quantizes to: 8 or 16 bits.
static bool isQuantizedType(Type type) {
  auto integer = dyn_cast<IntegerType>(type);
  return integer && (integer.getWidth() == 8 || integer.getWidth() == 16);
}

namespace {
/// How a scale or zero point lines up with the input: per tensor (one
/// element), per axis (a vector along `axis`) or per block (the input's
/// shape, `blockSize` elements along `axis` sharing one value).
struct Granularity {
  int64_t axis = 1, blockSize = 0;

  static FailureOr<Granularity> read(NodeContext &node) {
    FailureOr<int64_t> axis = node.intAttr("axis", 1);
    FailureOr<int64_t> blockSize = node.intAttr("block_size", 0);
    if (failed(axis) || failed(blockSize))
      return failure();
    if (*blockSize < 0)
      return node.error("block_size must not be negative, got ") << *blockSize;
    return Granularity{*axis, *blockSize};
  }

  /// `parameter` (input `what`) reshaped and repeated so that it
  /// broadcasts to `input`'s shape; null after an error.
  Value align(NodeContext &node, OpChain &ops, Value parameter,
              RankedTensorType input, StringRef what) const;
};
} // namespace

Value Granularity::align(NodeContext &node, OpChain &ops, Value parameter,
                         RankedTensorType input, StringRef what) const {
  auto type = cast<RankedTensorType>(parameter.getType());
  ArrayRef<int64_t> shape = input.getShape();
  if (blockSize == 0 && type.getNumElements() == 1)
    return ops.reshape(parameter, {});
  // The axis matters, and must exist, only beyond one element per tensor.
  FailureOr<int64_t> normalized = node.normalizeAxis(axis, shape.size());
  if (failed(normalized))
    return {};
  int64_t axis = *normalized;
  auto mismatch = [&] {
    node.error("") << what << " of shape [" << type.getShape()
                   << "] does not match input of shape [" << shape << "]"
                   << (blockSize ? " in blocks of " : " along axis ")
                   << (blockSize ? blockSize : axis);
    return Value();
  };
  if (blockSize == 0) {
    if (type.getRank() != 1 || type.getDimSize(0) != shape[axis])
      return mismatch();
    SmallVector<int64_t> column(shape.size() - axis, 1);
    column.front() = shape[axis];
    return ops.reshape(parameter, column);
  }
  // Per block: insert a dimension of blockSize copies after the axis, merge
  // it into the axis and cut what passes the input's end.
  int64_t blocks =
      type.getRank() == input.getRank() ? type.getDimSize(axis) : -1;
  if (blocks != llvm::divideCeilSigned(shape[axis], blockSize))
    return mismatch();
  for (auto [d, size] : llvm::enumerate(shape))
    if (static_cast<int64_t>(d) != axis && type.getDimSize(d) != size)
      return mismatch();
  SmallVector<int64_t> split(type.getShape());
  split.insert(split.begin() + axis + 1, 1);
  SmallVector<int64_t> repeated(split);
  repeated[axis + 1] = blockSize;
  SmallVector<int64_t> merged(type.getShape());
  merged[axis] = blocks * blockSize;
  Value spread = ops.build<BroadcastOp>({ops.reshape(parameter, split)}, {},
                                        {type.clone(repeated)});
  SmallVector<int64_t> start(shape.size(), 0), stride(shape.size(), 1);
  return ops.slice(ops.reshape(spread, merged), start, stride, shape);
}

/// Whether two ONNX inputs are the same: one value, or constants holding
/// the same elements.
static bool sameInput(NodeContext &node, Value a, Value b) {
  if (a == b)
    return true;
  std::optional<Tensor> x = node.constantValue(a), y = node.constantValue(b);
  return x && y && x->getDType() == y->getDType() &&
         x->getShape() == y->getShape() && x->floats() == y->floats() &&
         x->ints() == y->ints();
}

/// round(x / scale) + zeroPoint, clamped to [low, high], in x's float type.
static Value quantizedLevels(OpChain &ops, Value x, Value scale,
                             Value zeroPoint, std::pair<double, double> range) {
  Value level = ops.add(ops.unary<RoundOp>(ops.div(x, scale)), zeroPoint);
  return ops.min(ops.max(level, ops.constant(range.first)),
                 ops.constant(range.second));
}

/// The integer type QuantizeLinear produces: its zero point's, else
/// `output_dtype`'s (opset 21), else uint8.
static FailureOr<IntegerType> quantizedType(NodeContext &node) {
  Type fallback =
      IntegerType::get(node.builder.getContext(), 8, IntegerType::Unsigned);
  FailureOr<Type> declared = node.typeAttr("output_dtype", fallback);
  if (failed(declared))
    return failure();
  Type type = *declared;
  if (node.hasInput(2)) {
    Type zeroType = node.inputType(2).getElementType();
    if (node.attribute("output_dtype") && zeroType != type)
      return node.error("output_dtype ")
             << type << " differs from the zero point's type " << zeroType;
    type = zeroType;
  }
  if (!isQuantizedType(type))
    return node.error("quantizes to 8- and 16-bit integers, not ") << type;
  return cast<IntegerType>(type);
}

static LogicalResult importQuantizeLinear(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  RankedTensorType inputType = node.inputType(0);
  Type element = inputType.getElementType();
  if (!isa<FloatType>(element))
    return node.error("quantizes floating-point tensors, not ") << element;
  FailureOr<IntegerType> integer = quantizedType(node);
  FailureOr<Granularity> granularity = Granularity::read(node);
  if (failed(integer) || failed(granularity))
    return failure();
  OpChain ops(node, element);
  Value scale = granularity->align(node, ops, ops.cast(node.input(1), element),
                                   inputType, "scale");
  Value zeroPoint =
      node.hasInput(2)
          ? granularity->align(node, ops, ops.cast(node.input(2), element),
                               inputType, "zero point")
          : ops.constant(0.0);
  std::pair<double, double> range = integerRange(*integer);
  Value levels = quantizedLevels(ops, node.input(0), scale, zeroPoint, range);
  Value quantized = ops.cast(levels, *integer);
  if (!quantized)
    return failure();
  node.setOutput(0, quantized);
  // What a DequantizeLinear with the same scale and zero point reads back.
  Value fake = ops.build<FakeQuantizeOp>(
      {node.input(0), scale, zeroPoint},
      {node.builder.getNamedAttr("quant_min",
                                 node.builder.getF64FloatAttr(range.first)),
       node.builder.getNamedAttr("quant_max",
                                 node.builder.getF64FloatAttr(range.second))});
  if (!fake)
    return failure();
  node.quantizations()[quantized] = {
      node.input(1), node.hasInput(2) ? node.input(2) : Value(),
      granularity->axis, granularity->blockSize, fake};
  return success();
}

/// The fake quantization that `node` (a DequantizeLinear) reads back, if its
/// input is a QuantizeLinear's with the same scale, zero point and
/// granularity.
static Value readBack(NodeContext &node, const Granularity &granularity) {
  auto found = node.quantizations().find(node.input(0));
  if (found == node.quantizations().end())
    return {};
  const Quantization &q = found->second;
  Value zeroPoint = node.hasInput(2) ? node.input(2) : Value();
  bool sameZero = zeroPoint && q.zeroPoint
                      ? sameInput(node, zeroPoint, q.zeroPoint)
                      : zeroPoint == q.zeroPoint;
  // The axis of a scale of one element does not matter.
  bool perTensor =
      cast<RankedTensorType>(q.scale.getType()).getNumElements() == 1;
  int64_t rank = node.inputRank(0);
  auto normalized = [&](int64_t axis) { return axis < 0 ? axis + rank : axis; };
  if (!sameZero || !sameInput(node, node.input(1), q.scale) ||
      granularity.blockSize != q.blockSize ||
      (!perTensor && normalized(granularity.axis) != normalized(q.axis)))
    return {};
  return q.fakeQuantized;
}

static LogicalResult importDequantizeLinear(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  RankedTensorType inputType = node.inputType(0);
  Type scaleType = node.inputType(1).getElementType();
  FailureOr<Type> element = node.typeAttr("output_dtype", scaleType);
  FailureOr<Granularity> granularity = Granularity::read(node);
  if (failed(element) || failed(granularity))
    return failure();
  if (!isa<FloatType>(*element))
    return node.error("dequantizes to floating-point types, not ") << *element;
  auto integer = dyn_cast<IntegerType>(inputType.getElementType());
  if (!integer || !(isQuantizedType(integer) || integer.isSignlessInteger(32)))
    return node.error("dequantizes 8-, 16- and 32-bit integers, not ")
           << inputType.getElementType();
  if (node.hasInput(2) &&
      node.inputType(2).getElementType() != inputType.getElementType())
    return node.error("the zero point's type ")
           << node.inputType(2).getElementType() << " differs from the input's "
           << inputType.getElementType();
  OpChain ops(node, *element);
  if (Value fake = readBack(node, *granularity))
    return node.setResult(ops.cast(fake, *element));
  Value scale = granularity->align(node, ops, ops.cast(node.input(1), *element),
                                   inputType, "scale");
  Value x = ops.cast(node.input(0), *element);
  if (node.hasInput(2))
    x = ops.sub(x,
                granularity->align(node, ops, ops.cast(node.input(2), *element),
                                   inputType, "zero point"));
  Value result = ops.mul(x, scale);
  return result ? node.setResult(result) : failure();
}

/// `x` reduced with OpTy over all its dimensions.
template <typename OpTy>
static Value reduceAll(NodeContext &node, OpChain &ops, Value x) {
  auto axes = llvm::to_vector(
      llvm::seq<int64_t>(0, cast<RankedTensorType>(x.getType()).getRank()));
  return ops.build<OpTy>({x},
                         {node.builder.getNamedAttr(
                             "axes", node.builder.getDenseI64ArrayAttr(axes))});
}

/// DynamicQuantizeLinear: uint8 with the scale and zero point that map
/// [min(0, min(x)), max(0, max(x))] onto [0, 255].
static LogicalResult importDynamicQuantizeLinear(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  RankedTensorType inputType = node.inputType(0);
  Type element = inputType.getElementType();
  if (!isa<FloatType>(element))
    return node.error("quantizes floating-point tensors, not ") << element;
  OpChain ops(node, element);
  Value zero = ops.constant(0.0);
  Value low = ops.min(reduceAll<ReduceMinOp>(node, ops, node.input(0)), zero);
  Value high = ops.max(reduceAll<ReduceMaxOp>(node, ops, node.input(0)), zero);
  std::pair<double, double> range{0.0, 255.0};
  Value scale = ops.div(ops.sub(high, low), ops.constant(range.second));
  Value zeroLevel = ops.min(
      ops.max(ops.unary<RoundOp>(ops.sub(zero, ops.div(low, scale))), zero),
      ops.constant(range.second));
  auto uint8 =
      IntegerType::get(node.builder.getContext(), 8, IntegerType::Unsigned);
  Value quantized = ops.cast(
      quantizedLevels(ops, node.input(0), scale, zeroLevel, range), uint8);
  Value zeroPoint = ops.cast(zeroLevel, uint8);
  if (!quantized || !zeroPoint)
    return failure();
  node.setOutput(0, quantized);
  node.setOutput(1, scale);
  node.setOutput(2, zeroPoint);
  return success();
}

void registerQuantizationImporters(OpImporterTable &table) {
  table.add("QuantizeLinear", importQuantizeLinear);
  table.add("DequantizeLinear", importDequantizeLinear);
  table.add("DynamicQuantizeLinear", importDynamicQuantizeLinear);
}

} // namespace kiln
