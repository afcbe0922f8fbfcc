//===- MathImporters.cpp - ONNX products, reductions, softmax -------------===//
//
// MatMul, Gemm, the Reduce* family, ArgMax/ArgMin, TopK, Softmax, LogSoftmax,
// Hardmax, GlobalAveragePool and GlobalMaxPool.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

using namespace mlir;

namespace kiln {

static NamedAttribute unitAttr(NodeContext &node, StringRef name) {
  return node.builder.getNamedAttr(name, node.builder.getUnitAttr());
}

/// MatMul follows numpy.matmul: a 1-D operand is a row (lhs) or column (rhs)
/// vector whose unit dimension is removed from the result.
static LogicalResult importMatMul(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  return node.setResult(node.matmul(node.input(0), node.input(1)));
}

/// Gemm: alpha * op(A) op(B) + beta * C, C broadcast to [M, N].
static LogicalResult importGemm(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 1.0);
  FailureOr<double> beta = node.floatAttr("beta", 1.0);
  FailureOr<int64_t> transA = node.intAttr("transA", 0);
  FailureOr<int64_t> transB = node.intAttr("transB", 0);
  if (failed(node.requireInputs(2)) || failed(alpha) || failed(beta) ||
      failed(transA) || failed(transB))
    return failure();
  if (node.inputRank(0) != 2 || node.inputRank(1) != 2)
    return node.error("Gemm operands must be 2-D, got ")
           << node.inputType(0) << " and " << node.inputType(1);
  SmallVector<NamedAttribute> attributes;
  if (*transA)
    attributes.push_back(unitAttr(node, "transpose_lhs"));
  if (*transB)
    attributes.push_back(unitAttr(node, "transpose_rhs"));
  FailureOr<Value> result =
      node.create1<MatmulOp>({node.input(0), node.input(1)}, attributes);
  if (failed(result))
    return failure();
  Type elementType = node.inputType(0).getElementType();
  if (*alpha != 1.0) {
    result = node.create1<MulOp>({*result, node.scalar(*alpha, elementType)});
    if (failed(result))
      return failure();
  }
  if (node.hasInput(2) && *beta != 0.0) {
    Value bias = node.input(2);
    if (*beta != 1.0) {
      FailureOr<Value> scaled =
          node.create1<MulOp>({bias, node.scalar(*beta, elementType)});
      if (failed(scaled))
        return failure();
      bias = *scaled;
    }
    FailureOr<Value> sum = node.create1<AddOp>({*result, bias});
    if (succeeded(sum) && sum->getType() != result->getType())
      return node.error("C of type ") << bias.getType()
                                      << " does not broadcast to the product "
                                      << result->getType();
    result = sum;
  }
  return node.setResult(result);
}

