//===- ActivationImporters.cpp - ONNX activation functions ----------------===//
//
// Activations that kiln builds from its elementwise ops: LeakyRelu, PRelu,
// Elu, Selu, Celu, HardSigmoid, HardSwish, Softsign, ThresholdedRelu,
// Shrink, Softplus and Mish.
//
//===----------------------------------------------------------------------===//

#include "Activations.h"

using namespace mlir;

namespace kiln {
namespace activations {

Value below(OpChain &ops, Value x, double threshold, Value ifBelow,
            Value otherwise, bool inclusive) {
  return ops.select(
      ops.compare(inclusive ? ComparePredicate::LE : ComparePredicate::LT, x,
                  ops.constant(threshold)),
      ifBelow, otherwise);
}

Value leakyRelu(OpChain &ops, Value x, double alpha) {
  return below(ops, x, 0.0, ops.mul(x, ops.constant(alpha)), x);
}

Value expm1Scaled(OpChain &ops, Value x, double alpha, double scale) {
  Value scaled = scale == 1.0 ? x : ops.mul(x, ops.constant(1.0 / scale));
  return ops.mul(ops.sub(ops.unary<ExpOp>(scaled), ops.constant(1.0)),
                 ops.constant(alpha));
}

Value elu(OpChain &ops, Value x, double alpha) {
  return below(ops, x, 0.0, expm1Scaled(ops, x, alpha, 1.0), x);
}

Value hardSigmoid(OpChain &ops, Value x, double alpha, double beta) {
  Value linear = ops.add(ops.mul(x, ops.constant(alpha)), ops.constant(beta));
  return ops.max(ops.min(linear, ops.constant(1.0)), ops.constant(0.0));
}

Value softsign(OpChain &ops, Value x) {
  return ops.div(x, ops.add(ops.unary<AbsOp>(x), ops.constant(1.0)));
}

Value softplus(OpChain &ops, Value x) {
  Value tail = ops.unary<LogOp>(
      ops.add(ops.unary<ExpOp>(ops.unary<NegOp>(ops.unary<AbsOp>(x))),
              ops.constant(1.0)));
  return ops.add(ops.unary<ReluOp>(x), tail);
}

Value thresholdedRelu(OpChain &ops, Value x, double alpha, bool keepAlpha) {
  return below(ops, x, alpha, ops.constant(0.0), x, /*inclusive=*/!keepAlpha);
}

} // namespace activations

using namespace activations;

/// Imports a one-input activation: `build` composes it on an OpChain of the
/// input's element type.
template <typename Build>
static LogicalResult importActivation(NodeContext &node, Build build) {
  if (failed(node.requireInputs(1)))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  Value result = build(ops, node.input(0));
  return result ? node.setResult(result) : failure();
}

static LogicalResult importLeakyRelu(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 0.01);
  if (failed(alpha))
    return failure();
  return importActivation(
      node, [&](OpChain &ops, Value x) { return leakyRelu(ops, x, *alpha); });
}

/// PRelu: x < 0 ? slope * x : x, the slope broadcasting to x.
static LogicalResult importPRelu(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  return importActivation(node, [&](OpChain &ops, Value x) {
    return below(ops, x, 0.0, ops.mul(x, node.input(1)), x);
  });
}

static LogicalResult importElu(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 1.0);
  if (failed(alpha))
    return failure();
  return importActivation(
      node, [&](OpChain &ops, Value x) { return elu(ops, x, *alpha); });
}

/// Selu: gamma * (x <= 0 ? alpha * (exp(x) - 1) : x).
static LogicalResult importSelu(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 1.67326319217681884765625);
  FailureOr<double> gamma = node.floatAttr("gamma", 1.05070102214813232421875);
  if (failed(alpha) || failed(gamma))
    return failure();
  return importActivation(node, [&](OpChain &ops, Value x) {
    return ops.mul(below(ops, x, 0.0, expm1Scaled(ops, x, *alpha, 1.0), x,
                         /*inclusive=*/true),
                   ops.constant(*gamma));
  });
}

/// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
static LogicalResult importCelu(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 1.0);
  if (failed(alpha))
    return failure();
  return importActivation(node, [&](OpChain &ops, Value x) {
    return ops.add(
        ops.max(x, ops.constant(0.0)),
        ops.min(expm1Scaled(ops, x, *alpha, *alpha), ops.constant(0.0)));
  });
}

static LogicalResult importHardSigmoid(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 0.2);
  FailureOr<double> beta = node.floatAttr("beta", 0.5);
  if (failed(alpha) || failed(beta))
    return failure();
  return importActivation(node, [&](OpChain &ops, Value x) {
    return hardSigmoid(ops, x, *alpha, *beta);
  });
}

static LogicalResult importHardSwish(NodeContext &node) {
  return importActivation(node, [&](OpChain &ops, Value x) {
    return ops.mul(x, hardSigmoid(ops, x, 1.0 / 6.0, 0.5));
  });
}

static LogicalResult importSoftsign(NodeContext &node) {
  return importActivation(node, softsign);
}

static LogicalResult importThresholdedRelu(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", 1.0);
  if (failed(alpha))
    return failure();
  return importActivation(node, [&](OpChain &ops, Value x) {
    return thresholdedRelu(ops, x, *alpha);
  });
}

/// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
static LogicalResult importShrink(NodeContext &node) {
  FailureOr<double> lambd = node.floatAttr("lambd", 0.5);
  FailureOr<double> bias = node.floatAttr("bias", 0.0);
  if (failed(lambd) || failed(bias))
    return failure();
  return importActivation(node, [&](OpChain &ops, Value x) {
    Value inside = below(ops, x, *lambd, ops.constant(0.0),
                         ops.sub(x, ops.constant(*bias)), /*inclusive=*/true);
    return below(ops, x, -*lambd, ops.add(x, ops.constant(*bias)), inside);
  });
}

static LogicalResult importSoftplus(NodeContext &node) {
  return importActivation(node, softplus);
}

/// Mish (opset 18): x * tanh(softplus(x)).
static LogicalResult importMish(NodeContext &node) {
  return importActivation(node, [&](OpChain &ops, Value x) {
    return ops.mul(x, ops.unary<TanhOp>(softplus(ops, x)));
  });
}

void registerActivationImporters(OpImporterTable &table) {
  table.add("LeakyRelu", importLeakyRelu);
  table.add("PRelu", importPRelu);
  table.add("Elu", importElu);
  table.add("Selu", importSelu);
  table.add("Celu", importCelu);
  table.add("HardSigmoid", importHardSigmoid);
  table.add("HardSwish", importHardSwish);
  table.add("Softsign", importSoftsign);
  table.add("ThresholdedRelu", importThresholdedRelu);
  table.add("Softplus", importSoftplus);
  table.add("Mish", importMish);
  table.add("Shrink", importShrink);
}

} // namespace kiln
