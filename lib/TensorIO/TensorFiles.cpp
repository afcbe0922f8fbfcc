//===- TensorFiles.cpp - reading and writing tensor files -----------------===//
//
// `.pb` files hold one serialized TensorProto (the ONNX backend-test format);
// `.npy` files are NumPy's format, versions 1 to 3, little-endian, C order.
//
//===----------------------------------------------------------------------===//

#include "kiln/TensorIO/TensorFiles.h"
#include "kiln/Interpreter/TensorAttr.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace kiln {

static Error fileError(StringRef path, const Twine &reason) {
  return createStringError(inconvertibleErrorCode(), path + ": " + reason);
}

static std::optional<DType> dtypeFromNumpy(StringRef descr) {
  if (descr.size() < 3 || descr[0] == '>')
    return std::nullopt;
  StringRef code = descr.drop_front();
  return StringSwitch<std::optional<DType>>(code)
      .Case("f4", DType::F32).Case("f8", DType::F64).Case("f2", DType::F16)
      .Case("i8", DType::I64).Case("i4", DType::I32).Case("i2", DType::I16)
      .Case("i1", DType::I8).Case("u8", DType::U64).Case("u4", DType::U32)
      .Case("u2", DType::U16).Case("u1", DType::U8).Case("b1", DType::Bool)
      .Default(std::nullopt);
}

/// The value of `key` in the header dictionary, e.g. `'descr': '<f4'`.
static std::optional<StringRef> headerValue(StringRef header, StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(at + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  if (rest.starts_with("("))
    return rest.take_until([](char c) { return c == ')'; }).drop_front();
  if (rest.starts_with("'"))
    return rest.drop_front().take_until([](char c) { return c == '\''; });
  return rest.take_until([](char c) { return c == ',' || c == '}'; }).trim();
}

static Expected<Tensor> readNumpy(StringRef path, StringRef bytes) {
  if (bytes.size() < 10 || !bytes.starts_with("\x93NUMPY"))
    return fileError(path, "is not a NumPy .npy file (bad magic)");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = static_cast<unsigned char>(bytes[8]) |
                   static_cast<unsigned char>(bytes[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return fileError(path, "is truncated in its header");
    headerLength = 0;
    for (int i = 3; i >= 0; --i)
      headerLength = headerLength << 8 | static_cast<unsigned char>(bytes[8 + i]);
    headerStart = 12;
  } else {
    return fileError(path, "has unsupported .npy version " + Twine(major));
  }
  if (headerStart + headerLength > bytes.size())
    return fileError(path, "is truncated in its header");
  StringRef header = bytes.substr(headerStart, headerLength);
  std::optional<StringRef> descr = headerValue(header, "descr");
  std::optional<StringRef> fortran = headerValue(header, "fortran_order");
  std::optional<StringRef> shapeText = headerValue(header, "shape");
  if (!descr || !fortran || !shapeText)
    return fileError(path, "has a malformed .npy header");
  std::optional<DType> type = dtypeFromNumpy(*descr);
  if (!type)
    return fileError(path, "has unsupported element type '" + *descr +
                               "' (little-endian numbers and bools only)");
  if (*fortran != "False")
    return fileError(path, "is in Fortran order; save it in C order");
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  shapeText->split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    int64_t size;
    if (part.trim().getAsInteger(10, size) || size < 0)
      return fileError(path, "has a malformed shape '(" + *shapeText + ")'");
    shape.push_back(size);
  }
  StringRef data = bytes.drop_front(headerStart + headerLength);
  uint64_t expected = product(shape) * byteWidth(*type);
  if (data.size() != expected)
    return fileError(path, "holds " + Twine(data.size()) +
                               " bytes of data, but its shape and type need " +
                               Twine(expected));
  return unpackTensor(*type, shape, ArrayRef<char>(data.data(), data.size()));
}

Expected<Tensor> readTensorFile(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
  if (!file)
    return fileError(path, "cannot read: " + file.getError().message());
  StringRef bytes = (*file)->getBuffer();
  if (path.ends_with(".npy"))
    return readNumpy(path, bytes);
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return fileError(path, "is not a serialized ONNX TensorProto");
  Expected<Tensor> tensor =
      tensorFromProto(proto, sys::path::parent_path(path));
  if (!tensor)
    return fileError(path, toString(tensor.takeError()));
  return tensor;
}

Error writeTensorProtoFile(const Tensor &tensor, StringRef name,
                           StringRef path) {
  std::string bytes = tensorToProto(tensor, name).SerializeAsString();
  SmallString<256> temporary(path);
  temporary += ".partial";
  {
    std::error_code error;
    raw_fd_ostream out(temporary, error, sys::fs::OF_None);
    if (error)
      return fileError(path, "cannot write: " + error.message());
    out << bytes;
    out.close();
    if (out.has_error()) {
      out.clear_error();
      sys::fs::remove(temporary);
      return fileError(path, "write failed");
    }
  }
  if (std::error_code error = sys::fs::rename(temporary, path)) {
    sys::fs::remove(temporary);
    return fileError(path, "cannot rename into place: " + error.message());
  }
  return Error::success();
}

} // namespace kiln
