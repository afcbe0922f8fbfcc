//===- ModelExport.h - ONNX models with trained weights ---------*- C++ -*-===//
//
// Writes a copy of an ONNX model whose initializers hold new values, so that
// trained weights run anywhere the original model did (kiln-run included).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TENSORIO_MODELEXPORT_H
#define KILN_TENSORIO_MODELEXPORT_H

#include "kiln/Interpreter/Tensor.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace kiln {

/// Copies the model at `modelPath` to `outputPath` with every initializer
/// named in `values` replaced (stored inline, raw data). The file is written
/// under a temporary name and renamed.
llvm::Error exportONNXWithInitializers(llvm::StringRef modelPath,
                                       llvm::StringRef outputPath,
                                       const llvm::StringMap<Tensor> &values);

} // namespace kiln

#endif // KILN_TENSORIO_MODELEXPORT_H
