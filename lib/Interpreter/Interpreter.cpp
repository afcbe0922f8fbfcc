//===- Interpreter.cpp - the reference interpreter ------------------------===//
//
// Walks a function in order, dispatching each op to its evaluator through a
// table keyed by the op's TypeID.
//
//===----------------------------------------------------------------------===//

#include "Evaluators.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Support/Shapes.h"

#include "llvm/ADT/DenseMap.h"

#include <unistd.h>

using namespace mlir;

namespace kiln {

const Evaluator *EvaluatorTable::lookup(OperationName name) const {
  std::optional<RegisteredOperationName> registered = name.getRegisteredInfo();
  if (!registered)
    return nullptr;
  auto it = table.find(registered->getTypeID());
  return it == table.end() ? nullptr : &it->second;
}

static const EvaluatorTable &evaluators() {
  static const EvaluatorTable table = [] {
    EvaluatorTable t;
    registerConstantEvaluators(t);
    registerElementwiseEvaluators(t);
    registerMatmulEvaluator(t);
    registerReductionEvaluators(t);
    registerNormalizationEvaluators(t);
    registerDataMovementEvaluators(t);
    registerLossEvaluators(t);
    registerAttentionEvaluators(t);
    registerOptimizerEvaluators(t);
    return t;
  }();
  return table;
}

bool canEvaluate(OperationName name) {
  return evaluators().lookup(name) != nullptr;
}

Tensor makeTensor(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return Tensor(*dtypeOf(type.getElementType()), type.getShape());
}

SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> inputShape,
                                      ArrayRef<int64_t> outputShape) {
  SmallVector<int64_t> inputStrides = stridesOf(inputShape);
  SmallVector<int64_t> strides(outputShape.size(), 0);
  size_t offset = outputShape.size() - inputShape.size();
  for (size_t d = 0; d < inputShape.size(); ++d)
    if (inputShape[d] != 1)
      strides[offset + d] = inputStrides[d];
  return strides;
}

/// Bytes of physical memory, the most any result may take.
static uint64_t physicalMemory() {
  static const uint64_t bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  return bytes;
}

/// Results are stored as fp32 or int64; refuse what cannot fit rather than
/// fail inside an allocation.
static LogicalResult checkResultSizes(Operation *op) {
  uint64_t bytes = 0;
  for (Type type : op->getResultTypes()) {
    auto tensor = cast<RankedTensorType>(type);
    std::optional<int64_t> count = elementCount(tensor.getShape());
    uint64_t width = isa<FloatType>(tensor.getElementType()) ? 4 : 8;
    bytes = count ? llvm::SaturatingMultiplyAdd(uint64_t(*count), width, bytes)
                  : UINT64_MAX;
  }
  if (bytes > physicalMemory())
    return op->emitOpError() << "needs " << (bytes >> 20)
                             << " MiB for its results, more than this "
                                "machine's "
                             << (physicalMemory() >> 20) << " MiB of memory";
  return success();
}

static LogicalResult checkSupportedTypes(Operation *op) {
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Type type : types) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() ||
        !dtypeOf(tensor.getElementType()))
      return op->emitOpError() << "the interpreter cannot hold a value of type "
                               << type;
  }
  return success();
}

LogicalResult evaluateOp(Operation *op, ArrayRef<const Tensor *> operands,
                         SmallVectorImpl<Tensor> &results,
                         const InterpreterOptions &options) {
  const Evaluator *evaluator = evaluators().lookup(op->getName());
  if (!evaluator)
    return op->emitOpError("is not supported by the interpreter");
  if (failed(checkSupportedTypes(op)) || failed(checkResultSizes(op)))
    return failure();
  EvaluationContext context{operands, options};
  results.clear();
  return (*evaluator)(op, context, results);
}

/// Runs `block`, whose arguments are bound in `values`, up to its terminator
/// (func.return or kiln.yield) and returns the terminator's operands. A
/// kiln.fusion runs its body the same way.
static FailureOr<SmallVector<Tensor>>
runBlock(Block &block, DenseMap<Value, Tensor> &values,
         const InterpreterOptions &options) {
  // Drop each value after its last use so that peak memory stays close to
  // what the function really keeps alive.
  DenseMap<Operation *, SmallVector<Value>> lastUses;
  for (Operation &op : block)
    for (Value operand : op.getOperands()) {
      Operation *last = &op;
      for (Operation *user : operand.getUsers())
        if (user->getBlock() == last->getBlock() &&
            last->isBeforeInBlock(user))
          last = user;
      if (last == &op)
        lastUses[&op].push_back(operand);
    }

  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      SmallVector<Tensor> results;
      for (Value operand : op.getOperands())
        results.push_back(values.lookup(operand));
      return results;
    }
    SmallVector<const Tensor *> operands;
    for (Value operand : op.getOperands())
      operands.push_back(&values[operand]);
    SmallVector<Tensor> opResults;
    if (auto fusion = dyn_cast<FusionOp>(op)) {
      DenseMap<Value, Tensor> inner;
      for (auto [argument, tensor] :
           llvm::zip(fusion.getBody().getArguments(), operands))
        inner[argument] = *tensor;
      FailureOr<SmallVector<Tensor>> fused =
          runBlock(fusion.getBody().front(), inner, options);
      if (failed(fused))
        return failure();
      opResults = std::move(*fused);
    } else if (failed(evaluateOp(&op, operands, opResults, options))) {
      return failure();
    }
    for (auto [result, tensor] : llvm::zip(op.getResults(), opResults))
      values[result] = std::move(tensor);
    for (Value dead : lastUses.lookup(&op))
      values.erase(dead);
  }
  return block.getParentOp()->emitError("block has no terminator");
}

FailureOr<SmallVector<Tensor>> interpret(func::FuncOp function,
                                         ArrayRef<Tensor> arguments,
                                         const InterpreterOptions &options) {
  FunctionType type = function.getFunctionType();
  if (arguments.size() != type.getNumInputs())
    return function.emitError() << "@" << function.getSymName() << " takes "
                                << type.getNumInputs() << " arguments, got "
                                << arguments.size();
  DenseMap<Value, Tensor> values;
  for (auto [i, argument] : llvm::enumerate(function.getArguments())) {
    RankedTensorType expected = cast<RankedTensorType>(argument.getType());
    RankedTensorType actual = arguments[i].getType(function.getContext());
    if (expected != actual)
      return function.emitError()
             << "argument #" << i << " of @" << function.getSymName()
             << " must be " << expected << ", got " << actual;
    values[argument] = arguments[i];
  }
  if (!function.getBody().hasOneBlock())
    return function.emitError("the interpreter runs single-block functions");
  return runBlock(function.getBody().front(), values, options);
}

} // namespace kiln
