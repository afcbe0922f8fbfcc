//===- AttentionImporters.cpp - ONNX Attention, RotaryEmbedding (23) -----===//
//
// Attention becomes one kiln.attention, which computes what the operator
// specifies (scores scaled by `scale`, a boolean or additive mask, causal
// masking, grouped-query heads, a fully masked row giving zeros) and which
// the training pipeline differentiates like a rewritten one. 3-D inputs are
// split into heads and merged back; a key/value cache (`past_key`,
// `past_value`) is concatenated in front of the keys and values, and is what
// `present_key` and `present_value` return. Causal masking is bottom-right
// aligned past the cache: query i reads key j <= i + past length, which
// without a cache is kiln.attention's own `causal` and with one an explicit
// mask combined with `attn_mask`. kiln.attention scales the product q . k
// where the specification scales q and k by sqrt(scale) each: the same
// value up to rounding.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;

namespace kiln {

namespace {

/// Splits a 3-D [B, T, heads * D] input into [B, heads, T, D]; a 4-D one
/// is returned as it is.
FailureOr<Value> splitHeads(NodeContext &node, Value value,
                            std::optional<int64_t> heads, StringRef what) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 4)
    return value;
  if (type.getRank() != 3)
    return node.error(what) << " must be 3-D or 4-D, not " << type;
  if (!heads || *heads <= 0 || type.getDimSize(2) % *heads != 0)
    return node.error("3-D ") << what << " " << type << " needs "
                              << (what == "Q" ? "q_num_heads" : "kv_num_heads")
                              << " dividing its last dimension";
  ArrayRef<int64_t> s = type.getShape();
  FailureOr<Value> split =
      node.reshape(value, {s[0], s[1], *heads, s[2] / *heads});
  if (failed(split))
    return failure();
  return node.transpose(*split, {0, 2, 1, 3});
}

/// The boolean mask of causal attention past a cache of `past` keys: query
/// i reads key j when j <= i + past.
Value causalMask(NodeContext &node, int64_t queries, int64_t keys,
                 int64_t past) {
  Tensor mask(DType::Bool, {queries, keys});
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < keys; ++j)
      mask.ints()[i * keys + j] = j <= i + past;
  return node.constant(mask);
}

