//===- NodeContext.cpp - what an op importer sees of one node -------------===//
//
// Input and attribute access, checked op creation and import-time constant
// folding for the ONNX op importers.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Interpreter/TensorAttr.h"
#include "kiln/Support/Shapes.h"
#include "kiln/TensorIO/TensorFiles.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;

namespace kiln {

/// Constant subgraphs whose results have at most this many elements are
/// evaluated at import. Shape arithmetic is far below it; large constant
/// tensors (a causal mask at T = 4096) stay ops, computed when the step runs.
static constexpr int64_t kFoldLimit = 1 << 20;

NodeContext::NodeContext(const onnx::NodeProto &node, int64_t opset,
                         GraphState &graph, OpBuilder &builder)
    : node(node), opset(opset), builder(builder),
      loc(NameLoc::get(builder.getStringAttr(
          node.name().empty() ? node.op_type() : node.name()))),
      graph(graph) {}

InFlightDiagnostic NodeContext::error(const Twine &reason) {
  return emitError(UnknownLoc::get(builder.getContext()))
         << graph.path << ": node '" << node.name() << "' (" << node.op_type()
         << "): " << reason;
}

bool NodeContext::hasInput(unsigned i) const {
  return static_cast<int>(i) < node.input_size() && !node.input(i).empty();
}

bool NodeContext::isSequence(unsigned i) const {
  return hasInput(i) && graph.sequences.count(node.input(i));
}

FailureOr<ArrayRef<Value>> NodeContext::sequenceInput(unsigned i) {
  if (!isSequence(i))
    return error("input ") << i << " must be a sequence";
  return ArrayRef<Value>(graph.sequences.find(node.input(i))->second);
}

Value NodeContext::input(unsigned i) const {
  return graph.values.lookup(node.input(i));
}

RankedTensorType NodeContext::inputType(unsigned i) const {
  return cast<RankedTensorType>(input(i).getType());
}

LogicalResult NodeContext::requireInputs(unsigned count) {
  for (unsigned i = 0; i < count; ++i)
    if (!hasInput(i))
      return error("needs at least ") << count << " inputs, input " << i
                                      << " is missing";
  return success();
}

LogicalResult NodeContext::requireTableSize(ArrayRef<int64_t> shape,
                                            StringRef what) {
  std::optional<int64_t> count = elementCount(shape);
  if (!count || *count > (int64_t(1) << 28))
    return error(what) << " of shape " << formatShape(shape)
                       << " would have more than 2^28 elements, the most "
                          "kiln computes at import";
  return success();
}

std::optional<Tensor> NodeContext::constantValue(Value value) {
  auto it = graph.constants.find(value);
  if (it != graph.constants.end())
    return it->second;
  auto op = value.getDefiningOp<ConstantOp>();
  if (!op)
    return std::nullopt;
  FailureOr<Tensor> tensor = tensorFromAttr(op.getValue());
  if (failed(tensor))
    return std::nullopt;
  graph.constants[value] = *tensor;
  return *tensor;
}

FailureOr<Tensor> NodeContext::constantInput(unsigned i, StringRef what) {
  if (!hasInput(i))
    return error(what) << " (input " << i << ") is missing";
  std::optional<Tensor> value = constantValue(input(i));
  if (!value)
    return error(what) << " (input '" << node.input(i)
                       << "') must be known at compile time, but it is "
                          "computed from the model's inputs or parameters";
  return *value;
}

FailureOr<SmallVector<int64_t>> NodeContext::constantInts(unsigned i,
                                                          StringRef what) {
  FailureOr<Tensor> value = constantInput(i, what);
  if (failed(value))
    return failure();
  if (value->isFloat() || value->getRank() > 1)
    return error(what) << " must be a 0-D or 1-D integer tensor";
  return SmallVector<int64_t>(value->ints().begin(), value->ints().end());
}

FailureOr<Type> NodeContext::typeAttr(StringRef name, Type fallback) {
  if (!attribute(name))
    return fallback;
  FailureOr<int64_t> code = intAttr(name, std::nullopt);
  if (failed(code))
    return failure();
  std::optional<DType> dtype = dtypeFromOnnx(*code);
  if (!dtype)
    return error("unsupported ") << name << " " << onnxDataTypeName(*code);
  return mlirElementType(*dtype, builder.getContext());
}

const onnx::AttributeProto *NodeContext::attribute(StringRef name) const {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

FailureOr<int64_t> NodeContext::intAttr(StringRef name,
                                        std::optional<int64_t> fallback) {
  const onnx::AttributeProto *attr = attribute(name);
  if (!attr) {
    if (fallback)
      return *fallback;
    return error("missing required attribute '") << name << "'";
  }
  if (attr->type() != onnx::AttributeProto::INT)
    return error("attribute '") << name << "' must be an integer";
  return attr->i();
}

FailureOr<double> NodeContext::floatAttr(StringRef name,
                                         std::optional<double> fallback) {
  const onnx::AttributeProto *attr = attribute(name);
  if (!attr) {
    if (fallback)
      return *fallback;
    return error("missing required attribute '") << name << "'";
  }
  if (attr->type() != onnx::AttributeProto::FLOAT)
    return error("attribute '") << name << "' must be a float";
  return attr->f();
}

FailureOr<std::string>
NodeContext::stringAttr(StringRef name, std::optional<std::string> fallback) {
  const onnx::AttributeProto *attr = attribute(name);
  if (!attr) {
    if (fallback)
      return *fallback;
    return error("missing required attribute '") << name << "'";
  }
  if (attr->type() != onnx::AttributeProto::STRING)
    return error("attribute '") << name << "' must be a string";
  return attr->s();
}

FailureOr<std::optional<SmallVector<int64_t>>>
NodeContext::intsAttr(StringRef name) {
  const onnx::AttributeProto *attr = attribute(name);
  if (!attr)
    return std::optional<SmallVector<int64_t>>();
  if (attr->type() != onnx::AttributeProto::INTS)
    return error("attribute '") << name << "' must be a list of integers";
  return std::optional<SmallVector<int64_t>>(
      SmallVector<int64_t>(attr->ints().begin(), attr->ints().end()));
}

FailureOr<std::optional<SmallVector<int64_t>>>
NodeContext::intsAttrOrInput(StringRef name, unsigned i, int64_t inputSince) {
  if (opset < inputSince)
    return intsAttr(name);
  if (!hasInput(i))
    return std::optional<SmallVector<int64_t>>();
  FailureOr<SmallVector<int64_t>> given = constantInts(i, name);
  if (failed(given))
    return failure();
  return std::optional<SmallVector<int64_t>>(*given);
}

FailureOr<Value> NodeContext::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return create1<ReshapeOp>({value}, {}, {type.clone(shape)});
}

FailureOr<Value> NodeContext::transpose(Value value,
                                        ArrayRef<int64_t> permutation) {
  return create1<TransposeOp>(
      {value}, {builder.getNamedAttr(
                   "permutation", builder.getDenseI64ArrayAttr(permutation))});
}

FailureOr<Value> NodeContext::slice(Value value, ArrayRef<int64_t> start,
                                    ArrayRef<int64_t> stride,
                                    ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  return create1<SliceOp>(
      {value},
      {builder.getNamedAttr("start", builder.getDenseI64ArrayAttr(start)),
       builder.getNamedAttr("stride", builder.getDenseI64ArrayAttr(stride))},
      {type.clone(shape)});
}

FailureOr<Value> NodeContext::padConstant(Value value, ArrayRef<int64_t> low,
                                          ArrayRef<int64_t> high, double fill) {
  if (llvm::all_of(low, [](int64_t n) { return n == 0; }) &&
      llvm::all_of(high, [](int64_t n) { return n == 0; }))
    return value;
  return create1<PadOp>(
      {value},
      {builder.getNamedAttr(
           "mode", PadModeAttr::get(builder.getContext(), PadMode::Constant)),
       builder.getNamedAttr("low", builder.getDenseI64ArrayAttr(low)),
       builder.getNamedAttr("high", builder.getDenseI64ArrayAttr(high)),
       builder.getNamedAttr("value", builder.getF64FloatAttr(fill))});
}

FailureOr<Value> NodeContext::matmul(Value lhs, Value rhs) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  if (lhsType.getRank() == 0 || rhsType.getRank() == 0)
    return error("matrix product operands must not be scalars");
  bool lhsVector = lhsType.getRank() == 1, rhsVector = rhsType.getRank() == 1;
  if (lhsVector) {
    FailureOr<Value> row = reshape(lhs, {1, lhsType.getDimSize(0)});
    if (failed(row))
      return failure();
    lhs = *row;
  }
  if (rhsVector) {
    FailureOr<Value> column = reshape(rhs, {rhsType.getDimSize(0), 1});
    if (failed(column))
      return failure();
    rhs = *column;
  }
  FailureOr<Value> product = create1<MatmulOp>({lhs, rhs});
  if (failed(product) || (!lhsVector && !rhsVector))
    return product;
  SmallVector<int64_t> shape(
      cast<RankedTensorType>(product->getType()).getShape());
  if (rhsVector)
    shape.erase(shape.end() - 1);
  if (lhsVector)
    shape.erase(shape.end() - (rhsVector ? 1 : 2));
  return reshape(*product, shape);
}

