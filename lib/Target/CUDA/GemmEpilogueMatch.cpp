//===- GemmEpilogueMatch.cpp - what cuBLASLt applies after a product ------===//

#include "GemmEpilogueMatch.h"

#include "KernelWriter.h"

#include "kiln/Transforms/GemmEpilogues.h"

#include <optional>

using namespace mlir;

namespace kiln::cuda {

/// An epilogue's result as D holds it: rounded to 16 bits if a cast does
/// that next.
static Value asStored(Value result) {
  if (result.hasOneUse())
    if (auto cast = dyn_cast<CastOp>(*result.user_begin());
        cast && (elementTypeOf(cast.getResult()).isBF16() ||
                 elementTypeOf(cast.getResult()).isF16()))
      return cast.getResult();
  return result;
}

/// The tanh GELU of `sum` (maybe behind reshapes) that a GELU epilogue
/// computes, if all else that reads `sum` or its reshapes is one store of
/// it: `aux` is then the value stored (a cast of the sum, or a reshape the
/// fusion yields), or null.
static GeluOp geluOfSum(Value sum, Value &aux) {
  GeluOp gelu;
  aux = Value();
  SmallVector<Value> views = {sum};
  while (!views.empty()) {
    Value value = views.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (isa<ReshapeOp>(user)) {
        views.push_back(user->getResult(0));
        continue;
      }
      if (auto reader = dyn_cast<GeluOp>(user);
          reader && !gelu &&
          reader.getApproximation() == GeluApproximation::Tanh) {
        gelu = reader;
        continue;
      }
      Value stored = isa<CastOp>(user)    ? user->getResult(0)
                     : isa<YieldOp>(user) ? value
                                          : Value();
      if (!stored || (aux && aux != stored))
        return {};
      aux = stored;
    }
  }
  return gelu;
}

/// The GELU epilogue (GELU_BIAS or GELU_AUX_BIAS) after `sum`, a product
/// plus `bias` (as stored), if one applies.
static std::optional<GemmEpilogue>
matchGeluEpilogue(Value sum, Value bias, function_ref<int64_t(Value)> offsetOf,
                  function_ref<int64_t(Value)> resultOffset) {
  Value aux;
  GeluOp gelu = geluOfSum(sum, aux);
  if (!gelu)
    return std::nullopt;
  // The GELU's result, maybe reshaped, then rounded, is D; the bias and
  // the stored sum have D's type, and the sum's leading dimension is a
  // multiple of 8 (as cuBLASLt needs it for aux).
  Value result = gelu.getResult();
  while (result.hasOneUse())
    if (auto reshape = dyn_cast<ReshapeOp>(*result.getUsers().begin()))
      result = reshape.getResult();
    else
      break;
  result = asStored(result);
  Type type = elementTypeOf(result);
  if (elementTypeOf(bias) != type || shapeOf(sum).back() % 8 != 0)
    return std::nullopt;
  if (!aux)
    return GemmEpilogue{result, artifact::Epilogue::GeluBias, offsetOf(bias)};
  int64_t auxOffset = resultOffset(aux);
  if (auxOffset < 0 || elementTypeOf(aux) != type)
    return std::nullopt;
  return GemmEpilogue{result, artifact::Epilogue::GeluAuxBias, offsetOf(bias),
                      auxOffset, aux};
}

/// The bias gradient epilogue (BGRADA/BGRADB), if the fusion stores the
/// bare product and its only other result is a sum of an operand over k.
static std::optional<GemmEpilogue>
matchBiasGradient(MatmulOp matmul, function_ref<int64_t(Value)> resultOffset) {
  CastOp widening;
  bool ofLhs;
  ReduceSumOp sum = operandSum(matmul, widening, ofLhs);
  Block *body = matmul->getBlock();
  if (!sum || !isa<YieldOp>(*matmul->user_begin()) || !sum->hasOneUse() ||
      resultOffset(sum) < 0 ||
      body->getOperations().size() != (widening ? 4u : 3u))
    return std::nullopt;
  GemmEpilogue epilogue{matmul.getResult(),
                        ofLhs ? artifact::Epilogue::BiasGradA
                              : artifact::Epilogue::BiasGradB,
                        resultOffset(sum)};
  epilogue.biasGradient = sum.getResult();
  return epilogue;
}

GemmEpilogue matchGemmEpilogue(MatmulOp matmul,
                               function_ref<Value(Value)> outer,
                               function_ref<int64_t(Value)> offsetOf,
                               function_ref<int64_t(Value)> resultOffset) {
  Value product = matmul.getResult();
  GemmEpilogue none{product};
  if (!product.hasOneUse())
    return none;
  if (std::optional<GemmEpilogue> gradient =
          matchBiasGradient(matmul, resultOffset))
    return *gradient;
  // What the fusion reads for `inner`, seen through a cast widening it: a
  // bias or GELU input stored in 16 bits, which cuBLASLt reads as stored.
  auto stored = [&](Value inner) {
    if (auto cast = inner.getDefiningOp<CastOp>())
      inner = cast.getInput();
    return outer(inner);
  };
  Operation *user = *product.getUsers().begin();
  if (auto add = dyn_cast<AddOp>(user)) {
    Value other = add.getLhs() == product ? add.getRhs() : add.getLhs();
    if (add.getType() != product.getType())
      return none;
    // A matrix of the f32 product's type and shape: cuBLASLt's C (beta = 1),
    // with no epilogue after it.
    Value c = outer(other);
    if (c && other.getType() == product.getType() &&
        elementTypeOf(product).isF32() && offsetOf(c) >= 0) {
      GemmEpilogue sum{add.getResult()};
      sum.c = offsetOf(c);
      return sum;
    }
    // A bias along the product's columns, of D's type, maybe then the tanh
    // GELU.
    Value bias = stored(other);
    if (!bias || shapeOf(bias).size() != 1 ||
        shapeOf(bias)[0] != shapeOf(product).back() || offsetOf(bias) < 0)
      return none;
    Value sum = add.getResult();
    if (std::optional<GemmEpilogue> gelu =
            matchGeluEpilogue(sum, bias, offsetOf, resultOffset))
      return *gelu;
    Value result = asStored(sum);
    if (elementTypeOf(bias) != elementTypeOf(result))
      return none;
    return {result, artifact::Epilogue::Bias, offsetOf(bias)};
  }
  // The tanh GELU's gradient at a saved input: cuBLASLt's DGELU, whose
  // input matrix has D's type and a leading dimension that is a multiple
  // of 8.
  Value grad = product;
  while (auto reshape = dyn_cast<ReshapeOp>(user)) {
    grad = reshape.getResult();
    if (!grad.hasOneUse())
      return none;
    user = *grad.getUsers().begin();
  }
  auto gelu = dyn_cast<GeluGradOp>(user);
  if (!gelu || gelu.getGrad() != grad ||
      gelu.getApproximation() != GeluApproximation::Tanh)
    return none;
  Value input = stored(gelu.getInput());
  Value result = asStored(gelu.getResult());
  if (!input || offsetOf(input) < 0 || !elementTypeOf(product).isF32() ||
      elementTypeOf(input) != elementTypeOf(result) ||
      shapeOf(product).back() % 8 != 0)
    return none;
  return {result, artifact::Epilogue::DGelu, -1, offsetOf(input)};
}

} // namespace kiln::cuda