LogicalResult importAttention(NodeContext &node) {
  FailureOr<int64_t> isCausal = node.intAttr("is_causal", 0);
  FailureOr<double> softcap = node.floatAttr("softcap", 0.0);
  if (failed(node.requireInputs(3)) || failed(isCausal) || failed(softcap))
    return failure();
  if (*softcap != 0.0)
    return node.error("softcap is not supported");
  if (node.hasOutput(3))
    return node.error("the qk_matmul_output output is not supported (kiln's "
                      "attention keeps no scores)");
  if (node.hasInput(4) != node.hasInput(5))
    return node.error("past_key and past_value must be given together");
  std::optional<int64_t> qHeads, kvHeads;
  if (node.attribute("q_num_heads")) {
    FailureOr<int64_t> heads = node.intAttr("q_num_heads", std::nullopt);
    if (failed(heads))
      return failure();
    qHeads = *heads;
  }
  if (node.attribute("kv_num_heads")) {
    FailureOr<int64_t> heads = node.intAttr("kv_num_heads", std::nullopt);
    if (failed(heads))
      return failure();
    kvHeads = *heads;
  }
  bool flat = node.inputRank(0) == 3;
  FailureOr<Value> query = splitHeads(node, node.input(0), qHeads, "Q");
  FailureOr<Value> key = splitHeads(node, node.input(1), kvHeads, "K");
  FailureOr<Value> value = splitHeads(node, node.input(2), kvHeads, "V");
  if (failed(query) || failed(key) || failed(value))
    return failure();
  // A cache goes in front of the new keys and values.
  int64_t past = 0;
  if (node.hasInput(4)) {
    past =
        node.inputType(4).getRank() == 4 ? node.inputType(4).getDimSize(2) : 0;
    auto append = [&](unsigned cache, Value fresh) {
      return node.concat({node.input(cache), fresh}, 2);
    };
    key = append(4, *key);
    value = append(5, *value);
    if (failed(key) || failed(value))
      return failure();
  }
  auto queryType = cast<RankedTensorType>(query->getType());
  // kiln's softmax is f32 (f64 for f64 operands): any narrower precision
  // asked for is exceeded, a wider one refused.
  if (node.attribute("softmax_precision")) {
    FailureOr<int64_t> precision =
        node.intAttr("softmax_precision", std::nullopt);
    if (failed(precision))
      return failure();
    if (*precision == onnx::TensorProto::DOUBLE &&
        !queryType.getElementType().isF64())
      return node.error("softmax_precision double is not supported for ")
             << queryType.getElementType() << " operands (kiln's is f32)";
  }
  ArrayRef<int64_t> q = queryType.getShape();
  ArrayRef<int64_t> v = cast<RankedTensorType>(value->getType()).getShape();
  int64_t keys = cast<RankedTensorType>(key->getType()).getDimSize(2);
  Type element = queryType.getElementType();

  Value mask;
  if (node.hasInput(3)) {
    mask = node.input(3);
    Type maskElement = node.inputType(3).getElementType();
    if (!maskElement.isInteger(1) && maskElement != element)
      return node.error("attn_mask of type ")
             << node.inputType(3)
             << ": kiln takes a boolean mask or one of the query's type";
  }
  bool causal = *isCausal != 0;
  if (causal && past > 0) {
    // The cache shifts the causal frontier: an explicit mask, combined with
    // attn_mask (intersected if boolean, -inf where masked if additive).
    Value frontier = causalMask(node, q[2], keys, past);
    FailureOr<Value> combined = frontier;
    if (mask && node.inputType(3).getElementType().isInteger(1)) {
      combined = node.create1<AndOp>({frontier, mask});
    } else if (mask) {
      Value minusInfinity = node.scalar(-INFINITY, element);
      combined = node.create1<WhereOp>({frontier, mask, minusInfinity});
    }
    if (failed(combined))
      return failure();
    mask = *combined;
    causal = false;
  }

  double defaultScale = 1.0 / std::sqrt(static_cast<double>(q[3]));
  FailureOr<double> scale = node.floatAttr("scale", defaultScale);
  if (failed(scale))
    return failure();
  // Scores are f32 unless the operands are f64, and so is the scale.
  Type scoreType = element.isF64() ? element : node.builder.getF32Type();
  if (!element.isF64())
    *scale = static_cast<float>(*scale);
  auto outputType = RankedTensorType::get({q[0], q[1], q[2], v[3]}, element);
  auto logsumexpType = RankedTensorType::get({q[0], q[1], q[2]}, scoreType);
  SmallVector<Value> operands = {*query, *key, *value};
  if (mask)
    operands.push_back(mask);
  SmallVector<NamedAttribute> attributes = {
      node.builder.getNamedAttr("scale", node.builder.getF64FloatAttr(*scale)),
      node.builder.getNamedAttr(
          "operandSegmentSizes",
          node.builder.getDenseI32ArrayAttr({1, 1, 1, mask ? 1 : 0, 0}))};
  if (causal)
    attributes.push_back(
        node.builder.getNamedAttr("causal", node.builder.getUnitAttr()));
  FailureOr<SmallVector<Value>> results = node.create<AttentionOp>(
      operands, attributes, {outputType, logsumexpType});
  if (failed(results))
    return failure();
  Value output = results->front();
  if (flat) {
    FailureOr<Value> merged = node.transpose(output, {0, 2, 1, 3});
    if (failed(merged))
      return failure();
    FailureOr<Value> reshaped =
        node.reshape(*merged, {q[0], q[2], q[1] * v[3]});
    if (failed(reshaped))
      return failure();
    output = *reshaped;
  }
  node.setOutput(0, output);
  node.setOutput(1, *key);
  node.setOutput(2, *value);
  return success();
}

