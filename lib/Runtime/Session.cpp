//===- Session.cpp - a compiled step on one GPU ---------------------------===//
//
// Loading checks everything before allocating: the artifact, the GPU, the
// code for its architecture, the free memory. Kernels come from the cubin
// of the device's exact architecture, or else from the PTX when the device
// is newer. GEMMs are cuBLASLt matmuls planned at load time (Gemms.cpp);
// cuDNN's attention graphs (CudnnAttention.h) are planned then too.
//
//===----------------------------------------------------------------------===//

#include "SessionState.h"

#include "kiln/Support/InitialValues.h"

#include <algorithm>
#include <cstring>

namespace kiln::runtime {

using artifact::ElementType;

namespace {

/// Writes up to this size are staged in pinned memory (see Session::write).
constexpr size_t kStagedBytes = 16u << 20;

} // namespace

Session::~Session() = default;

std::unique_ptr<Session> Session::load(const std::string &path,
                                       const SessionOptions &options,
                                       std::string &error) {
  std::unique_ptr<Session> session(new Session());
  if (!artifact::read(path, session->bytes, session->model, error))
    return nullptr;
  session->state = std::make_unique<State>();
  if (!session->initialize(options, error))
    return nullptr;
  return session;
}

const artifact::Tensor *Session::tensor(const std::string &name) const {
  for (const artifact::Tensor *t : *model->tensors())
    if (t->name()->str() == name)
      return t;
  return nullptr;
}

/// The kernel image for a device of compute capability `major.minor`.
static bool chooseImage(const artifact::Artifact &model, int major, int minor,
                        const void *&image, std::string &error) {
  std::string arch = "sm_" + std::to_string(major * 10 + minor);
  std::string compiled;
  if (model.cubins())
    for (const artifact::Cubin *cubin : *model.cubins()) {
      compiled += (compiled.empty() ? "" : ", ") + cubin->arch()->str();
      if (cubin->arch()->str() == arch) {
        image = cubin->image()->data();
        return true;
      }
    }
  if (model.ptx() && model.ptx_arch()) {
    int ptxArch = std::atoi(model.ptx_arch()->c_str() + 3);
    if (ptxArch <= major * 10 + minor) {
      image = model.ptx()->c_str();
      return true;
    }
  }
  error = "this GPU is " + arch + ", and the artifact has code for " +
          (compiled.empty() ? std::string("no GPU") : compiled) +
          " only: compile it again with --arch=" + arch +
          ", or train on the CPU with --device=cpu";
  return false;
}

bool Session::initialize(const SessionOptions &options, std::string &error) {
  State &s = *state;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    error =
        "no CUDA GPU is available (" +
        (status == cudaSuccess ? std::string("none found")
                               : cudaMessage(status)) +
        "); train on the CPU with --device=cpu and the model's .onnx or .mlir";
    return false;
  }
  if (options.device >= count) {
    error = "there is no GPU " + std::to_string(options.device);
    return false;
  }
  s.device = options.device;
  s.launchEachStep = !options.cudaGraph;
  cudaDeviceProp properties;
  auto check = [&](cudaError_t result, const char *what) {
    if (result != cudaSuccess)
      error = std::string(what) + ": " + cudaMessage(result);
    return result == cudaSuccess;
  };
  if (!check(cudaSetDevice(s.device), "cannot select the GPU") ||
      !check(cudaGetDeviceProperties(&properties, s.device),
             "cannot query the GPU"))
    return false;
  description = std::string(properties.name) + " (sm_" +
                std::to_string(properties.major * 10 + properties.minor) + ")";
  const void *image = nullptr;
  if (!chooseImage(*model, properties.major, properties.minor, image, error))
    return false;

  // cuDNN's attention graphs are planned first: their workspace counts.
  if (!planAttention(error))
    return false;

