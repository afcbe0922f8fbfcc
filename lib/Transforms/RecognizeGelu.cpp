//===- RecognizeGelu.cpp - GELU spelled out op by op becomes kiln.gelu ----===//
//
// Exporters write GELU as the arithmetic of its formula (GPT-2's tanh form,
// BLOOM's with the polynomial factored, BERT's erf form under TorchScript):
//
//   0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//   x * 0.5 * (1 + tanh(sqrt(2/pi) * x * (1 + 0.044715 * x^2)))
//   x * 0.5 * (1 + erf(x / sqrt(2)))
//
// As one kiln.gelu it is one elementwise op whose gradient needs only x,
// instead of eight ops whose intermediates the backward pass keeps, and a
// cuBLASLt GELU epilogue can apply it. The factors may appear in any order
// of the commutative ops, as constants or as literals dynamo lifted into
// scalar initializers; every intermediate must have no other use.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/RecognizeGelu.h"

#include "PatternSupport.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_KILNRECOGNIZEGELU
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {

namespace {
/// Matches the ops of one GELU, collecting those it replaces.
class GeluMatcher {
public:
  explicit GeluMatcher(const Literals &literals) : literals(literals) {}

  /// If `value` is a single-use commutative `OpTy` of the literal
  /// `constant` and another value, that other value (else null).
  template <typename OpTy> Value operandBeside(Value value, double constant) {
    auto op = value.getDefiningOp<OpTy>();
    if (!op || !value.hasOneUse())
      return {};
    for (auto [a, b] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())})
      if (isLiteral(b, constant)) {
        ops.push_back(op);
        return a;
      }
    return {};
  }

  /// `x` if `value` is x^3 (pow(x, 3) or x * x * x, single use).
  Value cubeOf(Value value) {
    if (Value x = operandBeside<PowOp>(value, 3.0))
      return x;
    auto outer = value.getDefiningOp<MulOp>();
    if (!outer || !value.hasOneUse())
      return {};
    for (auto [a, b] : {std::pair(outer.getLhs(), outer.getRhs()),
                        std::pair(outer.getRhs(), outer.getLhs())})
      if (auto square = a.getDefiningOp<MulOp>();
          square && a.hasOneUse() && square.getLhs() == square.getRhs() &&
          square.getLhs() == b) {
        ops.append({outer, square});
        return b;
      }
    return {};
  }

  /// `x` if `value` is 0.044715 * x^2 ((x * c) * x or c * (x * x)).
  Value squareTermOf(Value value) {
    auto outer = value.getDefiningOp<MulOp>();
    if (!outer || !value.hasOneUse())
      return {};
    for (auto [a, b] : {std::pair(outer.getLhs(), outer.getRhs()),
                        std::pair(outer.getRhs(), outer.getLhs())}) {
      size_t mark = ops.size();
      if (Value x = operandBeside<MulOp>(a, 0.044715); x && x == b) {
        ops.push_back(outer);
        return x;
      }
      ops.resize(mark);
      auto square = b.getDefiningOp<MulOp>();
      if (square && b.hasOneUse() && square.getLhs() == square.getRhs() &&
          isLiteral(a, 0.044715)) {
        ops.append({outer, square});
        return square.getLhs();
      }
      ops.resize(mark);
    }
    return {};
  }

  /// `x` if `value` is BLOOM's tanh argument, (c * x) * (1 + 0.044715 *
  /// x^2) with c = sqrt(2/pi) (0.79788456), the same polynomial factored.
  Value factoredTanhArgumentOf(Value value) {
    auto product = value.getDefiningOp<MulOp>();
    if (!product || !value.hasOneUse())
      return {};
    for (auto [scaled, sum] : {std::pair(product.getLhs(), product.getRhs()),
                               std::pair(product.getRhs(), product.getLhs())}) {
      size_t mark = ops.size();
      Value x = operandBeside<MulOp>(scaled, std::sqrt(2.0 / M_PI));
      Value square = x ? operandBeside<AddOp>(sum, 1.0) : Value();
      if (square && squareTermOf(square) == x) {
        ops.push_back(product);
        return x;
      }
      ops.resize(mark);
    }
    return {};
  }

  /// `x` if `value` is the argument of tanh in the tanh form.
  Value tanhArgumentOf(Value value) {
    if (Value x = factoredTanhArgumentOf(value))
      return x;
    Value sum = operandBeside<MulOp>(value, std::sqrt(2.0 / M_PI));
    auto add = sum ? sum.getDefiningOp<AddOp>() : AddOp();
    if (!add || !sum.hasOneUse())
      return {};
    for (auto [x, cubic] : {std::pair(add.getLhs(), add.getRhs()),
                            std::pair(add.getRhs(), add.getLhs())}) {
      size_t mark = ops.size();
      Value cube = operandBeside<MulOp>(cubic, 0.044715);
      if (cube && cubeOf(cube) == x) {
        ops.push_back(add);
        return x;
      }
      ops.resize(mark);
    }
    return {};
  }

  /// `x` and the form if `value` is erf(x / sqrt(2)) or tanh(...).
  std::optional<std::pair<Value, GeluApproximation>> innerOf(Value value) {
    if (!value.hasOneUse())
      return std::nullopt;
    if (auto erf = value.getDefiningOp<ErfOp>()) {
      Value scaled = erf.getInput();
      Value x;
      if (auto div = scaled.getDefiningOp<DivOp>();
          div && scaled.hasOneUse() && isLiteral(div.getRhs(), M_SQRT2)) {
        ops.push_back(div);
        x = div.getLhs();
      } else {
        x = operandBeside<MulOp>(scaled, M_SQRT1_2);
      }
      if (!x)
        return std::nullopt;
      ops.push_back(erf);
      return std::pair(x, GeluApproximation::None);
    }
    if (auto tanh = value.getDefiningOp<TanhOp>()) {
      Value x = tanhArgumentOf(tanh.getInput());
      if (!x)
        return std::nullopt;
      ops.push_back(tanh);
      return std::pair(x, GeluApproximation::Tanh);
    }
    return std::nullopt;
  }

  /// Matches a GELU ending at `product` (the last multiplication): either
  /// (x * 0.5) * (1 + inner) or (x * (1 + inner)) * 0.5, in any order.
  std::optional<std::pair<Value, GeluApproximation>> match(MulOp product) {
    for (auto [a, b] : {std::pair(product.getLhs(), product.getRhs()),
                        std::pair(product.getRhs(), product.getLhs())}) {
      ops.clear();
      // (x * 0.5) * (1 + inner)
      if (Value x = operandBeside<MulOp>(a, 0.5))
        if (auto found = onePlusInner(b); found && found->first == x)
          return found;
      ops.clear();
      // (x * (1 + inner)) * 0.5
      if (isLiteral(b, 0.5))
        if (auto inner = a.getDefiningOp<MulOp>(); inner && a.hasOneUse())
          for (auto [x, sum] : {std::pair(inner.getLhs(), inner.getRhs()),
                                std::pair(inner.getRhs(), inner.getLhs())}) {
            size_t mark = ops.size();
            if (auto found = onePlusInner(sum); found && found->first == x) {
              ops.push_back(inner);
              return found;
            }
            ops.resize(mark);
          }
    }
    return std::nullopt;
  }

  /// The ops the match replaces (the last multiplication excluded).
  SmallVector<Operation *> ops;

private:
  /// Whether `value` is the literal `expected`; a constant joins the ops
  /// replaced (a parameter stays: it names a model input).
  bool isLiteral(Value value, double expected) {
    if (!literals.is(value, expected))
      return false;
    if (auto constant = value.getDefiningOp<ConstantOp>())
      ops.push_back(constant);
    return true;
  }

  std::optional<std::pair<Value, GeluApproximation>> onePlusInner(Value value) {
    Value inner = operandBeside<AddOp>(value, 1.0);
    return inner ? innerOf(inner) : std::nullopt;
  }

  const Literals &literals;
};
} // namespace

FailureOr<int> recognizeGelu(func::FuncOp function,
                             const AutodiffOptions &training) {
  FailureOr<Literals> literals = Literals::of(function, training);
  if (failed(literals))
    return failure();
  SmallVector<MulOp> products;
  function.walk([&](MulOp op) { products.push_back(op); });
  int recognized = 0;
  for (MulOp product : products) {
    if (!product->getBlock())
      continue; // erased as part of an earlier match
    GeluMatcher matcher(*literals);
    std::optional<std::pair<Value, GeluApproximation>> found =
        matcher.match(product);
    if (!found || found->first.getType() != product.getType())
      continue;
    OpBuilder builder(product);
    Value gelu =
        builder.create<GeluOp>(product.getLoc(), found->first, found->second);
    product.getResult().replaceAllUsesWith(gelu);
    product.erase();
    eraseReplaced(matcher.ops);
    ++recognized;
  }
  return recognized;
}

namespace {
struct RecognizeGeluPass
    : kiln::impl::KilnRecognizeGeluBase<RecognizeGeluPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(recognizeGelu(getOperation(), {"", train, freeze})))
      signalPassFailure();
  }
};
} // namespace

} // namespace kiln
