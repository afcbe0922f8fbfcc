//===- TensorImporters.cpp - ONNX ops that move tensor elements -----------===//
//
// Concat, Split, Slice, Transpose, Tile, Gather, GatherElements, GatherND,
// ScatterElements, ScatterND, Pad, Trilu, CumSum, OneHot and
// ReverseSequence.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <numeric>

using namespace mlir;

namespace kiln {

static NamedAttribute i64Attr(NodeContext &node, StringRef name, int64_t v) {
  return node.builder.getNamedAttr(name, node.builder.getI64IntegerAttr(v));
}
static NamedAttribute arrayAttr(NodeContext &node, StringRef name,
                                ArrayRef<int64_t> values) {
  return node.builder.getNamedAttr(name,
                                   node.builder.getDenseI64ArrayAttr(values));
}

static LogicalResult importConcat(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", std::nullopt);
  if (failed(node.requireInputs(1)) || failed(axis))
    return failure();
  SmallVector<Value> inputs;
  for (int i = 0; i < node.node.input_size(); ++i)
    if (node.hasInput(i))
      inputs.push_back(node.input(i));
  FailureOr<int64_t> normalized = node.normalizeAxis(*axis, node.inputRank(0));
  if (failed(normalized))
    return failure();
  return node.setResult(
      node.create1<ConcatOp>(inputs, {i64Attr(node, "axis", *normalized)}));
}

static LogicalResult importSplit(NodeContext &node) {
  FailureOr<int64_t> axisAttr = node.intAttr("axis", 0);
  if (failed(node.requireInputs(1)) || failed(axisAttr))
    return failure();
  RankedTensorType type = node.inputType(0);
  FailureOr<int64_t> axis = node.normalizeAxis(*axisAttr, type.getRank());
  if (failed(axis))
    return failure();
  int64_t size = type.getDimSize(*axis);
  int64_t parts = node.numOutputs();
  SmallVector<int64_t> sizes;
  // The sizes: an attribute before opset 13, input 1 from then on.
  FailureOr<std::optional<SmallVector<int64_t>>> split =
      node.intsAttrOrInput("split", 1, 13);
  if (failed(split))
    return failure();
  if (*split) {
    sizes = **split;
  } else {
    // Equal parts; from opset 18 `num_outputs` allows a smaller last part.
    FailureOr<int64_t> count = node.intAttr("num_outputs", parts);
    if (failed(count) || *count <= 0)
      return node.error("num_outputs must be positive");
    int64_t chunk = (size + *count - 1) / *count;
    if (node.opset < 18 && size % *count != 0)
      return node.error("axis of size ")
             << size << " does not split into " << *count << " equal parts";
    for (int64_t i = 0, left = size; i < *count; ++i, left -= chunk)
      sizes.push_back(std::max<int64_t>(std::min(chunk, left), 0));
  }
  if (static_cast<int64_t>(sizes.size()) != parts)
    return node.error("split has ") << sizes.size() << " parts but the node has "
                                    << parts << " outputs";
  int64_t offset = 0;
  SmallVector<int64_t> start(type.getRank(), 0), stride(type.getRank(), 1);
  for (auto [i, partSize] : llvm::enumerate(sizes)) {
    if (partSize < 0 || offset + partSize > size)
      return node.error("split sizes exceed the axis size ") << size;
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = partSize;
    start[*axis] = partSize == 0 ? 0 : offset;
    FailureOr<Value> part = node.slice(node.input(0), start, stride, shape);
    if (failed(part))
      return failure();
    node.setOutput(i, *part);
    offset += partSize;
  }
  if (offset != size)
    return node.error("split sizes sum to ") << offset << ", not the axis size "
                                             << size;
  return success();
}

static LogicalResult importSlice(NodeContext &node) {
  if (failed(node.requireInputs(3)))
    return failure();
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  FailureOr<SmallVector<int64_t>> starts = node.constantInts(1, "starts");
  FailureOr<SmallVector<int64_t>> ends = node.constantInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (node.hasInput(3)) {
    FailureOr<SmallVector<int64_t>> given = node.constantInts(3, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else {
    for (int64_t i = 0; i < static_cast<int64_t>(starts->size()); ++i)
      axes.push_back(i);
  }
  if (node.hasInput(4)) {
    FailureOr<SmallVector<int64_t>> given = node.constantInts(4, "steps");
    if (failed(given))
      return failure();
    steps = *given;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return node.error("starts, ends, axes and steps must have equal lengths");

  SmallVector<int64_t> start(rank, 0), stride(rank, 1),
      shape(type.getShape());
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    FailureOr<int64_t> axis = node.normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return node.error("axis ") << axes[i] << " is sliced twice";
    seen[*axis] = true;
    int64_t size = type.getDimSize(*axis), step = steps[i];
    if (step == 0)
      return node.error("step of axis ") << axes[i] << " is zero";
    // Clamp as the specification says: to [0, size] for positive steps and
    // to [-1, size - 1] for negative ones.
    auto resolve = [&](int64_t v, int64_t low, int64_t high) {
      if (v < 0)
        v = v <= INT64_MIN + size ? low : v + size;
      return std::clamp(v, low, high);
    };
    if (size == 0) {
      shape[*axis] = 0;
      continue;
    }
    int64_t first = step > 0 ? resolve((*starts)[i], 0, size)
                             : resolve((*starts)[i], 0, size - 1);
    int64_t last = step > 0 ? resolve((*ends)[i], 0, size)
                            : resolve((*ends)[i], -1, size - 1);
    int64_t count = step > 0 ? (last - first + step - 1) / step
                             : (first - last - step - 1) / -step;
    count = std::max<int64_t>(count, 0);
    start[*axis] = count > 0 ? first : 0;
    stride[*axis] = step;
    shape[*axis] = count;
  }
  return node.setResult(node.slice(node.input(0), start, stride, shape));
}

static LogicalResult importTranspose(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  FailureOr<std::optional<SmallVector<int64_t>>> perm = node.intsAttr("perm");
  if (failed(perm))
    return failure();
  SmallVector<int64_t> permutation;
  if (*perm)
    permutation = **perm;
  else // the default reverses the dimensions
    for (int64_t d = node.inputRank(0) - 1; d >= 0; --d)
      permutation.push_back(d);
  return node.setResult(node.transpose(node.input(0), permutation));
}

/// Tile as broadcast and reshape: [a, b] tiled [r, s] is [1, a... ] viewed
/// as [r, a, s, b] then flattened to [r*a, s*b].
static LogicalResult importTile(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  FailureOr<SmallVector<int64_t>> repeats = node.constantInts(1, "repeats");
  if (failed(repeats))
    return failure();
  RankedTensorType type = node.inputType(0);
  if (static_cast<int64_t>(repeats->size()) != type.getRank())
    return node.error("repeats has ") << repeats->size()
                                      << " entries for an input of rank "
                                      << type.getRank();
  SmallVector<int64_t> interleaved, expanded, result;
  for (auto [size, repeat] : llvm::zip(type.getShape(), *repeats)) {
    if (repeat < 0)
      return node.error("repeats must not be negative");
    interleaved.append({1, size});
    expanded.append({repeat, size});
    result.push_back(repeat * size);
  }
  FailureOr<Value> spread = node.create1<ReshapeOp>(
      {node.input(0)}, {}, {type.clone(interleaved)});
  if (failed(spread))
    return failure();
  FailureOr<Value> broadcast =
      node.create1<BroadcastOp>({*spread}, {}, {type.clone(expanded)});
  if (failed(broadcast))
    return failure();
  return node.setResult(
      node.create1<ReshapeOp>({*broadcast}, {}, {type.clone(result)}));
}

template <typename OpTy> static LogicalResult importGatherLike(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", 0);
  if (failed(node.requireInputs(2)) || failed(axis))
    return failure();
  FailureOr<int64_t> normalized = node.normalizeAxis(*axis, node.inputRank(0));
  if (failed(normalized))
    return failure();
  return node.setResult(node.create1<OpTy>(
      {node.input(0), node.input(1)}, {i64Attr(node, "axis", *normalized)}));
}

/// GatherND as a gather along one flattened axis: each index tuple (with the
/// position of its batch, for batch_dims > 0) becomes a linear index into
/// the data viewed as [batch * indexed dims, remaining dims...].
/// The position of each index tuple (the last dimension of `indices`) in
/// the row-major order of dimensions `indexed`, negative indices counting
/// from the end of their dimension: GatherND's and ScatterND's row of the
/// data flattened over those dimensions.
static FailureOr<Value> tuplePositions(NodeContext &node, Value indices,
                                       ArrayRef<int64_t> indexed) {
  MLIRContext *context = node.builder.getContext();
  Type i64 = IntegerType::get(context, 64);
  auto type = cast<RankedTensorType>(indices.getType());
  if (type.getElementType() != i64) {
    FailureOr<Value> wide =
        node.create1<CastOp>({indices}, {}, {type.clone(i64)});
    if (failed(wide))
      return failure();
    indices = *wide;
  }
  int64_t k = indexed.size();
  Value sizes = node.int64Constant({k}, indexed);
  Value zero = node.scalar(0.0, i64);
  auto compare = node.builder.getNamedAttr(
      "predicate", ComparePredicateAttr::get(context, ComparePredicate::LT));
  FailureOr<Value> negative =
      node.create1<CompareOp>({indices, zero}, {compare});
  if (failed(negative))
    return failure();
  FailureOr<Value> wrapped = node.create1<AddOp>({indices, sizes});
  if (failed(wrapped))
    return failure();
  FailureOr<Value> resolved =
      node.create1<WhereOp>({*negative, *wrapped, indices});
  if (failed(resolved))
    return failure();
  SmallVector<int64_t> strides(k, 1);
  for (int64_t j = k - 2; j >= 0; --j)
    strides[j] = strides[j + 1] * indexed[j + 1];
  FailureOr<Value> weighted =
      node.create1<MulOp>({*resolved, node.int64Constant({k}, strides)});
  if (failed(weighted))
    return failure();
  return node.create1<ReduceSumOp>(
      {*weighted},
      {node.builder.getNamedAttr(
          "axes", node.builder.getDenseI64ArrayAttr({type.getRank() - 1}))});
}

static LogicalResult importGatherND(NodeContext &node) {
  FailureOr<int64_t> batchDims = node.intAttr("batch_dims", 0);
  if (failed(node.requireInputs(2)) || failed(batchDims))
    return failure();
  RankedTensorType data = node.inputType(0), indices = node.inputType(1);
  int64_t b = *batchDims, q = indices.getRank(), r = data.getRank();
  if (q < 1 || b < 0 || b >= std::min(q, r))
    return node.error("batch_dims ") << b << " does not fit data of rank " << r
                                     << " and indices of rank " << q;
  int64_t k = indices.getDimSize(q - 1);
  if (k < 1 || b + k > r)
    return node.error("index tuples of length ")
           << k << " do not fit data of rank " << r << " after " << b
           << " batch dimensions";
  for (int64_t d = 0; d < b; ++d)
    if (indices.getDimSize(d) != data.getDimSize(d))
      return node.error("batch dimension ") << d
                                            << " differs between data and "
                                               "indices";
  ArrayRef<int64_t> indexed = data.getShape().slice(b, k);
  FailureOr<Value> linear = tuplePositions(node, node.input(1), indexed);
  if (failed(linear))
    return failure();
  Value flat = *linear;
  if (b > 0) {
    // Offsets of the batch positions: iota over the batch, broadcast.
    ArrayRef<int64_t> batchShape = indices.getShape().take_front(b);
    int64_t batch = product(batchShape), block = product(indexed);
    SmallVector<int64_t> offsets;
    for (int64_t i = 0; i < batch; ++i)
      offsets.push_back(i * block);
    SmallVector<int64_t> shape(batchShape);
    shape.append(q - 1 - b, 1);
    FailureOr<Value> sum =
        node.create1<AddOp>({flat, node.int64Constant(shape, offsets)});
    if (failed(sum))
      return failure();
    flat = *sum;
  }
  SmallVector<int64_t> viewShape{product(data.getShape().take_front(b + k))};
  llvm::append_range(viewShape, data.getShape().drop_front(b + k));
  FailureOr<Value> view =
      node.create1<ReshapeOp>({node.input(0)}, {}, {data.clone(viewShape)});
  if (failed(view))
    return failure();
  return node.setResult(node.create1<GatherOp>(
      {*view, flat}, {i64Attr(node, "axis", 0)}));
}

static LogicalResult importPad(NodeContext &node) {
  FailureOr<std::string> modeName = node.stringAttr("mode", "constant");
  if (failed(node.requireInputs(2)) || failed(modeName))
    return failure();
  std::optional<PadMode> mode = symbolizePadMode(*modeName);
  if (!mode)
    return node.error("pad mode '") << *modeName << "' is not supported";
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  FailureOr<SmallVector<int64_t>> pads = node.constantInts(1, "pads");
  if (failed(pads))
    return failure();
  double value = 0.0;
  if (node.hasInput(2)) {
    FailureOr<Tensor> constant = node.constantInput(2, "constant_value");
    if (failed(constant))
      return failure();
    if (constant->getNumElements() != 1)
      return node.error("constant_value must hold one element");
    value = constant->getAsDouble(0);
  }
  SmallVector<int64_t> axes;
  if (node.hasInput(3)) {
    FailureOr<SmallVector<int64_t>> given = node.constantInts(3, "axes");
    if (failed(given))
      return failure();
    for (int64_t axis : *given) {
      FailureOr<int64_t> normalized = node.normalizeAxis(axis, rank);
      if (failed(normalized))
        return failure();
      axes.push_back(*normalized);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  int64_t count = axes.size();
  if (static_cast<int64_t>(pads->size()) != 2 * count)
    return node.error("pads has ") << pads->size() << " entries, expected "
                                   << 2 * count;
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  for (int64_t i = 0; i < count; ++i) {
    low[axes[i]] = (*pads)[i];
    high[axes[i]] = (*pads)[count + i];
  }
  return node.setResult(node.create1<PadOp>(
      {node.input(0)},
      {node.builder.getNamedAttr(
           "mode", PadModeAttr::get(node.builder.getContext(), *mode)),
       arrayAttr(node, "low", low), arrayAttr(node, "high", high),
       node.builder.getNamedAttr("value", node.builder.getF64FloatAttr(value))}));
}

static LogicalResult importTrilu(NodeContext &node) {
  FailureOr<int64_t> upper = node.intAttr("upper", 1);
  if (failed(node.requireInputs(1)) || failed(upper))
    return failure();
  int64_t diagonal = 0;
  if (node.hasInput(1)) {
    FailureOr<SmallVector<int64_t>> k = node.constantInts(1, "k");
    if (failed(k))
      return failure();
    if (k->size() != 1)
      return node.error("k must hold one value");
    diagonal = k->front();
  }
  return node.setResult(node.create1<TriluOp>(
      {node.input(0)},
      {node.builder.getNamedAttr("upper", node.builder.getBoolAttr(*upper)),
       i64Attr(node, "diagonal", diagonal)},
      {node.inputType(0)}));
}

static LogicalResult importCumSum(NodeContext &node) {
  FailureOr<int64_t> exclusive = node.intAttr("exclusive", 0);
  FailureOr<int64_t> reverse = node.intAttr("reverse", 0);
  if (failed(node.requireInputs(2)) || failed(exclusive) || failed(reverse))
    return failure();
  FailureOr<SmallVector<int64_t>> axis = node.constantInts(1, "axis");
  if (failed(axis))
    return failure();
  if (axis->size() != 1)
    return node.error("axis must hold one value");
  FailureOr<int64_t> normalized =
      node.normalizeAxis(axis->front(), node.inputRank(0));
  if (failed(normalized))
    return failure();
  SmallVector<NamedAttribute> attributes{i64Attr(node, "axis", *normalized)};
  if (*exclusive)
    attributes.push_back(
        node.builder.getNamedAttr("exclusive", node.builder.getUnitAttr()));
  if (*reverse)
    attributes.push_back(
        node.builder.getNamedAttr("reverse", node.builder.getUnitAttr()));
  return node.setResult(node.create1<CumsumOp>({node.input(0)}, attributes,
                                               {node.inputType(0)}));
}

/// The `reduction` attribute of ScatterElements and ScatterND.
static FailureOr<NamedAttribute> scatterReduction(NodeContext &node) {
  FailureOr<std::string> name = node.stringAttr("reduction", "none");
  if (failed(name))
    return failure();
  std::optional<ScatterReduction> reduction = symbolizeScatterReduction(*name);
  if (!reduction)
    return node.error("reduction '") << *name << "' is not supported";
  return node.builder.getNamedAttr(
      "reduction",
      ScatterReductionAttr::get(node.builder.getContext(), *reduction));
}

static LogicalResult importScatterElements(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", 0);
  FailureOr<NamedAttribute> reduction = scatterReduction(node);
  if (failed(node.requireInputs(3)) || failed(axis) || failed(reduction))
    return failure();
  FailureOr<int64_t> normalized = node.normalizeAxis(*axis, node.inputRank(0));
  if (failed(normalized))
    return failure();
  return node.setResult(node.create1<ScatterElementsOp>(
      {node.input(0), node.input(1), node.input(2)},
      {i64Attr(node, "axis", *normalized), *reduction}, {node.inputType(0)}));
}

/// ScatterND: the data flattened to one row per index tuple's position (the
/// first k dimensions) and the rest, each update row scattered to its
/// tuple's row with ScatterElements along the rows.
static LogicalResult importScatterND(NodeContext &node) {
  FailureOr<NamedAttribute> reduction = scatterReduction(node);
  if (failed(node.requireInputs(3)) || failed(reduction))
    return failure();
  RankedTensorType data = node.inputType(0), indices = node.inputType(1),
                   updates = node.inputType(2);
  int64_t q = indices.getRank(), r = data.getRank();
  int64_t k = q ? indices.getDimSize(q - 1) : 0;
  if (q < 1 || k < 1 || k > r)
    return node.error("index tuples of length ")
           << k << " do not fit data of rank " << r;
  SmallVector<int64_t> expected(indices.getShape().drop_back());
  llvm::append_range(expected, data.getShape().drop_front(k));
  if (updates.getShape() != ArrayRef<int64_t>(expected))
    return node.error("updates have shape [")
           << updates.getShape() << "], not the indices' and data's ["
           << ArrayRef<int64_t>(expected) << "]";
  ArrayRef<int64_t> indexed = data.getShape().take_front(k);
  FailureOr<Value> positions = tuplePositions(node, node.input(1), indexed);
  if (failed(positions))
    return failure();
  int64_t tuples = product(indices.getShape().drop_back());
  int64_t row = product(data.getShape().drop_front(k));
  Type i64 = IntegerType::get(node.builder.getContext(), 64);
  FailureOr<Value> column = node.reshape(*positions, {tuples, 1});
  FailureOr<Value> rows = node.reshape(node.input(0), {product(indexed), row});
  FailureOr<Value> updateRows = node.reshape(node.input(2), {tuples, row});
  if (failed(column) || failed(rows) || failed(updateRows))
    return failure();
  FailureOr<Value> spread = node.create1<BroadcastOp>(
      {*column}, {}, {RankedTensorType::get({tuples, row}, i64)});
  if (failed(spread))
    return failure();
  FailureOr<Value> scattered = node.create1<ScatterElementsOp>(
      {*rows, *spread, *updateRows}, {i64Attr(node, "axis", 0), *reduction},
      {cast<RankedTensorType>(rows->getType())});
  if (failed(scattered))
    return failure();
  return node.setResult(node.reshape(*scattered, data.getShape()));
}

/// OneHot: `values`[1] where a new `axis` of `depth` positions is the index
/// (negative ones counting from the end), `values`[0] elsewhere and for
/// indices out of range.
static LogicalResult importOneHot(NodeContext &node) {
  FailureOr<int64_t> axisAttr = node.intAttr("axis", -1);
  if (failed(node.requireInputs(3)) || failed(axisAttr))
    return failure();
  FailureOr<Tensor> depthValue = node.constantInput(1, "depth");
  if (failed(depthValue))
    return failure();
  if (depthValue->getNumElements() != 1)
    return node.error("depth must hold one value");
  auto depth = static_cast<int64_t>(depthValue->getAsDouble(0));
  RankedTensorType indices = node.inputType(0), values = node.inputType(2);
  if (depth < 1)
    return node.error("depth ") << depth << " is not positive";
  if (values.getNumElements() != 2)
    return node.error("values must hold two elements, off and on");
  FailureOr<int64_t> axis =
      node.normalizeAxis(*axisAttr, indices.getRank() + 1);
  if (failed(axis))
    return failure();
  MLIRContext *context = node.builder.getContext();
  Type i64 = IntegerType::get(context, 64);
  SmallVector<int64_t> shape(indices.getShape());
  shape.insert(shape.begin() + *axis, 1);
  FailureOr<Value> wide =
      node.create1<CastOp>({node.input(0)}, {}, {indices.clone(i64)});
  if (failed(wide))
    return failure();
  FailureOr<Value> index = node.reshape(*wide, shape);
  if (failed(index))
    return failure();
  FailureOr<Value> negative = node.create1<CompareOp>(
      {*index, node.scalar(0.0, i64)},
      {node.builder.getNamedAttr(
          "predicate",
          ComparePredicateAttr::get(context, ComparePredicate::LT))});
  FailureOr<Value> wrapped =
      node.create1<AddOp>({*index, node.scalar(double(depth), i64)});
  if (failed(negative) || failed(wrapped))
    return failure();
  FailureOr<Value> resolved =
      node.create1<WhereOp>({*negative, *wrapped, *index});
  if (failed(resolved))
    return failure();
  FailureOr<Value> hot = node.isIndexAlong(*resolved, depth, *axis);
  FailureOr<Value> flat = node.reshape(node.input(2), {2});
  if (failed(hot) || failed(flat))
    return failure();
  // The off and on values, as scalars.
  SmallVector<Value> offOn;
  for (int64_t i = 0; i < 2; ++i) {
    FailureOr<Value> one = node.slice(*flat, {i}, {1}, {1});
    if (failed(one))
      return failure();
    FailureOr<Value> scalar = node.reshape(*one, {});
    if (failed(scalar))
      return failure();
    offOn.push_back(*scalar);
  }
  return node.setResult(node.create1<WhereOp>({*hot, offOn[1], offOn[0]}));
}

/// ReverseSequence: each batch entry's first sequence_lens[b] steps along
/// the time axis reversed, the rest kept: a gather of the elements at
/// t < len ? len - 1 - t : t, computed from the lengths (which may be
/// data).
static LogicalResult importReverseSequence(NodeContext &node) {
  FailureOr<int64_t> batchAxis = node.intAttr("batch_axis", 1);
  FailureOr<int64_t> timeAxis = node.intAttr("time_axis", 0);
  if (failed(node.requireInputs(2)) || failed(batchAxis) || failed(timeAxis))
    return failure();
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  if (rank < 2 || (*batchAxis != 0 && *batchAxis != 1) ||
      (*timeAxis != 0 && *timeAxis != 1) || *batchAxis == *timeAxis)
    return node.error("needs an input of rank 2 or more and batch_axis and "
                      "time_axis 0 and 1 (in some order), got rank ")
           << rank << ", " << *batchAxis << " and " << *timeAxis;
  int64_t steps = type.getDimSize(*timeAxis),
          batch = type.getDimSize(*batchAxis);
  if (node.inputType(1).getShape() != ArrayRef<int64_t>{batch})
    return node.error("sequence_lens must have ")
           << batch << " elements, got " << node.inputType(1);
  // Time along the time axis and lengths along the batch axis, broadcasting.
  SmallVector<int64_t> timeShape(rank, 1), lengthShape(rank, 1);
  timeShape[*timeAxis] = steps;
  lengthShape[*batchAxis] = batch;
  SmallVector<int64_t> positions(steps);
  std::iota(positions.begin(), positions.end(), 0);
  Value time = node.int64Constant(timeShape, positions);
  FailureOr<Value> lengths = node.create1<CastOp>(
      {node.input(1)}, {},
      {node.inputType(1).clone(node.builder.getI64Type())});
  if (succeeded(lengths))
    lengths = node.reshape(*lengths, lengthShape);
  if (failed(lengths))
    return failure();
  FailureOr<Value> inside = node.create1<CompareOp>(
      {time, *lengths},
      {node.builder.getNamedAttr(
          "predicate", ComparePredicateAttr::get(node.builder.getContext(),
                                                 ComparePredicate::LT))});
  FailureOr<Value> last =
      node.create1<SubOp>({*lengths, node.int64Constant({}, {1})});
  FailureOr<Value> reversed =
      failed(last) ? last : node.create1<SubOp>({*last, time});
  if (failed(inside) || failed(reversed))
    return failure();
  FailureOr<Value> index = node.create1<WhereOp>({*inside, *reversed, time});
  if (succeeded(index))
    index = node.create1<BroadcastOp>({*index}, {},
                                      {type.clone(node.builder.getI64Type())});
  if (failed(index))
    return failure();
  return node.setResult(node.create1<GatherElementsOp>(
      {node.input(0), *index}, {i64Attr(node, "axis", *timeAxis)}));
}

/// CenterCropPad (opset 18): along each of `axes` (all by default), the
/// input cropped to the target size around its centre, or padded with
/// zeros around it (the odd element after it, either way).
static LogicalResult importCenterCropPad(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  FailureOr<SmallVector<int64_t>> sizes = node.constantInts(1, "shape");
  FailureOr<std::optional<SmallVector<int64_t>>> axes = node.intsAttr("axes");
  if (failed(sizes) || failed(axes))
    return failure();
  SmallVector<int64_t> along =
      *axes ? **axes : llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (along.size() != sizes->size())
    return node.error("shape has ")
           << sizes->size() << " sizes for " << along.size() << " axes";
  SmallVector<int64_t> start(rank, 0), stride(rank, 1),
      cropped(type.getShape()), low(rank, 0), high(rank, 0);
  for (auto [axis, size] : llvm::zip(along, *sizes)) {
    FailureOr<int64_t> normalized = node.normalizeAxis(axis, rank);
    if (failed(normalized))
      return failure();
    if (size < 0)
      return node.error("target size ") << size << " is negative";
    int64_t dim = type.getDimSize(*normalized);
    if (size < dim) {
      start[*normalized] = (dim - size) / 2;
      cropped[*normalized] = size;
    } else {
      low[*normalized] = (size - dim) / 2;
      high[*normalized] = size - dim - low[*normalized];
    }
  }
  FailureOr<Value> crop = node.slice(node.input(0), start, stride, cropped);
  if (failed(crop))
    return failure();
  return node.setResult(node.padConstant(*crop, low, high, 0.0));
}

void registerTensorImporters(OpImporterTable &table) {
  table.add("CenterCropPad", importCenterCropPad);
  table.add("ReverseSequence", importReverseSequence);
  table.add("CumSum", importCumSum);
  table.add("ScatterElements", importScatterElements);
  table.add("ScatterND", importScatterND);
  table.add("Concat", importConcat);
  table.add("Split", importSplit);
  table.add("Slice", importSlice);
  table.add("Transpose", importTranspose);
  table.add("Tile", importTile);
  table.add("Gather", importGatherLike<GatherOp>);
  table.add("GatherElements", importGatherLike<GatherElementsOp>);
  table.add("GatherND", importGatherND);
  table.add("Pad", importPad);
  table.add("Trilu", importTrilu);
  table.add("OneHot", importOneHot);
}

} // namespace kiln