FailureOr<Value> NodeContext::stack(ArrayRef<Value> values, int64_t axis) {
  SmallVector<Value> rows;
  for (Value value : values) {
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(value.getType()).getShape());
    shape.insert(shape.begin() + axis, 1);
    FailureOr<Value> row = reshape(value, shape);
    if (failed(row))
      return failure();
    rows.push_back(*row);
  }
  return concat(rows, axis);
}

FailureOr<Value> NodeContext::concat(ValueRange values, int64_t axis) {
  return create1<ConcatOp>(
      values, {builder.getNamedAttr("axis", builder.getI64IntegerAttr(axis))});
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              StringRef what) {
  if (axis < -rank || axis >= rank)
    return error(what) << " " << axis << " is outside [" << -rank << ", "
                       << rank << ") for a tensor of rank " << rank;
  return axis < 0 ? axis + rank : axis;
}

/// Result types that `name` infers for `operands` and `attributes`, or
/// failure (with diagnostics emitted) when they are inconsistent.
static LogicalResult inferResultTypes(StringRef name, Location loc,
                                      ValueRange operands,
                                      ArrayRef<NamedAttribute> attributes,
                                      SmallVectorImpl<Type> &inferred) {
  // A detached, result-less op holds the operands and properties that the
  // op's inference reads; its own builders would abort on a shape error
  // instead of reporting it.
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addAttributes(attributes);
  Operation *probe = Operation::create(state);
  LogicalResult result = cast<InferTypeOpInterface>(probe).inferReturnTypes(
      probe->getContext(), loc, probe->getOperands(),
      probe->getRawDictionaryAttrs(), probe->getPropertiesStorage(),
      probe->getRegions(), inferred);
  probe->destroy();
  return result;
}

