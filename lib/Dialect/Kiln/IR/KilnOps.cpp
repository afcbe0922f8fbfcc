//===- KilnOps.cpp - kiln op verifiers and type inference -----------------===//
//
// Verifiers and result-type inference of the kiln ops. Shape rules that more
// than one op uses live in ShapeInference.cpp.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/IR/ShapeInference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

#include "kiln/Dialect/Kiln/IR/KilnEnums.cpp.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"

static RankedTensorType rankedType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// The shape of the statistics of a normalization over dimensions
/// `[axis, rank)`: the input's shape with those dimensions set to 1.
static LogicalResult inferNormalizationTypes(std::optional<Location> location,
                                             StringRef opName,
                                             RankedTensorType input,
                                             ArrayRef<Value> affine,
                                             int64_t axis, unsigned numStats,
                                             SmallVectorImpl<Type> &inferred) {
  int64_t rank = input.getRank();
  if (axis < 0 || axis >= rank)
    return emitOptionalError(location, opName, " axis ", axis,
                             " is outside [0, ", rank, ")");
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  for (Value value : affine) {
    if (!value)
      continue;
    ArrayRef<int64_t> shape = rankedType(value).getShape();
    FailureOr<SmallVector<int64_t>> merged =
        broadcastShapes(location, {normalized, shape});
    if (failed(merged))
      return failure();
    if (ArrayRef<int64_t>(*merged) != normalized)
      return emitOptionalError(location, opName,
                               " scale and bias must broadcast to the "
                               "normalized dimensions");
  }
  SmallVector<int64_t> statsShape(input.getShape());
  for (int64_t d = axis; d < rank; ++d)
    statsShape[d] = 1;
  inferred.push_back(input);
  Type f32 = Float32Type::get(input.getContext());
  for (unsigned i = 0; i < numStats; ++i)
    inferred.push_back(RankedTensorType::get(statsShape, f32));
  return success();
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty name");
  RankedTensorType logical = getType();
  if (std::optional<ArrayRef<int64_t>> shape = getLogicalShape()) {
    if (shape->size() != static_cast<size_t>(logical.getRank()) ||
        llvm::any_of(llvm::zip(*shape, logical.getShape()), [](auto dims) {
          return std::get<0>(dims) < 0 || std::get<0>(dims) > std::get<1>(dims);
        }))
      return emitOpError() << "logical shape [" << *shape
                           << "] does not fit in the stored type " << logical;
    logical = logical.clone(*shape);
  }
  if (std::optional<ElementsAttr> value = getInitialValue())
    if (value->getType() != logical)
      return emitOpError() << "initial value has type " << value->getType()
                           << " but the parameter has type " << logical;
  return success();
}

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("body arguments must have the types of the inputs");
  auto yield = body.empty() ? nullptr : dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError("body must end with kiln.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().getTypes().size()
           << " values whose types differ from the results";
  return success();
}

LogicalResult RangeOp::verify() {
  if (getType().getRank() != 1)
    return emitOpError() << "result must be 1-D, got " << getType();
  return success();
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return emitOpError() << "ratio " << ratio << " is outside [0, 1)";
  return success();
}

LogicalResult FakeQuantizeOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return inferBroadcastResultType(
      location,
      {adaptor.getInput().getType(), adaptor.getScale().getType(),
       adaptor.getZeroPoint().getType()},
      rankedType(adaptor.getInput()).getElementType(), inferred);
}

LogicalResult FakeQuantizeOp::verify() {
  if (getResult().getType() != getInput().getType())
    return emitOpError("scale and zero point must broadcast to the input's "
                       "shape, not widen it");
  double low = getQuantMin().convertToDouble();
  double high = getQuantMax().convertToDouble();
  if (!(low <= high) || low != std::round(low) || high != std::round(high))
    return emitOpError() << "quantization range [" << low << ", " << high
                         << "] is not a range of integers";
  return success();
}

