//===- ContribImporters.cpp - ONNX Runtime's com.microsoft ops
//-------------===//
//
// The ops ONNX Runtime's transformer optimizer fuses exported graphs into,
// so that a model saved after that optimization imports too: FusedMatMul,
// the GELUs (Gelu, BiasGelu, FastGelu, QuickGelu), BiasAdd, and the residual
// norms (SkipLayerNormalization, SkipSimplifiedLayerNormalization, and
// SimplifiedLayerNormalization, which ONNX Runtime registers in the default
// domain). Each is composed of kiln ops as ONNX Runtime's operator
// documentation (docs/ContribOperators.md there) defines it; the attention
// ops are in AttentionImporters.cpp.
//
//===----------------------------------------------------------------------===//

#include "OpChain.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace kiln {

/// The permutation that moves the leading (batch) dimension of a rank-r
/// operand to just before its last: FusedMatMul's transBatchA/transBatchB.
static SmallVector<int64_t> batchToRows(int64_t rank) {
  auto permutation = llvm::to_vector(llvm::seq<int64_t>(1, rank - 1));
  permutation.append({0, rank - 1});
  return permutation;
}

/// FusedMatMul: alpha * (A' x B'), where each operand is first transposed
/// as asked: its leading dimension moved to just before its last
/// (transBatch), then its last two swapped (trans); numpy.matmul otherwise.
static LogicalResult importFusedMatMul(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 1.0);
  if (failed(node.requireInputs(2)) || failed(alpha))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  auto operand = [&](unsigned i, StringRef trans,
                     StringRef transBatch) -> Value {
    FailureOr<int64_t> swap = node.intAttr(trans, 0);
    FailureOr<int64_t> batch = node.intAttr(transBatch, 0);
    if (failed(swap) || failed(batch))
      return {};
    Value x = node.input(i);
    int64_t rank = node.inputRank(i);
    if (*batch) {
      if (rank < 3) {
        node.error("") << transBatch << " needs an operand of rank 3 or "
                       << "more, not " << rank;
        return {};
      }
      x = ops.transpose(x, batchToRows(rank));
    }
    // A vector is the same transposed.
    if (*swap && rank >= 2) {
      auto permutation = llvm::to_vector(llvm::seq<int64_t>(0, rank));
      std::swap(permutation[rank - 2], permutation[rank - 1]);
      x = ops.transpose(x, permutation);
    }
    return x;
  };
  Value a = operand(0, "transA", "transBatchA");
  Value b = operand(1, "transB", "transBatchB");
  if (!a || !b)
    return failure();
  FailureOr<Value> product = node.matmul(a, b);
  if (failed(product) || *alpha == 1.0)
    return node.setResult(product);
  Value scaled = ops.mul(*product, ops.constant(*alpha));
  return scaled ? node.setResult(scaled) : failure();
}

/// The GELU of input 0, plus input 1 (a bias) first if given; `required`
/// inputs must be.
static LogicalResult importGeluOf(NodeContext &node,
                                  GeluApproximation approximation,
                                  unsigned required) {
  if (failed(node.requireInputs(required)))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  Value x = node.input(0);
  if (node.hasInput(1))
    x = ops.add(x, node.input(1));
  Value gelu = ops.build<GeluOp>(
      {x},
      {node.builder.getNamedAttr(
          "approximation", GeluApproximationAttr::get(node.builder.getContext(),
                                                      approximation))},
      {x ? x.getType() : Type()});
  return gelu ? node.setResult(gelu) : failure();
}

/// Gelu: the exact (erf) GELU.
static LogicalResult importContribGelu(NodeContext &node) {
  return importGeluOf(node, GeluApproximation::None, /*required=*/1);
}

/// BiasGelu: the exact GELU of A + B.
static LogicalResult importBiasGelu(NodeContext &node) {
  return importGeluOf(node, GeluApproximation::None, /*required=*/2);
}

/// FastGelu: the tanh approximation of GELU, of X + bias if bias is given.
static LogicalResult importFastGelu(NodeContext &node) {
  return importGeluOf(node, GeluApproximation::Tanh, /*required=*/1);
}

/// QuickGelu: x * sigmoid(alpha * x).
static LogicalResult importQuickGelu(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 1.702);
  if (failed(node.requireInputs(1)) || failed(alpha))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  Value x = node.input(0);
  Value result =
      ops.mul(x, ops.unary<SigmoidOp>(ops.mul(x, ops.constant(*alpha))));
  return result ? node.setResult(result) : failure();
}

/// BiasAdd: X + bias + skip.
static LogicalResult importBiasAdd(NodeContext &node) {
  if (failed(node.requireInputs(3)))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  Value result = ops.add(ops.add(node.input(0), node.input(1)), node.input(2));
  return result ? node.setResult(result) : failure();
}

