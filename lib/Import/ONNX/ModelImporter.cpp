//===- ModelImporter.cpp - ONNX models into the kiln dialect --------------===//
//
// Reads the model file, checks what kiln supports (opsets, domains, types),
// specializes the inputs' dynamic dimensions, turns initializers into
// parameters and constants, and imports the nodes in order through the op
// importer table.
//
//===----------------------------------------------------------------------===//

#include "kiln/Import/ONNXImporter.h"

#include "LocalFunctions.h"
#include "NodeContext.h"
#include "Subgraphs.h"

#include "kiln/Autodiff/TrainingStep.h"

#include "kiln/Interpreter/TensorAttr.h"
#include "kiln/Support/Shapes.h"
#include "kiln/TensorIO/TensorFiles.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>

using namespace mlir;

namespace kiln {

static const OpImporterTable &opImporters() {
  static const OpImporterTable table = [] {
    OpImporterTable t;
    registerActivationImporters(t);
    registerAttentionImporters(t);
    registerEinsumImporter(t);
    registerElementwiseImporters(t);
    registerGridSampleImporter(t);
    registerResizeImporter(t);
    registerSelectionImporters(t);
    registerSequenceImporters(t);
    registerShapeImporters(t);
    registerSignalImporters(t);
    registerTensorImporters(t);
    registerMathImporters(t);
    registerNormalizationImporters(t);
    registerContribImporters(t);
    registerConvolutionImporters(t);
    registerPoolingImporters(t);
    registerQuantizationImporters(t);
    registerRandomImporters(t);
    registerRecurrentImporters(t);
    registerLossImporters(t);
    registerTrainingImporters(t);
    return t;
  }();
  return table;
}

/// Whether `node` is one of the ops that read sequences (imported by
/// SequenceImporters.cpp).
static bool takesSequences(const onnx::NodeProto &node) {
  static const llvm::StringSet<> ops = {"SequenceAt",         "SequenceInsert",
                                        "SequenceErase",      "SequenceLength",
                                        "ConcatFromSequence", "Identity"};
  return (node.domain().empty() || node.domain() == "ai.onnx") &&
         ops.contains(node.op_type());
}

static bool isDefaultDomain(StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

std::string importerKey(const onnx::NodeProto &node) {
  return isDefaultDomain(node.domain()) ? node.op_type()
                                        : node.domain() + "." + node.op_type();
}

/// Control flow, which the importer unrolls rather than an op importer.
static bool isControlFlow(const onnx::NodeProto &node) {
  return (node.domain().empty() || node.domain() == "ai.onnx") &&
         (node.op_type() == "If" || node.op_type() == "Loop" ||
          node.op_type() == "Scan");
}

bool isSupportedONNXOp(const onnx::NodeProto &node) {
  return isControlFlow(node) ||
         opImporters().lookup(importerKey(node)) != nullptr;
}

bool parseDimensionOption(StringRef text, ImportOptions &options) {
  auto [name, size] = text.split('=');
  int64_t value;
  if (name.empty() || size.getAsInteger(10, value) || value <= 0)
    return false;
  options.dimensions[name] = value;
  return true;
}

namespace {
class ModelImporter {
public:
  ModelImporter(StringRef path, MLIRContext *context,
                const ImportOptions &options)
      : path(path), context(context), options(options), builder(context) {
    graph.path = this->path;
  }

  OwningOpRef<ModuleOp> run();

private:
  InFlightDiagnostic error(const Twine &reason) {
    return emitError(UnknownLoc::get(context)) << path << ": " << reason;
  }
  LogicalResult readModel();
  LogicalResult checkOpsets();
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &input);
  LogicalResult importInitializers();
  /// Imports the algorithm graphs of the model's TrainingInfoProtos into
  /// `function` after the inference graph: their new inputs become
  /// arguments (appended to `argumentTypes` and `argumentNames`), and each
  /// update binding a result `kiln.update_of` the initializer it updates.
  LogicalResult
  importTrainingAlgorithms(Block *entry, SmallVectorImpl<Type> &argumentTypes,
                           SmallVectorImpl<std::string> &argumentNames,
                           SmallVectorImpl<std::pair<std::string, Value>> &updates);
  LogicalResult importNode(const onnx::NodeProto &node, int64_t nodeOpset,
                           unsigned depth = 0);
  /// Imports subgraph `body` under a fresh scope, its inputs bound to the
  /// values named `inputs`; `outputs` receives its outputs' values.
  LogicalResult importSubgraph(NodeContext &node, const onnx::GraphProto &body,
                               ArrayRef<std::string> inputs, int64_t nodeOpset,
                               unsigned depth, SmallVectorImpl<Value> &outputs);
  LogicalResult importIf(NodeContext &node, int64_t nodeOpset, unsigned depth);
  LogicalResult importLoop(NodeContext &node, int64_t nodeOpset,
                           unsigned depth);
  LogicalResult importScan(NodeContext &node, int64_t nodeOpset,
                           unsigned depth);

  std::string path;
  MLIRContext *context;
  const ImportOptions &options;
  OpBuilder builder;
  onnx::ModelProto model;
  int64_t opset = 0;
  GraphState graph;
  std::optional<LocalFunctions> functions;
  /// The symbolic dimensions of the inputs.
  llvm::StringSet<> dimensionNames;
  /// Names of the algorithm outputs that update bindings return.
  SmallVector<std::string> updateOutputs;
  unsigned calls = 0;
};
} // namespace

LogicalResult ModelImporter::readModel() {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return error("cannot read the model: ") << file.getError().message();
  StringRef bytes = (*file)->getBuffer();
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(bytes.data()),
      static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT32_MAX);
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return error("is not an ONNX model (the protobuf does not parse; is the "
                 "file truncated?)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return error("is not an ONNX model (it has no graph nodes)");
  return success();
}

LogicalResult ModelImporter::checkOpsets() {
  for (const onnx::OperatorSetIdProto &entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  }
  // A model of only ai.onnx.preview.training ops needs no default opset.
  if (opset != 0 && (opset < kMinONNXOpset || opset > kMaxONNXOpset))
    return error("uses opset ") << opset << "; kiln supports opsets "
                                << kMinONNXOpset << " to " << kMaxONNXOpset;
  return success();
}

FailureOr<RankedTensorType>
ModelImporter::inputType(const onnx::ValueInfoProto &input) {
  const onnx::TypeProto &type = input.type();
  if (!type.has_tensor_type())
    return error("input '") << input.name()
                            << "' is not a tensor (sequences, maps and "
                               "optionals are not supported)";
  std::optional<DType> dtype = dtypeFromOnnx(type.tensor_type().elem_type());
  if (!dtype)
    return error("input '") << input.name() << "' has unsupported element type "
                            << onnxDataTypeName(type.tensor_type().elem_type());
  if (!type.tensor_type().has_shape())
    return error("input '") << input.name() << "' has no shape; kiln needs "
                               "the rank of every input";
  SmallVector<int64_t> shape;
  for (auto [i, dim] : llvm::enumerate(type.tensor_type().shape().dim())) {
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    if (dim.has_dim_param()) {
      dimensionNames.insert(dim.dim_param());
      auto it = options.dimensions.find(dim.dim_param());
      if (it != options.dimensions.end()) {
        shape.push_back(it->second);
        continue;
      }
      return error("input '") << input.name() << "' dimension " << i
                              << " is dynamic ('" << dim.dim_param()
                              << "'); give its size with --dim "
                              << dim.dim_param() << "=N";
    }
    return error("input '") << input.name() << "' dimension " << i
                            << " has no size and no name";
  }
  if (exceedsMaxElements(shape))
    return error("input '")
           << input.name() << "' of shape " << formatShape(shape)
           << " has more than 2^44 elements";
  return RankedTensorType::get(shape, mlirElementType(*dtype, context));
}

/// Whether a float initializer is an attention mask that the exporter folded
/// into a constant: it holds -inf or the lowest value of its type, which no
/// trainable weight does (training it would be meaningless), so it is
/// imported as a constant and never trained.
static bool isFoldedMask(const Tensor &value, FloatType type) {
  double lowest = APFloat::getLargest(type.getFloatSemantics(), /*Negative=*/true)
                      .convertToDouble();
  return llvm::any_of(value.floats(), [&](double x) { return x <= lowest; });
}

LogicalResult ModelImporter::importInitializers() {
  StringRef directory = llvm::sys::path::parent_path(path);
  for (const onnx::TensorProto &initializer : model.graph().initializer()) {
    const std::string &name = initializer.name();
    std::optional<DType> dtype = dtypeFromOnnx(initializer.data_type());
    if (!dtype)
      return error("initializer '")
             << name << "' has unsupported element type "
             << onnxDataTypeName(initializer.data_type());
    SmallVector<int64_t> shape(initializer.dims().begin(),
                               initializer.dims().end());
    if (exceedsMaxElements(shape))
      return error("initializer '")
             << name << "' of shape " << formatShape(shape)
             << " has a negative size or more than 2^44 elements";
    auto type = RankedTensorType::get(shape, mlirElementType(*dtype, context));
    Location loc = NameLoc::get(builder.getStringAttr(name));
    if (!protoHasValues(initializer) && product(shape) > 0) {
      // A graph-only export: a declared parameter without a value.
      if (!isFloat(*dtype))
        return error("initializer '") << name << "' has no values, but only "
                                         "floating-point parameters may be "
                                         "declared without one";
      graph.values[name] = builder.create<ParameterOp>(
          loc, type, builder.getStringAttr(name), ElementsAttr(),
          DenseI64ArrayAttr());
      continue;
    }
    llvm::Expected<Tensor> value = tensorFromProto(initializer, directory);
    if (!value)
      return error("initializer: ") << llvm::toString(value.takeError());
    if (isFloat(*dtype) &&
        !isFoldedMask(*value, cast<FloatType>(type.getElementType()))) {
      graph.values[name] = builder.create<ParameterOp>(
          loc, type, builder.getStringAttr(name),
          resourceAttrFromTensor(*value, name, context), DenseI64ArrayAttr());
    } else {
      Value constant = builder.create<ConstantOp>(
          loc, denseAttrFromTensor(*value, context));
      graph.constants[constant] = std::move(*value);
      graph.values[name] = constant;
    }
  }
  return success();
}

/// Calls of model-local functions nested deeper than this are refused: the
/// functions call each other in a cycle.
static constexpr unsigned kMaxFunctionDepth = 64;

LogicalResult ModelImporter::importNode(const onnx::NodeProto &node,
                                        int64_t nodeOpset, unsigned depth) {
  NodeContext nodeContext(node, nodeOpset, graph, builder);
  if (const onnx::FunctionProto *function = functions->lookup(node)) {
    if (depth >= kMaxFunctionDepth)
      return nodeContext.error("model-local functions call each other "
                               "recursively");
    std::string scope = (node.name().empty() ? node.op_type() : node.name()) +
                        "#" + std::to_string(calls++) + "/";
    int64_t bodyOpset = functionOpset(*function, nodeOpset);
    for (const onnx::NodeProto &inner :
         instantiateFunction(*function, node, scope))
      if (failed(importNode(inner, bodyOpset, depth + 1)))
        return failure();
    return success();
  }
  OpImporter importer = opImporters().lookup(importerKey(node));
  if (!importer && node.domain() == "com.microsoft")
    return nodeContext.error("op type '")
           << node.op_type()
           << "' of domain 'com.microsoft' is not supported by kiln (it "
              "imports the fusions of ONNX Runtime's transformer optimizer)";
  if (!importer && !isDefaultDomain(node.domain()))
    return nodeContext.error("domain '")
           << node.domain()
           << "' is not supported (kiln imports the default ONNX domain, "
              "ai.onnx.preview.training and com.microsoft's fusions)";
  if (!importer && !isControlFlow(node))
    return nodeContext.error("op type '")
           << node.op_type() << "' is not supported by kiln";
  if (isDefaultDomain(node.domain()) && nodeOpset == 0)
    return nodeContext.error("the model imports no opset of the default ONNX "
                             "domain");
  for (const std::string &input : node.input()) {
    if (input.empty())
      continue;
    bool sequence = graph.sequences.count(input);
    if (!sequence && !graph.values.count(input))
      return nodeContext.error("input '")
             << input << "' is not produced by any earlier node, graph input "
                         "or initializer";
    // Only the sequence ops read sequences; the others read tensors.
    if (sequence && !takesSequences(node))
      return nodeContext.error("input '") << input << "' is a sequence, which "
                                          << node.op_type() << " does not take";
  }
  if (isControlFlow(node))
    return node.op_type() == "If" ? importIf(nodeContext, nodeOpset, depth)
           : node.op_type() == "Loop"
               ? importLoop(nodeContext, nodeOpset, depth)
               : importScan(nodeContext, nodeOpset, depth);
  if (failed(importer(nodeContext)))
    return failure();
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty() || graph.sequences.count(node.output(i)))
      continue;
    Value output = graph.values.lookup(node.output(i));
    if (!output)
      return nodeContext.error("output ")
             << i << " ('" << node.output(i)
             << "') is not supported by kiln's import of this op";
    auto type = dyn_cast<RankedTensorType>(output.getType());
    if (type && exceedsMaxElements(type.getShape()))
      return nodeContext.error("output ")
             << i << " ('" << node.output(i) << "') of shape "
             << formatShape(type.getShape()) << " has more than 2^44 elements";
  }
  return success();
}