std::optional<MutableOperandRange> kiln::randomOffset(Operation *op) {
  if (auto dropout = dyn_cast<DropoutOp>(op))
    return dropout.getOffsetMutable();
  if (auto uniform = dyn_cast<RandomUniformOp>(op))
    return uniform.getOffsetMutable();
  if (auto normal = dyn_cast<RandomNormalOp>(op))
    return normal.getOffsetMutable();
  if (auto attention = dyn_cast<AttentionOp>(op);
      attention && !attention.getDropoutRatio().isZero())
    return attention.getOffsetMutable();
  if (auto grad = dyn_cast<AttentionGradOp>(op);
      grad && !grad.getDropoutRatio().isZero())
    return grad.getOffsetMutable();
  return std::nullopt;
}

LogicalResult RandomUniformOp::verify() {
  double low = getLow().convertToDouble(), high = getHigh().convertToDouble();
  if (!(std::isfinite(low) && std::isfinite(high) && low <= high))
    return emitOpError() << "needs finite low <= high, got [" << low << ", "
                         << high << ")";
  return success();
}

LogicalResult RandomNormalOp::verify() {
  double mean = getMean().convertToDouble(),
         scale = getScale().convertToDouble();
  if (!(std::isfinite(mean) && std::isfinite(scale) && scale >= 0.0))
    return emitOpError() << "needs a finite mean and a finite scale >= 0, got "
                         << mean << " and " << scale;
  return success();
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location>,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = rankedType(adaptor.getInput());
  inferred.push_back(input);
  inferred.push_back(input.clone(IntegerType::get(context, 1)));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult inferPredicateType(Value input,
                                        SmallVectorImpl<Type> &inferred) {
  inferred.push_back(
      rankedType(input).clone(IntegerType::get(input.getContext(), 1)));
  return success();
}

LogicalResult IsNanOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  return inferPredicateType(adaptor.getInput(), inferred);
}

LogicalResult IsInfOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  return inferPredicateType(adaptor.getInput(), inferred);
}

LogicalResult CompareOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferBroadcastResultType(
      location, {adaptor.getLhs().getType(), adaptor.getRhs().getType()},
      IntegerType::get(context, 1), inferred);
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  Type onTrue = rankedType(adaptor.getOnTrue()).getElementType();
  Type onFalse = rankedType(adaptor.getOnFalse()).getElementType();
  if (onTrue != onFalse)
    return emitOptionalError(location, "where branches have different element "
                                       "types ",
                             onTrue, " and ", onFalse);
  return inferBroadcastResultType(
      location,
      {adaptor.getOnTrue().getType(), adaptor.getCondition().getType(),
       adaptor.getOnFalse().getType()},
      onTrue, inferred);
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = rankedType(adaptor.getLhs());
  auto rhs = rankedType(adaptor.getRhs());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(location, "matmul operands need rank 2 or more, "
                                       "got ",
                             lhs, " and ", rhs);
  int64_t m = lhs.getDimSize(lhs.getRank() - (adaptor.getTransposeLhs() ? 1 : 2));
  int64_t kl = lhs.getDimSize(lhs.getRank() - (adaptor.getTransposeLhs() ? 2 : 1));
  int64_t kr = rhs.getDimSize(rhs.getRank() - (adaptor.getTransposeRhs() ? 1 : 2));
  int64_t n = rhs.getDimSize(rhs.getRank() - (adaptor.getTransposeRhs() ? 2 : 1));
  if (kl != kr)
    return emitOptionalError(location, "matmul contracting dimensions differ: ",
                             kl, " (lhs) vs ", kr, " (rhs)");
  FailureOr<SmallVector<int64_t>> batch = broadcastShapes(
      location, {lhs.getShape().drop_back(2), rhs.getShape().drop_back(2)});
  if (failed(batch))
    return failure();
  batch->append({m, n});
  Type elementType = lhs.getElementType();
  if (std::optional<Type> accumulate = adaptor.getAccumulate()) {
    auto from = dyn_cast<FloatType>(elementType);
    auto to = cast<FloatType>(*accumulate);
    if (!from || from.getWidth() > to.getWidth())
      return emitOptionalError(location, "matmul cannot accumulate ",
                               elementType, " operands in ", *accumulate);
    elementType = *accumulate;
  }
  inferred.push_back(RankedTensorType::get(*batch, elementType));
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferNormalizationTypes(location, "layer_norm",
                                 rankedType(adaptor.getInput()),
                                 {adaptor.getScale(), adaptor.getBias()},
                                 adaptor.getAxis(), /*numStats=*/2, inferred);
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferNormalizationTypes(location, "rms_norm",
                                 rankedType(adaptor.getInput()),
                                 {adaptor.getScale()}, adaptor.getAxis(),
                                 /*numStats=*/1, inferred);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (getInput().getType().getNumElements() != getType().getNumElements())
    return emitOpError() << "cannot reshape " << getInput().getType() << " ("
                         << getInput().getType().getNumElements()
                         << " elements) to " << getType() << " ("
                         << getType().getNumElements() << " elements)";
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = rankedType(adaptor.getInput());
  ArrayRef<int64_t> permutation = adaptor.getPermutation();
  if (static_cast<int64_t>(permutation.size()) != input.getRank())
    return emitOptionalError(location, "transpose permutation has ",
                             permutation.size(), " entries for rank ",
                             input.getRank());
  llvm::SmallBitVector seen(permutation.size());
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation) {
    if (dim < 0 || dim >= input.getRank() || seen.test(dim))
      return emitOptionalError(location, "transpose permutation [",
                               permutation, "] is not a permutation of [0, ",
                               input.getRank(), ")");
    seen.set(dim);
    shape.push_back(input.getDimSize(dim));
  }
  inferred.push_back(input.clone(shape));
  return success();
}

