//===- RecognizeNorms.cpp - norms spelled out become one op ---------------===//
//
// Exporters spell out the norms an opset lacks as the arithmetic of their
// formulas: RMS norms below opset 23 (Llama, T5, Gemma), layer norms below
// opset 17 (and the hand-written LayerNorm of older BERT code):
//
//   x * (1 / sqrt(mean(x^2) + eps)) * scale           kiln.rms_norm
//   d / sqrt(mean(d^2) + eps) * scale + bias,         kiln.layer_norm
//     d = x - mean(x)
//
// the reciprocal also as a division or kiln.reciprocal, the means over the
// same trailing axes, kept, and the scale (Gemma's 1 + w too) and bias
// after the normalized value. As one op the norm is one kernel that reads
// each row once, whose gradient is another (instead of some eight ops whose
// intermediates the backward pass keeps, and their gradients' kernels, a
// mean's gradient spread over the row among them). No intermediate may be
// read outside the norm.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/RecognizeNorms.h"

#include "PatternSupport.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNRECOGNIZENORMS
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

namespace {
/// One norm spelled out: what kiln.rms_norm or kiln.layer_norm (when
/// `centered`) takes, the value it replaces and the ops that computed it
/// (the last excepted).
struct NormMatch {
  Value input, scale, bias;
  bool centered = false;
  int64_t axis = 0;
  double epsilon = 0.0;
  Value result;
  SmallVector<Operation *> replaced;
};

/// The first of `mean`'s axes if they are the trailing axes, kept.
std::optional<int64_t> trailingAxis(ReduceMeanOp mean) {
  ArrayRef<int64_t> axes = mean.getAxes();
  int64_t rank = shapeOf(mean.getInput()).size();
  if (!mean.getKeepDims() || axes.empty() || axes.back() != rank - 1 ||
      axes.size() != static_cast<size_t>(rank - axes.front()))
    return std::nullopt;
  return axes.front();
}

/// The other operand of the binary op `op` than `value`.
template <typename BinaryOp> Value otherOperand(BinaryOp op, Value value) {
  return op.getLhs() == value ? op.getRhs() : op.getLhs();
}

/// Matches the ops of one norm from its mean of squares.
class NormMatcher {
public:
  explicit NormMatcher(const Literals &literals) : literals(literals) {}