  // The plan must fit before anything is allocated.
  size_t freeBytes = 0, totalBytes = 0;
  if (!check(cudaMemGetInfo(&freeBytes, &totalBytes),
             "cannot query GPU memory"))
    return false;
  size_t operations = model->operations() ? model->operations()->size() : 0;
  size_t tableBytes = 0;
  for (size_t i = 0; i < operations; ++i)
    if (const artifact::KernelLaunch *launch =
            model->operations()->Get(i)->kernel())
      tableBytes +=
          sizeof(void *) * (launch->args() ? launch->args()->size() : 0);
  size_t needed = model->arena_bytes() + tableBytes + kWorkspaceBytes +
                  s.attentionWorkspaceBytes;
  if (needed > freeBytes) {
    error =
        "the step needs " + std::to_string(needed >> 20) +
        " MiB of GPU memory (arena " +
        std::to_string(model->arena_bytes() >> 20) + " MiB) and " +
        description + " has " + std::to_string(freeBytes >> 20) +
        " MiB free: compile with a smaller batch (kiln-compile --max-memory)";
    return false;
  }
  heldBytes = needed;
  if (!check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
             "cannot create a stream") ||
      !check(cudaMalloc(reinterpret_cast<void **>(&s.arena),
                        std::max<size_t>(model->arena_bytes(), 1)),
             "cannot allocate the arena") ||
      !check(cudaMemset(s.arena, options.poison ? 0xff : 0,
                        std::max<size_t>(model->arena_bytes(), 1)),
             "cannot clear the arena") ||
      !check(cudaMalloc(&s.workspace, kWorkspaceBytes),
             "cannot allocate the GEMM workspace") ||
      (s.attentionWorkspaceBytes &&
       !check(cudaMalloc(&s.attentionWorkspace, s.attentionWorkspaceBytes),
              "cannot allocate cuDNN's attention workspace")) ||
      !check(cudaLibraryLoadData(&s.library, image, nullptr, nullptr, 0,
                                 nullptr, nullptr, 0),
             "cannot load the kernels"))
    return false;
  if (model->kernel_names())
    for (const auto *name : *model->kernel_names()) {
      cudaKernel_t kernel;
      if (!check(cudaLibraryGetKernel(&kernel, s.library, name->c_str()),
                 "a kernel is missing from the artifact's code"))
        return false;
      s.kernels.push_back(kernel);
    }

  // Argument tables: every kernel reads its arena pointers from one.
  std::vector<void *> host;
  std::vector<size_t> starts;
  for (size_t i = 0; i < operations; ++i) {
    starts.push_back(host.size());
    if (const artifact::KernelLaunch *launch =
            model->operations()->Get(i)->kernel())
      if (launch->args())
        for (int64_t offset : *launch->args())
          host.push_back(s.arena + offset);
  }
  if (!host.empty()) {
    if (!check(cudaMalloc(reinterpret_cast<void **>(&s.argumentTables),
                          host.size() * sizeof(void *)),
               "cannot allocate argument tables") ||
        !check(cudaMemcpy(s.argumentTables, host.data(),
                          host.size() * sizeof(void *), cudaMemcpyHostToDevice),
               "cannot upload argument tables"))
      return false;
  }
  for (size_t i = 0; i < operations; ++i)
    s.tables.push_back(s.argumentTables + starts[i]);

  sizeGrids(options);
  if (!planGemms(options, error))
    return false;
  skipFallbacks();
  if (s.cudnn &&
      s.cudnnApi->setStream(s.cudnn, s.stream) != CUDNN_STATUS_SUCCESS) {
    error = "cannot give cuDNN the session's stream";
    return false;
  }
  for (auto &[index, attention] : s.attentions)
    if (!attention->bind(s.arena, static_cast<char *>(s.attentionWorkspace),
                         error)) {
      error = "cannot bind cuDNN's attention (" +
              model->operations()->Get(index)->origin()->str() +
              ") to memory: " + error;
      return false;
    }

  // Index checks start clear, whatever the arena was filled with.
  if (model->checks())
    for (const artifact::IndexCheck *c : *model->checks())
      if (!check(cudaMemset(s.arena + c->offset(), 0, 4),
                 "cannot clear index checks"))
        return false;
  // Constants, then parameters and state.
  if (model->constants())
    for (const artifact::Constant *constant : *model->constants())
      if (!check(cudaMemcpy(s.arena + constant->offset(),
                            constant->data()->data(), constant->data()->size(),
                            cudaMemcpyHostToDevice),
                 "cannot upload constants"))
        return false;
  for (const artifact::Tensor *t : *model->tensors()) {
    bool parameter = t->role() == artifact::Role::Parameter;
    if (!parameter && t->role() != artifact::Role::State)
      continue;
    char *at = s.arena + t->offset();
    size_t bytes = artifact::elementCount(t->shape()) *
                   artifact::elementBytes(t->element_type());
    if (parameter && t->data() && t->data()->size()) {
      if (!check(
              cudaMemcpy(at, t->data()->data(), bytes, cudaMemcpyHostToDevice),
              "cannot upload parameters"))
        return false;
      continue;
    }
    if (t->element_type() != ElementType::F32) {
      error = "cannot initialize '" + t->name()->str() + "': not f32";
      return false;
    }
    if (!parameter && t->fill() == 0.0) {
      if (!check(cudaMemset(at, 0, bytes), "cannot clear optimizer state"))
        return false;
      continue;
    }
    std::vector<int64_t> stored = artifact::dimensions(t->shape());
    std::vector<int64_t> logical = stored;
    if (t->logical_shape() && t->logical_shape()->size())
      logical.assign(t->logical_shape()->begin(), t->logical_shape()->end());
    std::vector<float> values =
        parameter ? firstValues(t->name()->str(), stored, logical, options.seed)
                  : filledValues(t->fill(), stored, logical);
    if (!check(cudaMemcpy(at, values.data(), bytes, cudaMemcpyHostToDevice),
               "cannot upload parameters"))
      return false;
  }
  // Those copies ran on the legacy default stream, which the session's
  // non-blocking stream does not wait for.
  if (!check(cudaDeviceSynchronize(), "cannot initialize GPU memory"))
    return false;
  if (options.tuneGemms && !tuneGemms(error))
    return false;
  return true;
}

