//===- NodeContext.h - what an op importer sees of one node -----*- C++ -*-===//
//
// Internal to the ONNX importer. An op importer reads a node's inputs and
// attributes through NodeContext, builds kiln ops with `create`, which checks
// shapes and folds constant subgraphs, and binds the node's outputs. Every
// failure is reported through `error`, which names the file, the node and
// its op type.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_NODECONTEXT_H
#define KILN_LIB_IMPORT_ONNX_NODECONTEXT_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Tensor.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

namespace kiln {

class NodeContext;
using OpImporter = mlir::LogicalResult (*)(NodeContext &);

/// Op importers by ONNX op type. Each importer handles every opset from 13 to
/// 23 and branches where the specification changed at a version.
class OpImporterTable {
public:
  void add(llvm::StringRef opType, OpImporter importer) {
    importers[opType] = importer;
  }
  OpImporter lookup(llvm::StringRef opType) const {
    return importers.lookup(opType);
  }

private:
  llvm::StringMap<OpImporter> importers;
};

void registerActivationImporters(OpImporterTable &table);
void registerAttentionImporters(OpImporterTable &table);
void registerContribImporters(OpImporterTable &table);
void registerConvolutionImporters(OpImporterTable &table);
void registerEinsumImporter(OpImporterTable &table);
void registerElementwiseImporters(OpImporterTable &table);
void registerGridSampleImporter(OpImporterTable &table);
void registerResizeImporter(OpImporterTable &table);
void registerSelectionImporters(OpImporterTable &table);
void registerSequenceImporters(OpImporterTable &table);
void registerShapeImporters(OpImporterTable &table);
void registerSignalImporters(OpImporterTable &table);
void registerTensorImporters(OpImporterTable &table);
void registerMathImporters(OpImporterTable &table);
void registerNormalizationImporters(OpImporterTable &table);
void registerPoolingImporters(OpImporterTable &table);
void registerQuantizationImporters(OpImporterTable &table);
void registerRandomImporters(OpImporterTable &table);
void registerRecurrentImporters(OpImporterTable &table);
void registerLossImporters(OpImporterTable &table);
void registerTrainingImporters(OpImporterTable &table);

/// The convolution of `input` with `weights` (and `bias`, if given) that the
/// node's Conv attributes (strides, dilations, pads, auto_pad, group)
/// describe: Conv's, and that of the integer convolutions.
mlir::FailureOr<mlir::Value> importConvolution(NodeContext &node,
                                               mlir::Value input,
                                               mlir::Value weights,
                                               mlir::Value bias);

/// The key of a node in the OpImporterTable: its op type in the default
/// domain, "<domain>.<op type>" in others.
std::string importerKey(const onnx::NodeProto &node);

/// An integer output of QuantizeLinear: its scale and zero point inputs
/// (null if none), its granularity, and the kiln.fake_quantize of its input
/// that a DequantizeLinear with the same ones reads back.
struct Quantization {
  mlir::Value scale, zeroPoint;
  int64_t axis, blockSize;
  mlir::Value fakeQuantized;
};

/// State of one graph import that nodes share.
struct GraphState {
  llvm::StringRef path;
  llvm::StringMap<mlir::Value> values;
  /// Values of constants already decoded, so that folding chains do not
  /// decode the same attribute again.
  llvm::DenseMap<mlir::Value, Tensor> constants;
  /// Initializers the forward pass updates (BatchNormalization's running
  /// statistics in training mode), with their new values.
  llvm::SmallVector<std::pair<std::string, mlir::Value>> bufferUpdates;
  /// Nodes that drew random numbers so far: each one's default seed differs
  /// even where names repeat (unnamed nodes, inlined functions).
  int64_t randomNodes = 0;
  /// QuantizeLinear's outputs, by value.
  llvm::DenseMap<mlir::Value, Quantization> quantizations;
  /// Values that are sequences of tensors (SplitToSequence's,
  /// SequenceConstruct's...), by name: their tensors, known at import.
  llvm::StringMap<llvm::SmallVector<mlir::Value>> sequences;
};

class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int64_t opset, GraphState &graph,
              mlir::OpBuilder &builder);

  const onnx::NodeProto &node;
  /// The model's opset version of the default domain.
  const int64_t opset;
  mlir::OpBuilder &builder;
  mlir::Location loc;

  //===--------------------------------------------------------------------===//
  // Inputs
  //===--------------------------------------------------------------------===//

  /// True when input `i` is given (ONNX marks omitted optional inputs by an
  /// empty name or by leaving them off the end).
  bool hasInput(unsigned i) const;
  /// Input `i`; it must be given (checked by the importer against the op's
  /// minimum number of inputs, see `requireInputs`).
  mlir::Value input(unsigned i) const;
  mlir::RankedTensorType inputType(unsigned i) const;
  /// Whether input `i` is given and is a sequence.
  bool isSequence(unsigned i) const;
  /// The tensors of sequence input `i`; an error naming it if it is a
  /// tensor.
  mlir::FailureOr<llvm::ArrayRef<mlir::Value>> sequenceInput(unsigned i);
  /// The graph value named `name`, or null.
  mlir::Value valueNamed(llvm::StringRef name) const {
    return graph.values.lookup(name);
  }
  int64_t inputRank(unsigned i) const { return inputType(i).getRank(); }
  /// Checks that inputs [0, count) are given.
  mlir::LogicalResult requireInputs(unsigned count);
  /// Checks that a table the importer computes (a window, a DFT matrix) of
  /// `shape` has at most 2^28 elements; `what` names it in the error.
  mlir::LogicalResult requireTableSize(llvm::ArrayRef<int64_t> shape,
                                       llvm::StringRef what);
  /// The value of input `i`, which must be a constant after folding (shapes,
  /// axes, pads...); `what` names it in the error.
  mlir::FailureOr<Tensor> constantInput(unsigned i, llvm::StringRef what);
  /// The integers of a constant 0-D or 1-D input.
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  constantInts(unsigned i, llvm::StringRef what);
  /// The value of `value` if it is a constant.
  std::optional<Tensor> constantValue(mlir::Value value);

  //===--------------------------------------------------------------------===//
  // Attributes
  //===--------------------------------------------------------------------===//

  const onnx::AttributeProto *attribute(llvm::StringRef name) const;
  mlir::FailureOr<int64_t> intAttr(llvm::StringRef name,
                                   std::optional<int64_t> fallback);
  mlir::FailureOr<double> floatAttr(llvm::StringRef name,
                                    std::optional<double> fallback);
  mlir::FailureOr<std::string> stringAttr(llvm::StringRef name,
                                          std::optional<std::string> fallback);
  /// The element type that the ONNX data type attribute `name` names
  /// (`dtype`, `output_datatype`), `fallback` where it is absent.
  mlir::FailureOr<mlir::Type> typeAttr(llvm::StringRef name,
                                       mlir::Type fallback);
  /// A list of integers; absent gives std::nullopt.
  mlir::FailureOr<std::optional<llvm::SmallVector<int64_t>>>
  intsAttr(llvm::StringRef name);
  /// Integers that attribute `name` gives before opset `inputSince` and the
  /// constant input `i` from then on (axes, split sizes); absent gives
  /// std::nullopt.
  mlir::FailureOr<std::optional<llvm::SmallVector<int64_t>>>
  intsAttrOrInput(llvm::StringRef name, unsigned i, int64_t inputSince);

  //===--------------------------------------------------------------------===//
  // Building and binding
  //===--------------------------------------------------------------------===//

  /// Builds a kiln op of `OpTy`. Result types are inferred where the op can
  /// (pass no `resultTypes`) and the op is verified; a failure is reported
  /// as an error of this node. An op whose operands are all constants is
  /// evaluated and replaced by constants.
  template <typename OpTy>
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  create(mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attributes = {},
         mlir::TypeRange resultTypes = {}) {
    return createOp(OpTy::getOperationName(), operands, attributes,
                    resultTypes);
  }
  /// `create` for ops of one result.
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  create1(mlir::ValueRange operands,
          llvm::ArrayRef<mlir::NamedAttribute> attributes = {},
          mlir::TypeRange resultTypes = {}) {
    mlir::FailureOr<llvm::SmallVector<mlir::Value>> results =
        create<OpTy>(operands, attributes, resultTypes);
    if (mlir::failed(results))
      return mlir::failure();
    return results->front();
  }
  /// `value` reshaped to `shape` (itself when it has that shape).
  mlir::FailureOr<mlir::Value> reshape(mlir::Value value,
                                       llvm::ArrayRef<int64_t> shape);
  /// `value` with its dimensions permuted.
  mlir::FailureOr<mlir::Value> transpose(mlir::Value value,
                                         llvm::ArrayRef<int64_t> permutation);
  /// The elements of `value` from `start` on, `stride` apart, per
  /// dimension, giving `shape`.
  mlir::FailureOr<mlir::Value> slice(mlir::Value value,
                                     llvm::ArrayRef<int64_t> start,
                                     llvm::ArrayRef<int64_t> stride,
                                     llvm::ArrayRef<int64_t> shape);
  /// An i64 constant of `shape` holding `values`.
  mlir::Value int64Constant(llvm::ArrayRef<int64_t> shape,
                            llvm::ArrayRef<int64_t> values);
  /// Whether each position along `axis` of a new dimension of `depth`
  /// positions is the index `indices` holds there (i64, size 1 at `axis`):
  /// a one-hot encoding, as booleans.
  mlir::FailureOr<mlir::Value> isIndexAlong(mlir::Value indices, int64_t depth,
                                            int64_t axis);
  /// `value` with `low[i]` elements of `fill` before and `high[i]` after
  /// dimension `i`.
  mlir::FailureOr<mlir::Value> padConstant(mlir::Value value,
                                           llvm::ArrayRef<int64_t> low,
                                           llvm::ArrayRef<int64_t> high,
                                           double fill);
  /// The matrix product as numpy.matmul defines it (MatMul's): a 1-D
  /// operand is a row (left) or a column (right), dropped from the result.
  mlir::FailureOr<mlir::Value> matmul(mlir::Value lhs, mlir::Value rhs);
  /// `values` of one shape stacked along a new dimension at `axis`.
  mlir::FailureOr<mlir::Value> stack(llvm::ArrayRef<mlir::Value> values,
                                     int64_t axis);
  /// `values` concatenated along `axis`.
  mlir::FailureOr<mlir::Value> concat(mlir::ValueRange values, int64_t axis);
  /// A kiln.constant holding `tensor`.
  mlir::Value constant(const Tensor &tensor);
  /// A 0-D constant of `elementType` holding `value`.
  mlir::Value scalar(double value, mlir::Type elementType);
  /// A constant of `type` whose elements all equal `value`; stored as one
  /// element however large the type.
  mlir::Value splat(double value, mlir::RankedTensorType type);

  /// Binds output `i` of the node (if the node names it).
  void setOutput(unsigned i, mlir::Value value);
  /// Binds output `i` of the node to a sequence of `values`.
  void setSequenceOutput(unsigned i, llvm::ArrayRef<mlir::Value> values);
  /// Binds output 0 to `value` when it was built; propagates failure.
  mlir::LogicalResult setResult(mlir::FailureOr<mlir::Value> value) {
    if (mlir::failed(value))
      return mlir::failure();
    setOutput(0, *value);
    return mlir::success();
  }
  /// The directory of the model file (external data is relative to it).
  llvm::StringRef modelDirectory() const;
  /// True when output `i` is named, i.e. used by the graph.
  bool hasOutput(unsigned i) const;
  unsigned numOutputs() const { return node.output_size(); }
  /// A seed for a node that draws random numbers and names none: a hash of
  /// its name and of how many such nodes came before it.
  int64_t defaultSeed();
  /// The outputs of QuantizeLinear nodes of this graph so far.
  llvm::DenseMap<mlir::Value, Quantization> &quantizations() {
    return graph.quantizations;
  }
  /// Whether input `i` is an initializer (a kiln.parameter).
  bool isInitializer(unsigned i) const;
  /// Records `value` as the new value of initializer input `i`, which the
  /// step writes back (a buffer the forward pass updates); fails if another
  /// node updates it too.
  mlir::LogicalResult updateBuffer(unsigned i, mlir::Value value);

  /// Emits "FILE: node 'NAME' (OP): reason" and returns failure.
  mlir::InFlightDiagnostic error(const llvm::Twine &reason);

  /// Normalizes a possibly negative axis for a tensor of `rank`.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what = "axis");

private:
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  createOp(llvm::StringRef name, mlir::ValueRange operands,
           llvm::ArrayRef<mlir::NamedAttribute> attributes,
           mlir::TypeRange resultTypes);
  /// Replaces `op` by constants when its operands are all constants.
  llvm::SmallVector<mlir::Value> foldIfConstant(mlir::Operation *op);

  GraphState &graph;
};

} // namespace kiln

#endif // KILN_LIB_IMPORT_ONNX_NODECONTEXT_H