/// Builds and verifies an op; null (with diagnostics emitted) when its types
/// cannot be inferred or it does not verify.
static Operation *buildVerified(OpBuilder &builder, Location loc,
                                StringRef name, ValueRange operands,
                                ArrayRef<NamedAttribute> attributes,
                                TypeRange resultTypes) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addAttributes(attributes);
  if (!resultTypes.empty()) {
    state.addTypes(resultTypes);
  } else {
    SmallVector<Type> inferred;
    if (failed(inferResultTypes(name, loc, operands, attributes, inferred)))
      return nullptr;
    state.addTypes(inferred);
  }
  Operation *op = builder.create(state);
  if (failed(verify(op))) {
    op->erase();
    return nullptr;
  }
  return op;
}

FailureOr<SmallVector<Value>>
NodeContext::createOp(StringRef name, ValueRange operands,
                      ArrayRef<NamedAttribute> attributes,
                      TypeRange resultTypes) {
  // Report what verification and inference say as an error of this node
  // rather than of an op the user never wrote.
  std::string messages;
  Operation *op;
  {
    ScopedDiagnosticHandler capture(builder.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error)
        messages += (messages.empty() ? "" : "; ") + d.str();
      return success();
    });
    op = buildVerified(builder, loc, name, operands, attributes, resultTypes);
  }
  if (!op)
    return error(messages.empty() ? "invalid operation" : messages);
  return foldIfConstant(op);
}