bool Session::planAttention(std::string &error) {
  State &s = *state;
  for (size_t i = 0; i < model->operations()->size(); ++i) {
    const artifact::Operation *operation = model->operations()->Get(i);
    const artifact::LibraryAttention *attention = operation->attention();
    if (!attention)
      continue;
    if (!s.cudnn) {
      s.cudnnApi = loadCudnn(error);
      if (!s.cudnnApi)
        return false;
      cudnnStatus_t status = s.cudnnApi->create(&s.cudnn);
      if (status != CUDNN_STATUS_SUCCESS) {
        error = std::string("cannot start cuDNN: ") +
                s.cudnnApi->errorString(status);
        return false;
      }
    }
    std::string why;
    std::unique_ptr<CudnnAttention> planned =
        CudnnAttention::create(*s.cudnnApi, s.cudnn, *attention, why);
    if (!planned) {
      error = "cuDNN cannot run the attention of " +
              operation->origin()->str() + ": " + why +
              " (compile with --attention=kiln for kiln's kernels)";
      return false;
    }
    // Attentions run one after another: one workspace serves them all.
    s.attentionWorkspaceBytes =
        std::max<size_t>(s.attentionWorkspaceBytes, planned->workspaceBytes());
    s.attentions.emplace(i, std::move(planned));
  }
  return true;
}

void Session::skipFallbacks() {
  State &s = *state;
  size_t operations = model->operations() ? model->operations()->size() : 0;
  std::vector<bool> withoutEpilogue(operations, false);
  for (const GemmPlan &plan : s.gemms)
    withoutEpilogue[plan.index] = plan.withoutEpilogue;
  s.skipped.clear();
  for (size_t i = 0; i < operations; ++i) {
    int64_t of = model->operations()->Get(i)->epilogue_fallback_of();
    s.skipped.push_back(of >= 0 && !withoutEpilogue[of]);
  }
}

