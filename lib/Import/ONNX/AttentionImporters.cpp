//===- AttentionImporters.cpp - Attention and RotaryEmbedding ------------===//
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
// ONNX Runtime's com.microsoft Attention, MultiHeadAttention and
// RotaryEmbedding, which its transformer optimizer writes, become the same
// kiln ops.
//
//===----------------------------------------------------------------------===//

#include "OpChain.h"

#include "llvm/ADT/STLExtras.h"

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

/// kiln.attention of [B, H, T, D] operands under `mask` (if given) and the
/// causal flag, scaling scores by `scale` (rounded to f32 unless the
/// operands are f64, as the scores are); the [B, H, Tq, Dv] output.
FailureOr<Value> attend(NodeContext &node, Value query, Value key, Value value,
                        Value mask, bool causal, double scale) {
  auto queryType = cast<RankedTensorType>(query.getType());
  ArrayRef<int64_t> q = queryType.getShape();
  ArrayRef<int64_t> v = cast<RankedTensorType>(value.getType()).getShape();
  Type element = queryType.getElementType();
  Type scoreType = element.isF64() ? element : node.builder.getF32Type();
  if (!element.isF64())
    scale = static_cast<float>(scale);
  auto outputType = RankedTensorType::get({q[0], q[1], q[2], v[3]}, element);
  auto logsumexpType = RankedTensorType::get({q[0], q[1], q[2]}, scoreType);
  SmallVector<Value> operands = {query, key, value};
  if (mask)
    operands.push_back(mask);
  SmallVector<NamedAttribute> attributes = {
      node.builder.getNamedAttr("scale", node.builder.getF64FloatAttr(scale)),
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
  return results->front();
}

/// [B, H, T, D] heads merged into [B, T, H * D].
FailureOr<Value> mergeHeads(NodeContext &node, Value x) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(x.getType()).getShape();
  FailureOr<Value> moved = node.transpose(x, {0, 2, 1, 3});
  if (failed(moved))
    return failure();
  return node.reshape(*moved, {s[0], s[2], s[1] * s[3]});
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
  FailureOr<Value> attended =
      attend(node, *query, *key, *value, mask, causal, *scale);
  if (failed(attended))
    return failure();
  Value output = *attended;
  if (flat) {
    FailureOr<Value> merged = mergeHeads(node, output);
    if (failed(merged))
      return failure();
    output = *merged;
  }
  node.setOutput(0, output);
  node.setOutput(1, *key);
  node.setOutput(2, *value);
  return success();
}

/// The additive mask, 0 where a key takes part and `filter` where not,
/// that com.microsoft's `mask_index` / `key_padding_mask` means, of a shape
/// that broadcasts to [B, heads, S, T] scores: key lengths [B] (right
/// padding), end then start positions [2B] (left padding), or 0/1 masks
/// [B, T], [B, S, T] or [B, 1, S, T].
static FailureOr<Value> keyMask(NodeContext &node, unsigned input,
                                int64_t batch, int64_t queries, int64_t keys,
                                double filter, Type element) {
  OpChain ops(node, element);
  Type i64 = node.builder.getI64Type();
  Value mask = ops.cast(node.input(input), i64);
  RankedTensorType type = node.inputType(input);
  ArrayRef<int64_t> shape = type.getShape();
  auto positions = [&] {
    return node.int64Constant({keys},
                              llvm::to_vector(llvm::seq<int64_t>(0, keys)));
  };
  auto perBatch = [&](int64_t start) {
    SmallVector<int64_t> begin{start}, step{1}, size{batch};
    return ops.reshape(ops.slice(mask, begin, step, size), {batch, 1, 1, 1});
  };
  Value valid;
  if (shape == ArrayRef<int64_t>{batch}) {
    valid = ops.compare(ComparePredicate::LT, positions(), perBatch(0));
  } else if (shape == ArrayRef<int64_t>{2 * batch}) {
    valid = ops.build<AndOp>(
        {ops.compare(ComparePredicate::LT, positions(), perBatch(0)),
         ops.compare(ComparePredicate::GE, positions(), perBatch(batch))});
  } else {
    SmallVector<int64_t> spread;
    if (shape == ArrayRef<int64_t>{batch, keys})
      spread = {batch, 1, 1, keys};
    else if (shape == ArrayRef<int64_t>{batch, queries, keys})
      spread = {batch, 1, queries, keys};
    else if (shape == ArrayRef<int64_t>{batch, 1, queries, keys})
      spread = {batch, 1, queries, keys};
    else
      return node.error("mask of shape [")
             << shape << "] is none of [B], [2B], [B, T], [B, S, T] or "
             << "[B, 1, S, T] for B = " << batch << ", S = " << queries
             << ", T = " << keys;
    Value zero = node.scalar(0.0, i64);
    valid = ops.compare(ComparePredicate::NE, ops.reshape(mask, spread), zero);
  }
  Value additive = ops.select(valid, ops.constant(0.0), ops.constant(filter));
  if (!additive)
    return failure();
  return additive;
}