/// The axes of a Reduce* node: an attribute before `inputSince`, input 1
/// from then on. Empty means all axes unless noop_with_empty_axes is set, in
/// which case std::nullopt tells the caller to pass the input through.
static FailureOr<std::optional<SmallVector<int64_t>>>
reductionAxes(NodeContext &node, int64_t inputSince) {
  int64_t rank = node.inputRank(0);
  FailureOr<std::optional<SmallVector<int64_t>>> given =
      node.intsAttrOrInput("axes", 1, inputSince);
  if (failed(given))
    return failure();
  SmallVector<int64_t> axes = given->value_or(SmallVector<int64_t>());
  if (axes.empty()) {
    FailureOr<int64_t> noop = node.intAttr("noop_with_empty_axes", 0);
    if (failed(noop))
      return failure();
    if (*noop && node.opset >= inputSince)
      return std::optional<SmallVector<int64_t>>();
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  SmallVector<bool> seen(rank, false);
  for (int64_t &axis : axes) {
    FailureOr<int64_t> normalized = node.normalizeAxis(axis, rank);
    if (failed(normalized))
      return failure();
    if (seen[*normalized])
      return node.error("axis ") << axis << " appears twice";
    seen[*normalized] = true;
    axis = *normalized;
  }
  llvm::sort(axes);
  return std::optional<SmallVector<int64_t>>(axes);
}

namespace {
/// How a Reduce* op maps to kiln: an optional elementwise step before the
/// reduction and one after it.
enum class Prologue { None, Square, Abs, Exp };
enum class Epilogue { None, Sqrt, Log };
} // namespace

template <typename ReduceOp, Prologue prologue = Prologue::None,
          Epilogue epilogue = Epilogue::None, int64_t axesInputSince = 18>
static LogicalResult importReduce(NodeContext &node) {
  FailureOr<int64_t> keepDims = node.intAttr("keepdims", 1);
  if (failed(node.requireInputs(1)) || failed(keepDims))
    return failure();
  FailureOr<std::optional<SmallVector<int64_t>>> axes =
      reductionAxes(node, axesInputSince);
  if (failed(axes))
    return failure();
  Value x = node.input(0);
  RankedTensorType type = node.inputType(0);
  if (!*axes) {
    node.setOutput(0, x);
    return success();
  }
  // log-sum-exp subtracts the maximum first so that exp cannot overflow.
  Value shift;
  if (prologue == Prologue::Exp) {
    FailureOr<Value> maximum = node.create1<ReduceMaxOp>(
        {x}, {node.builder.getNamedAttr(
                  "axes", node.builder.getDenseI64ArrayAttr(**axes)),
              unitAttr(node, "keep_dims")});
    if (failed(maximum))
      return failure();
    // An all -inf slice would give NaN: shift by 0 there instead.
    FailureOr<Value> finite = node.create1<IsInfOp>(
        {*maximum}, {node.builder.getNamedAttr("detect_positive",
                                               node.builder.getBoolAttr(true)),
                     node.builder.getNamedAttr("detect_negative",
                                               node.builder.getBoolAttr(true))});
    if (failed(finite))
      return failure();
    FailureOr<Value> safe = node.create1<WhereOp>(
        {*finite, node.scalar(0.0, type.getElementType()), *maximum});
    if (failed(safe))
      return failure();
    shift = *safe;
    FailureOr<Value> shifted = node.create1<SubOp>({x, shift});
    if (failed(shifted))
      return failure();
    x = *shifted;
  }
  FailureOr<Value> before = x;
  switch (prologue) {
  case Prologue::Square: before = node.create1<MulOp>({x, x}); break;
  case Prologue::Abs: before = node.create1<AbsOp>({x}, {}, {type}); break;
  case Prologue::Exp: before = node.create1<ExpOp>({x}, {}, {type}); break;
  case Prologue::None: break;
  }
  if (failed(before))
    return failure();
  SmallVector<NamedAttribute> attributes{node.builder.getNamedAttr(
      "axes", node.builder.getDenseI64ArrayAttr(**axes))};
  if (*keepDims || shift)
    attributes.push_back(unitAttr(node, "keep_dims"));
  FailureOr<Value> reduced = node.create1<ReduceOp>({*before}, attributes);
  if (failed(reduced))
    return failure();
  auto reducedType = cast<RankedTensorType>(reduced->getType());
  FailureOr<Value> after = *reduced;
  switch (epilogue) {
  case Epilogue::Sqrt: after = node.create1<SqrtOp>({*reduced}, {}, {reducedType}); break;
  case Epilogue::Log: after = node.create1<LogOp>({*reduced}, {}, {reducedType}); break;
  case Epilogue::None: break;
  }
  if (failed(after) || !shift)
    return node.setResult(after);
  FailureOr<Value> unshifted = node.create1<AddOp>({*after, shift});
  if (failed(unshifted) || *keepDims)
    return node.setResult(unshifted);
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!llvm::is_contained(**axes, d))
      shape.push_back(type.getDimSize(d));
  return node.setResult(node.reshape(*unshifted, shape));
}

