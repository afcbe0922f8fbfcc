//===- Safetensors.cpp - the safetensors file format ----------------------===//
//
// Reading and writing safetensors files, and atomic file replacement.
//
//===----------------------------------------------------------------------===//

#include "kiln/Training/Safetensors.h"

#include "kiln/Interpreter/TensorAttr.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <fcntl.h>
#include <unistd.h>

using namespace llvm;

namespace kiln {

static Error fileError(StringRef path, const Twine &reason) {
  return createStringError(inconvertibleErrorCode(), path + ": " + reason);
}

static StringRef safetensorsDtype(DType type) {
  switch (type) {
  case DType::F32: case DType::TF32: return "F32"; // tf32 is exact in f32
  case DType::F64: return "F64";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::I64: return "I64";
  case DType::I32: return "I32";
  case DType::I16: return "I16";
  case DType::I8: return "I8";
  case DType::U64: return "U64";
  case DType::U32: return "U32";
  case DType::U16: return "U16";
  case DType::U8: return "U8";
  case DType::Bool: return "BOOL";
  }
  return "";
}

static std::optional<DType> dtypeFromSafetensors(StringRef name) {
  for (DType type : {DType::F32, DType::F64, DType::F16, DType::BF16,
                     DType::I64, DType::I32, DType::I16, DType::I8, DType::U64,
                     DType::U32, DType::U16, DType::U8, DType::Bool})
    if (safetensorsDtype(type) == name)
      return type;
  return std::nullopt;
}

Error writeFileAtomically(StringRef path, StringRef bytes) {
  std::string temporary = (path + ".partial").str();
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return fileError(path, "cannot write: " +
                               std::error_code(errno, std::generic_category())
                                   .message());
  const char *data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t written = ::write(fd, data, left);
    if (written <= 0) {
      ::close(fd);
      sys::fs::remove(temporary);
      return fileError(path, "write failed (disk full?)");
    }
    data += written;
    left -= written;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    sys::fs::remove(temporary);
    return fileError(path, "cannot flush the file to disk");
  }
  if (std::error_code error = sys::fs::rename(temporary, path)) {
    sys::fs::remove(temporary);
    return fileError(path, "cannot rename into place: " + error.message());
  }
  return Error::success();
}

Error writeSafetensors(StringRef path, const NamedTensors &tensors,
                       const std::map<std::string, std::string> &metadata) {
  json::Object header;
  json::Object meta;
  for (const auto &[key, value] : metadata)
    meta[key] = value;
  if (!metadata.empty())
    header["__metadata__"] = std::move(meta);
  std::string data;
  for (const auto &[name, tensor] : tensors) {
    std::vector<char> bytes = packTensor(tensor);
    json::Array shape;
    for (int64_t size : tensor.getShape())
      shape.push_back(size);
    header[name] = json::Object{
        {"dtype", safetensorsDtype(tensor.getDType())},
        {"shape", std::move(shape)},
        {"data_offsets", json::Array{static_cast<int64_t>(data.size()),
                                     static_cast<int64_t>(data.size() +
                                                          bytes.size())}}};
    data.append(bytes.begin(), bytes.end());
  }
  std::string headerText;
  raw_string_ostream os(headerText);
  os << json::Value(std::move(header));
  os.flush();
  headerText.append((8 - headerText.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  uint64_t length = headerText.size();
  for (int i = 0; i < 8; ++i)
    file[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  file += headerText;
  file += data;
  return writeFileAtomically(path, file);
}

Expected<SafetensorsFile> readSafetensors(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
  if (!file)
    return fileError(path, "cannot read: " + file.getError().message());
  StringRef bytes = (*file)->getBuffer();
  if (bytes.size() < 8)
    return fileError(path, "is truncated (no header length)");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = length << 8 | static_cast<unsigned char>(bytes[i]);
  if (length > bytes.size() - 8)
    return fileError(path, "is truncated in its header");
  Expected<json::Value> header = json::parse(bytes.substr(8, length));
  if (!header)
    return fileError(path, "has a malformed header: " +
                               toString(header.takeError()));
  json::Object *object = header->getAsObject();
  if (!object)
    return fileError(path, "has a header that is not a JSON object");
  StringRef data = bytes.drop_front(8 + length);
  SafetensorsFile result;
  for (auto &[key, value] : *object) {
    if (key == "__metadata__") {
      if (json::Object *meta = value.getAsObject())
        for (auto &[metaKey, metaValue] : *meta)
          if (std::optional<StringRef> text = metaValue.getAsString())
            result.metadata[metaKey.str()] = text->str();
      continue;
    }
    json::Object *entry = value.getAsObject();
    std::optional<StringRef> dtypeName =
        entry ? entry->getString("dtype") : std::nullopt;
    json::Array *shapeArray = entry ? entry->getArray("shape") : nullptr;
    json::Array *offsets = entry ? entry->getArray("data_offsets") : nullptr;
    if (!dtypeName || !shapeArray || !offsets || offsets->size() != 2)
      return fileError(path, "tensor '" + key.str() + "' has a malformed entry");
    std::optional<DType> dtype = dtypeFromSafetensors(*dtypeName);
    if (!dtype)
      return fileError(path, "tensor '" + key.str() + "' has unsupported dtype " +
                                 *dtypeName);
    SmallVector<int64_t> shape;
    for (const json::Value &size : *shapeArray) {
      std::optional<int64_t> dim = size.getAsInteger();
      if (!dim || *dim < 0)
        return fileError(path, "tensor '" + key.str() + "' has a bad shape");
      shape.push_back(*dim);
    }
    std::optional<int64_t> begin = (*offsets)[0].getAsInteger();
    std::optional<int64_t> end = (*offsets)[1].getAsInteger();
    uint64_t expected = static_cast<uint64_t>(product(shape)) * byteWidth(*dtype);
    if (!begin || !end || *begin < 0 || *end < *begin ||
        static_cast<uint64_t>(*end) > data.size() ||
        static_cast<uint64_t>(*end - *begin) != expected)
      return fileError(path, "tensor '" + key.str() +
                                 "' has a byte range that does not fit its "
                                 "shape or the file (truncated?)");
    result.tensors.emplace_back(
        key.str(), unpackTensor(*dtype, shape,
                                ArrayRef<char>(data.data() + *begin, expected)));
  }
  return result;
}

} // namespace kiln
