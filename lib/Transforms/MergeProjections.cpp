//===- MergeProjections.cpp - products of one input by several weights ----===//
//
// Transformers project one activation by several weights side by side,
// BERT's query, key and value for attention. As three products of
// [tokens, d] by [d, d], the activation is read three times, and the
// backward pass writes three partial input gradients that a kernel then
// adds. As one product by the weights stacked ([3d, d]; GPT-2's c_attn
// packs them likewise) it is read once, the input gradient's GEMM sums the
// three in its accumulator, and the weight gradient is one GEMM too. The
// slices of the product are strided views of its buffer (attention reads
// its heads there, and writes their gradients back there in place).
//
// Each column of the merged product is the same dot product as before and
// each bias the same addition, so the forward function computes exactly
// what it did; the backward pass rounds the input gradient once instead of
// at each partial sum. The parameters stay apart (their names, checkpoints,
// optimizer state); the step concatenates them, a copy of the weights'
// size.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/MergeProjections.h"

#include "PatternSupport.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNMERGEPROJECTIONS
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

namespace {

/// A product of an input by a weight (a 2-D parameter), and its bias (a
/// 1-D parameter added to the product, its only use) if it has one.
struct Projection {
  MatmulOp product;
  ParameterOp weight;
  AddOp biasAdd;
  ParameterOp bias;

  /// What the rest of the function reads.
  Value result() { return biasAdd ? biasAdd.getResult() : product.getResult(); }
  /// The product's columns, the weight's output features.
  int64_t width() { return shapeOf(product.getResult()).back(); }
};

/// The 1-D parameter of `width` elements that `add` adds to `product`.
ParameterOp biasOf(AddOp add, Value product, int64_t width) {
  if (add.getResult().getType() != product.getType())
    return {};
  Value other = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto bias = other.getDefiningOp<ParameterOp>();
  if (!bias || bias.getLogicalShape() ||
      shapeOf(other) != ArrayRef<int64_t>{width})
    return {};
  return bias;
}

/// Whether attention reads `value` as its query, key or value, through
/// reshapes and transposes alone: it then reads it in place, as a strided
/// view that keeps the buffer around it until the backward pass.
bool attentionReads(Value value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUses(), [](OpOperand &use) {
           Operation *reader = use.getOwner();
           if (isa<ReshapeOp, TransposeOp>(reader))
             return attentionReads(reader->getResult(0));
           auto attention = dyn_cast<AttentionOp>(reader);
           unsigned n = use.getOperandNumber();
           return attention &&
                  (n == attention.getQueryMutable().getOperandNumber() ||
                   n == attention.getKeyMutable().getOperandNumber() ||
                   n == attention.getValueMutable().getOperandNumber());
         });
}

/// `product` as a projection, if it multiplies by an unpadded 2-D weight
/// parameter stored as Linear layers store theirs ([out, in], read
/// transposed), stores its operands' type and attention reads it (after
/// its bias) in place.
///
/// Stacked along their rows, such weights' gradients are contiguous blocks
/// of the merged one's, which the gradient norm and the optimizer read in
/// place; weights stored [in, out] would stack along columns, whose
/// gradients they would copy out (on llama_tiny: 25 more launches and 3%
/// more bytes). And read in place by attention, the merged product's
/// buffer is kept until the backward pass as its parts would be; a part
/// something else reads (Llama's query and key, which go through the
/// rotary embedding) would be kept by its siblings' reads, and a merged
/// product is no candidate for recomputation (merging those and the MLP's
/// gate and up took llama_tiny 5% more memory in fp32, and recomputing
/// products no longer saved any).
std::optional<Projection> projectionOf(MatmulOp product) {
  auto weight = product.getRhs().getDefiningOp<ParameterOp>();
  if (!weight || weight.getLogicalShape() || shapeOf(weight).size() != 2 ||
      !product.getTransposeRhs() || product.getAccumulate())
    return std::nullopt;
  Projection projection{product, weight, {}, {}};
  if (auto add = dyn_cast_if_present<AddOp>(onlyUser(product.getResult())))
    if (ParameterOp bias = biasOf(add, product, projection.width())) {
      projection.biasAdd = add;
      projection.bias = bias;
    }
  if (!attentionReads(projection.result()))
    return std::nullopt;
  return projection;
}

