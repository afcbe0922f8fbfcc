//===- PoolingImporters.cpp - ONNX pools ----------------------------------===//
//
// AveragePool, MaxPool (and its Indices), LpPool as reductions over the
// windows of Windows.h; GlobalLpPool over every spatial dimension; MaxUnpool
// as a scatter to the indices MaxPool gives.
//
//===----------------------------------------------------------------------===//

#include "OpChain.h"
#include "Windows.h"

#include <limits>

using namespace mlir;

namespace kiln {

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

void registerPoolingImporters(OpImporterTable &table) {
  table.add("MaxPool", importMaxPool);
  table.add("AveragePool", importAveragePool);
  table.add("LpPool", importLpPool);
  table.add("GlobalLpPool", importGlobalLpPool);
  table.add("MaxUnpool", importMaxUnpool);
}

} // namespace kiln
