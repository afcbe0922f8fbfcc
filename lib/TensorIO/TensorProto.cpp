//===- TensorProto.cpp - tensors to and from ONNX TensorProto -------------===//
//
// Decodes every storage form the ONNX specification allows for the supported
// element types: raw_data, the typed repeated fields and external data.
//
//===----------------------------------------------------------------------===//

#include "kiln/TensorIO/TensorFiles.h"
#include "kiln/Interpreter/TensorAttr.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace llvm;

namespace kiln {

std::optional<DType> dtypeFromOnnx(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT: return DType::F32;
  case onnx::TensorProto::DOUBLE: return DType::F64;
  case onnx::TensorProto::FLOAT16: return DType::F16;
  case onnx::TensorProto::BFLOAT16: return DType::BF16;
  case onnx::TensorProto::INT64: return DType::I64;
  case onnx::TensorProto::INT32: return DType::I32;
  case onnx::TensorProto::INT16: return DType::I16;
  case onnx::TensorProto::INT8: return DType::I8;
  case onnx::TensorProto::UINT64: return DType::U64;
  case onnx::TensorProto::UINT32: return DType::U32;
  case onnx::TensorProto::UINT16: return DType::U16;
  case onnx::TensorProto::UINT8: return DType::U8;
  case onnx::TensorProto::BOOL: return DType::Bool;
  default: return std::nullopt;
  }
}

int32_t onnxDataType(DType type) {
  switch (type) {
  case DType::F32: case DType::TF32: return onnx::TensorProto::FLOAT;
  case DType::F64: return onnx::TensorProto::DOUBLE;
  case DType::F16: return onnx::TensorProto::FLOAT16;
  case DType::BF16: return onnx::TensorProto::BFLOAT16;
  case DType::I64: return onnx::TensorProto::INT64;
  case DType::I32: return onnx::TensorProto::INT32;
  case DType::I16: return onnx::TensorProto::INT16;
  case DType::I8: return onnx::TensorProto::INT8;
  case DType::U64: return onnx::TensorProto::UINT64;
  case DType::U32: return onnx::TensorProto::UINT32;
  case DType::U16: return onnx::TensorProto::UINT16;
  case DType::U8: return onnx::TensorProto::UINT8;
  case DType::Bool: return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

std::string onnxDataTypeName(int32_t dataType) {
  if (!onnx::TensorProto::DataType_IsValid(dataType))
    return "unknown (" + std::to_string(dataType) + ")";
  return onnx::TensorProto::DataType_Name(
      static_cast<onnx::TensorProto::DataType>(dataType));
}

bool protoHasValues(const onnx::TensorProto &proto) {
  return proto.data_location() == onnx::TensorProto::EXTERNAL ||
         !proto.raw_data().empty() || proto.float_data_size() ||
         proto.double_data_size() || proto.int32_data_size() ||
         proto.int64_data_size() || proto.uint64_data_size();
}

static Error protoError(const onnx::TensorProto &proto, const Twine &reason) {
  return createStringError(inconvertibleErrorCode(),
                           "tensor '" + proto.name() + "': " + reason);
}

/// Reads the bytes of externally stored data.
static Expected<std::string> readExternalData(const onnx::TensorProto &proto,
                                              StringRef baseDirectory) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const onnx::StringStringEntryProto &entry : proto.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset" &&
             StringRef(entry.value()).getAsInteger(10, offset))
      return protoError(proto, "external data offset '" + entry.value() +
                                   "' is not a number");
    else if (entry.key() == "length") {
      uint64_t value;
      if (StringRef(entry.value()).getAsInteger(10, value))
        return protoError(proto, "external data length '" + entry.value() +
                                     "' is not a number");
      length = value;
    }
  }
  if (location.empty())
    return protoError(proto, "external data has no location");
  if (sys::path::is_absolute(location) ||
      StringRef(location).contains(".."))
    return protoError(proto, "external data location '" + location +
                                 "' must be a relative path inside the "
                                 "model's directory");
  SmallString<256> path(baseDirectory);
  sys::path::append(path, location);
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
  if (!file)
    return protoError(proto, "cannot read external data file '" + path +
                                 "': " + file.getError().message());
  StringRef bytes = (*file)->getBuffer();
  if (offset > bytes.size())
    return protoError(proto, "external data offset " + Twine(offset) +
                                 " is past the end of '" + path + "' (" +
                                 Twine(bytes.size()) + " bytes)");
  bytes = bytes.drop_front(offset);
  if (length) {
    if (*length > bytes.size())
      return protoError(proto, "external data in '" + path +
                                   "' is truncated: " + Twine(*length) +
                                   " bytes wanted, " + Twine(bytes.size()) +
                                   " present");
    bytes = bytes.take_front(*length);
  }
  return bytes.str();
}