/// What projections must share to be merged: the input, and as bits
/// whether the product reads it transposed, whether they add a bias and
/// whether their weights are trained (a frozen weight's gradient would be
/// computed with the rest).
using GroupKey = std::pair<Value, unsigned>;

GroupKey groupKeyOf(const Projection &projection, bool trained) {
  MatmulOp product = projection.product;
  return {product.getLhs(), product.getTransposeLhs() |
                                bool(projection.bias) << 1 | trained << 2};
}

/// Stacks the results of `parameters` (along their first dimension) before
/// `at`; moves each parameter before it (a parameter has no operands).
Value stacked(OpBuilder &builder, Operation *at,
              ArrayRef<ParameterOp> parameters) {
  SmallVector<Value> values;
  for (ParameterOp parameter : parameters) {
    if (at->isBeforeInBlock(parameter))
      parameter->moveBefore(at);
    values.push_back(parameter.getResult());
  }
  return builder.create<ConcatOp>(at->getLoc(), values, 0);
}

/// Replaces `group` (two or more, in program order) with one product by the
/// weights stacked, plus the biases concatenated, whose column slices the
/// projections' readers read.
void merge(ArrayRef<Projection> group) {
  MatmulOp first = group.front().product;
  SmallVector<Location> locations;
  SmallVector<ParameterOp> weights, biases;
  for (Projection projection : group) {
    locations.push_back(projection.product.getLoc());
    weights.push_back(projection.weight);
    if (projection.bias)
      biases.push_back(projection.bias);
  }
  OpBuilder builder(first);
  Location location = builder.getFusedLoc(locations);
  Value weight = stacked(builder, first, weights);
  Value merged = builder.create<MatmulOp>(
      location, first.getLhs(), weight, first.getTransposeLhsAttr(),
      first.getTransposeRhsAttr(), TypeAttr());
  if (!biases.empty())
    merged = builder.create<AddOp>(location, merged,
                                   stacked(builder, first, biases));
  int64_t rank = shapeOf(merged).size(), column = 0;
  for (Projection projection : group) {
    SmallVector<int64_t> start(rank, 0), stride(rank, 1);
    start.back() = column;
    column += projection.width();
    Value slice = builder.create<SliceOp>(projection.product.getLoc(),
                                          projection.result().getType(), merged,
                                          builder.getDenseI64ArrayAttr(start),
                                          builder.getDenseI64ArrayAttr(stride));
    projection.result().replaceAllUsesWith(slice);
  }
  // Only now: the builder inserts before the first product.
  for (Projection projection : group) {
    if (projection.biasAdd)
      projection.biasAdd.erase();
    projection.product.erase();
  }
}

} // namespace

FailureOr<int> mergeProjections(func::FuncOp function,
                                const AutodiffOptions &training) {
  FailureOr<DenseSet<Operation *>> trained =
      trainedParameters(function, training);
  if (failed(trained))
    return failure();
  llvm::MapVector<GroupKey, SmallVector<Projection>> groups;
  function.walk([&](MatmulOp product) {
    std::optional<Projection> projection = projectionOf(product);
    if (!projection)
      return;
    // Merged, the product sits where the first of the group did: every
    // product must be in its block.
    SmallVector<Projection> &group =
        groups[groupKeyOf(*projection, trained->contains(projection->weight))];
    if (group.empty() ||
        group.front().product->getBlock() == product->getBlock())
      group.push_back(*projection);
  });
  int merged = 0;
  for (auto &[key, group] : groups) {
    if (group.size() < 2)
      continue;
    merge(group);
    merged += group.size();
  }
  return merged;
}

namespace {
struct MergeProjectionsPass
    : kiln::impl::KilnMergeProjectionsBase<MergeProjectionsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(mergeProjections(getOperation(), {"", train, freeze})))
      signalPassFailure();
  }
};
} // namespace

} // namespace kiln
