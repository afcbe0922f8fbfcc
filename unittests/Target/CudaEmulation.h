//===- CudaEmulation.h - running an artifact on the CPU ---------*- C++ -*-===//
//
// Executes a `.kiln` artifact without a GPU: its generated CUDA C++ is
// compiled as host C++ (a small shim defines the CUDA keywords and runs the
// threads of each block as fibers, so barriers and shared memory behave as
// on a GPU) and its GEMMs and cuDNN attentions run as plain loops over their
// descriptions. This
// checks the CUDA target's code and arena layout against the interpreter in CI;
// the GPU tests check the same artifacts on a device.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_UNITTESTS_TARGET_CUDAEMULATION_H
#define KILN_UNITTESTS_TARGET_CUDAEMULATION_H

#include "Executor.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::testing {

/// Compiles kernel source `source` after the shim with the host compiler,
/// in `directory`, and opens the library; null, with the compiler's output
/// or dlopen's message in `error`, where that fails.
void *openHostLibrary(const std::string &source, const std::string &directory,
                      std::string &error);

class CudaEmulation : public Executor {
public:
  /// Compiles the artifact's kernels with the host compiler; on failure
  /// `error` holds the compiler's output.
  static std::unique_ptr<CudaEmulation>
  create(const artifact::ArtifactT &artifact, const ExecutorOptions &options,
         std::string &error);
  ~CudaEmulation() override;

  bool has(const std::string &name) const override;
  void write(const std::string &name, const Tensor &value) override;
  Tensor read(const std::string &name) override;
  void run() override;
  std::string indexError() override;

private:
  CudaEmulation(const artifact::ArtifactT &artifact,
                const ExecutorOptions &options)
      : artifact(artifact), options(options) {}
  const artifact::TensorT &tensor(const std::string &name) const;
  void gemm(const artifact::GemmT &g);
  /// Computes what cuDNN's attention `a` does (AttentionEmulation.cpp).
  void libraryAttention(const artifact::LibraryAttentionT &a);
  /// Writes the bias gradient of `g`, whose operands are `a` and `b`.
  void storeBiasGradient(const artifact::GemmT &g, const Tensor &a,
                         const Tensor &b);

  const artifact::ArtifactT &artifact;
  ExecutorOptions options;
  std::vector<uint8_t> arena;
  void *library = nullptr;
  std::vector<void (*)(void *const *)> kernels;
  using LaunchFunction = int (*)(void (*)(void *const *), void *const *,
                                 unsigned, unsigned, unsigned);
  LaunchFunction launchKernel = nullptr;
  std::string directory;
};

} // namespace kiln::testing

#endif // KILN_UNITTESTS_TARGET_CUDAEMULATION_H