LogicalResult BroadcastOp::verify() {
  ArrayRef<int64_t> from = getInput().getType().getShape();
  ArrayRef<int64_t> to = getType().getShape();
  if (from.size() > to.size())
    return emitOpError() << "cannot broadcast rank " << from.size()
                         << " to the smaller rank " << to.size();
  size_t offset = to.size() - from.size();
  for (auto [i, size] : llvm::enumerate(from))
    if (size != 1 && size != to[offset + i])
      return emitOpError() << "input dimension " << i << " of size " << size
                           << " cannot broadcast to size " << to[offset + i];
  return success();
}

LogicalResult SliceOp::verify() {
  return verifySliceWindow(*this, getInput().getType().getShape(), getStart(),
                           getStride(), getType().getShape());
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(location, "concat needs at least one input");
  auto first = rankedType(adaptor.getInputs().front());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(location, "concat axis ", axis,
                             " is outside [0, ", first.getRank(), ")");
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value input : adaptor.getInputs()) {
    auto type = rankedType(input);
    for (int64_t d = 0; d < first.getRank(); ++d) {
      if (type.getRank() != first.getRank() ||
          (d != axis && type.getDimSize(d) != first.getDimSize(d)))
        return emitOptionalError(location, "concat inputs ", first, " and ",
                                 type, " differ outside axis ", axis);
    }
    shape[axis] += type.getDimSize(axis);
  }
  inferred.push_back(first.clone(shape));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> location,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto input = rankedType(adaptor.getInput());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (static_cast<int64_t>(low.size()) != input.getRank() ||
      static_cast<int64_t>(high.size()) != input.getRank())
    return emitOptionalError(location, "pad amounts need one entry per "
                                       "dimension of rank ",
                             input.getRank());
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t size = input.getDimSize(d) + low[d] + high[d];
    if (size < 0)
      return emitOptionalError(location, "padding dimension ", d,
                               " gives negative size ", size);
    if (adaptor.getMode() != PadMode::Constant && input.getDimSize(d) == 0 &&
        size > 0)
      return emitOptionalError(location, "cannot pad empty dimension ", d,
                               " except with a constant");
    shape.push_back(size);
  }
  inferred.push_back(input.clone(shape));
  return success();
}

LogicalResult TriluOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError() << "needs rank 2 or more, got " << getType();
  return success();
}

