//===- CudnnGraph.h - cuDNN backend graphs, built by hand --------*- C++
//-*-===//
//
// A small builder over cuDNN's backend API (no cudnn-frontend here): tensor
// descriptors with unique ids, the matmul, pointwise, reduction and reshape
// operations that fused attention graphs are made of, and the execution
// plan of the first engine configuration cuDNN's heuristic proposes that
// finalizes. Every call's status is checked; the first failure is kept,
// naming the call, and later calls do nothing.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_RUNTIME_CUDNNGRAPH_H
#define KILN_LIB_RUNTIME_CUDNNGRAPH_H

#include "CudnnLibrary.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

/// A backend descriptor, destroyed with its owner.
class BackendDescriptor {
public:
  BackendDescriptor(const CudnnLibrary &api, cudnnBackendDescriptor_t raw)
      : api(&api), raw(raw) {}
  BackendDescriptor(BackendDescriptor &&other) noexcept
      : api(other.api), raw(other.raw) {
    other.raw = nullptr;
  }
  BackendDescriptor(const BackendDescriptor &) = delete;
  ~BackendDescriptor();

private:
  const CudnnLibrary *api;
  cudnnBackendDescriptor_t raw = nullptr;
};

/// A 4-D tensor of a graph.
struct GraphTensor {
  int64_t uid = 0;
  cudnnBackendDescriptor_t descriptor = nullptr;
};

class CudnnGraph {
public:
  using Dims = std::array<int64_t, 4>;

  explicit CudnnGraph(const CudnnLibrary &api) : api(api) {}

  /// A tensor the caller supplies memory for (`virtual_` false), or one
  /// cuDNN keeps inside the fused kernel.
  GraphTensor tensor(cudnnDataType_t type, Dims dims, Dims strides,
                     bool virtual_);
  /// A virtual f32 tensor of `dims`, row-major.
  GraphTensor intermediate(Dims dims, cudnnDataType_t type = CUDNN_DATA_FLOAT);
  /// A scalar passed by value at execution (the scale, -inf, 1).
  GraphTensor scalar(float value);

  /// y = a x b, batched over the first two dimensions, in f32.
  void matmul(GraphTensor a, GraphTensor b, GraphTensor y);
  /// y = mode(x [, b [, t]]); `axis` for GEN_INDEX; `precision` the math
  /// type.
  void pointwise(cudnnPointwiseMode_t mode, GraphTensor x, GraphTensor y,
                 const GraphTensor *b = nullptr, const GraphTensor *t = nullptr,
                 int64_t axis = -1,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT);
  /// y = the reduction of x over the dimensions where y has size 1.
  void reduction(cudnnReduceTensorOp_t op, GraphTensor x, GraphTensor y);
  /// y = x viewed with y's dimensions and strides (a transpose).
  void reshape(GraphTensor x, GraphTensor y);

  /// The operation graph, the heuristic's engine configurations and the
  /// plan of the first that finalizes; false with `error` set otherwise.
  bool plan(cudnnHandle_t handle);
  /// Binds `pointers` (uid, address) for every non-virtual tensor and
  /// by-value scalar, and `workspace`, for every execution.
  bool bind(const std::vector<std::pair<int64_t, void *>> &pointers,
            void *workspace);
  /// Runs the plan on the bound memory, on the handle's stream.
  cudnnStatus_t execute(cudnnHandle_t handle) const;
  int64_t workspaceBytes() const { return workspace; }
  /// The by-value scalars, each with the host address of its value.
  const std::vector<std::pair<int64_t, void *>> &scalars() const {
    return scalarPointers;
  }
  const std::string &failure() const { return error; }

private:
  /// A finalized tensor descriptor with a new uid, `flag` (IS_VIRTUAL or
  /// IS_BY_VALUE) set, or neither when it is CUDNN_ATTR_TENSOR_DATA_TYPE.
  GraphTensor describe(cudnnDataType_t type, Dims dims, Dims strides,
                       cudnnBackendAttributeName_t flag);
  /// A new descriptor of `type`, kept until the graph goes.
  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type);
  void set(cudnnBackendDescriptor_t descriptor,
           cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, const void *values);
  void finalize(cudnnBackendDescriptor_t descriptor, const char *what);
  bool check(cudnnStatus_t status, const char *what);

  const CudnnLibrary &api;
  std::vector<BackendDescriptor> owned;
  std::vector<cudnnBackendDescriptor_t> operations;
  /// Scalar values live here, at stable addresses, for the variant pack.
  std::vector<std::unique_ptr<float>> scalarValues;
  std::vector<std::pair<int64_t, void *>> scalarPointers;
  cudnnBackendDescriptor_t executionPlan = nullptr, variantPack = nullptr;
  int64_t nextUid = 1;
  int64_t workspace = 0;
  std::string error;
};

} // namespace kiln::runtime

#endif // KILN_LIB_RUNTIME_CUDNNGRAPH_H
