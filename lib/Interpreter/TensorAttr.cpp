//===- TensorAttr.cpp - tensors to and from MLIR attributes ---------------===//
//
// Byte packing of every element type and the two attribute kinds that hold
// tensors in kiln IR: dense elements for constants, dense resources for
// parameter values.
//
//===----------------------------------------------------------------------===//

#include "kiln/Interpreter/TensorAttr.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cstring>

using namespace mlir;

namespace kiln {

template <typename T> static T load(const char *p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

template <typename T> static void store(char *p, T value) {
  std::memcpy(p, &value, sizeof value);
}

static float bf16BitsToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

static uint16_t floatToBF16Bits(double wide) {
  // Values are kept rounded to bf16 already, so the low half is zero.
  float value = static_cast<float>(wide);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}

Tensor unpackTensor(DType type, ArrayRef<int64_t> shape, ArrayRef<char> bytes) {
  Tensor tensor(type, shape);
  const char *p = bytes.data();
  unsigned width = byteWidth(type);
  for (int64_t i = 0, e = tensor.getNumElements(); i < e; ++i, p += width) {
    switch (type) {
    case DType::F32: case DType::TF32: tensor.floats()[i] = load<float>(p); break;
    case DType::F64: tensor.floats()[i] = load<double>(p); break;
    case DType::F16: tensor.floats()[i] = static_cast<float>(load<_Float16>(p)); break;
    case DType::BF16: tensor.floats()[i] = bf16BitsToFloat(load<uint16_t>(p)); break;
    case DType::I64: case DType::U64: tensor.ints()[i] = load<int64_t>(p); break;
    case DType::I32: tensor.ints()[i] = load<int32_t>(p); break;
    case DType::U32: tensor.ints()[i] = load<uint32_t>(p); break;
    case DType::I16: tensor.ints()[i] = load<int16_t>(p); break;
    case DType::U16: tensor.ints()[i] = load<uint16_t>(p); break;
    case DType::I8: tensor.ints()[i] = load<int8_t>(p); break;
    case DType::U8: tensor.ints()[i] = load<uint8_t>(p); break;
    case DType::Bool: tensor.ints()[i] = load<uint8_t>(p) != 0; break;
    }
  }
  return tensor;
}

std::vector<char> packTensor(const Tensor &tensor) {
  DType type = tensor.getDType();
  unsigned width = byteWidth(type);
  std::vector<char> bytes(tensor.getNumElements() * width);
  char *p = bytes.data();
  for (int64_t i = 0, e = tensor.getNumElements(); i < e; ++i, p += width) {
    switch (type) {
    case DType::F32: case DType::TF32:
      store(p, static_cast<float>(tensor.floats()[i]));
      break;
    case DType::F64: store(p, tensor.floats()[i]); break;
    case DType::F16: store(p, static_cast<_Float16>(tensor.floats()[i])); break;
    case DType::BF16: store(p, floatToBF16Bits(tensor.floats()[i])); break;
    case DType::I64: case DType::U64: store(p, tensor.ints()[i]); break;
    case DType::I32: case DType::U32: store(p, static_cast<int32_t>(tensor.ints()[i])); break;
    case DType::I16: case DType::U16: store(p, static_cast<int16_t>(tensor.ints()[i])); break;
    case DType::I8: case DType::U8: case DType::Bool:
      store(p, static_cast<int8_t>(tensor.ints()[i]));
      break;
    }
  }
  return bytes;
}

FailureOr<Tensor> tensorFromAttr(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  std::optional<DType> dtype = dtypeOf(type.getElementType());
  if (!dtype)
    return failure();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return failure();
    ArrayRef<char> data = blob->getData();
    if (static_cast<int64_t>(data.size()) !=
        type.getNumElements() * byteWidth(*dtype))
      return failure();
    return unpackTensor(*dtype, type.getShape(), data);
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return failure();
  if (*dtype == DType::Bool) {
    Tensor tensor(DType::Bool, type.getShape());
    for (auto [i, value] : llvm::enumerate(dense.getValues<bool>()))
      tensor.ints()[i] = value;
    return tensor;
  }
  if (dense.isSplat()) {
    Tensor one = unpackTensor(*dtype, {}, dense.getRawData());
    Tensor tensor(*dtype, type.getShape());
    if (tensor.isFloat())
      std::fill(tensor.floats().begin(), tensor.floats().end(), one.floats()[0]);
    else
      std::fill(tensor.ints().begin(), tensor.ints().end(), one.ints()[0]);
    return tensor;
  }
  return unpackTensor(*dtype, type.getShape(), dense.getRawData());
}

static bool isSplat(const Tensor &tensor) {
  if (tensor.getNumElements() == 0)
    return false;
  auto allEqual = [](auto values) {
    return std::all_of(values.begin(), values.end(),
                       [&](auto v) { return v == values.front(); });
  };
  return tensor.isFloat() ? allEqual(tensor.floats()) : allEqual(tensor.ints());
}

ElementsAttr denseAttrFromTensor(const Tensor &tensor, MLIRContext *context) {
  RankedTensorType type = tensor.getType(context);
  if (tensor.getDType() == DType::Bool) {
    if (isSplat(tensor))
      return DenseElementsAttr::get(type, tensor.ints()[0] != 0);
    SmallVector<bool> values(tensor.ints().begin(), tensor.ints().end());
    return DenseElementsAttr::get(type, values);
  }
  std::vector<char> bytes = packTensor(tensor);
  if (isSplat(tensor))
    bytes.resize(byteWidth(tensor.getDType()));
  return DenseElementsAttr::getFromRawBuffer(type, bytes);
}

/// `name` as a resource key that MLIR's printer writes and its parser reads
/// back: a bare identifier (initializer names such as "onnx::MatMul_534" or
/// "0.weight" are not). The key only names the blob; the parameter keeps its
/// own name.
static std::string resourceKey(StringRef name) {
  auto isLetter = [](char c) { return isalpha(static_cast<unsigned char>(c)); };
  auto isDigit = [](char c) { return isdigit(static_cast<unsigned char>(c)); };
  std::string key = !name.empty() && (isLetter(name[0]) || name[0] == '_')
                        ? ""
                        : "_";
  for (char c : name)
    key += isLetter(c) || isDigit(c) || c == '_' || c == '.' ? c : '_';
  return key;
}

ElementsAttr resourceAttrFromTensor(const Tensor &tensor, StringRef key,
                                    MLIRContext *context) {
  std::vector<char> bytes = packTensor(tensor);
  AsmResourceBlob blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
      bytes, alignof(double));
  return DenseResourceElementsAttr::get(tensor.getType(context),
                                        resourceKey(key), std::move(blob));
}

} // namespace kiln
