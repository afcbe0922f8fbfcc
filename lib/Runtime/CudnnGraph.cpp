//===- CudnnGraph.cpp - cuDNN backend graphs, built by hand ---------------===//

#include "CudnnGraph.h"

namespace kiln::runtime {

BackendDescriptor::~BackendDescriptor() {
  if (raw)
    api->destroyDescriptor(raw);
}

bool CudnnGraph::check(cudnnStatus_t status, const char *what) {
  if (status == CUDNN_STATUS_SUCCESS || !error.empty())
    return status == CUDNN_STATUS_SUCCESS && error.empty();
  char detail[512] = "";
  api.lastErrorString(detail, sizeof(detail));
  error = std::string(what) + ": " + api.errorString(status) +
          (detail[0] ? std::string(" (") + detail + ")" : std::string());
  return false;
}

cudnnBackendDescriptor_t CudnnGraph::create(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t raw = nullptr;
  if (!error.empty() ||
      !check(api.createDescriptor(type, &raw), "creating a descriptor"))
    return nullptr;
  owned.emplace_back(api, raw);
  return raw;
}

void CudnnGraph::set(cudnnBackendDescriptor_t descriptor,
                     cudnnBackendAttributeName_t name,
                     cudnnBackendAttributeType_t type, int64_t count,
                     const void *values) {
  std::string what = "setting attribute " + std::to_string(name);
  if (error.empty())
    check(api.setAttribute(descriptor, name, type, count, values),
          what.c_str());
}

void CudnnGraph::finalize(cudnnBackendDescriptor_t descriptor,
                          const char *what) {
  if (error.empty())
    check(api.finalize(descriptor), what);
}

GraphTensor CudnnGraph::describe(cudnnDataType_t type, Dims dims, Dims strides,
                                 cudnnBackendAttributeName_t flag) {
  GraphTensor tensor{nextUid++, create(CUDNN_BACKEND_TENSOR_DESCRIPTOR)};
  int64_t alignment = 16;
  bool set_ = true;
  set(tensor.descriptor, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
      &type);
  set(tensor.descriptor, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4,
      dims.data());
  set(tensor.descriptor, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4,
      strides.data());
  set(tensor.descriptor, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1,
      &tensor.uid);
  set(tensor.descriptor, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
      &alignment);
  if (flag != CUDNN_ATTR_TENSOR_DATA_TYPE)
    set(tensor.descriptor, flag, CUDNN_TYPE_BOOLEAN, 1, &set_);
  finalize(tensor.descriptor, "a tensor descriptor");
  return tensor;
}

GraphTensor CudnnGraph::tensor(cudnnDataType_t type, Dims dims, Dims strides,
                               bool virtual_) {
  return describe(type, dims, strides,
                  virtual_ ? CUDNN_ATTR_TENSOR_IS_VIRTUAL
                           : CUDNN_ATTR_TENSOR_DATA_TYPE);
}

GraphTensor CudnnGraph::intermediate(Dims dims, cudnnDataType_t type) {
  Dims strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  return tensor(type, dims, strides, /*virtual_=*/true);
}

GraphTensor CudnnGraph::scalar(float value) {
  GraphTensor tensor = describe(CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1},
                                CUDNN_ATTR_TENSOR_IS_BY_VALUE);
  scalarValues.push_back(std::make_unique<float>(value));
  scalarPointers.push_back({tensor.uid, scalarValues.back().get()});
  return tensor;
}