template <typename OpTy> static LogicalResult importArgReduce(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", 0);
  FailureOr<int64_t> keepDims = node.intAttr("keepdims", 1);
  FailureOr<int64_t> last = node.intAttr("select_last_index", 0);
  if (failed(node.requireInputs(1)) || failed(axis) || failed(keepDims) ||
      failed(last))
    return failure();
  FailureOr<int64_t> normalized = node.normalizeAxis(*axis, node.inputRank(0));
  if (failed(normalized))
    return failure();
  SmallVector<NamedAttribute> attributes{node.builder.getNamedAttr(
      "axis", node.builder.getI64IntegerAttr(*normalized))};
  if (*keepDims)
    attributes.push_back(unitAttr(node, "keep_dims"));
  if (*last)
    attributes.push_back(unitAttr(node, "select_last_index"));
  return node.setResult(node.create1<OpTy>({node.input(0)}, attributes));
}

/// TopK: the indices of the k best along `axis` (kiln.top_k; k an
/// attribute before opset 10, a constant input from then on), and the
/// values gathered at them, so that autodiff routes the values' gradient
/// back through the gather. `sorted` = 0 leaves the order open: sorted is
/// one.
static LogicalResult importTopK(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", -1);
  FailureOr<int64_t> largest = node.intAttr("largest", 1);
  FailureOr<std::optional<SmallVector<int64_t>>> k =
      node.intsAttrOrInput("k", 1, 10);
  if (failed(node.requireInputs(1)) || failed(axis) || failed(largest) ||
      failed(k))
    return failure();
  if (!*k || (*k)->size() != 1)
    return node.error("k must be one number");
  FailureOr<int64_t> normalized = node.normalizeAxis(*axis, node.inputRank(0));
  if (failed(normalized))
    return failure();
  SmallVector<NamedAttribute> attributes{
      node.builder.getNamedAttr("axis",
                                node.builder.getI64IntegerAttr(*normalized)),
      node.builder.getNamedAttr("k", node.builder.getI64IntegerAttr((**k)[0]))};
  if (*largest)
    attributes.push_back(unitAttr(node, "largest"));
  FailureOr<Value> indices = node.create1<TopKOp>({node.input(0)}, attributes);
  if (failed(indices))
    return failure();
  FailureOr<Value> values = node.create1<GatherElementsOp>(
      {node.input(0), *indices},
      {node.builder.getNamedAttr("axis",
                                 node.builder.getI64IntegerAttr(*normalized))});
  if (failed(values))
    return failure();
  node.setOutput(0, *values);
  node.setOutput(1, *indices);
  return success();
}

namespace {
/// What Softmax, LogSoftmax and Hardmax normalize: input 0 along `axis`;
/// before opset 13, the input flattened to 2-D at `axis` (default 1), all
/// of [axis, rank) at once along its axis 1.
struct Normalized {
  Value input;
  int64_t axis;
};
} // namespace

static FailureOr<Normalized> normalizedAlong(NodeContext &node) {
  bool flattens = node.opset < 13;
  FailureOr<int64_t> axisAttr = node.intAttr("axis", flattens ? 1 : -1);
  if (failed(node.requireInputs(1)) || failed(axisAttr))
    return failure();
  RankedTensorType type = node.inputType(0);
  FailureOr<int64_t> axis = node.normalizeAxis(*axisAttr, type.getRank());
  if (failed(axis))
    return failure();
  if (!flattens || *axis == type.getRank() - 1)
    return Normalized{node.input(0), *axis};
  ArrayRef<int64_t> shape = type.getShape();
  FailureOr<Value> rows =
      node.reshape(node.input(0), {product(shape.take_front(*axis)),
                                   product(shape.drop_front(*axis))});
  if (failed(rows))
    return failure();
  return Normalized{*rows, 1};
}