/// Iterations a Loop may unroll to: each is a copy of its body.
static constexpr int64_t kMaxLoopIterations = 4096;

/// A graph attribute of `node`, or null.
static const onnx::GraphProto *graphAttribute(NodeContext &node,
                                              StringRef name) {
  const onnx::AttributeProto *attribute = node.attribute(name);
  return attribute && attribute->has_g() ? &attribute->g() : nullptr;
}

LogicalResult ModelImporter::importSubgraph(NodeContext &node,
                                            const onnx::GraphProto &body,
                                            ArrayRef<std::string> inputs,
                                            int64_t nodeOpset, unsigned depth,
                                            SmallVectorImpl<Value> &outputs) {
  if (depth >= kMaxFunctionDepth)
    return node.error("subgraphs nest too deeply");
  if (body.initializer_size() || body.sparse_initializer_size())
    return node.error("subgraph '")
           << body.name() << "' has initializers, which kiln does not import";
  std::string scope =
      (node.node.name().empty() ? node.node.op_type() : node.node.name()) +
      "#" + std::to_string(calls++) + "/";
  InlinedSubgraph inlined = inlineSubgraph(body, inputs, scope);
  for (const onnx::NodeProto &inner : inlined.nodes)
    if (failed(importNode(inner, nodeOpset, depth + 1)))
      return failure();
  for (const std::string &name : inlined.outputs) {
    Value value = graph.values.lookup(name);
    if (!value)
      return node.error("subgraph output '") << name << "' has no value";
    outputs.push_back(value);
  }
  return success();
}

