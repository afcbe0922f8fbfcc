//===- CudnnAttention.h - an artifact's attention by cuDNN ------*- C++ -*-===//
//
// The fused flash attention graphs of cuDNN (forward with the log-sum-exp,
// backward recomputing the probabilities from it) for an artifact's
// LibraryAttention, planned at load time with the arena's addresses bound,
// so that a step only executes them (and a CUDA graph captures them).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_RUNTIME_CUDNNATTENTION_H
#define KILN_LIB_RUNTIME_CUDNNATTENTION_H

#include "CudnnGraph.h"

#include "kiln/Artifact/Artifact.h"

#include <memory>

namespace kiln::runtime {

class CudnnAttention {
public:
  /// Builds and plans `attention`'s graph on `handle`; null with `error`
  /// set when cuDNN cannot run it.
  static std::unique_ptr<CudnnAttention>
  create(const CudnnLibrary &api, cudnnHandle_t handle,
         const artifact::LibraryAttention &attention, std::string &error);
  /// The workspace the plan needs, with the f32 buffers of the backward
  /// pass (row sums of dO * O, the query gradient's accumulator).
  int64_t workspaceBytes() const;
  /// Binds the arena and a workspace of workspaceBytes().
  bool bind(char *arena, char *workspace, std::string &error);
  cudnnStatus_t execute(cudnnHandle_t handle) const {
    return graph.execute(handle);
  }

private:
  CudnnAttention(const CudnnLibrary &api,
                 const artifact::LibraryAttention &attention)
      : attention(attention), graph(api) {}
  void buildForward();
  void buildBackward();
  /// The artifact's operand `index` (attentionOperands' order) bound to
  /// the arena, as [batch, heads, rows, head_dim] or, `transposed`, its
  /// [batch, heads, head_dim, rows] view.
  GraphTensor operand(size_t index, bool transposed = false);
  /// The log-sum-exp [batch, heads, rows, 1] bound to the arena.
  GraphTensor logsumexp();
  /// Q K^T * scale, with -inf where the causal mask drops a key.
  GraphTensor maskedScores(GraphTensor q, GraphTensor kT, GraphTensor scale);

  const artifact::LibraryAttention &attention;
  CudnnGraph graph;
  /// The graph's tensors the arena or the workspace holds: uid and where
  /// (an arena offset, or a workspace offset when `inWorkspace`).
  struct Binding {
    int64_t uid, offset;
    bool inWorkspace;
  };
  std::vector<Binding> bindings;
  int64_t extraWorkspace = 0;
};

} // namespace kiln::runtime

#endif // KILN_LIB_RUNTIME_CUDNNATTENTION_H
