//===- ShapeImporters.cpp - ONNX ops that compute or change shapes --------===//
//
// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand, ConstantOfShape,
// EyeLike, Range and Constant. Shapes are static after import, so Shape and
// Size become constants and everything they feed folds.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "kiln/Dialect/Kiln/IR/ShapeInference.h"
#include "kiln/TensorIO/TensorFiles.h"

using namespace mlir;

namespace kiln {

static Tensor int64Vector(ArrayRef<int64_t> values) {
  Tensor tensor(DType::I64, {static_cast<int64_t>(values.size())});
  llvm::copy(values, tensor.ints().begin());
  return tensor;
}

static LogicalResult importShape(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  ArrayRef<int64_t> shape = node.inputType(0).getShape();
  int64_t rank = shape.size();
  FailureOr<int64_t> start = node.intAttr("start", 0);
  FailureOr<int64_t> end = node.intAttr("end", rank);
  if (failed(start) || failed(end))
    return failure();
  // Opset 15: out-of-range start and end are clamped.
  auto clampIndex = [&](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  int64_t first = clampIndex(*start), last = clampIndex(*end);
  node.setOutput(0, node.constant(int64Vector(
                        shape.slice(first, std::max<int64_t>(last - first, 0)))));
  return success();
}

static LogicalResult importSize(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  Tensor size(DType::I64, {});
  size.ints()[0] = node.inputType(0).getNumElements();
  node.setOutput(0, node.constant(size));
  return success();
}

static LogicalResult importReshape(NodeContext &node) {
  FailureOr<int64_t> allowZero = node.intAttr("allowzero", 0);
  if (failed(node.requireInputs(2)) || failed(allowZero))
    return failure();
  FailureOr<SmallVector<int64_t>> requested = node.constantInts(1, "shape");
  if (failed(requested))
    return failure();
  RankedTensorType type = node.inputType(0);
  SmallVector<int64_t> shape;
  std::optional<size_t> inferred;
  int64_t known = 1;
  for (auto [i, size] : llvm::enumerate(*requested)) {
    if (size == 0 && !*allowZero) {
      if (static_cast<int64_t>(i) >= type.getRank())
        return node.error("shape entry ") << i << " is 0 (copy the input's "
                                             "size) but the input has rank "
                                          << type.getRank();
      size = type.getDimSize(i);
    }
    if (size == -1) {
      if (inferred)
        return node.error("shape has more than one -1 entry");
      inferred = i;
      shape.push_back(1);
      continue;
    }
    if (size < 0)
      return node.error("shape entry ") << i << " is " << size;
    shape.push_back(size);
    known *= size;
  }
  if (inferred) {
    if (known == 0 || type.getNumElements() % known != 0)
      return node.error("cannot reshape ")
             << type << " to a shape with " << known << " elements and a -1";
    shape[*inferred] = type.getNumElements() / known;
  }
  return node.setResult(node.reshape(node.input(0), shape));
}

static LogicalResult importFlatten(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", 1);
  if (failed(node.requireInputs(1)) || failed(axis))
    return failure();
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  if (*axis < -rank || *axis > rank)
    return node.error("axis ") << *axis << " is outside [" << -rank << ", "
                               << rank << "]";
  int64_t split = *axis < 0 ? *axis + rank : *axis;
  int64_t outer = product(type.getShape().take_front(split));
  return node.setResult(node.reshape(
      node.input(0), {outer, product(type.getShape().drop_front(split))}));
}

/// The axes of a Squeeze or Unsqueeze: an attribute before opset 13, input
/// 1 from then on; absent gives std::nullopt.
static FailureOr<std::optional<SmallVector<int64_t>>>
squeezeAxes(NodeContext &node) {
  return node.intsAttrOrInput("axes", 1, 13);
}

static LogicalResult importSqueeze(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  RankedTensorType type = node.inputType(0);
  SmallVector<bool> drop(type.getRank(), false);
  FailureOr<std::optional<SmallVector<int64_t>>> axes = squeezeAxes(node);
  if (failed(axes))
    return failure();
  if (*axes) {
    for (int64_t given : **axes) {
      FailureOr<int64_t> axis = node.normalizeAxis(given, type.getRank());
      if (failed(axis))
        return failure();
      if (type.getDimSize(*axis) != 1)
        return node.error("cannot squeeze axis ")
               << given << " of size " << type.getDimSize(*axis);
      drop[*axis] = true;
    }
  } else {
    for (int64_t d = 0; d < type.getRank(); ++d)
      drop[d] = type.getDimSize(d) == 1;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!drop[d])
      shape.push_back(type.getDimSize(d));
  return node.setResult(node.reshape(node.input(0), shape));
}

static LogicalResult importUnsqueeze(NodeContext &node) {
  if (failed(node.requireInputs(node.opset < 13 ? 1 : 2)))
    return failure();
  RankedTensorType type = node.inputType(0);
  FailureOr<std::optional<SmallVector<int64_t>>> axes = squeezeAxes(node);
  if (failed(axes))
    return failure();
  if (!*axes)
    return node.error("needs the attribute 'axes'");
  int64_t rank = type.getRank() + (*axes)->size();
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : **axes) {
    FailureOr<int64_t> normalized = node.normalizeAxis(axis, rank);
    if (failed(normalized))
      return failure();
    if (inserted[*normalized])
      return node.error("axis ") << axis << " appears twice";
    inserted[*normalized] = true;
  }
  SmallVector<int64_t> shape;
  int64_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(inserted[d] ? 1 : type.getDimSize(next++));
  return node.setResult(node.reshape(node.input(0), shape));
}

static LogicalResult importExpand(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  FailureOr<SmallVector<int64_t>> requested = node.constantInts(1, "shape");
  if (failed(requested))
    return failure();
  RankedTensorType type = node.inputType(0);
  // Expand broadcasts both ways: a 1 in the requested shape keeps the input's
  // size.
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(std::nullopt, {type.getShape(), *requested});
  if (failed(shape))
    return node.error("input shape ")
           << type << " does not broadcast with the requested shape";
  if (type.getShape() == ArrayRef<int64_t>(*shape)) {
    node.setOutput(0, node.input(0));
    return success();
  }
  return node.setResult(
      node.create1<BroadcastOp>({node.input(0)}, {}, {type.clone(*shape)}));
}

static LogicalResult importConstantOfShape(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = node.constantInts(0, "shape");
  if (failed(shape))
    return failure();
  Tensor fill(DType::F32, {});
  if (const onnx::AttributeProto *value = node.attribute("value")) {
    llvm::Expected<Tensor> decoded =
        tensorFromProto(value->t(), node.modelDirectory());
    if (!decoded)
      return node.error(llvm::toString(decoded.takeError()));
    if (decoded->getNumElements() != 1)
      return node.error("value must hold exactly one element");
    fill = std::move(*decoded);
  }
  for (int64_t size : *shape)
    if (size < 0)
      return node.error("shape entry ") << size << " is negative";
  auto type = RankedTensorType::get(
      *shape, mlirElementType(fill.getDType(), node.builder.getContext()));
  node.setOutput(0, node.splat(fill.getAsDouble(0), type));
  return success();
}

/// EyeLike: a 2-D constant of the input's shape with ones on diagonal `k`
/// (above the main one for k > 0), in `dtype` (the input's by default).
static LogicalResult importEyeLike(NodeContext &node) {
  FailureOr<int64_t> k = node.intAttr("k", 0);
  if (failed(node.requireInputs(1)) || failed(k))
    return failure();
  RankedTensorType type = node.inputType(0);
  if (type.getRank() != 2)
    return node.error("input must be 2-D, got ") << type;
  FailureOr<Type> element = node.typeAttr("dtype", type.getElementType());
  if (failed(element))
    return failure();
  std::optional<DType> dtype = dtypeOf(*element);
  int64_t rows = type.getDimSize(0), columns = type.getDimSize(1);
  Tensor eye(*dtype, {rows, columns});
  for (int64_t i = 0; i < rows; ++i)
    if (int64_t j = i + *k; j >= 0 && j < columns)
      eye.setFromDouble(i * columns + j, 1.0);
  node.setOutput(0, node.constant(eye));
  return success();
}

static LogicalResult importRange(NodeContext &node) {
  if (failed(node.requireInputs(3)))
    return failure();
  double bounds[3];
  const char *names[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    FailureOr<Tensor> value = node.constantInput(i, names[i]);
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1)
      return node.error(names[i]) << " must be a scalar";
    bounds[i] = value->getAsDouble(0);
  }
  if (bounds[2] == 0.0)
    return node.error("delta is zero");
  double steps = std::ceil((bounds[1] - bounds[0]) / bounds[2]);
  if (!(steps < 9007199254740992.0)) // 2^53: beyond it steps are not exact
    return node.error("range of ") << steps << " elements is too large";
  int64_t count = std::max<int64_t>(static_cast<int64_t>(steps), 0);
  auto type = RankedTensorType::get({count}, node.inputType(0).getElementType());
  return node.setResult(node.create1<RangeOp>(
      {},
      {node.builder.getNamedAttr("start", node.builder.getF64FloatAttr(bounds[0])),
       node.builder.getNamedAttr("step", node.builder.getF64FloatAttr(bounds[2]))},
      {type}));
}