namespace {
/// The two norms the residual fusions end in.
enum class Norm { Layer, RootMeanSquare };
} // namespace

/// kiln.layer_norm or kiln.rms_norm of `x` over its last dimension with
/// `scale` and (layer norm only) `bias`, if given; binds output 0, and the
/// statistics to outputs `meanOutput` (layer norm only) and `invOutput`.
static LogicalResult normalizeLast(NodeContext &node, Norm norm, Value x,
                                   Value scale, Value bias, double epsilon,
                                   unsigned meanOutput, unsigned invOutput) {
  int64_t axis = cast<RankedTensorType>(x.getType()).getRank() - 1;
  SmallVector<Value> operands{x, scale};
  SmallVector<NamedAttribute> attributes{
      node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(axis)),
      node.builder.getNamedAttr("epsilon",
                                node.builder.getF64FloatAttr(epsilon))};
  FailureOr<SmallVector<Value>> results;
  if (norm == Norm::Layer) {
    if (bias)
      operands.push_back(bias);
    attributes.push_back(node.builder.getNamedAttr(
        "operandSegmentSizes",
        node.builder.getDenseI32ArrayAttr({1, 1, bias ? 1 : 0})));
    results = node.create<LayerNormOp>(operands, attributes);
  } else {
    if (node.hasOutput(meanOutput))
      return node.error("RMS normalization has no mean output");
    results = node.create<RmsNormOp>(operands, attributes);
  }
  if (failed(results))
    return failure();
  node.setOutput(0, results->front());
  if (norm == Norm::Layer)
    node.setOutput(meanOutput, (*results)[1]);
  node.setOutput(invOutput, results->back());
  return success();
}

/// SkipLayerNormalization (`Norm::Layer`: input, skip, gamma, beta, bias)
/// and SkipSimplifiedLayerNormalization (`Norm::RootMeanSquare`: input,
/// skip, gamma, bias): the norm of input + skip (+ bias) over the last
/// dimension; outputs the norm, its mean and inverse standard deviation,
/// and the sum.
template <Norm norm>
static LogicalResult importSkipNormalization(NodeContext &node) {
  FailureOr<double> epsilon = node.floatAttr("epsilon", 1e-12);
  if (failed(node.requireInputs(3)) || failed(epsilon))
    return failure();
  unsigned biasInput = norm == Norm::Layer ? 4 : 3;
  OpChain ops(node, node.inputType(0).getElementType());
  Value sum = ops.add(node.input(0), node.input(1));
  if (node.hasInput(biasInput))
    sum = ops.add(sum, node.input(biasInput));
  if (!sum)
    return failure();
  node.setOutput(3, sum);
  Value beta =
      norm == Norm::Layer && node.hasInput(3) ? node.input(3) : Value();
  return normalizeLast(node, norm, sum, node.input(2), beta, *epsilon,
                       /*meanOutput=*/1, /*invOutput=*/2);
}

/// SimplifiedLayerNormalization (ONNX Runtime's, in the default domain): the
/// RMS norm of X over [axis, rank) times scale; outputs Y and inv_std_var.
static LogicalResult importSimplifiedLayerNormalization(NodeContext &node) {
  FailureOr<int64_t> axis = node.intAttr("axis", -1);
  FailureOr<double> epsilon = node.floatAttr("epsilon", 1e-5);
  if (failed(node.requireInputs(2)) || failed(axis) || failed(epsilon))
    return failure();
  FailureOr<int64_t> normalized = node.normalizeAxis(*axis, node.inputRank(0));
  if (failed(normalized))
    return failure();
  FailureOr<SmallVector<Value>> results = node.create<RmsNormOp>(
      {node.input(0), node.input(1)},
      {node.builder.getNamedAttr("axis",
                                 node.builder.getI64IntegerAttr(*normalized)),
       node.builder.getNamedAttr("epsilon",
                                 node.builder.getF64FloatAttr(*epsilon))});
  if (failed(results))
    return failure();
  node.setOutput(0, results->front());
  node.setOutput(1, results->back());
  return success();
}

void registerContribImporters(OpImporterTable &table) {
  table.add("com.microsoft.FusedMatMul", importFusedMatMul);
  table.add("com.microsoft.Gelu", importContribGelu);
  table.add("com.microsoft.BiasGelu", importBiasGelu);
  table.add("com.microsoft.FastGelu", importFastGelu);
  table.add("com.microsoft.QuickGelu", importQuickGelu);
  table.add("com.microsoft.BiasAdd", importBiasAdd);
  table.add("com.microsoft.SkipLayerNormalization",
            importSkipNormalization<Norm::Layer>);
  table.add("com.microsoft.SkipSimplifiedLayerNormalization",
            importSkipNormalization<Norm::RootMeanSquare>);
  table.add("SimplifiedLayerNormalization", importSimplifiedLayerNormalization);
}

} // namespace kiln
