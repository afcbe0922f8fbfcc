//===- DeviceRunner.h - kiln-run on a compiled artifact ----------*- C++
//-*-===//

#ifndef KILN_TOOLS_KILN_RUN_DEVICERUNNER_H
#define KILN_TOOLS_KILN_RUN_DEVICERUNNER_H

#include "kiln/Interpreter/Tensor.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

namespace kiln {

/// Runs the artifact at `path` on the GPU: trains it (`train`, with the
/// training options) or runs its function once on `inputs`, passing each
/// output to `print` and writing it to `outputDirectory` when given.
/// `tuneGemms` times cuBLASLt's candidate algorithms at load.
/// Returns the exit code.
int runArtifact(
    llvm::StringRef path, const llvm::StringMap<Tensor> &inputs, bool train,
    bool tuneGemms, llvm::StringRef outputDirectory,
    llvm::function_ref<void(llvm::StringRef, const Tensor &)> print);

} // namespace kiln

#endif // KILN_TOOLS_KILN_RUN_DEVICERUNNER_H