template <typename OpTy> static LogicalResult importSoftmax(NodeContext &node) {
  FailureOr<Normalized> along = normalizedAlong(node);
  if (failed(along))
    return failure();
  FailureOr<Value> result = node.create1<OpTy>(
      {along->input},
      {node.builder.getNamedAttr("axis",
                                 node.builder.getI64IntegerAttr(along->axis))},
      {cast<RankedTensorType>(along->input.getType())});
  if (failed(result))
    return failure();
  return node.setResult(node.reshape(*result, node.inputType(0).getShape()));
}

/// Hardmax: 1 at the first maximum, 0 elsewhere.
static LogicalResult importHardmax(NodeContext &node) {
  FailureOr<Normalized> along = normalizedAlong(node);
  if (failed(along))
    return failure();
  auto type = cast<RankedTensorType>(along->input.getType());
  FailureOr<Value> first = node.create1<ArgMaxOp>(
      {along->input}, {node.builder.getNamedAttr(
                           "axis", node.builder.getI64IntegerAttr(along->axis)),
                       unitAttr(node, "keep_dims")});
  if (failed(first))
    return failure();
  FailureOr<Value> hot =
      node.isIndexAlong(*first, type.getDimSize(along->axis), along->axis);
  if (failed(hot))
    return failure();
  FailureOr<Value> ones = node.create1<CastOp>({*hot}, {}, {type});
  if (failed(ones))
    return failure();
  return node.setResult(node.reshape(*ones, node.inputType(0).getShape()));
}

/// GlobalAveragePool and GlobalMaxPool: the reduction over every spatial
/// dimension of [N, C, spatial...], kept as size 1.
template <typename ReduceOp>
static LogicalResult importGlobalPool(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  int64_t rank = node.inputRank(0);
  if (rank < 3)
    return node.error("input of rank ")
           << rank << " has no spatial dimensions to pool";
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  return node.setResult(node.create1<ReduceOp>(
      {node.input(0)}, {node.builder.getNamedAttr(
                            "axes", node.builder.getDenseI64ArrayAttr(axes)),
                        unitAttr(node, "keep_dims")}));
}

void registerMathImporters(OpImporterTable &table) {
  table.add("MatMul", importMatMul);
  table.add("Gemm", importGemm);
  // ReduceSum took its axes as an input from opset 13, the others from 18.
  table.add("ReduceSum", importReduce<ReduceSumOp, Prologue::None,
                                      Epilogue::None, /*axesInputSince=*/13>);
  table.add("ReduceMean", importReduce<ReduceMeanOp>);
  table.add("ReduceMax", importReduce<ReduceMaxOp>);
  table.add("ReduceMin", importReduce<ReduceMinOp>);
  table.add("ReduceProd", importReduce<ReduceProdOp>);
  table.add("ReduceSumSquare", importReduce<ReduceSumOp, Prologue::Square>);
  table.add("ReduceL1", importReduce<ReduceSumOp, Prologue::Abs>);
  table.add("ReduceL2",
            importReduce<ReduceSumOp, Prologue::Square, Epilogue::Sqrt>);
  table.add("ReduceLogSum",
            importReduce<ReduceSumOp, Prologue::None, Epilogue::Log>);
  table.add("ReduceLogSumExp",
            importReduce<ReduceSumOp, Prologue::Exp, Epilogue::Log>);
  table.add("ArgMax", importArgReduce<ArgMaxOp>);
  table.add("TopK", importTopK);
  table.add("ArgMin", importArgReduce<ArgMinOp>);
  table.add("Softmax", importSoftmax<SoftmaxOp>);
  table.add("LogSoftmax", importSoftmax<LogSoftmaxOp>);
  table.add("Hardmax", importHardmax);
  table.add("GlobalAveragePool", importGlobalPool<ReduceMeanOp>);
  table.add("GlobalMaxPool", importGlobalPool<ReduceMaxOp>);
}

} // namespace kiln