/// Values stored in the typed repeated fields, widened to the storage kind.
static Tensor tensorFromTypedFields(const onnx::TensorProto &proto, DType type,
                                    ArrayRef<int64_t> shape) {
  Tensor tensor(type, shape);
  int64_t n = tensor.getNumElements();
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
    case DType::F32: tensor.floats()[i] = proto.float_data(i); break;
    case DType::F64: tensor.floats()[i] = proto.double_data(i); break;
    case DType::I64: tensor.ints()[i] = proto.int64_data(i); break;
    case DType::U64: case DType::U32:
      tensor.ints()[i] = static_cast<int64_t>(proto.uint64_data(i));
      break;
    case DType::F16: case DType::BF16: {
      // 16-bit floats are stored as their bit patterns in int32_data.
      uint16_t bits = static_cast<uint16_t>(proto.int32_data(i));
      char bytes[2];
      std::memcpy(bytes, &bits, 2);
      tensor.floats()[i] = unpackTensor(type, {}, bytes).floats()[0];
      break;
    }
    default:
      tensor.ints()[i] = wrapToElementType(type, proto.int32_data(i));
      break;
    }
  }
  return tensor;
}

static int64_t typedFieldSize(const onnx::TensorProto &proto, DType type) {
  switch (type) {
  case DType::F32: return proto.float_data_size();
  case DType::F64: return proto.double_data_size();
  case DType::I64: return proto.int64_data_size();
  case DType::U64: case DType::U32: return proto.uint64_data_size();
  default: return proto.int32_data_size();
  }
}

Expected<Tensor> tensorFromProto(const onnx::TensorProto &proto,
                                 StringRef baseDirectory) {
  std::optional<DType> type = dtypeFromOnnx(proto.data_type());
  if (!type)
    return protoError(proto, "element type " +
                                 onnxDataTypeName(proto.data_type()) +
                                 " is not supported");
  SmallVector<int64_t> shape;
  int64_t count = 1;
  for (int64_t size : proto.dims()) {
    if (size < 0)
      return protoError(proto, "negative dimension " + Twine(size));
    // Refuse shapes whose byte size overflows before allocating anything.
    if (__builtin_mul_overflow(count, size, &count) || count > (int64_t(1) << 40))
      return protoError(proto, "shape is too large");
    shape.push_back(size);
  }
  if (proto.has_segment())
    return protoError(proto, "segmented tensors are not supported");

  if (proto.data_location() == onnx::TensorProto::EXTERNAL ||
      proto.has_raw_data()) {
    std::string external;
    StringRef bytes = proto.raw_data();
    if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
      Expected<std::string> data = readExternalData(proto, baseDirectory);
      if (!data)
        return data.takeError();
      external = std::move(*data);
      bytes = external;
    }
    uint64_t expected = static_cast<uint64_t>(count) * byteWidth(*type);
    if (bytes.size() != expected)
      return protoError(proto, "holds " + Twine(bytes.size()) +
                                   " bytes of data, but its shape and type "
                                   "need " +
                                   Twine(expected));
    return unpackTensor(*type, shape, ArrayRef<char>(bytes.data(), bytes.size()));
  }
  int64_t present = typedFieldSize(proto, *type);
  if (present != count)
    return protoError(proto, "holds " + Twine(present) +
                                 " values, but its shape needs " + Twine(count));
  return tensorFromTypedFields(proto, *type, shape);
}

onnx::TensorProto tensorToProto(const Tensor &tensor, StringRef name) {
  onnx::TensorProto proto;
  proto.set_name(name.str());
  proto.set_data_type(onnxDataType(tensor.getDType()));
  for (int64_t size : tensor.getShape())
    proto.add_dims(size);
  std::vector<char> bytes = packTensor(tensor);
  proto.set_raw_data(bytes.data(), bytes.size());
  return proto;
}

} // namespace kiln