namespace {
/// What com.microsoft's Attention and MultiHeadAttention share: the heads,
/// the masks and the scale.
struct ContribAttention {
  NodeContext &node;
  int64_t heads = 0;
  double filter = -10000.0;
  bool causal = false;

  LogicalResult readAttributes() {
    FailureOr<int64_t> numHeads = node.intAttr("num_heads", std::nullopt);
    FailureOr<double> maskFilter =
        node.floatAttr("mask_filter_value", -10000.0);
    FailureOr<int64_t> unidirectional = node.intAttr("unidirectional", 0);
    if (failed(numHeads) || failed(maskFilter) || failed(unidirectional))
      return failure();
    if (*numHeads <= 0)
      return node.error("num_heads must be positive, got ") << *numHeads;
    heads = *numHeads;
    filter = *maskFilter;
    causal = *unidirectional != 0;
    return success();
  }

  /// [B, S, heads * D] projections split into heads and attended, the key
  /// mask input `maskInput` and the bias input `biasInput` (if given)
  /// added to the scores; the merged [B, S, heads * Dv] output.
  FailureOr<Value> attendProjections(Value query, Value key, Value value,
                                     unsigned maskInput, unsigned biasInput) {
    SmallVector<Value> split;
    StringRef names[] = {"query", "key", "value"};
    Value projections[] = {query, key, value};
    for (auto [what, projection] : llvm::zip(names, projections)) {
      auto type = cast<RankedTensorType>(projection.getType());
      if (type.getRank() != 3 || type.getDimSize(2) % heads != 0)
        return node.error("") << what << " " << type
                              << " is not [B, S, hidden] with hidden a "
                                 "multiple of num_heads "
                              << heads;
      FailureOr<Value> headsOf = splitHeads(node, projection, heads, what);
      if (failed(headsOf))
        return failure();
      split.push_back(*headsOf);
    }
    auto queryType = cast<RankedTensorType>(split[0].getType());
    ArrayRef<int64_t> q = queryType.getShape();
    int64_t keys = cast<RankedTensorType>(split[1].getType()).getDimSize(2);
    Type element = queryType.getElementType();
    OpChain ops(node, element);
    Value mask;
    bool causalFlag = causal;
    if (node.hasInput(maskInput)) {
      FailureOr<Value> padding =
          keyMask(node, maskInput, q[0], q[2], keys, filter, element);
      if (failed(padding))
        return failure();
      mask = *padding;
      // ONNX Runtime adds the filter value for future keys too: a row whose
      // keys padding and causality both mask attends to all of them, not
      // to the one padding left.
      if (causal) {
        Tensor future(*dtypeOf(element), {q[2], keys});
        for (int64_t i = 0; i < q[2]; ++i)
          for (int64_t j = 0; j < keys; ++j)
            future.setFromDouble(i * keys + j, j > i ? filter : 0.0);
        mask = ops.add(mask, node.constant(future));
        causalFlag = false;
      }
    }
    if (node.hasInput(biasInput))
      mask =
          mask ? ops.add(mask, node.input(biasInput)) : node.input(biasInput);
    if ((node.hasInput(maskInput) || node.hasInput(biasInput)) && !mask)
      return failure();
    FailureOr<double> scale =
        node.floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(q[3])));
    if (failed(scale))
      return failure();
    FailureOr<Value> output =
        attend(node, split[0], split[1], split[2], mask, causalFlag, *scale);
    if (failed(output))
      return failure();
    return mergeHeads(node, *output);
  }
};
} // namespace

