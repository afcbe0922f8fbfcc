//===- QuantizationImporters.cpp - ONNX linear quantization ---------------===//
//
// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: per tensor,
// per axis and (opset 21) per block, to and from 8- and 16-bit integers;
// the integer products of quantized inference (MatMulInteger, ConvInteger,
// QLinearMatMul, QLinearConv), in i32 as their specification computes.
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

//===----------------------------------------------------------------------===//
// Integer products: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv
//===----------------------------------------------------------------------===//

/// A 1-D `parameter` of more than one element per row of a matrix (or per
/// output channel of a convolution) reshaped to [n, 1, ...] with `trailing`
/// ones, which broadcasts along those rows; others as given (scalars, and
/// per-column or N-D ones, which broadcast as they are).
static Value perRow(OpChain &ops, Value parameter, int64_t trailing) {
  auto type = cast<RankedTensorType>(parameter.getType());
  if (type.getRank() != 1 || type.getNumElements() == 1)
    return parameter;
  SmallVector<int64_t> shape(trailing + 1, 1);
  shape.front() = type.getDimSize(0);
  return ops.reshape(parameter, shape);
}

/// Integer input `i` of `node` widened to i32, less zero point input `zero`
/// (if given) lined up by `align`.
template <typename Align>
static Value centered(NodeContext &node, OpChain &ops, unsigned i,
                      unsigned zero, Align align) {
  Type i32 = node.builder.getI32Type();
  Value x = ops.cast(node.input(i), i32);
  if (!node.hasInput(zero))
    return x;
  return ops.sub(x, align(ops.cast(node.input(zero), i32)));
}

/// Checks that inputs `indices` of `node` are 8-bit integers, as the
/// integer products take them.
static LogicalResult requireEightBits(NodeContext &node,
                                      ArrayRef<unsigned> indices) {
  for (unsigned i : indices) {
    if (!node.hasInput(i))
      continue;
    auto integer = dyn_cast<IntegerType>(node.inputType(i).getElementType());
    if (!integer || integer.getWidth() != 8)
      return node.error("input ") << i << " must be int8 or uint8, not "
                                  << node.inputType(i).getElementType();
  }
  return success();
}

/// The 8-bit integers of `accumulated` (i32) times `scale` (f32), rounded
/// half to even, plus `zeroPoint`, saturated to its type: the product in
/// f64, as ONNX's reference computes it.
static Value requantize(NodeContext &node, Value accumulated, Value scale,
                        Value zeroPoint) {
  auto integer = cast<IntegerType>(
      cast<RankedTensorType>(zeroPoint.getType()).getElementType());
  OpChain ops(node, node.builder.getF64Type());
  Value scaled = ops.mul(ops.cast(accumulated, node.builder.getF64Type()),
                         ops.cast(scale, node.builder.getF64Type()));
  std::pair<double, double> range = integerRange(integer);
  Value levels =
      ops.min(ops.max(ops.add(ops.unary<RoundOp>(scaled),
                              ops.cast(zeroPoint, node.builder.getF64Type())),
                      ops.constant(range.first)),
              ops.constant(range.second));
  return ops.cast(levels, integer);
}

/// MatMulInteger: the i32 product of A and B less their zero points
/// (A's per row, B's per column).
static LogicalResult importMatMulInteger(NodeContext &node) {
  if (failed(node.requireInputs(2)) ||
      failed(requireEightBits(node, {0, 1, 2, 3})))
    return failure();
  OpChain ops(node, node.builder.getI32Type());
  Value a =
      centered(node, ops, 0, 2, [&](Value z) { return perRow(ops, z, 1); });
  Value b = centered(node, ops, 1, 3, [](Value z) { return z; });
  if (!a || !b)
    return failure();
  return node.setResult(node.matmul(a, b));
}

/// ConvInteger: the i32 convolution of x and w less their zero points (w's
/// per output channel), under Conv's attributes.
static LogicalResult importConvInteger(NodeContext &node) {
  if (failed(node.requireInputs(2)) ||
      failed(requireEightBits(node, {0, 1, 2, 3})))
    return failure();
  OpChain ops(node, node.builder.getI32Type());
  int64_t spatial = node.inputRank(1) - 1;
  Value x = centered(node, ops, 0, 2, [](Value z) { return z; });
  Value w = centered(node, ops, 1, 3,
                     [&](Value z) { return perRow(ops, z, spatial); });
  if (!x || !w)
    return failure();
  return node.setResult(importConvolution(node, x, w, Value()));
}

/// QLinearMatMul and QLinearConv: `combine` (a product, a convolution) of
/// inputs 0 and 3 less their zero points (inputs 2 and 5) in i32,
/// requantized with the scale input 1 * input 4 / input 6 and the zero
/// point input 7. A scale or zero point of input 0 or 3 that is 1-D of more
/// than one element holds one value per row of the result, of `lhsRows` or
/// `rhsRows` trailing dimensions (none: it broadcasts as given).
template <typename Combine>
static LogicalResult
importQLinear(NodeContext &node, std::optional<int64_t> lhsRows,
              std::optional<int64_t> rhsRows, Combine combine) {
  if (failed(node.requireInputs(8)) ||
      failed(requireEightBits(node, {0, 2, 3, 5, 7})))
    return failure();
  OpChain ops(node, node.builder.getI32Type());
  OpChain scales(node, node.builder.getF32Type());
  auto aligned = [&](OpChain &chain, std::optional<int64_t> rows) {
    return [&chain, rows](Value parameter) {
      return rows ? perRow(chain, parameter, *rows) : parameter;
    };
  };
  Value lhs = centered(node, ops, 0, 2, aligned(ops, lhsRows));
  Value rhs = centered(node, ops, 3, 5, aligned(ops, rhsRows));
  if (!lhs || !rhs)
    return failure();
  FailureOr<Value> sum = combine(lhs, rhs);
  Value scale = scales.div(scales.mul(aligned(scales, lhsRows)(node.input(1)),
                                      aligned(scales, rhsRows)(node.input(4))),
                           node.input(6));
  if (failed(sum) || !scale)
    return failure();
  Value result = requantize(node, *sum, scale, node.input(7));
  return result ? node.setResult(result) : failure();
}

/// QLinearMatMul: a (per tensor or per row) times b (per tensor or per
/// column), y per tensor or per column.
static LogicalResult importQLinearMatMul(NodeContext &node) {
  return importQLinear(node, /*lhsRows=*/1, /*rhsRows=*/std::nullopt,
                       [&](Value a, Value b) { return node.matmul(a, b); });
}

/// QLinearConv: x (per tensor) convolved with w (per tensor or per output
/// channel) plus the i32 bias (input 8), y per tensor.
static LogicalResult importQLinearConv(NodeContext &node) {
  int64_t spatial = node.hasInput(3) ? node.inputRank(3) - 1 : 0;
  return importQLinear(node, /*lhsRows=*/std::nullopt, /*rhsRows=*/spatial,
                       [&](Value x, Value w) {
                         return importConvolution(
                             node, x, w,
                             node.hasInput(8) ? node.input(8) : Value());
                       });
}

void registerQuantizationImporters(OpImporterTable &table) {
  table.add("QuantizeLinear", importQuantizeLinear);
  table.add("DequantizeLinear", importDequantizeLinear);
  table.add("DynamicQuantizeLinear", importDynamicQuantizeLinear);
  table.add("MatMulInteger", importMatMulInteger);
  table.add("ConvInteger", importConvInteger);
  table.add("QLinearMatMul", importQLinearMatMul);
  table.add("QLinearConv", importQLinearConv);
}

} // namespace kiln