static LogicalResult importConstant(NodeContext &node) {
  if (node.node.attribute_size() != 1)
    return node.error("needs exactly one value attribute");
  const onnx::AttributeProto &attr = node.node.attribute(0);
  StringRef name = attr.name();
  if (name == "value") {
    llvm::Expected<Tensor> value =
        tensorFromProto(attr.t(), node.modelDirectory());
    if (!value)
      return node.error(llvm::toString(value.takeError()));
    node.setOutput(0, node.constant(*value));
    return success();
  }
  if (name == "value_float" || name == "value_floats") {
    bool scalar = name == "value_float";
    Tensor value(DType::F32, scalar ? ArrayRef<int64_t>{}
                                    : ArrayRef<int64_t>{attr.floats_size()});
    for (int64_t i = 0; i < value.getNumElements(); ++i)
      value.floats()[i] = scalar ? attr.f() : attr.floats(i);
    node.setOutput(0, node.constant(value));
    return success();
  }
  if (name == "value_int" || name == "value_ints") {
    bool scalar = name == "value_int";
    Tensor value(DType::I64, scalar ? ArrayRef<int64_t>{}
                                    : ArrayRef<int64_t>{attr.ints_size()});
    for (int64_t i = 0; i < value.getNumElements(); ++i)
      value.ints()[i] = scalar ? attr.i() : attr.ints(i);
    node.setOutput(0, node.constant(value));
    return success();
  }
  return node.error("attribute '") << name << "' is not supported (strings "
                                              "and sparse tensors are not)";
}