void CudnnGraph::matmul(GraphTensor a, GraphTensor b, GraphTensor y) {
  cudnnBackendDescriptor_t description =
      create(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set(description, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
      &compute);
  finalize(description, "a matmul descriptor");
  cudnnBackendDescriptor_t operation =
      create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  set(operation, CUDNN_ATTR_OPERATION_MATMUL_ADESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a.descriptor);
  set(operation, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b.descriptor);
  set(operation, CUDNN_ATTR_OPERATION_MATMUL_CDESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.descriptor);
  set(operation, CUDNN_ATTR_OPERATION_MATMUL_DESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &description);
  finalize(operation, "a matmul operation");
  operations.push_back(operation);
}

void CudnnGraph::pointwise(cudnnPointwiseMode_t mode, GraphTensor x,
                           GraphTensor y, const GraphTensor *b,
                           const GraphTensor *t, int64_t axis,
                           cudnnDataType_t precision) {
  cudnnBackendDescriptor_t description =
      create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  set(description, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1,
      &mode);
  set(description, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
      &precision);
  if (mode == CUDNN_POINTWISE_GEN_INDEX)
    set(description, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  finalize(description, "a pointwise descriptor");
  cudnnBackendDescriptor_t operation =
      create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  set(operation, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &description);
  set(operation, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.descriptor);
  set(operation, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.descriptor);
  if (b)
    set(operation, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->descriptor);
  if (t)
    set(operation, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->descriptor);
  float one = 1.0f;
  set(operation, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1,
      &one);
  set(operation, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1,
      &one);
  finalize(operation, "a pointwise operation");
  operations.push_back(operation);
}

void CudnnGraph::reduction(cudnnReduceTensorOp_t op, GraphTensor x,
                           GraphTensor y) {
  cudnnBackendDescriptor_t description =
      create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set(description, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
      &compute);
  set(description, CUDNN_ATTR_REDUCTION_OPERATOR,
      CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op);
  finalize(description, "a reduction descriptor");
  cudnnBackendDescriptor_t operation =
      create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  set(operation, CUDNN_ATTR_OPERATION_REDUCTION_DESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &description);
  set(operation, CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.descriptor);
  set(operation, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.descriptor);
  finalize(operation, "a reduction operation");
  operations.push_back(operation);
}

void CudnnGraph::reshape(GraphTensor x, GraphTensor y) {
  cudnnBackendDescriptor_t operation =
      create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  set(operation, CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.descriptor);
  set(operation, CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.descriptor);
  finalize(operation, "a reshape operation");
  operations.push_back(operation);
}

bool CudnnGraph::plan(cudnnHandle_t handle) {
  cudnnBackendDescriptor_t graph =
      create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      static_cast<int64_t>(operations.size()), operations.data());
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  finalize(graph, "the operation graph");
  cudnnBackendDescriptor_t heuristic =
      create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  set(heuristic, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  set(heuristic, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  finalize(heuristic, "the engine heuristic");
  if (!error.empty())
    return false;
  // The configurations it proposes, best first.
  constexpr int64_t kCandidates = 8;
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < kCandidates; ++i)
    configs.push_back(create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
  int64_t proposed = 0;
  if (!check(api.getAttribute(heuristic, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                              CUDNN_TYPE_BACKEND_DESCRIPTOR, kCandidates,
                              &proposed, configs.data()),
             "the engine heuristic's results"))
    return false;
  for (int64_t i = 0; i < proposed; ++i) {
    cudnnBackendDescriptor_t candidate =
        create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    if (!error.empty())
      return false;
    if (api.setAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                         CUDNN_TYPE_HANDLE, 1,
                         &handle) != CUDNN_STATUS_SUCCESS ||
        api.setAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                         &configs[i]) != CUDNN_STATUS_SUCCESS ||
        api.finalize(candidate) != CUDNN_STATUS_SUCCESS)
      continue; // this engine cannot run the graph here; try the next
    executionPlan = candidate;
    int64_t count = 0;
    return check(api.getAttribute(executionPlan,
                                  CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                  CUDNN_TYPE_INT64, 1, &count, &workspace),
                 "the plan's workspace size");
  }
  error = "no engine of the " + std::to_string(proposed) +
          " cuDNN proposes runs the graph";
  return false;
}

bool CudnnGraph::bind(const std::vector<std::pair<int64_t, void *>> &pointers,
                      void *workspaceMemory) {
  std::vector<int64_t> uids;
  std::vector<void *> data;
  for (auto [uid, pointer] : pointers) {
    uids.push_back(uid);
    data.push_back(pointer);
  }
  int64_t count = static_cast<int64_t>(uids.size());
  variantPack = create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  set(variantPack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count,
      uids.data());
  set(variantPack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
      count, data.data());
  set(variantPack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
      &workspaceMemory);
  finalize(variantPack, "the variant pack");
  return error.empty();
}

cudnnStatus_t CudnnGraph::execute(cudnnHandle_t handle) const {
  return api.execute(handle, executionPlan, variantPack);
}

} // namespace kiln::runtime
