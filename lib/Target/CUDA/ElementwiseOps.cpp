//===- ElementwiseOps.cpp - elementwise ops as element lambdas ------------===//
//
// Operands broadcast to the result's shape (NumPy) by index arithmetic;
// every result is rounded to its element type, as the interpreter rounds.
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::cuda {

namespace {
/// Emits one elementwise op: `operand(n)` reads operand n at the result's
/// index, `returns(expr)` defines the result as `expr` rounded to its type.
struct ElementwiseEmitter {
  KernelWriter &writer;
  Value value;
  bool nested;
  Operation *op = value.getDefiningOp();
  Type type = elementTypeOf(value);

  FailureOr<std::string> operand(unsigned n) {
    Value v = op->getOperand(n);
    return writer.at(v, broadcastIndex(v, shapeOf(value), "i"), nested);
  }
  std::string operandType(unsigned n) {
    return computeType(elementTypeOf(op->getOperand(n)));
  }
  /// Declarations binding the operands to `names` (in order), as their
  /// computation type or as floats.
  FailureOr<std::string> bind(ArrayRef<const char *> names, bool asFloats) {
    std::string body;
    for (auto [n, name] : llvm::enumerate(names)) {
      FailureOr<std::string> x = operand(n);
      if (failed(x))
        return failure();
      body += "    const " + (asFloats ? "float" : operandType(n)) + " " +
              name + " = " + (asFloats ? "(float)" : "") + *x + ";\n";
    }
    return body;
  }
  /// Defines the result from its operands bound to `names` (in order).
  FailureOr<std::string> returns(ArrayRef<const char *> names,
                                 const std::string &expr) {
    FailureOr<std::string> body = bind(names, /*asFloats=*/false);
    if (failed(body))
      return failure();
    return writer.define(value, nested,
                         *body + "    return " + rounded(type, expr) + ";\n");
  }
  FailureOr<std::string> unary(const std::string &expr) {
    return returns({"x"}, expr);
  }
  FailureOr<std::string> binary(const std::string &expr) {
    return returns({"a", "b"}, expr);
  }
  bool isFloat() { return isa<FloatType>(type); }
  /// Whether every operand is a float exactly (an f32, bf16 or f16 value;
  /// every value is rounded to its type).
  bool operandsAreFloats() {
    return llvm::all_of(op->getOperandTypes(), [](Type t) {
      Type element = getElementTypeOrSelf(t);
      return element.isF32() || element.isBF16() || element.isF16();
    });
  }
  /// `expr` of float operands bound to `names` in f32, whose one rounding
  /// of the exact result is the double computation's rounded to f32: for
  /// +, -, *, / and sqrt, rounding to 53 bits first and then to 24 changes
  /// nothing (53 >= 2 * 24 + 2). The operands' conversions from the
  /// doubles their lambdas return fold into the floats those hold. `expr`
  /// uses the _rn intrinsics, which are never contracted into an FMA (one
  /// rounding for two).
  FailureOr<std::string> inFloat(ArrayRef<const char *> names,
                                 const std::string &expr) {
    FailureOr<std::string> body = bind(names, /*asFloats=*/true);
    if (failed(body))
      return failure();
    return writer.define(value, nested,
                         *body + "    return (double)" + expr + ";\n");
  }
  /// A binary op `expr` of doubles a and b, or `intrinsic` of floats where
  /// an f32 result of float operands rounds alike in f32 (inFloat).
  FailureOr<std::string> binary(const std::string &expr,
                                const char *intrinsic) {
    if (type.isF32() && operandsAreFloats())
      return inFloat({"a", "b"}, std::string(intrinsic) + "(a, b)");
    return binary(expr);
  }
};
} // namespace

static unsigned bitWidth(Type type) { return type.getIntOrFloatBitWidth(); }

static std::string castExpr(Type from, Type to) {
  bool fromFloat = isa<FloatType>(from), toFloat = isa<FloatType>(to);
  if (to.isInteger(1))
    return fromFloat ? "x != 0.0" : "x != 0";
  if (fromFloat && !toFloat) // toward zero; NaN to 0; saturating
    return "x != x ? (i64)0 : x >= 9.2233720368547758e18 ? "
           "(i64)9223372036854775807ll"
           " : x <= -9.2233720368547758e18 ? (-9223372036854775807ll - 1) : "
           "(i64)x";
  return toFloat ? "(double)x" : "(i64)x";
}

/// The key of a random draw: its seed, mixed with its offset if it has one
/// (read from memory).
static FailureOr<std::string> randomKey(KernelWriter &writer, int64_t seed,
                                        Value offset, bool nested) {
  std::string key = "random_key(" + std::to_string(seed) + "ll";
  if (!offset)
    return key + ")";
  FailureOr<std::string> at = writer.at(offset, "0", nested);
  if (failed(at))
    return failure();
  return key + ", " + *at + ")";
}

/// `value`, element i of which is `shift + factor * draw(key, i)`.
static FailureOr<std::string> emitDraw(KernelWriter &writer, Value value,
                                       bool nested, int64_t seed, Value offset,
                                       double shift, double factor,
                                       StringRef draw) {
  FailureOr<std::string> key = randomKey(writer, seed, offset, nested);
  if (failed(key))
    return failure();
  std::string x = literal(shift) + " + " + literal(factor) + " * " +
                  draw.str() + "(" + *key + ", i)";
  return writer.define(value, nested,
                       "    return " + rounded(getElementTypeOrSelf(value), x) +
                           ";\n");
}

FailureOr<std::string> emitElementwise(KernelWriter &writer, Value value,
                                       bool nested, bool &handled) {
  ElementwiseEmitter e{writer, value, nested};
  handled = true;
  auto gelu = [](GeluApproximation a, const char *tanhForm,
                 const char *erfForm) {
    return std::string(a == GeluApproximation::Tanh ? tanhForm : erfForm);
  };
  return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(e.op)
      .Case([&](ConstantOp c) -> FailureOr<std::string> {
        // Dense constants are read from memory (KernelWriter::lambda).
        auto splat = cast<DenseElementsAttr>(c.getValue());
        std::string x =
            e.isFloat()
                ? literal(splat.getSplatValue<APFloat>().convertToDouble())
                : literal(splat.getSplatValue<APInt>().getSExtValue());
        return writer.define(value, nested,
                             "    return " + rounded(e.type, x) + ";\n");
      })
      .Case([&](RangeOp r) {
        std::string x = literal(r.getStart().convertToDouble()) +
                        " + (double)i * " +
                        literal(r.getStep().convertToDouble());
        return writer.define(
            value, nested,
            "    return " +
                rounded(e.type, e.isFloat() ? x : "(i64)(" + x + ")") + ";\n");
      })
      .Case([&](NegOp) { return e.unary("-x"); })
      .Case([&](AbsOp) {
        return e.unary(e.isFloat() ? "fabs(x)" : "(x < 0 ? -x : x)");
      })
      .Case([&](SignOp) { return e.unary("(x > 0) - (x < 0)"); })
      .Case([&](ExpOp) { return e.unary("exp(x)"); })
      .Case([&](LogOp) { return e.unary("log(x)"); })
      .Case([&](TanhOp) { return e.unary("tanh(x)"); })
      .Case([&](ErfOp) { return e.unary("erf(x)"); })
      .Case([&](SigmoidOp) { return e.unary("1.0 / (1.0 + exp(-x))"); })
      .Case([&](SiluOp) { return e.unary("x / (1.0 + exp(-x))"); })
      .Case([&](ReluOp) { return e.unary("(x > 0.0 || x != x) ? x : 0.0"); })
      .Case([&](SinOp) { return e.unary("sin(x)"); })
      .Case([&](CosOp) { return e.unary("cos(x)"); })
      .Case([&](TanOp) { return e.unary("tan(x)"); })
      .Case([&](AsinOp) { return e.unary("asin(x)"); })
      .Case([&](AcosOp) { return e.unary("acos(x)"); })
      .Case([&](AtanOp) { return e.unary("atan(x)"); })
      .Case([&](SinhOp) { return e.unary("sinh(x)"); })
      .Case([&](CoshOp) { return e.unary("cosh(x)"); })
      .Case([&](AsinhOp) { return e.unary("asinh(x)"); })
      .Case([&](AcoshOp) { return e.unary("acosh(x)"); })
      .Case([&](AtanhOp) { return e.unary("atanh(x)"); })
      .Case([&](SqrtOp) {
        if (e.type.isF32() && e.operandsAreFloats())
          return e.inFloat({"x"}, "__fsqrt_rn(x)");
        return e.unary("sqrt(x)");
      })
      .Case([&](RsqrtOp) { return e.unary("1.0 / sqrt(x)"); })
      .Case([&](ReciprocalOp) { return e.unary("1.0 / x"); })
      .Case([&](FloorOp) { return e.unary("floor(x)"); })
      .Case([&](CeilOp) { return e.unary("ceil(x)"); })
      .Case([&](RoundOp) { return e.unary("rint(x)"); })
      .Case([&](NotOp) { return e.unary(e.type.isInteger(1) ? "!x" : "~x"); })
      .Case([&](IsNanOp) { return e.unary("x != x"); })
      .Case([&](IsInfOp o) {
        std::string pos = o.getDetectPositive() ? "x == (1.0 / 0.0)" : "false";
        std::string neg = o.getDetectNegative() ? "x == (-1.0 / 0.0)" : "false";
        return e.unary(pos + " || " + neg);
      })
      .Case([&](GeluOp g) {
        return e.unary(
            gelu(g.getApproximation(), "gelu_tanh(x)", "gelu_erf(x)"));
      })
      .Case([&](GeluGradOp g) {
        return e.binary(gelu(g.getApproximation(), "gelu_tanh_grad(a) * b",
                             "gelu_erf_grad(a) * b"));
      })
      .Case([&](CastOp c) -> FailureOr<std::string> {
        // Widening a float changes no value: the operand's lambda, so that
        // statistics of both (the loss's log-sum-exps of widened logits,
        // the gradient's of the logits) are computed once.
        if (c.widensExactly()) {
          FailureOr<std::string> x = writer.lambda(c.getInput(), nested);
          if (failed(x))
            return failure();
          return writer.alias(value, nested, *x);
        }
        // An f32 erf GELU, or its derivative scaling a gradient, that only
        // this cast to 16 bits reads (a GELU between two 16-bit GEMMs, and
        // backward its gradient): in f32 where that rounds alike
        // (rounded_gelu_erf, rounded_gelu_erf_grad), not in double.
        Operation *erfGelu = c.getInput().getDefiningOp();
        auto gelu = dyn_cast_or_null<GeluOp>(erfGelu);
        auto geluGrad = dyn_cast_or_null<GeluGradOp>(erfGelu);
        if (((gelu && gelu.getApproximation() == GeluApproximation::None) ||
             (geluGrad &&
              geluGrad.getApproximation() == GeluApproximation::None)) &&
            elementTypeOf(erfGelu->getResult(0)).isF32() &&
            erfGelu->hasOneUse() && (e.type.isBF16() || e.type.isF16())) {
          std::string arguments;
          for (Value operand : erfGelu->getOperands()) {
            FailureOr<std::string> x = writer.at(
                operand,
                broadcastIndex(operand, shapeOf(erfGelu->getResult(0)), "i"),
                nested);
            if (failed(x))
              return failure();
            arguments += (arguments.empty() ? "" : ", ") + *x;
          }
          std::string call =
              gelu ? "rounded_gelu_erf<" : "rounded_gelu_erf_grad<";
          return writer.define(value, nested,
                               "    return " + call +
                                   (e.type.isBF16() ? "Bf16" : "F16") + ">(" +
                                   arguments + ");\n");
        }
        // A float narrowed to 16 bits: its bits rounded to nearest even, as
        // round_bf16 (round_f16) rounds the same value as a double, in a
        // few integer instructions instead of some twenty.
        if ((e.type.isBF16() || e.type.isF16()) && e.operandsAreFloats())
          return e.inFloat({"x"}, e.type.isBF16()
                                      ? "bf16_to_f32(f32_to_bf16(x))"
                                      : "f16_to_f32(f32_to_f16(x))");
        return e.unary(castExpr(elementTypeOf(c.getInput()), e.type));
      })
      .Case([&](AddOp) { return e.binary("a + b", "__fadd_rn"); })
      .Case([&](SubOp) { return e.binary("a - b", "__fsub_rn"); })
      .Case([&](MulOp) { return e.binary("a * b", "__fmul_rn"); })
      .Case([&](DivOp) {
        if (!e.isFloat())
          return e.binary("b == 0 ? (i64)0 : a / b");
        return e.binary("a / b", "__fdiv_rn");
      })
      .Case([&](PowOp) { return e.binary("pow((double)a, (double)b)"); })
      .Case([&](MaxOp) {
        return e.binary(e.isFloat() ? "kiln_max(a, b)" : "a > b ? a : b");
      })
      .Case([&](MinOp) {
        return e.binary(e.isFloat() ? "kiln_min(a, b)" : "a < b ? a : b");
      })
      .Case([&](RemainderOp r) {
        std::string m =
            e.isFloat() ? "fmod(a, b)" : "(b == 0 ? (i64)0 : a % b)";
        if (!r.getFloored())
          return e.binary(m);
        // The sign of the divisor, as Python's %.
        return e.binary(
            "[&] { auto m = " + m +
            "; return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m; }()");
      })
      .Case([&](AndOp) { return e.binary("a & b"); })
      .Case([&](OrOp) { return e.binary("a | b"); })
      .Case([&](XorOp) { return e.binary("a ^ b"); })
      .Case([&](ShiftLeftOp) {
        return e.binary("(b < 0 || b >= " + std::to_string(bitWidth(e.type)) +
                        ") ? (i64)0 : (i64)((unsigned long long)a << b)");
      })
      .Case([&](ShiftRightOp) {
        unsigned bits = bitWidth(e.type);
        std::string width = std::to_string(bits);
        if (!e.type.isUnsignedInteger() && !e.type.isInteger(1))
          return e.binary("(b < 0 || b >= " + width +
                          ") ? (a < 0 ? (i64)-1 : (i64)0) : a >> b");
        std::string pattern =
            bits == 64
                ? "(unsigned long long)a"
                : "((unsigned long long)a & ((1ull << " + width + ") - 1))";
        return e.binary("(b < 0 || b >= " + width + ") ? (i64)0 : (i64)(" +
                        pattern + " >> b)");
      })
      .Case([&](CompareOp c) {
        static const char *predicates[] = {"a == b", "a != b", "a < b",
                                           "a <= b", "a > b",  "a >= b"};
        return e.binary(predicates[static_cast<int>(c.getPredicate())]);
      })
      .Case([&](WhereOp) {
        return e.returns({"c", "t", "f"}, "c ? t : f");
      })
      .Case([&](FakeQuantizeOp f) {
        std::string level =
            "rint(" + rounded(e.type, "x * " + rounded(e.type, "1.0 / s")) +
            ") + z";
        return e.returns(
            {"x", "s", "z"},
            "(kiln_min(kiln_max(" + level + ", " +
                literal(f.getQuantMin().convertToDouble()) + "), " +
                literal(f.getQuantMax().convertToDouble()) + ") - z) * s");
      })
      .Case([&](DropoutOp d) -> FailureOr<std::string> {
        FailureOr<std::string> key =
            randomKey(writer, d.getSeed(), d.getOffset(), nested);
        if (failed(key))
          return failure();
        double ratio = d.getRatio().convertToDouble();
        std::string keep =
            "dropout_keep(" + *key + ", i, " + literal(ratio) + ")";
        if (value == d.getMask())
          return writer.define(value, nested, "    return " + keep + ";\n");
        return e.unary(keep + " ? x * " + literal(1.0 / (1.0 - ratio)) +
                       " : 0.0");
      })
      .Case([&](RandomUniformOp r) {
        double low = r.getLow().convertToDouble();
        return emitDraw(writer, value, nested, r.getSeed(), r.getOffset(), low,
                        r.getHigh().convertToDouble() - low, "random_uniform");
      })
      .Case([&](RandomNormalOp r) {
        return emitDraw(writer, value, nested, r.getSeed(), r.getOffset(),
                        r.getMean().convertToDouble(),
                        r.getScale().convertToDouble(), "random_normal");
      })
      .Default([&](Operation *) -> FailureOr<std::string> {
        handled = false;
        return failure();
      });
}

} // namespace kiln::cuda