/// DepthToSpace and SpaceToDepth: blocks of `blocksize` x `blocksize`
/// pixels moved between the channels and the two spatial dimensions of
/// [N, C, H, W], as a reshape, a transpose and a reshape.
static LogicalResult importSpaceDepth(NodeContext &node, bool toSpace) {
  FailureOr<int64_t> block = node.intAttr("blocksize", std::nullopt);
  FailureOr<std::string> mode = node.stringAttr("mode", "DCR");
  if (failed(node.requireInputs(1)) || failed(block) || failed(mode))
    return failure();
  RankedTensorType type = node.inputType(0);
  if (type.getRank() != 4 || *block < 1)
    return node.error("needs an input of rank 4 and a positive blocksize");
  int64_t b = *block, n = type.getDimSize(0), c = type.getDimSize(1),
          h = type.getDimSize(2), w = type.getDimSize(3);
  SmallVector<int64_t> split, permutation, result;
  if (toSpace) {
    if (b > c || c % (b * b) != 0)
      return node.error("channels (")
             << c << ") are not a multiple of the square of blocksize " << b;
    if (*mode == "DCR") {
      split = {n, b, b, c / (b * b), h, w};
      permutation = {0, 3, 4, 1, 5, 2};
    } else if (*mode == "CRD") {
      split = {n, c / (b * b), b, b, h, w};
      permutation = {0, 1, 4, 2, 5, 3};
    } else {
      return node.error("mode '") << *mode << "' is not DCR or CRD";
    }
    result = {n, c / (b * b), h * b, w * b};
  } else {
    if (h % b != 0 || w % b != 0)
      return node.error("spatial size ")
             << h << "x" << w << " is not a multiple of blocksize " << b;
    split = {n, c, h / b, b, w / b, b};
    permutation = {0, 3, 5, 1, 2, 4};
    result = {n, c * b * b, h / b, w / b};
  }
  FailureOr<Value> blocks = node.reshape(node.input(0), split);
  if (failed(blocks))
    return failure();
  FailureOr<Value> moved = node.transpose(*blocks, permutation);
  if (failed(moved))
    return failure();
  return node.setResult(node.reshape(*moved, result));
}

void registerShapeImporters(OpImporterTable &table) {
  table.add("Shape", importShape);
  table.add("Size", importSize);
  table.add("Reshape", importReshape);
  table.add("Flatten", importFlatten);
  table.add("Squeeze", importSqueeze);
  table.add("Unsqueeze", importUnsqueeze);
  table.add("Expand", importExpand);
  table.add("ConstantOfShape", importConstantOfShape);
  table.add("EyeLike", importEyeLike);
  table.add("Range", importRange);
  table.add("Constant", importConstant);
  table.add("DepthToSpace",
            [](NodeContext &node) { return importSpaceDepth(node, true); });
  table.add("SpaceToDepth",
            [](NodeContext &node) { return importSpaceDepth(node, false); });
}

} // namespace kiln
