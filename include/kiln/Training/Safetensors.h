//===- Safetensors.h - the safetensors file format ---------------*- C++ -*-===//
//
// Hugging Face's safetensors: an 8-byte little-endian header length, a JSON
// header mapping each tensor name to its dtype, shape and byte range (plus
// "__metadata__", string to string), then the raw little-endian bytes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRAINING_SAFETENSORS_H
#define KILN_TRAINING_SAFETENSORS_H

#include "kiln/Interpreter/Tensor.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Writes `tensors` to `path` through a temporary file that is flushed to
/// disk and renamed, so that `path` is complete or untouched.
llvm::Error writeSafetensors(llvm::StringRef path, const NamedTensors &tensors,
                             const std::map<std::string, std::string> &metadata);

struct SafetensorsFile {
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;
};

/// Reads a safetensors file; every inconsistency (truncation, overlapping or
/// out-of-range byte ranges, unknown dtypes) is an error naming the file.
llvm::Expected<SafetensorsFile> readSafetensors(llvm::StringRef path);

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename).
llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef bytes);

} // namespace kiln

#endif // KILN_TRAINING_SAFETENSORS_H