/// com.microsoft Attention: the query, key and value projections of input
/// by one merged weight [in, Dq + Dk + Dv] (sizes `qkv_hidden_sizes`, equal
/// thirds by default) and bias, attended with `num_heads` heads under
/// mask_index and attention_bias, `unidirectional` causal. Caches (`past`,
/// `present`) and `do_rotary` are inference features, refused.
LogicalResult importContribAttention(NodeContext &node) {
  ContribAttention attention{node};
  FailureOr<int64_t> rotary = node.intAttr("do_rotary", 0);
  if (failed(node.requireInputs(2)) || failed(attention.readAttributes()) ||
      failed(rotary))
    return failure();
  if (*rotary || node.hasInput(4) || node.hasInput(6) || node.hasOutput(1))
    return node.error("key/value caches (past, present) and do_rotary are "
                      "not supported");
  FailureOr<Value> projected = node.matmul(node.input(0), node.input(1));
  if (failed(projected))
    return failure();
  auto type = cast<RankedTensorType>(projected->getType());
  if (type.getRank() != 3)
    return node.error("input must be [B, S, hidden], not ")
           << node.inputType(0);
  int64_t total = type.getDimSize(2);
  FailureOr<std::optional<SmallVector<int64_t>>> sizes =
      node.intsAttr("qkv_hidden_sizes");
  if (failed(sizes))
    return failure();
  SmallVector<int64_t> hidden =
      *sizes ? **sizes : SmallVector<int64_t>(3, total / 3);
  if (hidden.size() != 3 || hidden[0] + hidden[1] + hidden[2] != total ||
      hidden[0] != hidden[1])
    return node.error("qkv_hidden_sizes [")
           << hidden << "] do not split the projection of " << total
           << " values into query, key and value";
  OpChain ops(node, type.getElementType());
  Value sum = *projected;
  if (node.hasInput(2))
    sum = ops.add(sum, node.input(2));
  SmallVector<Value> parts;
  int64_t offset = 0;
  for (int64_t size : hidden) {
    parts.push_back(ops.slice(sum, {0, 0, offset}, {1, 1, 1},
                              {type.getDimSize(0), type.getDimSize(1), size}));
    offset += size;
  }
  if (llvm::is_contained(parts, Value()))
    return failure();
  return node.setResult(attention.attendProjections(
      parts[0], parts[1], parts[2], /*maskInput=*/3, /*biasInput=*/5));
}

/// com.microsoft MultiHeadAttention of 3-D query, key and value (plus the
/// bias [Dq + Dk + Dv], split among them, if given) under key_padding_mask
/// and attention_bias; packed inputs and caches are refused.
LogicalResult importMultiHeadAttention(NodeContext &node) {
  ContribAttention attention{node};
  if (failed(node.requireInputs(3)) || failed(attention.readAttributes()))
    return failure();
  if (node.hasInput(6) || node.hasInput(7) || node.hasOutput(1) ||
      node.hasOutput(2))
    return node.error("key/value caches (past_key, past_value, present_key, "
                      "present_value) are not supported");
  SmallVector<Value> projections{node.input(0), node.input(1), node.input(2)};
  if (node.hasInput(3)) {
    OpChain ops(node, node.inputType(0).getElementType());
    int64_t offset = 0;
    for (Value &projection : projections) {
      int64_t size =
          cast<RankedTensorType>(projection.getType()).getShape().back();
      projection =
          ops.add(projection, ops.slice(node.input(3), {offset}, {1}, {size}));
      offset += size;
    }
    if (offset != node.inputType(3).getNumElements())
      return node.error("bias of ")
             << node.inputType(3).getNumElements()
             << " values does not cover query, key and value (" << offset
             << ")";
    if (llvm::is_contained(projections, Value()))
      return failure();
  }
  return node.setResult(attention.attendProjections(
      projections[0], projections[1], projections[2], /*maskInput=*/4,
      /*biasInput=*/5));
}