/// If: the branch its condition, known at compile time, selects.
LogicalResult ModelImporter::importIf(NodeContext &node, int64_t nodeOpset,
                                      unsigned depth) {
  if (failed(node.requireInputs(1)))
    return failure();
  FailureOr<Tensor> condition = node.constantInput(0, "the condition");
  if (failed(condition))
    return failure();
  if (condition->getNumElements() != 1)
    return node.error("the condition must hold one element");
  const char *branch =
      condition->getAsDouble(0) != 0.0 ? "then_branch" : "else_branch";
  const onnx::GraphProto *body = graphAttribute(node, branch);
  if (!body)
    return node.error("has no '") << branch << "' graph";
  SmallVector<Value> outputs;
  if (failed(importSubgraph(node, *body, {}, nodeOpset, depth, outputs)))
    return failure();
  if (outputs.size() < node.numOutputs())
    return node.error("its ") << branch << " has " << outputs.size()
                              << " outputs, the node " << node.numOutputs();
  for (auto [i, value] : llvm::enumerate(outputs))
    node.setOutput(i, value);
  return success();
}

/// Loop, unrolled: its trip count and its condition before every iteration
/// must be known at compile time. The loop-carried values thread through
/// the copies of the body; each scan output is its per-iteration values
/// stacked along a new first axis.
LogicalResult ModelImporter::importLoop(NodeContext &node, int64_t nodeOpset,
                                        unsigned depth) {
  const onnx::GraphProto *body = graphAttribute(node, "body");
  if (!body)
    return node.error("has no 'body' graph");
  std::optional<int64_t> tripCount;
  if (node.hasInput(0)) {
    FailureOr<Tensor> count = node.constantInput(0, "the trip count");
    if (failed(count))
      return failure();
    tripCount = static_cast<int64_t>(count->getAsDouble(0));
  }
  bool running = true;
  if (node.hasInput(1)) {
    FailureOr<Tensor> condition = node.constantInput(1, "the condition");
    if (failed(condition))
      return failure();
    running = condition->getAsDouble(0) != 0.0;
  }
  int carried = node.node.input_size() - 2;
  if (carried < 0 || body->input_size() != carried + 2 ||
      body->output_size() < carried + 1)
    return node.error("its body must take the iteration number, the "
                      "condition and the ")
           << std::max(carried, 0) << " loop-carried values, and return the "
           << "condition and them";
  SmallVector<Value> state;
  for (int i = 0; i < carried; ++i)
    state.push_back(node.input(i + 2));
  int scans = body->output_size() - 1 - carried;
  SmallVector<SmallVector<Value>> scanned(scans);
  Type i64 = node.builder.getI64Type(), i1 = node.builder.getI1Type();
  int64_t iteration = 0;
  for (; running && (!tripCount || iteration < *tripCount); ++iteration) {
    if (iteration == kMaxLoopIterations)
      return node.error("runs more than ")
             << kMaxLoopIterations << " iterations, which kiln unrolls";
    // The body's inputs, bound under names of this iteration.
    std::string prefix = "loop#" + std::to_string(calls++) + "/";
    SmallVector<Value> values = {node.scalar(iteration, i64),
                                 node.scalar(1.0, i1)};
    values.append(state);
    SmallVector<std::string> names;
    for (auto [i, value] : llvm::enumerate(values)) {
      names.push_back(prefix + std::to_string(i));
      graph.values[names.back()] = value;
    }
    SmallVector<Value> outputs;
    if (failed(importSubgraph(node, *body, names, nodeOpset, depth, outputs)))
      return failure();
    std::optional<Tensor> condition = node.constantValue(outputs[0]);
    if (!condition)
      return node.error("the condition its body computes must be known at "
                        "compile time (kiln unrolls loops)");
    running = condition->getAsDouble(0) != 0.0;
    state.assign(outputs.begin() + 1, outputs.begin() + 1 + carried);
    for (int s = 0; s < scans; ++s)
      scanned[s].push_back(outputs[1 + carried + s]);
  }
  for (auto [i, value] : llvm::enumerate(state))
    node.setOutput(i, value);
  for (int s = 0; s < scans; ++s) {
    if (scanned[s].empty())
      return node.error("runs no iteration, so its scan outputs would be "
                        "empty");
    FailureOr<Value> stacked = node.stack(scanned[s], 0);
    if (failed(stacked))
      return failure();
    node.setOutput(carried + s, *stacked);
  }
  return success();
}