void Session::sizeGrids(const SessionOptions &options) {
  State &s = *state;
  // Any grid computes the same results, so a kernel whose occupancy cannot
  // be queried keeps the artifact's.
  int processors = 0;
  if (cudaDeviceGetAttribute(&processors, cudaDevAttrMultiProcessorCount,
                             s.device) != cudaSuccess)
    processors = 0;
  size_t operations = model->operations() ? model->operations()->size() : 0;
  for (size_t i = 0; i < operations; ++i) {
    const artifact::KernelLaunch *launch =
        model->operations()->Get(i)->kernel();
    unsigned grid = launch ? launch->grid() : 0;
    int resident = 0;
    if (launch && options.deviceGrids && launch->grid_strided() &&
        processors > 0 &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &resident,
            reinterpret_cast<const void *>(s.kernels[launch->kernel()]),
            launch->block(), 0) == cudaSuccess &&
        resident > 0)
      // One wave, which a batched launch's rows share.
      grid = std::min<unsigned>(
          grid,
          std::max(1u, unsigned(resident) * processors / launch->batches()));
    if (launch && launch->grid_strided() && options.gridLimit > 0)
      grid = std::min(grid, options.gridLimit);
    s.grids.push_back(grid);
  }
  cudaGetLastError(); // a failed query leaves nothing for later calls
}

bool Session::enqueueOperations(std::string &error) {
  State &s = *state;
  size_t gemm = 0;
  for (size_t i = 0; i < model->operations()->size(); ++i) {
    const artifact::Operation *operation = model->operations()->Get(i);
    if (!s.marks.empty())
      cudaEventRecord(s.marks[i], s.stream);
    if (s.skipped[i])
      continue;
    if (const artifact::KernelLaunch *launch = operation->kernel()) {
      cudaError_t status =
          launchKernel(s.kernels[launch->kernel()], s.tables[i], s.grids[i],
                       *launch, s.stream);
      if (status != cudaSuccess) {
        error = "cannot launch " + operation->origin()->str() + ": " +
                cudaMessage(status);
        return false;
      }
      continue;
    }
    if (operation->attention()) {
      cudnnStatus_t status = s.attentions.at(i)->execute(s.cudnn);
      if (status != CUDNN_STATUS_SUCCESS) {
        error = "cuDNN failed on " + operation->origin()->str() + ": " +
                s.cudnnApi->errorString(status);
        return false;
      }
      continue;
    }
    GemmPlan &plan = s.gemms[gemm++];
    cublasStatus_t status =
        runGemm(s.blas, plan, plan.algorithm, s.arena, s.workspace, s.stream);
    if (status != CUBLAS_STATUS_SUCCESS) {
      error = "cuBLASLt failed on " + operation->origin()->str() + ": " +
              cublasLtGetStatusString(status);
      return false;
    }
  }
  if (!s.marks.empty())
    cudaEventRecord(s.marks.back(), s.stream);
  return true;
}

bool Session::runs(size_t index) const { return !state->skipped[index]; }

std::pair<int, int> Session::gemmBiasGradients() const {
  int computed = 0, all = 0;
  for (const GemmPlan &plan : state->gemms)
    if (artifact::writesBiasGradient(plan.gemm->epilogue())) {
      ++all;
      computed += !plan.withoutEpilogue;
    }
  return {computed, all};
}

std::pair<int, int> Session::launchesInOneWave() const {
  int fewer = 0, all = 0;
  for (size_t i = 0; i < state->grids.size(); ++i)
    if (const artifact::KernelLaunch *launch =
            model->operations()->Get(i)->kernel()) {
      ++all;
      fewer += state->grids[i] < launch->grid();
    }
  return {fewer, all};
}

bool Session::step(std::string &error) {
  State &s = *state;
  if (s.launchEachStep)
    return enqueueOperations(error);
  if (!s.replay) {
    cudaError_t status =
        cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal);
    if (status != cudaSuccess) {
      error = "cannot capture the step: " + cudaMessage(status);
      return false;
    }
    bool enqueued = enqueueOperations(error);
    status = cudaStreamEndCapture(s.stream, &s.graph);
    if (!enqueued)
      return false;
    if (status == cudaSuccess)
      status = cudaGraphInstantiate(&s.replay, s.graph, 0);
    if (status != cudaSuccess) {
      error = "cannot capture the step as a CUDA graph: " + cudaMessage(status);
      return false;
    }
  }
  cudaError_t status = cudaGraphLaunch(s.replay, s.stream);
  if (status != cudaSuccess) {
    error = "cannot launch the step: " + cudaMessage(status);
    return false;
  }
  return true;
}

