//===- RecognizeRmsNorm.cpp - RMS norms spelled out become kiln.rms_norm --===//
//
// Exporters below opset 23 write Llama's, T5's and Gemma's RMS norm as the
// arithmetic of its formula:
//
//   x * (1 / sqrt(mean(x^2) + eps)) * scale    (the reciprocal: a division
//   x / sqrt(mean(x^2) + eps) * scale           or kiln.reciprocal)
//
// with the mean over the trailing axes, kept, and the scale (Gemma's 1 + w
// too) after the normalized value. As one kiln.rms_norm it is one kernel
// that reads each row once, whose gradient is another (instead of some
// eight ops whose intermediates the backward pass keeps, and their
// gradients' kernels, a mean's gradient spread over the row among them).
// Every intermediate must have no other use.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/RecognizeRmsNorm.h"

#include "PatternSupport.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNRECOGNIZERMSNORM
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

namespace {
/// One RMS norm spelled out: what kiln.rms_norm takes, the value it
/// replaces and the ops that computed it.
struct RmsNormMatch {
  Value input, scale;
  int64_t axis = 0;
  double epsilon = 0.0;
  Value result;
  SmallVector<Operation *> replaced;
};

/// Matches the ops of one RMS norm from its mean of squares.
class RmsNormMatcher {
public:
  explicit RmsNormMatcher(const Literals &literals) : literals(literals) {}

  std::optional<RmsNormMatch> match(ReduceMeanOp mean) {
    RmsNormMatch found;
    ArrayRef<int64_t> axes = mean.getAxes();
    int64_t rank = shapeOf(mean.getInput()).size();
    if (!mean.getKeepDims() || axes.empty() || axes.back() != rank - 1 ||
        axes.size() != static_cast<size_t>(rank - axes.front()) ||
        !mean.getInput().hasOneUse())
      return std::nullopt;
    found.axis = axes.front();
    Value x = squared(mean.getInput());
    if (!x)
      return std::nullopt;
    found.input = x;
    ops.push_back(mean);
    // mean + eps, its square root, and x divided by it (or times its
    // reciprocal).
    auto sum = dyn_cast_or_null<AddOp>(onlyUser(mean.getResult()));
    if (!sum || !sum.getResult().hasOneUse())
      return std::nullopt;
    Value epsilon =
        sum.getLhs() == mean.getResult() ? sum.getRhs() : sum.getLhs();
    std::optional<double> value = literals.value(epsilon);
    if (!value || *value < 0.0)
      return std::nullopt;
    found.epsilon = *value;
    literal(epsilon);
    ops.push_back(sum);
    auto root = dyn_cast_or_null<SqrtOp>(onlyUser(sum.getResult()));
    if (!root)
      return std::nullopt;
    ops.push_back(root);
    Value normalized = dividedBy(x, root.getResult());
    if (!normalized || normalized.getType() != x.getType())
      return std::nullopt;
    found.result = normalized;
    // The scale after it, a tensor of the normalized dimensions.
    if (auto scaled = dyn_cast_or_null<MulOp>(onlyUser(normalized))) {
      Value scale =
          scaled.getLhs() == normalized ? scaled.getRhs() : scaled.getLhs();
      auto type = cast<RankedTensorType>(scale.getType());
      if (type.getShape() == shapeOf(x).drop_front(found.axis) &&
          type.getElementType() == getElementTypeOrSelf(x) &&
          scaled.getType() == x.getType()) {
        ops.push_back(normalized.getDefiningOp());
        found.scale = scale;
        found.result = scaled.getResult();
      }
    }
    found.replaced = std::move(ops);
    return found;
  }

private:
  /// `x` if `value` is x^2 (pow(x, 2) or x * x).
  Value squared(Value value) {
    if (auto pow = value.getDefiningOp<PowOp>()) {
      if (!literals.is(pow.getRhs(), 2.0))
        return {};
      literal(pow.getRhs());
      ops.push_back(pow);
      return pow.getLhs();
    }
    if (auto mul = value.getDefiningOp<MulOp>();
        mul && mul.getLhs() == mul.getRhs()) {
      ops.push_back(mul);
      return mul.getLhs();
    }
    return {};
  }

  /// x / root, as the one user of `root` computes it: x / root, x * (1 /
  /// root) or x * reciprocal(root) (the reciprocal used once); null if it
  /// is none of them.
  Value dividedBy(Value x, Value root) {
    Operation *user = onlyUser(root);
    Value reciprocal;
    if (auto div = dyn_cast_or_null<DivOp>(user)) {
      if (div.getRhs() != root)
        return {};
      if (div.getLhs() == x)
        return div.getResult();
      if (!literals.is(div.getLhs(), 1.0))
        return {};
      literal(div.getLhs());
      reciprocal = div.getResult();
    } else if (auto inverse = dyn_cast_or_null<ReciprocalOp>(user)) {
      reciprocal = inverse.getResult();
    } else {
      return {};
    }
    ops.push_back(user);
    auto product = dyn_cast_or_null<MulOp>(onlyUser(reciprocal));
    if (!product || (product.getLhs() != x && product.getRhs() != x))
      return {};
    return product.getResult();
  }

  /// Records a literal that a match consumes: a constant goes with the ops
  /// replaced (a parameter stays: it names a model input).
  void literal(Value value) {
    if (auto constant = value.getDefiningOp<ConstantOp>())
      ops.push_back(constant);
  }

  const Literals &literals;
  SmallVector<Operation *> ops;
};
} // namespace

FailureOr<int> recognizeRmsNorm(func::FuncOp function,
                                const AutodiffOptions &training) {
  FailureOr<Literals> literals = Literals::of(function, training);
  if (failed(literals))
    return failure();
  SmallVector<ReduceMeanOp> means;
  function.walk([&](ReduceMeanOp op) { means.push_back(op); });
  int recognized = 0;
  for (ReduceMeanOp mean : means) {
    std::optional<RmsNormMatch> found = RmsNormMatcher(*literals).match(mean);
    if (!found)
      continue;
    Operation *last = found->result.getDefiningOp();
    OpBuilder builder(last);
    auto norm =
        builder.create<RmsNormOp>(last->getLoc(), found->input, found->scale,
                                  builder.getI64IntegerAttr(found->axis),
                                  builder.getF64FloatAttr(found->epsilon));
    found->result.replaceAllUsesWith(norm.getOutput());
    last->erase();
    eraseReplaced(found->replaced);
    ++recognized;
  }
  return recognized;
}

namespace {
struct RecognizeRmsNormPass
    : kiln::impl::KilnRecognizeRmsNormBase<RecognizeRmsNormPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(recognizeRmsNorm(getOperation(), {"", train, freeze})))
      signalPassFailure();
  }
};
} // namespace

} // namespace kiln
