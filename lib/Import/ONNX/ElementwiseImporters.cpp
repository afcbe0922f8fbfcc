//===- ElementwiseImporters.cpp - elementwise ONNX ops --------------------===//
//
// Unary math, broadcasting arithmetic, comparisons, logic, selection and
// casts.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "kiln/TensorIO/TensorFiles.h"

using namespace mlir;

namespace kiln {

/// Ops of one operand whose result has the operand's type.
template <typename OpTy> static LogicalResult importUnary(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  return node.setResult(
      node.create1<OpTy>({node.input(0)}, {}, {node.inputType(0)}));
}

template <typename OpTy> static LogicalResult importBinary(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  return node.setResult(
      node.create1<OpTy>({node.input(0), node.input(1)}));
}

/// BitShift: unsigned integers shifted toward the most (`direction` LEFT)
/// or least (RIGHT) significant bit.
static LogicalResult importBitShift(NodeContext &node) {
  FailureOr<std::string> direction = node.stringAttr("direction", std::nullopt);
  if (failed(node.requireInputs(2)) || failed(direction))
    return failure();
  if (!node.inputType(0).getElementType().isUnsignedInteger())
    return node.error("shifts unsigned integers, not ")
           << node.inputType(0).getElementType();
  if (*direction == "LEFT")
    return importBinary<ShiftLeftOp>(node);
  if (*direction == "RIGHT")
    return importBinary<ShiftRightOp>(node);
  return node.error("direction must be LEFT or RIGHT, got '")
         << *direction << "'";
}

/// Max, Min, Sum: any number of inputs, folded pairwise.
template <typename OpTy> static FailureOr<Value> foldVariadic(NodeContext &node) {
  if (failed(node.requireInputs(std::max(node.node.input_size(), 1))))
    return failure();
  Value acc = node.input(0);
  for (int i = 1; i < node.node.input_size(); ++i) {
    FailureOr<Value> next = node.create1<OpTy>({acc, node.input(i)});
    if (failed(next))
      return failure();
    acc = *next;
  }
  return acc;
}

template <typename OpTy> static LogicalResult importVariadic(NodeContext &node) {
  return node.setResult(
      foldVariadic<OpTy>(node));
}

static LogicalResult importMean(NodeContext &node) {
  FailureOr<Value> sum = foldVariadic<AddOp>(node);
  if (failed(sum))
    return failure();
  Type elementType = cast<RankedTensorType>(sum->getType()).getElementType();
  return node.setResult(node.create1<DivOp>(
      {*sum, node.scalar(node.node.input_size(), elementType)}));
}

static LogicalResult importPow(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  // The exponent may have another numeric type than the base.
  Value exponent = node.input(1);
  RankedTensorType base = node.inputType(0);
  if (node.inputType(1).getElementType() != base.getElementType()) {
    FailureOr<Value> cast = node.create1<CastOp>(
        {exponent}, {}, {node.inputType(1).clone(base.getElementType())});
    if (failed(cast))
      return failure();
    exponent = *cast;
  }
  return node.setResult(
      node.create1<PowOp>({node.input(0), exponent}));
}

template <ComparePredicate predicate>
static LogicalResult importCompare(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  return node.setResult(
      node.create1<CompareOp>(
      {node.input(0), node.input(1)},
      {node.builder.getNamedAttr(
          "predicate",
          ComparePredicateAttr::get(node.builder.getContext(), predicate))}));
}

static LogicalResult importWhere(NodeContext &node) {
  if (failed(node.requireInputs(3)))
    return failure();
  return node.setResult(
      node.create1<WhereOp>({node.input(0), node.input(1), node.input(2)}));
}

static LogicalResult importIsInf(NodeContext &node) {
  FailureOr<int64_t> positive = node.intAttr("detect_positive", 1);
  FailureOr<int64_t> negative = node.intAttr("detect_negative", 1);
  if (failed(node.requireInputs(1)) || failed(positive) || failed(negative))
    return failure();
  return node.setResult(
      node.create1<IsInfOp>(
      {node.input(0)},
      {node.builder.getNamedAttr("detect_positive",
                                 node.builder.getBoolAttr(*positive)),
       node.builder.getNamedAttr("detect_negative",
                                 node.builder.getBoolAttr(*negative))}));
}

static LogicalResult importIsNan(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  return node.setResult(
      node.create1<IsNanOp>({node.input(0)}));
}

static LogicalResult castTo(NodeContext &node, Type elementType) {
  return node.setResult(
      node.create1<CastOp>(
      {node.input(0)}, {}, {node.inputType(0).clone(elementType)}));
}

static LogicalResult importCast(NodeContext &node) {
  FailureOr<int64_t> to = node.intAttr("to", std::nullopt);
  if (failed(node.requireInputs(1)) || failed(to))
    return failure();
  std::optional<DType> type = dtypeFromOnnx(*to);
  if (!type)
    return node.error("cannot cast to unsupported type ")
           << onnxDataTypeName(*to);
  return castTo(node, mlirElementType(*type, node.builder.getContext()));
}

static LogicalResult importCastLike(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  return castTo(node, node.inputType(1).getElementType());
}

/// Identity: the input, a tensor or (opset 14 on) a sequence.
static LogicalResult importIdentity(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  if (node.isSequence(0)) {
    node.setSequenceOutput(0, *node.sequenceInput(0));
    return success();
  }
  node.setOutput(0, node.input(0));
  return success();
}

static LogicalResult importClip(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  Value result = node.input(0);
  if (node.hasInput(1)) {
    FailureOr<Value> clipped = node.create1<MaxOp>({result, node.input(1)});
    if (failed(clipped))
      return failure();
    result = *clipped;
  }
  if (node.hasInput(2)) {
    FailureOr<Value> clipped = node.create1<MinOp>({result, node.input(2)});
    if (failed(clipped))
      return failure();
    result = *clipped;
  }
  node.setOutput(0, result);
  return success();
}

static LogicalResult importGelu(NodeContext &node) {
  FailureOr<std::string> approximate = node.stringAttr("approximate", "none");
  if (failed(node.requireInputs(1)) || failed(approximate))
    return failure();
  GeluApproximation approximation;
  if (*approximate == "none")
    approximation = GeluApproximation::None;
  else if (*approximate == "tanh")
    approximation = GeluApproximation::Tanh;
  else
    return node.error("approximate must be 'none' or 'tanh', got '")
           << *approximate << "'";
  return node.setResult(
      node.create1<GeluOp>(
      {node.input(0)},
      {node.builder.getNamedAttr(
          "approximation",
          GeluApproximationAttr::get(node.builder.getContext(), approximation))},
      {node.inputType(0)}));
}

/// Mod: C's fmod with fmod = 1, else Python's floored remainder (integers
/// only, as the specification requires for fmod = 0).
static LogicalResult importMod(NodeContext &node) {
  FailureOr<int64_t> fmod = node.intAttr("fmod", 0);
  if (failed(node.requireInputs(2)) || failed(fmod))
    return failure();
  if (!*fmod && isa<FloatType>(node.inputType(0).getElementType()))
    return node.error("fmod must be 1 for floating-point inputs");
  SmallVector<NamedAttribute> attributes;
  if (!*fmod)
    attributes.push_back(
        node.builder.getNamedAttr("floored", node.builder.getUnitAttr()));
  return node.setResult(
      node.create1<RemainderOp>({node.input(0), node.input(1)}, attributes));
}

void registerElementwiseImporters(OpImporterTable &table) {
  table.add("Abs", importUnary<AbsOp>);
  table.add("Neg", importUnary<NegOp>);
  table.add("Sign", importUnary<SignOp>);
  table.add("Exp", importUnary<ExpOp>);
  table.add("Log", importUnary<LogOp>);
  table.add("Tanh", importUnary<TanhOp>);
  table.add("Erf", importUnary<ErfOp>);
  table.add("Sigmoid", importUnary<SigmoidOp>);
  table.add("Relu", importUnary<ReluOp>);
  table.add("Sin", importUnary<SinOp>);
  table.add("Cos", importUnary<CosOp>);
  table.add("Tan", importUnary<TanOp>);
  table.add("Asin", importUnary<AsinOp>);
  table.add("Acos", importUnary<AcosOp>);
  table.add("Atan", importUnary<AtanOp>);
  table.add("Sinh", importUnary<SinhOp>);
  table.add("Cosh", importUnary<CoshOp>);
  table.add("Asinh", importUnary<AsinhOp>);
  table.add("Acosh", importUnary<AcoshOp>);
  table.add("Atanh", importUnary<AtanhOp>);
  table.add("Sqrt", importUnary<SqrtOp>);
  table.add("Reciprocal", importUnary<ReciprocalOp>);
  table.add("Floor", importUnary<FloorOp>);
  table.add("Ceil", importUnary<CeilOp>);
  table.add("Round", importUnary<RoundOp>);
  table.add("Not", importUnary<NotOp>);
  table.add("IsNaN", importIsNan);
  table.add("IsInf", importIsInf);
  table.add("Gelu", importGelu);

  table.add("Add", importBinary<AddOp>);
  table.add("Sub", importBinary<SubOp>);
  table.add("Mul", importBinary<MulOp>);
  table.add("Div", importBinary<DivOp>);
  table.add("Pow", importPow);
  table.add("Mod", importMod);
  table.add("And", importBinary<AndOp>);
  table.add("Or", importBinary<OrOp>);
  table.add("Xor", importBinary<XorOp>);
  // Opset 18's bitwise ops are the same ops on integers.
  table.add("BitwiseAnd", importBinary<AndOp>);
  table.add("BitwiseOr", importBinary<OrOp>);
  table.add("BitwiseXor", importBinary<XorOp>);
  table.add("BitwiseNot", importUnary<NotOp>);
  table.add("BitShift", importBitShift);
  table.add("Max", importVariadic<MaxOp>);
  table.add("Min", importVariadic<MinOp>);
  table.add("Sum", importVariadic<AddOp>);
  table.add("Mean", importMean);
  table.add("Equal", importCompare<ComparePredicate::EQ>);
  table.add("Less", importCompare<ComparePredicate::LT>);
  table.add("LessOrEqual", importCompare<ComparePredicate::LE>);
  table.add("Greater", importCompare<ComparePredicate::GT>);
  table.add("GreaterOrEqual", importCompare<ComparePredicate::GE>);
  table.add("Where", importWhere);
  table.add("Clip", importClip);

  table.add("Cast", importCast);
  table.add("CastLike", importCastLike);
  table.add("Identity", importIdentity);
}

} // namespace kiln
