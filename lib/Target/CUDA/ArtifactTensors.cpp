//===- ArtifactTensors.cpp - host tensors in an artifact's storage --------===//

#include "kiln/Target/ArtifactTensors.h"

#include <cstring>

namespace kiln {

using artifact::ElementType;

DType dtypeOf(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return DType::F32;
  case ElementType::F64:
    return DType::F64;
  case ElementType::F16:
    return DType::F16;
  case ElementType::BF16:
    return DType::BF16;
  case ElementType::I64:
    return DType::I64;
  case ElementType::I32:
    return DType::I32;
  case ElementType::I16:
    return DType::I16;
  case ElementType::I8:
    return DType::I8;
  case ElementType::U8:
    return DType::U8;
  case ElementType::Bool:
    return DType::Bool;
  }
  return DType::F32;
}

static void encodeElement(uint8_t *at, ElementType type, double value,
                          int64_t integer) {
  switch (type) {
  case ElementType::F32: {
    float f = value;
    std::memcpy(at, &f, 4);
    return;
  }
  case ElementType::F64:
    std::memcpy(at, &value, 8);
    return;
  case ElementType::BF16: { // to nearest, ties to even
    float f = value;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint16_t half = (bits & 0x7fffffffu) > 0x7f800000u
                        ? static_cast<uint16_t>((bits >> 16) | 0x40u)
                        : static_cast<uint16_t>(
                              (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    std::memcpy(at, &half, 2);
    return;
  }
  case ElementType::F16: {
    _Float16 h = static_cast<_Float16>(value);
    std::memcpy(at, &h, 2);
    return;
  }
  case ElementType::I64:
    std::memcpy(at, &integer, 8);
    return;
  case ElementType::I32: {
    int32_t v = integer;
    std::memcpy(at, &v, 4);
    return;
  }
  case ElementType::I16: {
    int16_t v = integer;
    std::memcpy(at, &v, 2);
    return;
  }
  default:
    at[0] = static_cast<uint8_t>(integer);
    return;
  }
}

std::vector<uint8_t> encodeTensor(const Tensor &tensor, ElementType type) {
  int64_t count = tensor.getNumElements(), width = artifact::elementBytes(type);
  std::vector<uint8_t> bytes(count * width);
  for (int64_t i = 0; i < count; ++i) {
    double value = tensor.isFloat() ? tensor.floats()[i] : tensor.ints()[i];
    int64_t integer =
        tensor.isFloat() ? static_cast<int64_t>(value) : tensor.ints()[i];
    encodeElement(bytes.data() + i * width, type, value, integer);
  }
  return bytes;
}

Tensor decodeTensor(const uint8_t *bytes, ElementType type,
                    llvm::ArrayRef<int64_t> shape) {
  Tensor tensor(dtypeOf(type), shape);
  int64_t width = artifact::elementBytes(type);
  for (int64_t i = 0; i < tensor.getNumElements(); ++i) {
    const uint8_t *at = bytes + i * width;
    switch (type) {
    case ElementType::F32: {
      float f;
      std::memcpy(&f, at, 4);
      tensor.floats()[i] = f;
      break;
    }
    case ElementType::F64:
      std::memcpy(&tensor.floats()[i], at, 8);
      break;
    case ElementType::BF16: {
      uint32_t bits = uint32_t(at[0] | (at[1] << 8)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      tensor.floats()[i] = f;
      break;
    }
    case ElementType::F16: {
      _Float16 h;
      std::memcpy(&h, at, 2);
      tensor.floats()[i] = static_cast<double>(h);
      break;
    }
    case ElementType::I64:
      std::memcpy(&tensor.ints()[i], at, 8);
      break;
    case ElementType::I32: {
      int32_t v;
      std::memcpy(&v, at, 4);
      tensor.ints()[i] = v;
      break;
    }
    case ElementType::I16: {
      int16_t v;
      std::memcpy(&v, at, 2);
      tensor.ints()[i] = v;
      break;
    }
    case ElementType::I8:
      tensor.ints()[i] = static_cast<int8_t>(at[0]);
      break;
    default:
      tensor.ints()[i] = at[0];
      break;
    }
  }
  return tensor;
}

} // namespace kiln