const artifact::Tensor *Session::sized(const std::string &name, size_t size,
                                       std::string &error) const {
  const artifact::Tensor *t = tensor(name);
  if (!t) {
    error = "the artifact has no tensor '" + name + "'";
    return nullptr;
  }
  size_t expected = artifact::elementCount(t->shape()) *
                    artifact::elementBytes(t->element_type());
  if (size != expected) {
    error = "tensor '" + name + "' holds " + std::to_string(expected) +
            " bytes, not " + std::to_string(size);
    return nullptr;
  }
  return t;
}

bool Session::write(const std::string &name, const void *data, size_t size,
                    std::string &error) {
  const artifact::Tensor *t = sized(name, size, error);
  if (!t)
    return false;
  // Small tensors (the inputs of every step) go through a pinned buffer
  // without waiting for the GPU: the host only waits until the previous
  // upload from that buffer, which preceded the previous step, is done.
  // Large ones (restoring a checkpoint) are copied synchronously.
  State &s = *state;
  cudaError_t status = cudaSuccess;
  if (size <= kStagedBytes) {
    State::Staging &buffer = s.staging[name];
    if (!buffer.pinned) {
      status = cudaMallocHost(&buffer.pinned, std::max<size_t>(size, 1));
      if (status == cudaSuccess)
        status =
            cudaEventCreateWithFlags(&buffer.uploaded, cudaEventDisableTiming);
    } else {
      status = cudaEventSynchronize(buffer.uploaded);
    }
    if (status == cudaSuccess) {
      std::memcpy(buffer.pinned, data, size);
      status = cudaMemcpyAsync(s.arena + t->offset(), buffer.pinned, size,
                               cudaMemcpyHostToDevice, s.stream);
    }
    if (status == cudaSuccess)
      status = cudaEventRecord(buffer.uploaded, s.stream);
  } else {
    // On the session's stream: a copy on the default stream would not be
    // ordered before the next step.
    status = cudaMemcpyAsync(s.arena + t->offset(), data, size,
                             cudaMemcpyHostToDevice, s.stream);
    if (status == cudaSuccess)
      status = cudaStreamSynchronize(s.stream);
  }
  if (status != cudaSuccess) {
    error = "cannot write '" + name + "': " + cudaMessage(status);
    return false;
  }
  return true;
}

bool Session::checkIndices(std::string &error) {
  if (!model->checks())
    return true;
  for (const artifact::IndexCheck *c : *model->checks()) {
    uint32_t flag = 0;
    cudaError_t status = cudaMemcpy(&flag, state->arena + c->offset(), 4,
                                    cudaMemcpyDeviceToHost);
    if (status != cudaSuccess) {
      error = "cannot read the index checks: " + cudaMessage(status);
      return false;
    }
    if (flag) {
      error = "an index out of range (a token id or a label outside the "
              "vocabulary?) reached '" +
              model->operations()->Get(c->operation())->origin()->str() +
              "' on the GPU; the step's results are not valid";
      return false;
    }
  }
  return true;
}

bool Session::read(const std::string &name, void *data, size_t size,
                   std::string &error) {
  const artifact::Tensor *t = sized(name, size, error);
  if (!t)
    return false;
  cudaError_t status = cudaMemcpyAsync(data, state->arena + t->offset(), size,
                                       cudaMemcpyDeviceToHost, state->stream);
  if (status == cudaSuccess)
    status = cudaStreamSynchronize(state->stream);
  if (status == cudaSuccess && !checkIndices(error))
    return false;
  if (status != cudaSuccess) {
    error = "cannot read '" + name +
            "' (a kernel of the step may have failed): " + cudaMessage(status);
    return false;
  }
  return true;
}

} // namespace kiln::runtime
