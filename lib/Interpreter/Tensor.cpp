//===- Tensor.cpp - the interpreter's tensor value ------------------------===//
//
// Storage, element types and the rounding hook of interpreter tensors.
//
//===----------------------------------------------------------------------===//

#include "kiln/Interpreter/Tensor.h"

#include "mlir/IR/Builders.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;

namespace kiln {

bool isFloat(DType type) {
  return type == DType::F32 || type == DType::F64 || type == DType::F16 ||
         type == DType::BF16 || type == DType::TF32;
}

unsigned byteWidth(DType type) {
  switch (type) {
  case DType::F64: case DType::I64: case DType::U64: return 8;
  // tf32 values live in 32-bit containers, as tensor cores read them.
  case DType::F32: case DType::TF32: case DType::I32: case DType::U32: return 4;
  case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
  case DType::I8: case DType::U8: case DType::Bool: return 1;
  }
  return 0;
}

llvm::StringRef dtypeName(DType type) {
  switch (type) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::TF32: return "tf32";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::I16: return "i16";
  case DType::I8: return "i8";
  case DType::U64: return "ui64";
  case DType::U32: return "ui32";
  case DType::U16: return "ui16";
  case DType::U8: return "ui8";
  case DType::Bool: return "i1";
  }
  return "?";
}

std::optional<DType> dtypeOf(Type elementType) {
  if (elementType.isF32()) return DType::F32;
  if (elementType.isF64()) return DType::F64;
  if (elementType.isF16()) return DType::F16;
  if (elementType.isBF16()) return DType::BF16;
  if (elementType.isTF32()) return DType::TF32;
  auto integer = dyn_cast<IntegerType>(elementType);
  if (!integer)
    return std::nullopt;
  bool isUnsigned = integer.isUnsigned();
  switch (integer.getWidth()) {
  case 1: return DType::Bool;
  case 8: return isUnsigned ? DType::U8 : DType::I8;
  case 16: return isUnsigned ? DType::U16 : DType::I16;
  case 32: return isUnsigned ? DType::U32 : DType::I32;
  case 64: return isUnsigned ? DType::U64 : DType::I64;
  default: return std::nullopt;
  }
}

Type mlirElementType(DType type, MLIRContext *context) {
  Builder b(context);
  switch (type) {
  case DType::F32: return b.getF32Type();
  case DType::F64: return b.getF64Type();
  case DType::F16: return b.getF16Type();
  case DType::BF16: return b.getBF16Type();
  case DType::TF32: return b.getTF32Type();
  case DType::Bool: return b.getI1Type();
  case DType::I8: case DType::I16: case DType::I32: case DType::I64:
    return b.getIntegerType(8 * byteWidth(type));
  case DType::U8: case DType::U16: case DType::U32: case DType::U64:
    return b.getIntegerType(8 * byteWidth(type), /*isSigned=*/false);
  }
  return {};
}

/// Rounds to a float with fp32's 8 exponent bits and `significant` bits of
/// precision (bf16: 8, tf32: 11) directly from the double: rounding through
/// fp32 first could land exactly on a midpoint and then round the wrong way.
static double roundToFp32Range(double value, int significant) {
  if (!std::isfinite(value) || value == 0.0)
    return value;
  int exponent;
  std::frexp(value, &exponent); // |value| = m * 2^exponent, 0.5 <= m < 1
  // The unit in the last place: 2^-(significant - 1) of the leading bit, no
  // finer than the smallest subnormal's.
  double ulp =
      std::ldexp(1.0, std::max(exponent - 1, -126) - (significant - 1));
  double rounded = std::nearbyint(value / ulp) * ulp; // ties to even
  // The largest finite value: (2 - 2^-(significant - 1)) * 2^127.
  double largest = std::ldexp(2.0 - std::ldexp(1.0, 1 - significant), 127);
  return std::fabs(rounded) > largest ? std::copysign(INFINITY, value)
                                      : rounded;
}

double roundToElementType(DType type, double value) {
  switch (type) {
  case DType::BF16: return roundToFp32Range(value, 8);
  case DType::TF32: return roundToFp32Range(value, 11);
  case DType::F16: return static_cast<_Float16>(value);
  case DType::F32: return static_cast<float>(value);
  default: return value;
  }
}

int64_t wrapToElementType(DType type, int64_t value) {
  switch (type) {
  case DType::Bool: return value != 0;
  case DType::I8: return static_cast<int8_t>(value);
  case DType::I16: return static_cast<int16_t>(value);
  case DType::I32: return static_cast<int32_t>(value);
  case DType::U8: return static_cast<uint8_t>(value);
  case DType::U16: return static_cast<uint16_t>(value);
  case DType::U32: return static_cast<uint32_t>(value);
  default: return value; // u64 keeps its bits in an int64
  }
}

Tensor::Tensor(DType type, llvm::ArrayRef<int64_t> shape)
    : dtype(type), shape(shape.begin(), shape.end()) {
  numElements = product(shape);
  if (kiln::isFloat(type))
    floatData.assign(numElements, 0.0);
  else
    intData.assign(numElements, 0);
}

void Tensor::setFromDouble(int64_t i, double value) {
  if (isFloat()) {
    floatData[i] = roundToElementType(dtype, value);
    return;
  }
  if (dtype == DType::Bool) {
    intData[i] = value != 0.0;
    return;
  }
  // Truncate toward zero, saturating where C++ conversion would be undefined.
  if (std::isnan(value))
    value = 0.0;
  constexpr double limit = 9223372036854775807.0;
  int64_t truncated = value >= limit    ? std::numeric_limits<int64_t>::max()
                      : value <= -limit ? std::numeric_limits<int64_t>::min()
                                        : static_cast<int64_t>(value);
  intData[i] = wrapToElementType(dtype, truncated);
}

Tensor Tensor::reshaped(llvm::ArrayRef<int64_t> newShape) const {
  Tensor result = *this;
  result.shape.assign(newShape.begin(), newShape.end());
  return result;
}

/// Copies the elements that `from` and `to` share (the leading corner of
/// both shapes) from `source` into `target`.
static void copyCorner(const Tensor &source, Tensor &target) {
  ArrayRef<int64_t> from = source.getShape(), to = target.getShape();
  SmallVector<int64_t> corner, sourceStrides(from.size()), targetStrides(to.size());
  for (size_t d = 0; d < from.size(); ++d)
    corner.push_back(std::min(from[d], to[d]));
  for (int64_t d = from.size() - 1, s = 1, t = 1; d >= 0; --d) {
    sourceStrides[d] = s;
    targetStrides[d] = t;
    s *= from[d];
    t *= to[d];
  }
  int64_t count = product(corner);
  SmallVector<int64_t> index(corner.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < corner.size(); ++d) {
      s += index[d] * sourceStrides[d];
      t += index[d] * targetStrides[d];
    }
    if (source.isFloat())
      target.floats()[t] = source.floats()[s];
    else
      target.ints()[t] = source.ints()[s];
    for (int64_t d = corner.size() - 1; d >= 0 && ++index[d] == corner[d]; --d)
      index[d] = 0;
  }
}

Tensor Tensor::resized(ArrayRef<int64_t> newShape) const {
  Tensor result(dtype, newShape);
  copyCorner(*this, result);
  return result;
}

RankedTensorType Tensor::getType(MLIRContext *context) const {
  return RankedTensorType::get(shape, mlirElementType(dtype, context));
}

int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t result = 1;
  for (int64_t size : shape)
    result *= size;
  return result;
}

llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

} // namespace kiln
