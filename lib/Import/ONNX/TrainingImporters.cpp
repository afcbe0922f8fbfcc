//===- TrainingImporters.cpp - ai.onnx.preview.training optimizers --------===//
//
// ONNX's training ops of the domain ai.onnx.preview.training: Gradient, by
// kiln's autodiff, and the optimizers Adagrad, Momentum and Adam, as the
// elementwise kiln ops their
// specification spells out. They differ from PyTorch's optimizers (an L2
// `norm_coefficient` instead of decoupled decay; Adam's step size folded in
// differently), so they are not mapped to kiln.adamw and friends. Each takes
// R (learning rate) and T (update count), then groups of tensors: X..., G...,
// and the state (H..., or V..., or V... H...).
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "kiln/Autodiff/Autodiff.h"

using namespace mlir;

namespace kiln {

namespace {
/// Elementwise arithmetic on one parameter's tensors.
struct Update {
  NodeContext &node;
  Type f;

  Value c(double v) { return node.scalar(v, f); }
  template <typename OpTy> Value op(Value a, Value b) {
    return *node.create1<OpTy>({a, b});
  }
  Value add(Value a, Value b) { return op<AddOp>(a, b); }
  Value sub(Value a, Value b) { return op<SubOp>(a, b); }
  Value mul(Value a, Value b) { return op<MulOp>(a, b); }
  Value div(Value a, Value b) { return op<DivOp>(a, b); }
  Value sqrt(Value a) {
    return *node.create1<SqrtOp>({a}, {}, {a.getType()});
  }
  /// A scalar (R, or the update count T) in the parameters' type.
  Value scalar(Value t) {
    return *node.create1<CastOp>(
        {t}, {}, {cast<RankedTensorType>(t.getType()).clone(f)});
  }
  /// `ifPositive` where T > 0, else `otherwise`.
  Value whenStarted(Value t, Value ifPositive, Value otherwise) {
    Value zero = node.scalar(0.0, cast<RankedTensorType>(t.getType()).getElementType());
    Value started = *node.create1<CompareOp>(
        {t, zero}, {node.builder.getNamedAttr(
                       "predicate", ComparePredicateAttr::get(
                                        node.builder.getContext(),
                                        ComparePredicate::GT))});
    return *node.create1<WhereOp>({started, ifPositive, otherwise});
  }
};
} // namespace

/// Checks the input layout R, T, then `groups` groups of n tensors, and the
/// shapes of each parameter's tensors; returns n.
static FailureOr<int> tensorsPerGroup(NodeContext &node, int groups) {
  int count = node.node.input_size() - 2;
  if (count <= 0 || count % groups != 0)
    return node.error("expects R, T and ") << groups
                                           << " groups of equally many tensors";
  if (failed(node.requireInputs(node.node.input_size())))
    return failure();
  if (node.inputRank(0) != 0 || node.inputRank(1) != 0)
    return node.error("R and T must be scalars");
  int n = count / groups;
  for (int g = 1; g < groups; ++g)
    for (int i = 0; i < n; ++i)
      if (node.inputType(2 + g * n + i) != node.inputType(2 + i))
        return node.error("tensor ") << i << " of group " << g
                                     << " does not have its parameter's type";
  Type parameters = node.inputType(2).getElementType();
  if (!isa<FloatType>(parameters))
    return node.error("parameters must be floating-point");
  // The parameters share one type (the schema's T3), in which the update
  // computes (Update's `f`); R may be another float type.
  for (int i = 3; i < 2 + n; ++i)
    if (node.inputType(i).getElementType() != parameters)
      return node.error("every parameter must have the first one's element "
                        "type");
  if (!isa<FloatType>(node.inputType(0).getElementType()))
    return node.error("R must be a floating-point scalar");
  if (!node.inputType(1).getElementType().isInteger(64))
    return node.error("T must be an int64 scalar");
  return n;
}

static LogicalResult importAdagrad(NodeContext &node) {
  FailureOr<double> decay = node.floatAttr("decay_factor", 0.0);
  FailureOr<double> epsilon = node.floatAttr("epsilon", 1e-6f);
  FailureOr<double> norm = node.floatAttr("norm_coefficient", 0.0);
  FailureOr<int> n = tensorsPerGroup(node, 3);
  if (failed(decay) || failed(epsilon) || failed(norm) || failed(n))
    return failure();
  Update u{node, node.inputType(2).getElementType()};
  Value r = u.scalar(node.input(0)), t = u.scalar(node.input(1));
  Value rate = u.div(r, u.add(u.c(1.0), u.mul(t, u.c(*decay))));
  for (int i = 0; i < *n; ++i) {
    Value x = node.input(2 + i), g = node.input(2 + *n + i);
    Value h = node.input(2 + 2 * *n + i);
    Value regularized = u.add(u.mul(u.c(*norm), x), g);
    Value hNew = u.add(h, u.mul(regularized, regularized));
    Value adaptive = u.add(u.sqrt(hNew), u.c(*epsilon));
    node.setOutput(i, u.sub(x, u.div(u.mul(rate, regularized), adaptive)));
    node.setOutput(*n + i, hNew);
  }
  return success();
}

static LogicalResult importMomentum(NodeContext &node) {
  FailureOr<double> alpha = node.floatAttr("alpha", std::nullopt);
  FailureOr<double> beta = node.floatAttr("beta", std::nullopt);
  FailureOr<double> norm = node.floatAttr("norm_coefficient", std::nullopt);
  FailureOr<std::string> mode = node.stringAttr("mode", std::nullopt);
  FailureOr<int> n = tensorsPerGroup(node, 3);
  if (failed(alpha) || failed(beta) || failed(norm) || failed(mode) || failed(n))
    return failure();
  if (*mode != "standard" && *mode != "nesterov")
    return node.error("mode must be 'standard' or 'nesterov', got '")
           << *mode << "'";
  Update u{node, node.inputType(2).getElementType()};
  Value r = u.scalar(node.input(0));
  Value betaAdjusted = u.whenStarted(node.input(1), u.c(*beta), u.c(1.0));
  for (int i = 0; i < *n; ++i) {
    Value x = node.input(2 + i), g = node.input(2 + *n + i);
    Value v = node.input(2 + 2 * *n + i);
    Value regularized = u.add(u.mul(u.c(*norm), x), g);
    Value vNew = u.add(u.mul(u.c(*alpha), v), u.mul(betaAdjusted, regularized));
    Value direction = *mode == "standard"
                          ? vNew
                          : u.add(regularized, u.mul(u.c(*alpha), vNew));
    node.setOutput(i, u.sub(x, u.mul(r, direction)));
    node.setOutput(*n + i, vNew);
  }
  return success();
}

static LogicalResult importAdam(NodeContext &node) {
  // Defaults as the schema stores them, in float.
  FailureOr<double> alpha = node.floatAttr("alpha", 0.9f);
  FailureOr<double> beta = node.floatAttr("beta", 0.999f);
  FailureOr<double> epsilon = node.floatAttr("epsilon", 1e-6f);
  FailureOr<double> norm = node.floatAttr("norm_coefficient", 0.0);
  FailureOr<double> post = node.floatAttr("norm_coefficient_post", 0.0);
  FailureOr<int> n = tensorsPerGroup(node, 4);
  if (failed(alpha) || failed(beta) || failed(epsilon) || failed(norm) ||
      failed(post) || failed(n))
    return failure();
  Update u{node, node.inputType(2).getElementType()};
  Value r = u.scalar(node.input(0)), t = u.scalar(node.input(1));
  // R * sqrt(1 - beta^T) / (1 - alpha^T) once T > 0.
  Value alphaT = u.op<PowOp>(u.c(*alpha), t), betaT = u.op<PowOp>(u.c(*beta), t);
  Value adjusted = u.div(u.mul(r, u.sqrt(u.sub(u.c(1.0), betaT))),
                         u.sub(u.c(1.0), alphaT));
  Value rate = u.whenStarted(node.input(1), adjusted, r);
  for (int i = 0; i < *n; ++i) {
    Value x = node.input(2 + i), g = node.input(2 + *n + i);
    Value v = node.input(2 + 2 * *n + i), h = node.input(2 + 3 * *n + i);
    Value regularized = u.add(u.mul(u.c(*norm), x), g);
    Value vNew = u.add(u.mul(u.c(*alpha), v),
                       u.mul(u.c(1.0 - *alpha), regularized));
    Value hNew = u.add(u.mul(u.c(*beta), h),
                       u.mul(u.c(1.0 - *beta), u.mul(regularized, regularized)));
    Value denominator = u.add(u.sqrt(hNew), u.c(*epsilon));
    Value xNew = u.sub(x, u.mul(rate, u.div(vNew, denominator)));
    node.setOutput(i, u.mul(u.c(1.0 - *post), xNew));
    node.setOutput(*n + i, vNew);
    node.setOutput(2 * *n + i, hNew);
  }
  return success();
}

/// Gradient: d(y)/d(x) for the graph values named by `xs`, where `y` names a
/// value computed before the node (a tensor y is seeded with ones, i.e. the
/// gradient of the sum of its elements). Built by kiln's autodiff rules.
static LogicalResult importGradient(NodeContext &node) {
  const onnx::AttributeProto *xs = node.attribute("xs");
  FailureOr<std::string> y = node.stringAttr("y", std::nullopt);
  if (failed(y))
    return failure();
  if (!xs || xs->type() != onnx::AttributeProto::STRINGS)
    return node.error("needs the attribute 'xs', a list of value names");
  Value target = node.valueNamed(*y);
  if (!target)
    return node.error("y names '") << *y << "', which no earlier node "
                                            "computes";
  if (!isa<FloatType>(cast<RankedTensorType>(target.getType()).getElementType()))
    return node.error("y must be floating-point");
  SmallVector<Value> sources;
  for (const std::string &name : xs->strings()) {
    Value x = node.valueNamed(name);
    if (!x)
      return node.error("xs names '") << name << "', which is not a value";
    sources.push_back(x);
  }
  FailureOr<SmallVector<Value>> grads =
      differentiate(node.builder, target, sources);
  if (failed(grads))
    return node.error("cannot differentiate '") << *y << "'";
  for (auto [i, grad] : llvm::enumerate(*grads))
    node.setOutput(i, grad ? grad
                           : node.splat(0.0, cast<RankedTensorType>(
                                                 sources[i].getType())));
  return success();
}

void registerTrainingImporters(OpImporterTable &table) {
  table.add("ai.onnx.preview.training.Gradient", importGradient);
  table.add("ai.onnx.preview.training.Adagrad", importAdagrad);
  table.add("ai.onnx.preview.training.Momentum", importMomentum);
  table.add("ai.onnx.preview.training.Adam", importAdam);
}

} // namespace kiln