/// Scan (opset 11 on): the body once per position along the scan inputs'
/// axes (each forward or reverse), threading the states; each scan output
/// is the iterations' values stacked along its axis (in reverse order for
/// a reverse one).
LogicalResult ModelImporter::importScan(NodeContext &node, int64_t nodeOpset,
                                        unsigned depth) {
  const onnx::GraphProto *body = graphAttribute(node, "body");
  if (!body)
    return node.error("has no 'body' graph");
  FailureOr<int64_t> scanInputs = node.intAttr("num_scan_inputs", std::nullopt);
  if (failed(scanInputs))
    return failure();
  int64_t states = node.node.input_size() - *scanInputs;
  int64_t scanOutputs = body->output_size() - states;
  if (*scanInputs < 1 || states < 0 || scanOutputs < 0 ||
      body->input_size() != node.node.input_size())
    return node.error("its body must take the ")
           << std::max<int64_t>(states, 0) << " states and " << *scanInputs
           << " scan inputs' slices and return the states first";
  auto listAttr = [&](StringRef name, int64_t count,
                      int64_t fallback) -> FailureOr<SmallVector<int64_t>> {
    FailureOr<std::optional<SmallVector<int64_t>>> given = node.intsAttr(name);
    if (failed(given))
      return failure();
    SmallVector<int64_t> values =
        given->value_or(SmallVector<int64_t>(count, fallback));
    if (static_cast<int64_t>(values.size()) != count)
      return node.error(name) << " needs " << count << " entries";
    return values;
  };
  FailureOr<SmallVector<int64_t>> inputAxes =
      listAttr("scan_input_axes", *scanInputs, 0);
  FailureOr<SmallVector<int64_t>> inputDirections =
      listAttr("scan_input_directions", *scanInputs, 0);
  FailureOr<SmallVector<int64_t>> outputAxes =
      listAttr("scan_output_axes", scanOutputs, 0);
  FailureOr<SmallVector<int64_t>> outputDirections =
      listAttr("scan_output_directions", scanOutputs, 0);
  if (failed(inputAxes) || failed(inputDirections) || failed(outputAxes) ||
      failed(outputDirections))
    return failure();
  // The scan inputs' axes and their common length.
  int64_t length = -1;
  for (int64_t j = 0; j < *scanInputs; ++j) {
    RankedTensorType type = node.inputType(states + j);
    FailureOr<int64_t> axis =
        node.normalizeAxis((*inputAxes)[j], type.getRank(), "scan input axis");
    if (failed(axis))
      return failure();
    (*inputAxes)[j] = *axis;
    if (length >= 0 && type.getDimSize(*axis) != length)
      return node.error("its scan inputs have different lengths along "
                        "their axes");
    length = type.getDimSize(*axis);
  }
  if (length < 1)
    return node.error("scans nothing: its scan inputs are empty");
  SmallVector<Value> state;
  for (int64_t i = 0; i < states; ++i)
    state.push_back(node.input(i));
  SmallVector<SmallVector<Value>> scanned(scanOutputs);
  for (int64_t iteration = 0; iteration < length; ++iteration) {
    std::string prefix = "scan#" + std::to_string(calls++) + "/";
    SmallVector<Value> values(state);
    for (int64_t j = 0; j < *scanInputs; ++j) {
      RankedTensorType type = node.inputType(states + j);
      int64_t axis = (*inputAxes)[j];
      int64_t at = (*inputDirections)[j] ? length - 1 - iteration : iteration;
      SmallVector<int64_t> start(type.getRank(), 0), stride(type.getRank(), 1),
          shape(type.getShape());
      start[axis] = at;
      shape[axis] = 1;
      FailureOr<Value> slice =
          node.slice(node.input(states + j), start, stride, shape);
      shape.erase(shape.begin() + axis);
      if (succeeded(slice))
        slice = node.reshape(*slice, shape);
      if (failed(slice))
        return failure();
      values.push_back(*slice);
    }
    SmallVector<std::string> names;
    for (auto [i, value] : llvm::enumerate(values)) {
      names.push_back(prefix + std::to_string(i));
      graph.values[names.back()] = value;
    }
    SmallVector<Value> outputs;
    if (failed(importSubgraph(node, *body, names, nodeOpset, depth, outputs)))
      return failure();
    state.assign(outputs.begin(), outputs.begin() + states);
    for (int64_t k = 0; k < scanOutputs; ++k)
      scanned[k].push_back(outputs[states + k]);
  }
  for (auto [i, value] : llvm::enumerate(state))
    node.setOutput(i, value);
  for (int64_t k = 0; k < scanOutputs; ++k) {
    if ((*outputDirections)[k])
      std::reverse(scanned[k].begin(), scanned[k].end());
    int64_t rank =
        cast<RankedTensorType>(scanned[k].front().getType()).getRank() + 1;
    FailureOr<int64_t> axis =
        node.normalizeAxis((*outputAxes)[k], rank, "scan output axis");
    if (failed(axis))
      return failure();
    FailureOr<Value> stacked = node.stack(scanned[k], *axis);
    if (failed(stacked))
      return failure();
    node.setOutput(states + k, *stacked);
  }
  return success();
}

