//===- Executor.h - where the CUDA target's tests run an artifact -*- C++
//-*-===//
//
// The same tests run an artifact in the CPU emulation (kiln-target-tests,
// in CI) and on a GPU through the runtime (kiln-gpu-tests, ctest label
// gpu). Both start from an arena of 0xff bytes, NaN in every float type,
// so that a kernel that reads a value nothing wrote cannot pass.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_UNITTESTS_TARGET_EXECUTOR_H
#define KILN_UNITTESTS_TARGET_EXECUTOR_H

#include "kiln/Artifact/Artifact.h"
#include "kiln/Interpreter/Tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::testing {

class Executor {
public:
  virtual ~Executor() = default;
  /// Whether the artifact has a tensor `name` (a parameter the step no
  /// longer reads, such as a constant of a recognized GELU, has none).
  virtual bool has(const std::string &name) const = 0;
  virtual void write(const std::string &name, const Tensor &value) = 0;
  virtual Tensor read(const std::string &name) = 0;
  /// Runs the artifact's operations once, in order.
  virtual void run() = 0;
  /// The runtime's message if a launch flagged an index out of range, or
  /// empty.
  virtual std::string indexError() = 0;
};

/// The blocks of any kernel the emulated device holds at once: fewer than
/// most grids, and a divisor of few row counts, so that the blocks of a
/// grid-strided kernel take uneven shares (ExecutorOptions::deviceGrids).
constexpr unsigned kEmulatedResidentBlocks = 5;

/// How an executor runs the artifact (runtime::SessionOptions).
struct ExecutorOptions {
  /// GEMMs sum bias gradients (BGRADA/BGRADB) where they can; off, the
  /// artifact's fallback kernels do.
  bool gemmBiasGradients = true;
  /// On a GPU, the step is replayed as a CUDA graph; off, launched
  /// operation by operation. The emulation always runs them in order.
  bool cudaGraph = true;
  /// A kernel that strides over its grid runs in as many blocks as the
  /// device holds at once (kEmulatedResidentBlocks in the emulation), where
  /// fewer than its grid; off, in its grid.
  bool deviceGrids = true;
  /// At most this many blocks for such a kernel, on either executor (0: no
  /// limit; runtime::SessionOptions::gridLimit).
  unsigned gridLimit = 0;
};

/// The executor this test binary was built for; null with `error` set.
std::unique_ptr<Executor> makeExecutor(const artifact::ArtifactT &artifact,
                                       std::string &error,
                                       const ExecutorOptions &options = {});

/// The architectures artifacts are compiled for: none for the emulation,
/// which reads the source.
std::vector<std::string> executorArchitectures();

/// Whether results come from cuBLAS, which accumulates in f32 where the
/// interpreter accumulates in f64.
bool gemmsAccumulateInF32();

} // namespace kiln::testing

#endif // KILN_UNITTESTS_TARGET_EXECUTOR_H