/// `x` rotated as RotaryEmbedding defines: each head's first `rotaryDim`
/// features (all for 0) are pairs (x1, x2), halves or, `interleaved`,
/// neighbours, rotated by their position's angle: (x1 cos - x2 sin,
/// x1 sin + x2 cos); the rest pass through. `x` is [B, H, S, D], or
/// [B, S, hidden] split into `heads` (0: as many as the caches' width
/// makes heads of). The caches, [positions, R/2], are gathered at
/// `positions` ([B, S]) if given, else are [B, S, R/2] already.
static FailureOr<Value> rotate(NodeContext &node, Value input, Value cosCache,
                               Value sinCache, Value positions,
                               bool interleaved, int64_t rotaryDim,
                               int64_t heads) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t rank = type.getRank();
  if (rank != 3 && rank != 4)
    return node.error("the input must be 3-D or 4-D, not ") << type;
  // Work on [B, H, S, D] (4-D) or [B, S, H, D] (3-D, split into heads);
  // the caches broadcast over the heads' axis.
  Value x = input;
  int64_t headAxis = rank == 4 ? 1 : 2;
  if (rank == 3) {
    int64_t width =
        cast<RankedTensorType>(cosCache.getType()).getShape().back();
    if (heads == 0 && rotaryDim == 0 && width > 0)
      heads = type.getDimSize(2) / (2 * width);
    if (heads <= 0 || type.getDimSize(2) % heads != 0)
      return node.error("num_heads ")
             << heads << " does not divide the hidden size of " << type;
    FailureOr<Value> split =
        node.reshape(x, {type.getDimSize(0), type.getDimSize(1), heads,
                         type.getDimSize(2) / heads});
    if (failed(split))
      return failure();
    x = *split;
  }
  SmallVector<int64_t> shape(cast<RankedTensorType>(x.getType()).getShape());
  int64_t head = shape[3];
  int64_t rotated = rotaryDim == 0 ? head : rotaryDim;
  if (rotated % 2 != 0 || rotated > head)
    return node.error("rotary_embedding_dim ")
           << rotated << " must be even and at most the head size " << head;
  // The caches as [B, S, R/2], then with a unit heads' axis.
  SmallVector<Value> caches;
  for (Value cache : {cosCache, sinCache}) {
    if (positions) {
      FailureOr<Value> gathered = node.create1<GatherOp>(
          {cache, positions}, {node.builder.getNamedAttr(
                                  "axis", node.builder.getI64IntegerAttr(0))});
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
  int64_t step = interleaved ? 2 : 1;
  FailureOr<Value> x1 = node.slice(x, {0, 0, 0, 0}, {1, 1, 1, step}, halfShape);
  FailureOr<Value> x2 = node.slice(x, {0, 0, 0, interleaved ? 1 : rotated / 2},
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
  if (interleaved) {
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
  return node.reshape(*result, type.getShape());
}

/// RotaryEmbedding (opset 23): X, cos_cache, sin_cache and the optional
/// position_ids.
LogicalResult importRotaryEmbedding(NodeContext &node) {
  FailureOr<int64_t> interleaved = node.intAttr("interleaved", 0);
  FailureOr<int64_t> rotaryDim = node.intAttr("rotary_embedding_dim", 0);
  FailureOr<int64_t> heads = node.intAttr("num_heads", 0);
  if (failed(node.requireInputs(3)) || failed(interleaved) ||
      failed(rotaryDim) || failed(heads))
    return failure();
  if (node.inputRank(0) == 3 && !node.attribute("num_heads"))
    return node.error("a 3-D input needs num_heads");
  return node.setResult(rotate(node, node.input(0), node.input(1),
                               node.input(2),
                               node.hasInput(3) ? node.input(3) : Value(),
                               *interleaved != 0, *rotaryDim, *heads));
}

/// com.microsoft RotaryEmbedding: input, position_ids ([B, S], or one
/// offset [1] from which the positions count), cos_cache, sin_cache.
LogicalResult importContribRotaryEmbedding(NodeContext &node) {
  FailureOr<int64_t> interleaved = node.intAttr("interleaved", 0);
  FailureOr<int64_t> rotaryDim = node.intAttr("rotary_embedding_dim", 0);
  FailureOr<int64_t> heads = node.intAttr("num_heads", 0);
  FailureOr<int64_t> packed = node.intAttr("is_packed_batching", 0);
  FailureOr<double> scale = node.floatAttr("scale", 1.0);
  if (failed(node.requireInputs(4)) || failed(interleaved) ||
      failed(rotaryDim) || failed(heads) || failed(packed) || failed(scale))
    return failure();
  if (*packed || *scale != 1.0)
    return node.error("is_packed_batching and scale are not supported");
  Value positions = node.input(1);
  RankedTensorType positionType = node.inputType(1);
  if (positionType.getNumElements() == 1) {
    int64_t sequence = node.inputType(0).getDimSize(node.inputRank(0) - 2);
    OpChain ops(node, node.builder.getI64Type());
    positions = ops.add(
        ops.reshape(ops.cast(positions, node.builder.getI64Type()), {1, 1}),
        node.int64Constant({1, sequence},
                           llvm::to_vector(llvm::seq<int64_t>(0, sequence))));
    if (!positions)
      return failure();
  }
  return node.setResult(rotate(node, node.input(0), node.input(2),
                               node.input(3), positions, *interleaved != 0,
                               *rotaryDim, *heads));
}

} // namespace

void registerAttentionImporters(OpImporterTable &table) {
  table.add("Attention", importAttention);
  table.add("RotaryEmbedding", importRotaryEmbedding);
  table.add("com.microsoft.Attention", importContribAttention);
  table.add("com.microsoft.MultiHeadAttention", importMultiHeadAttention);
  table.add("com.microsoft.RotaryEmbedding", importContribRotaryEmbedding);
}

} // namespace kiln