int64_t NodeContext::defaultSeed() {
  std::string key = node.name() + "#" + std::to_string(graph.randomNodes++);
  return static_cast<int64_t>(llvm::xxh3_64bits(key));
}

SmallVector<Value> NodeContext::foldIfConstant(Operation *op) {
  SmallVector<Value> results(op->getResults());
  if (!canEvaluate(op->getName()) || isa<ConstantOp, ParameterOp>(op) ||
      randomOffset(op))
    return results;
  // Sizes first: a splat constant as large as a huge input would be
  // materialized to fold it.
  auto tooLarge = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return false;
    std::optional<int64_t> count = elementCount(tensor.getShape());
    return !count || *count > kFoldLimit;
  };
  if (llvm::any_of(op->getResultTypes(), tooLarge) ||
      llvm::any_of(op->getOperandTypes(), tooLarge))
    return results;
  SmallVector<Tensor> operands;
  for (Value operand : op->getOperands()) {
    std::optional<Tensor> value = constantValue(operand);
    if (!value)
      return results;
    operands.push_back(std::move(*value));
  }
  SmallVector<const Tensor *> pointers;
  for (const Tensor &operand : operands)
    pointers.push_back(&operand);
  SmallVector<Tensor> values;
  if (failed(evaluateOp(op, pointers, values)))
    return results; // the same error surfaces when the function runs
  SmallVector<Value> constants;
  for (const Tensor &value : values)
    constants.push_back(constant(value));
  op->replaceAllUsesWith(constants);
  op->erase();
  return constants;
}

Value NodeContext::constant(const Tensor &tensor) {
  Value value = builder.create<ConstantOp>(
      loc, denseAttrFromTensor(tensor, builder.getContext()));
  if (tensor.getNumElements() <= kFoldLimit)
    graph.constants[value] = tensor;
  return value;
}

Value NodeContext::int64Constant(ArrayRef<int64_t> shape,
                                 ArrayRef<int64_t> values) {
  Tensor tensor(DType::I64, shape);
  llvm::copy(values, tensor.ints().begin());
  return constant(tensor);
}

FailureOr<Value> NodeContext::isIndexAlong(Value indices, int64_t depth,
                                           int64_t axis) {
  auto type = cast<RankedTensorType>(indices.getType());
  SmallVector<int64_t> shape(type.getRank(), 1);
  shape[axis] = depth;
  SmallVector<int64_t> positions(depth);
  for (int64_t i = 0; i < depth; ++i)
    positions[i] = i;
  return create1<CompareOp>(
      {indices, int64Constant(shape, positions)},
      {builder.getNamedAttr("predicate",
                            ComparePredicateAttr::get(builder.getContext(),
                                                      ComparePredicate::EQ))});
}

Value NodeContext::scalar(double value, Type elementType) {
  return splat(value, RankedTensorType::get({}, elementType));
}

Value NodeContext::splat(double value, RankedTensorType type) {
  Tensor element(*dtypeOf(type.getElementType()), {});
  element.setFromDouble(0, value);
  auto attr = cast<DenseElementsAttr>(
      denseAttrFromTensor(element, builder.getContext()));
  return builder.create<ConstantOp>(loc, attr.resizeSplat(type));
}

StringRef NodeContext::modelDirectory() const {
  return llvm::sys::path::parent_path(graph.path);
}

bool NodeContext::isInitializer(unsigned i) const {
  return isa_and_present<ParameterOp>(input(i).getDefiningOp());
}

LogicalResult NodeContext::updateBuffer(unsigned i, Value value) {
  const std::string &name = node.input(i);
  if (llvm::any_of(graph.bufferUpdates,
                   [&](auto &update) { return update.first == name; }))
    return error("initializer '") << name << "' is updated by another node";
  graph.bufferUpdates.push_back({name, value});
  return success();
}

bool NodeContext::hasOutput(unsigned i) const {
  return static_cast<int>(i) < node.output_size() && !node.output(i).empty();
}

void NodeContext::setOutput(unsigned i, Value value) {
  if (hasOutput(i))
    graph.values[node.output(i)] = value;
}

void NodeContext::setSequenceOutput(unsigned i, ArrayRef<Value> values) {
  if (hasOutput(i))
    graph.sequences[node.output(i)].assign(values.begin(), values.end());
}

} // namespace kiln
