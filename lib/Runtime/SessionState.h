//===- SessionState.h - what a Session holds on the GPU ---------*- C++ -*-===//
//
// The CUDA and cuBLASLt objects behind runtime::Session, shared by the
// files that implement it (loading and stepping, GEMMs, profiling).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_RUNTIME_SESSIONSTATE_H
#define KILN_LIB_RUNTIME_SESSIONSTATE_H

#include "CudnnAttention.h"

#include "kiln/Runtime/Session.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace kiln::runtime {

/// The cuBLASLt workspace every GEMM of a session shares.
constexpr size_t kWorkspaceBytes = 32u << 20;

/// The name and description of a CUDA error.
inline std::string cudaMessage(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " +
         cudaGetErrorString(status);
}

/// The cuBLASLt type of an artifact element type (tf32 values are f32).
inline cudaDataType_t cudaType(artifact::ElementType type) {
  switch (type) {
  case artifact::ElementType::F64:
    return CUDA_R_64F;
  case artifact::ElementType::F16:
    return CUDA_R_16F;
  case artifact::ElementType::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

/// One GEMM's cuBLASLt objects, the algorithms the heuristic proposed (best
/// first) and the one chosen.
struct GemmPlan {
  const artifact::Gemm *gemm = nullptr;
  /// Its place among the artifact's operations.
  size_t index = 0;
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  cublasLtMatmulAlgo_t algorithm{};
  /// Whether it runs without the artifact's bias gradient epilogue, whose
  /// fallback kernels then run.
  bool withoutEpilogue = false;
};

/// Runs `plan`'s GEMM with `algorithm` on `stream` (Gemms.cpp).
cublasStatus_t runGemm(cublasLtHandle_t blas, const GemmPlan &plan,
                       const cublasLtMatmulAlgo_t &algorithm, char *arena,
                       void *workspace, cudaStream_t stream);

/// Launches `kernel` in `grid` blocks of `block` threads for each of
/// `launch`'s batches, with the argument table at `table` on `stream`.
inline cudaError_t launchKernel(cudaKernel_t kernel, void *table, unsigned grid,
                                const artifact::KernelLaunch &launch,
                                cudaStream_t stream) {
  void *arguments[] = {&table};
  return cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                          dim3(grid, launch.batches()), dim3(launch.block()),
                          arguments, 0, stream);
}

struct Session::State {
  int device = 0;
  cudaStream_t stream = nullptr;
  char *arena = nullptr;
  void **argumentTables = nullptr;
  cudaLibrary_t library = nullptr;
  std::vector<cudaKernel_t> kernels;
  /// Per operation: the device address of its argument table, and the
  /// blocks a kernel launch runs (SessionOptions::deviceGrids).
  std::vector<void *> tables;
  std::vector<unsigned> grids;
  cublasLtHandle_t blas = nullptr;
  void *workspace = nullptr;
  std::vector<GemmPlan> gemms;
  /// cuDNN's attention graphs by operation index, and their shared
  /// workspace.
  const CudnnLibrary *cudnnApi = nullptr;
  cudnnHandle_t cudnn = nullptr;
  std::map<size_t, std::unique_ptr<CudnnAttention>> attentions;
  size_t attentionWorkspaceBytes = 0;
  void *attentionWorkspace = nullptr;
  /// Per operation: whether the step skips it (the fallback of an epilogue
  /// its GEMM computes).
  std::vector<bool> skipped;
  /// The step as a CUDA graph, captured at the first step; or every step
  /// launched anew when `launchEachStep`.
  bool launchEachStep = false;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t replay = nullptr;
  /// While profiling: events recorded before each operation and after the
  /// last one.
  std::vector<cudaEvent_t> marks;
  /// Pinned copies of the small tensors written every step (the batch, the
  /// learning rate), and the event after each one's last upload.
  struct Staging {
    void *pinned = nullptr;
    cudaEvent_t uploaded = nullptr;
  };
  std::map<std::string, Staging> staging;

  ~State() {
    for (auto &[name, buffer] : staging) {
      if (buffer.uploaded)
        cudaEventDestroy(buffer.uploaded);
      if (buffer.pinned)
        cudaFreeHost(buffer.pinned);
    }
    if (replay)
      cudaGraphExecDestroy(replay);
    if (graph)
      cudaGraphDestroy(graph);
    for (GemmPlan &g : gemms) {
      if (g.operation)
        cublasLtMatmulDescDestroy(g.operation);
      if (g.a)
        cublasLtMatrixLayoutDestroy(g.a);
      if (g.b)
        cublasLtMatrixLayoutDestroy(g.b);
      if (g.d)
        cublasLtMatrixLayoutDestroy(g.d);
    }
    attentions.clear();
    if (cudnn)
      cudnnApi->destroy(cudnn);
    if (attentionWorkspace)
      cudaFree(attentionWorkspace);
    if (blas)
      cublasLtDestroy(blas);
    if (workspace)
      cudaFree(workspace);
    if (library)
      cudaLibraryUnload(library);
    if (argumentTables)
      cudaFree(argumentTables);
    if (arena)
      cudaFree(arena);
    if (stream)
      cudaStreamDestroy(stream);
  }
};

} // namespace kiln::runtime

#endif // KILN_LIB_RUNTIME_SESSIONSTATE_H