/// RotaryEmbedding (opset 23), composed of kiln ops: each head's first
/// `rotary_embedding_dim` features (all by default) are pairs (x1, x2),
/// halves or, `interleaved`, neighbours, rotated by their position's angle:
/// (x1 cos - x2 sin, x1 sin + x2 cos); the rest pass through. The caches
/// are indexed by `position_ids` when given ([B, S] -> [B, S, R/2]).
LogicalResult importRotaryEmbedding(NodeContext &node) {
  FailureOr<int64_t> interleaved = node.intAttr("interleaved", 0);
  FailureOr<int64_t> rotaryDim = node.intAttr("rotary_embedding_dim", 0);
  if (failed(node.requireInputs(3)) || failed(interleaved) || failed(rotaryDim))
    return failure();
  RankedTensorType type = node.inputType(0);
  int64_t rank = type.getRank();
  if (rank != 3 && rank != 4)
    return node.error("X must be 3-D or 4-D, not ") << type;
  // Work on [B, H, S, D] (4-D) or [B, S, H, D] (3-D, split into heads);
  // the caches broadcast over the heads' axis.
  Value x = node.input(0);
  int64_t headAxis = rank == 4 ? 1 : 2;
  if (rank == 3) {
    FailureOr<int64_t> heads = node.intAttr("num_heads", std::nullopt);
    if (failed(heads))
      return failure();
    if (*heads <= 0 || type.getDimSize(2) % *heads != 0)
      return node.error("num_heads ")
             << *heads << " does not divide the hidden size of " << type;
    FailureOr<Value> split =
        node.reshape(x, {type.getDimSize(0), type.getDimSize(1), *heads,
                         type.getDimSize(2) / *heads});
    if (failed(split))
      return failure();
    x = *split;
  }
  SmallVector<int64_t> shape(cast<RankedTensorType>(x.getType()).getShape());
  int64_t head = shape[3];
  int64_t rotated = *rotaryDim == 0 ? head : *rotaryDim;
  if (rotated % 2 != 0 || rotated > head)
    return node.error("rotary_embedding_dim ")
           << rotated << " must be even and at most the head size " << head;
  // The caches as [B, S, R/2], then with a unit heads' axis.
  SmallVector<Value> caches;
  for (unsigned i : {1u, 2u}) {
    Value cache = node.input(i);
    if (node.hasInput(3)) {
      FailureOr<Value> gathered = node.create1<GatherOp>(
          {cache, node.input(3)},
          {node.builder.getNamedAttr("axis",
                                     node.builder.getI64IntegerAttr(0))});
      if (failed(gathered))
        return failure();
      cache = *gathered;
    }
    auto cacheType = cast<RankedTensorType>(cache.getType());
    if (cacheType.getRank() != 3 || cacheType.getDimSize(2) != rotated / 2)
      return node.error("the cos and sin caches must give [batch, sequence, ")
             << rotated / 2 << "] values, not " << cacheType;
    SmallVector<int64_t> expanded(cacheType.getShape());
    expanded.insert(expanded.begin() + headAxis, 1);
    FailureOr<Value> reshaped = node.reshape(cache, expanded);
    if (failed(reshaped))
      return failure();
    caches.push_back(*reshaped);
  }
  // x1 and x2: the two halves, or the even and odd features.
  SmallVector<int64_t> halfShape = shape;
  halfShape[3] = rotated / 2;
  int64_t step = *interleaved ? 2 : 1;
  FailureOr<Value> x1 = node.slice(x, {0, 0, 0, 0}, {1, 1, 1, step}, halfShape);
  FailureOr<Value> x2 = node.slice(x, {0, 0, 0, *interleaved ? 1 : rotated / 2},
                                   {1, 1, 1, step}, halfShape);
  if (failed(x1) || failed(x2))
    return failure();
  Value cos = caches[0], sin = caches[1];
  auto combine = [&](Value a, Value p, Value b, Value q, bool add) {
    FailureOr<Value> left = node.create1<MulOp>({a, p});
    FailureOr<Value> right = node.create1<MulOp>({b, q});
    if (failed(left) || failed(right))
      return FailureOr<Value>(failure());
    return add ? node.create1<AddOp>({*left, *right})
               : node.create1<SubOp>({*left, *right});
  };
  FailureOr<Value> real = combine(cos, *x1, sin, *x2, false);
  FailureOr<Value> imag = combine(sin, *x1, cos, *x2, true);
  if (failed(real) || failed(imag))
    return failure();
  FailureOr<Value> result;
  if (*interleaved) {
    // Pairs back in place: [..., R/2, 2] read as [..., R].
    SmallVector<int64_t> pairShape = halfShape;
    pairShape.push_back(1);
    FailureOr<Value> r = node.reshape(*real, pairShape);
    FailureOr<Value> i = node.reshape(*imag, pairShape);
    if (failed(r) || failed(i))
      return failure();
    FailureOr<Value> pairs = node.concat({*r, *i}, 4);
    if (failed(pairs))
      return failure();
    SmallVector<int64_t> rotatedShape = halfShape;
    rotatedShape[3] = rotated;
    result = node.reshape(*pairs, rotatedShape);
  } else {
    result = node.concat({*real, *imag}, 3);
  }
  if (failed(result))
    return failure();
  if (rotated < head) {
    SmallVector<int64_t> restShape = shape;
    restShape[3] = head - rotated;
    FailureOr<Value> rest =
        node.slice(x, {0, 0, 0, rotated}, {1, 1, 1, 1}, restShape);
    if (failed(rest))
      return failure();
    result = node.concat({*result, *rest}, 3);
    if (failed(result))
      return failure();
  }
  return node.setResult(node.reshape(*result, type.getShape()));
}

} // namespace

void registerAttentionImporters(OpImporterTable &table) {
  table.add("Attention", importAttention);
  table.add("RotaryEmbedding", importRotaryEmbedding);
}

} // namespace kiln