LogicalResult ModelImporter::importTrainingAlgorithms(
    Block *entry, SmallVectorImpl<Type> &argumentTypes,
    SmallVectorImpl<std::string> &argumentNames,
    SmallVectorImpl<std::pair<std::string, Value>> &updates) {
  for (const onnx::TrainingInfoProto &info : model.training_info()) {
    if (info.initialization().node_size() || info.initialization_binding_size())
      return error("training_info: initialization graphs are not supported; "
                   "kiln initializes parameters from the initializers");
    const onnx::GraphProto &algorithm = info.algorithm();
    if (algorithm.initializer_size())
      return error("training_info: the algorithm graph's own initializers "
                   "are not supported");
    for (const onnx::ValueInfoProto &input : algorithm.input()) {
      if (graph.values.count(input.name()))
        continue; // a value of the inference graph
      FailureOr<RankedTensorType> type = inputType(input);
      if (failed(type))
        return failure();
      graph.values[input.name()] =
          entry->addArgument(*type, NameLoc::get(builder.getStringAttr(input.name())));
      argumentTypes.push_back(*type);
      argumentNames.push_back(input.name());
    }
    for (const onnx::NodeProto &node : algorithm.node())
      if (failed(importNode(node, opset)))
        return failure();
    for (const onnx::StringStringEntryProto &binding : info.update_binding()) {
      Value value = graph.values.lookup(binding.value());
      if (!value)
        return error("training_info: update binding of '")
               << binding.key() << "' names '" << binding.value()
               << "', which the algorithm does not compute";
      updates.emplace_back(binding.key(), value);
      updateOutputs.push_back(binding.value());
    }
  }
  return success();
}

