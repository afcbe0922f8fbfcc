//===- ArtifactTensors.h - host tensors in an artifact's storage -*- C++
//-*-===//
//
// Converts between the interpreter's Tensor and the bytes an artifact's
// arena holds: constants and initial values when compiling, inputs and
// results when kiln-run and the tests run an artifact.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_ARTIFACTTENSORS_H
#define KILN_TARGET_ARTIFACTTENSORS_H

#include "kiln/Artifact/Artifact.h"
#include "kiln/Interpreter/Tensor.h"

#include <vector>

namespace kiln {

DType dtypeOf(artifact::ElementType type);

/// `tensor`'s elements as `type` stores them (floats rounded to nearest).
std::vector<uint8_t> encodeTensor(const Tensor &tensor,
                                  artifact::ElementType type);

/// The tensor of `shape` that `bytes` hold as `type`.
Tensor decodeTensor(const uint8_t *bytes, artifact::ElementType type,
                    llvm::ArrayRef<int64_t> shape);

} // namespace kiln

#endif // KILN_TARGET_ARTIFACTTENSORS_H
