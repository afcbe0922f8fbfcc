//===- DeviceRunner.h - kiln-run on a compiled artifact --------*- C++ -*-===//

#ifndef KILN_TOOLS_KILN_RUN_DEVICERUNNER_H
#define KILN_TOOLS_KILN_RUN_DEVICERUNNER_H

#include "kiln/Interpreter/Tensor.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace kiln {

/// How kiln-run runs an artifact.
struct ArtifactRunOptions {
  /// Train it with the training options, or run its function once.
  bool train = false;
  /// Time cuBLASLt's candidate algorithms at load.
  bool tuneGemms = false;
  /// Let cuBLASLt sum bias gradients where it can (SessionOptions).
  bool gemmBiasGradients = true;
  /// Replay the step as a CUDA graph (SessionOptions).
  bool cudaGraph = true;
  /// Launch grid-strided kernels in one wave of the GPU (SessionOptions).
  bool deviceGrids = true;
  /// After training, profile this many more steps and print where their
  /// time goes (0: no profile), in this many rows (0: every row).
  int profileSteps = 0;
  int profileRows = 10;
  /// Where a single run writes each output, if given.
  std::string outputDirectory;
};

/// Runs the artifact at `path` on the GPU as `options` say; a single run
/// reads `inputs` and passes each output to `print`. Returns the exit code.
int runArtifact(
    llvm::StringRef path, const llvm::StringMap<Tensor> &inputs,
    const ArtifactRunOptions &options,
    llvm::function_ref<void(llvm::StringRef, const Tensor &)> print);

} // namespace kiln

#endif // KILN_TOOLS_KILN_RUN_DEVICERUNNER_H
