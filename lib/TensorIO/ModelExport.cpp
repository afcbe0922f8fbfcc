//===- ModelExport.cpp - ONNX models with trained weights -----------------===//
//
// Initializer replacement in an ONNX ModelProto.
//
//===----------------------------------------------------------------------===//

#include "kiln/TensorIO/ModelExport.h"

#include "kiln/TensorIO/TensorFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace kiln {

Error exportONNXWithInitializers(StringRef modelPath, StringRef outputPath,
                                 const StringMap<Tensor> &values) {
  auto fail = [](StringRef path, const Twine &reason) {
    return createStringError(inconvertibleErrorCode(), path + ": " + reason);
  };
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(modelPath);
  onnx::ModelProto model;
  if (!file || !model.ParseFromArray((*file)->getBufferStart(),
                                     (*file)->getBufferSize()))
    return fail(modelPath, "cannot read the model to export");
  for (onnx::TensorProto &initializer : *model.mutable_graph()->mutable_initializer()) {
    auto it = values.find(initializer.name());
    if (it == values.end())
      continue;
    initializer = tensorToProto(it->second, initializer.name());
  }
  std::string bytes = model.SerializeAsString();
  std::string temporary = (outputPath + ".partial").str();
  {
    std::error_code error;
    raw_fd_ostream out(temporary, error);
    if (error)
      return fail(outputPath, "cannot write: " + error.message());
    out << bytes;
    out.close();
    if (out.has_error()) {
      out.clear_error();
      sys::fs::remove(temporary);
      return fail(outputPath, "write failed");
    }
  }
  if (std::error_code error = sys::fs::rename(temporary, outputPath))
    return fail(outputPath, "cannot rename into place: " + error.message());
  return Error::success();
}

} // namespace kiln