LogicalResult ScatterElementsOp::verify() {
  RankedTensorType data = getData().getType(), indices = getIndices().getType();
  if (failed(verifyAxis(*this, getAxis(), data.getRank())))
    return failure();
  if (indices.getShape() != getUpdates().getType().getShape())
    return emitOpError() << "indices " << indices << " and updates "
                         << getUpdates().getType() << " differ in shape";
  if (getUpdates().getType().getElementType() != data.getElementType())
    return emitOpError("updates must have the data's element type");
  if (indices.getRank() != data.getRank())
    return emitOpError() << "indices have rank " << indices.getRank()
                         << " but data has rank " << data.getRank();
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != static_cast<int64_t>(getAxis()) &&
        indices.getDimSize(d) > data.getDimSize(d))
      return emitOpError() << "indices dimension " << d << " ("
                           << indices.getDimSize(d) << ") exceeds the data's ("
                           << data.getDimSize(d) << ")";
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= data.getRank())
    return emitOptionalError(location, "gather axis ", axis,
                             " is outside [0, ", data.getRank(), ")");
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  inferred.push_back(data.clone(shape));
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= data.getRank())
    return emitOptionalError(location, "gather_elements axis ", axis,
                             " is outside [0, ", data.getRank(), ")");
  if (indices.getRank() != data.getRank())
    return emitOptionalError(location, "gather_elements indices have rank ",
                             indices.getRank(), " but data has rank ",
                             data.getRank());
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != axis && indices.getDimSize(d) > data.getDimSize(d))
      return emitOptionalError(location, "gather_elements indices dimension ",
                               d, " (", indices.getDimSize(d),
                               ") exceeds the data's (", data.getDimSize(d),
                               ")");
  inferred.push_back(data.clone(indices.getShape()));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// Checks the shapes that a normalization's gradient shares with its forward
/// op: statistics with the normalized dimensions set to 1, parameter
/// gradients over the normalized dimensions.
static LogicalResult verifyNormalizationGrad(Operation *op, Value input,
                                             ArrayRef<Value> statistics,
                                             Value grad, int64_t axis,
                                             ArrayRef<Value> parameterGrads) {
  auto inputType = rankedType(input);
  if (failed(verifyAxis(op, axis, inputType.getRank())))
    return failure();
  // The input and the output's gradient may be stored narrower than the
  // gradients computed (16-bit norms, a 16-bit product's gradient).
  auto type = rankedType(op->getResult(0));
  if (type.getShape() != inputType.getShape() ||
      rankedType(grad).getShape() != inputType.getShape())
    return op->emitOpError("grad and input_grad must have the input's shape");
  SmallVector<int64_t> statsShape(type.getShape());
  for (int64_t d = axis; d < type.getRank(); ++d)
    statsShape[d] = 1;
  for (Value stat : statistics)
    if (rankedType(stat).getShape() != ArrayRef<int64_t>(statsShape))
      return op->emitOpError() << "statistics have type " << stat.getType()
                               << ", expected the input's shape with the "
                                  "normalized dimensions set to 1";
  RankedTensorType normalized =
      type.clone(type.getShape().drop_front(axis));
  for (Value parameterGrad : parameterGrads)
    if (parameterGrad.getType() != normalized)
      return op->emitOpError() << "parameter gradients must have type "
                               << normalized;
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormalizationGrad(*this, getInput(), {getMean(), getInvStdDev()},
                                 getGrad(), getAxis(),
                                 {getScaleGrad(), getBiasGrad()});
}

LogicalResult RmsNormGradOp::verify() {
  return verifyNormalizationGrad(*this, getInput(), {getInvRms()}, getGrad(),
                                 getAxis(), {getScaleGrad()});
}

LogicalResult GatherGradOp::verify() {
  RankedTensorType data = getType();
  int64_t axis = getAxis();
  if (failed(verifyAxis(*this, axis, data.getRank())))
    return failure();
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, getIndices().getType().getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  if (getGrad().getType().getShape() != ArrayRef<int64_t>(shape) ||
      getGrad().getType().getElementType() != data.getElementType())
    return emitOpError() << "grad has type " << getGrad().getType()
                         << " but gathering from " << data
                         << " gives results of shape [" << shape << "]";
  return success();
}

LogicalResult InsertSliceOp::verify() {
  if (getSource().getType().getElementType() !=
      getDest().getType().getElementType())
    return emitOpError("source and dest must have one element type");
  return verifySliceWindow(*this, getDest().getType().getShape(), getStart(),
                           getStride(), getSource().getType().getShape());
}