/// Removes what folding left dead (shape constants, unused initializers) and
/// applies the kiln canonicalizations, so that the function holds only the
/// model's tensor work.
static LogicalResult simplify(ModuleOp module) {
  MLIRContext *context = module.getContext();
  RewritePatternSet patterns(context);
  for (RegisteredOperationName op : context->getRegisteredOperations())
    if (op.getDialectNamespace() == KilnDialect::getDialectNamespace())
      op.getCanonicalizationPatterns(patterns, context);
  // Not reaching a fixed point within the driver's iteration limit leaves
  // correct IR, only less simplified.
  (void)applyPatternsAndFoldGreedily(module, std::move(patterns));
  return success();
}

OwningOpRef<ModuleOp> ModelImporter::run() {
  if (failed(readModel()) || failed(checkOpsets()))
    return nullptr;
  context->loadDialect<KilnDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(context));
  const onnx::GraphProto &onnxGraph = model.graph();

  llvm::StringSet<> initializerNames;
  for (const onnx::TensorProto &initializer : onnxGraph.initializer())
    initializerNames.insert(initializer.name());
  SmallVector<Type> argumentTypes;
  SmallVector<std::string> argumentNames;
  SmallVector<std::pair<std::string, const Tensor *>> boundValues;
  for (const onnx::ValueInfoProto &input : onnxGraph.input()) {
    if (initializerNames.contains(input.name()))
      continue; // an initializer listed as an input (IR version < 4)
    FailureOr<RankedTensorType> type = inputType(input);
    if (failed(type))
      return nullptr;
    auto bound = options.boundInputs.find(input.name());
    if (bound != options.boundInputs.end()) {
      if (bound->second.getType(context) != *type) {
        error("value bound to input '")
            << input.name() << "' has type " << bound->second.getType(context)
            << ", but the input is " << *type;
        return nullptr;
      }
      boundValues.emplace_back(input.name(), &bound->second);
      continue;
    }
    argumentTypes.push_back(*type);
    argumentNames.push_back(input.name());
  }

  // A --dim that names no dimension is a typo or the wrong model.
  for (const auto &entry : options.dimensions)
    if (!dimensionNames.contains(entry.getKey())) {
      std::string known;
      for (const auto &name : dimensionNames)
        known += (known.empty() ? "" : ", ") + name.getKey().str();
      error("has no dynamic dimension named '")
          << entry.getKey() << "' ("
          << (known.empty() ? "its inputs have static shapes"
                            : "its dynamic dimensions are: " + known)
          << ")";
      return nullptr;
    }

  builder.setInsertionPointToEnd(module->getBody());
  auto function = builder.create<func::FuncOp>(
      UnknownLoc::get(context), options.functionName,
      builder.getFunctionType(argumentTypes, {}));
  Block *entry = function.addEntryBlock();
  builder.setInsertionPointToEnd(entry);
  for (auto [i, name] : llvm::enumerate(argumentNames))
    graph.values[name] = entry->getArgument(i);
  for (auto [name, tensor] : boundValues) {
    Value constant = builder.create<ConstantOp>(
        NameLoc::get(builder.getStringAttr(name)),
        denseAttrFromTensor(*tensor, context));
    graph.constants[constant] = *tensor;
    graph.values[name] = constant;
  }
  if (failed(importInitializers()))
    return nullptr;
  functions.emplace(model);
  for (const onnx::NodeProto &node : onnxGraph.node())
    if (failed(importNode(node, opset)))
      return nullptr;
  SmallVector<std::pair<std::string, Value>> updates;
  if (failed(importTrainingAlgorithms(entry, argumentTypes, argumentNames,
                                      updates)))
    return nullptr;

  SmallVector<Value> results;
  for (const onnx::ValueInfoProto &output : onnxGraph.output()) {
    Value value = graph.values.lookup(output.name());
    if (!value) {
      if (graph.sequences.count(output.name()))
        error("graph output '") << output.name()
                                << "' is a sequence (kiln's functions return "
                                   "tensors)";
      else
        error("graph output '") << output.name() << "' is never produced";
      return nullptr;
    }
    results.push_back(value);
  }
  for (auto &[name, value] : updates)
    results.push_back(value);
  for (auto &[name, value] : graph.bufferUpdates)
    results.push_back(value);
  builder.create<func::ReturnOp>(UnknownLoc::get(context), results);
  function.setType(builder.getFunctionType(argumentTypes,
                                           ValueRange(results).getTypes()));
  for (auto [i, name] : llvm::enumerate(argumentNames))
    function.setArgAttr(i, "kiln.name", builder.getStringAttr(name));
  for (auto [i, output] : llvm::enumerate(onnxGraph.output()))
    function.setResultAttr(i, "kiln.name", builder.getStringAttr(output.name()));
  for (auto [i, update] : llvm::enumerate(updates)) {
    unsigned index = onnxGraph.output_size() + i;
    function.setResultAttr(index, "kiln.name",
                           builder.getStringAttr(updateOutputs[i]));
    function.setResultAttr(index, "kiln.update_of",
                           builder.getStringAttr(update.first));
  }
  // Buffers the forward pass updates: results named after them.
  for (auto [i, update] : llvm::enumerate(graph.bufferUpdates)) {
    unsigned index = onnxGraph.output_size() + updates.size() + i;
    function.setResultAttr(index, "kiln.name",
                           builder.getStringAttr(update.first + ".updated"));
    function.setResultAttr(index, kBufferUpdateOfAttr,
                           builder.getStringAttr(update.first));
  }
  if (failed(verify(*module)) || failed(simplify(*module)))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp> importONNXModel(StringRef path, MLIRContext *context,
                                      const ImportOptions &options) {
  return ModelImporter(path, context, options).run();
}

} // namespace kiln