  std::optional<NormMatch> match(ReduceMeanOp variance) {
    NormMatch found;
    std::optional<int64_t> axis = trailingAxis(variance);
    if (!axis)
      return std::nullopt;
    found.axis = *axis;
    ops.push_back(variance);
    Value squaredValue = squared(variance.getInput());
    if (!squaredValue)
      return std::nullopt;
    found.input = squaredValue;
    if (Value x = centered(squaredValue, found.axis)) {
      found.input = x;
      found.centered = true;
    }
    // variance + eps, its square root, and the squared value divided by it
    // (or times its reciprocal).
    auto sum = dyn_cast_or_null<AddOp>(onlyUser(variance.getResult()));
    if (!sum)
      return std::nullopt;
    Value epsilon = otherOperand(sum, variance.getResult());
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
    Value normalized = dividedBy(squaredValue, root.getResult());
    Type type = found.input.getType();
    if (!normalized || normalized.getType() != type)
      return std::nullopt;
    found.result = normalized;
    // The scale, then (layer norms) the bias after it: tensors of the
    // normalized dimensions.
    if (auto scaled = dyn_cast_or_null<MulOp>(onlyUser(found.result))) {
      Value scale = otherOperand(scaled, found.result);
      if (isOfNormalizedShape(scale, found) && scaled.getType() == type) {
        ops.push_back(found.result.getDefiningOp());
        found.scale = scale;
        found.result = scaled.getResult();
      }
    }
    if (auto shifted = dyn_cast_or_null<AddOp>(onlyUser(found.result));
        shifted && found.centered) {
      Value bias = otherOperand(shifted, found.result);
      if (isOfNormalizedShape(bias, found) && shifted.getType() == type) {
        ops.push_back(found.result.getDefiningOp());
        found.bias = bias;
        found.result = shifted.getResult();
      }
    }
    if (!readOnlyWithin(found.result.getDefiningOp()))
      return std::nullopt;
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

  /// `x` if `value` is x - mean(x), the mean over the axes from `axis`.
  Value centered(Value value, int64_t axis) {
    auto difference = value.getDefiningOp<SubOp>();
    if (!difference)
      return {};
    auto mean = difference.getRhs().getDefiningOp<ReduceMeanOp>();
    if (!mean || mean.getInput() != difference.getLhs() ||
        trailingAxis(mean) != axis)
      return {};
    ops.append({difference, mean});
    return difference.getLhs();
  }

  /// Whether `value` is `numerator`, or computes it again (x - mean(x)
  /// written twice, as older BERT code does).
  bool isNumerator(Value value, Value numerator) {
    if (value == numerator)
      return true;
    auto again = value.getDefiningOp<SubOp>();
    auto difference = numerator.getDefiningOp<SubOp>();
    if (!again || !difference || again.getLhs() != difference.getLhs() ||
        again.getRhs() != difference.getRhs())
      return false;
    ops.push_back(again);
    return true;
  }

  /// `numerator` / root, as the one user of `root` computes it: a
  /// division, a product with 1 / root or with reciprocal(root) (the
  /// reciprocal used once); null if it is none of them.
  Value dividedBy(Value numerator, Value root) {
    Operation *user = onlyUser(root);
    Value reciprocal;
    if (auto div = dyn_cast_or_null<DivOp>(user)) {
      if (div.getRhs() != root)
        return {};
      if (isNumerator(div.getLhs(), numerator))
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
    if (!product || !isNumerator(otherOperand(product, reciprocal), numerator))
      return {};
    return product.getResult();
  }

  /// Whether `value` is a tensor of the normalized dimensions of `found`'s
  /// input, of its element type.
  static bool isOfNormalizedShape(Value value, const NormMatch &found) {
    auto type = cast<RankedTensorType>(value.getType());
    return type.getShape() == shapeOf(found.input).drop_front(found.axis) &&
           type.getElementType() == getElementTypeOrSelf(found.input);
  }

  /// Whether the results of the ops matched are read by those ops and
  /// `last` only (constants, which the norm no longer reads, aside).
  bool readOnlyWithin(Operation *last) const {
    llvm::SmallPtrSet<Operation *, 16> matched(ops.begin(), ops.end());
    matched.insert(last);
    return llvm::all_of(ops, [&](Operation *op) {
      return isa<ConstantOp>(op) ||
             llvm::all_of(op->getUsers(), [&](Operation *user) {
               return matched.contains(user);
             });
    });
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

/// Replaces `found`'s result with the norm it spells out.
void replace(NormMatch &found) {
  Operation *last = found.result.getDefiningOp();
  OpBuilder builder(last);
  IntegerAttr axis = builder.getI64IntegerAttr(found.axis);
  FloatAttr epsilon = builder.getF64FloatAttr(found.epsilon);
  Value norm =
      found.centered
          ? builder
                .create<LayerNormOp>(last->getLoc(), found.input, found.scale,
                                     found.bias, axis, epsilon)
                .getOutput()
          : builder
                .create<RmsNormOp>(last->getLoc(), found.input, found.scale,
                                   axis, epsilon)
                .getOutput();
  found.result.replaceAllUsesWith(norm);
  last->erase();
  eraseReplaced(found.replaced);
}
} // namespace

FailureOr<int> recognizeNorms(func::FuncOp function,
                              const AutodiffOptions &training) {
  FailureOr<Literals> literals = Literals::of(function, training);
  if (failed(literals))
    return failure();
  // In program order: a match erases no mean after its mean of squares.
  SmallVector<ReduceMeanOp> means;
  function.walk([&](ReduceMeanOp op) { means.push_back(op); });
  int recognized = 0;
  for (ReduceMeanOp mean : means) {
    if (std::optional<NormMatch> found = NormMatcher(*literals).match(mean)) {
      replace(*found);
      ++recognized;
    }
  }
  return recognized;
}

namespace {
struct RecognizeNormsPass
    : kiln::impl::KilnRecognizeNormsBase<RecognizeNormsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(recognizeNorms(getOperation(), {"", train, freeze})))
      signalPassFailure();
  }
};
} // namespace

} // namespace kiln
