//===- Profiling.cpp - timing a step operation by operation ---------------===//
//
// Session::profile: events around every operation of the step launched one
// by one, the step's graph replayed whole, and the device's two ceilings
// measured on the spot (datasheet rates are only leads): a
// device-to-device copy and a GEMM of random data in the type the step's
// GEMMs read, with the compute type the step uses.
//
//===----------------------------------------------------------------------===//

#include "SessionState.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>

namespace kiln::runtime {

namespace {

double median(std::vector<float> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

/// Events that destroy themselves.
struct Events {
  explicit Events(size_t count) : events(count, nullptr) {}
  ~Events() {
    for (cudaEvent_t event : events)
      if (event)
        cudaEventDestroy(event);
  }
  bool create() {
    for (cudaEvent_t &event : events)
      if (cudaEventCreate(&event) != cudaSuccess)
        return false;
    return true;
  }
  /// Milliseconds from event `from` to event `to`, once `to` completed.
  bool elapsed(size_t from, size_t to, float &milliseconds) {
    return cudaEventSynchronize(events[to]) == cudaSuccess &&
           cudaEventElapsedTime(&milliseconds, events[from], events[to]) ==
               cudaSuccess;
  }
  std::vector<cudaEvent_t> events;
};

/// The median milliseconds of `repeats` runs of `work` on `stream`, after
/// one run to warm up; negative if any failed.
double timeMedian(cudaStream_t stream, int repeats,
                  const std::function<bool()> &work) {
  Events events(2);
  if (!events.create() || !work())
    return -1;
  std::vector<float> times;
  for (int r = 0; r < repeats; ++r) {
    float milliseconds = 0;
    if (cudaEventRecord(events.events[0], stream) != cudaSuccess || !work() ||
        cudaEventRecord(events.events[1], stream) != cudaSuccess ||
        !events.elapsed(0, 1, milliseconds))
      return -1;
    times.push_back(milliseconds);
  }
  return median(times);
}

/// `count` random elements of `type`, of magnitudes between 1/4 and 1.
std::vector<uint8_t> randomElements(artifact::ElementType type, size_t count) {
  std::mt19937_64 random(1);
  std::uniform_real_distribution<double> uniform(0.25, 1.0);
  size_t width = artifact::elementBytes(type);
  std::vector<uint8_t> bytes(count * width);
  for (size_t i = 0; i < count; ++i) {
    double x = (random() & 1 ? -1 : 1) * uniform(random);
    float f = static_cast<float>(x);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint16_t half = 0;
    if (type == artifact::ElementType::BF16)
      half = static_cast<uint16_t>(bits >> 16);
    else if (type == artifact::ElementType::F16)
      // Sign, exponent (-2..0 biased by 15) and ten bits of significand.
      half = static_cast<uint16_t>((bits >> 16 & 0x8000) |
                                   (((bits >> 23 & 0xff) - 127 + 15) << 10) |
                                   (bits >> 13 & 0x3ff));
    uint8_t *at = bytes.data() + i * width;
    if (width == 2)
      std::memcpy(at, &half, 2);
    else if (width == 4)
      std::memcpy(at, &f, 4);
    else
      std::memcpy(at, &x, 8);
  }
  return bytes;
}

/// Device memory that frees itself.
struct Buffer {
  ~Buffer() {
    if (pointer)
      cudaFree(pointer);
  }
  void *pointer = nullptr;
};

} // namespace

bool Session::profile(int steps, StepProfile &result, std::string &error) {
  State &s = *state;
  size_t count = model->operations() ? model->operations()->size() : 0;
  Events events(count + 1);
  if (!events.create()) {
    error = "cannot create events to profile the step";
    return false;
  }
  std::vector<std::vector<float>> times(count);
  std::vector<float> stepTimes;
  for (int r = 0; r < steps; ++r) {
    s.marks = events.events;
    bool enqueued = enqueueOperations(error);
    s.marks.clear();
    if (!enqueued)
      return false;
    for (size_t i = 0; i < count; ++i) {
      float milliseconds = 0;
      if (!events.elapsed(i, i + 1, milliseconds)) {
        error = "cannot time " + model->operations()->Get(i)->origin()->str();
        return false;
      }
      times[i].push_back(milliseconds);
    }
  }
  for (int r = 0; r < steps; ++r) {
    float milliseconds = 0;
    if (cudaEventRecord(events.events[0], s.stream) != cudaSuccess ||
        !step(error) ||
        cudaEventRecord(events.events[1], s.stream) != cudaSuccess ||
        !events.elapsed(0, 1, milliseconds)) {
      if (error.empty())
        error = "cannot time the step's graph";
      return false;
    }
    stepTimes.push_back(milliseconds);
  }
  result.milliseconds.clear();
  result.skipped.clear();
  for (size_t i = 0; i < count; ++i) {
    result.milliseconds.push_back(median(times[i]));
    result.skipped.push_back(!runs(i));
  }
  result.stepMilliseconds = median(stepTimes);
  result.launchedEachStep = s.launchEachStep;
  return measureCeilings(result, error);
}

bool Session::measureCeilings(StepProfile &result, std::string &error) {
  State &s = *state;
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
    error = "cannot query GPU memory";
    return false;
  }
  // Bandwidth: a copy of up to 1 GiB, counting bytes read and written.
  size_t copyBytes = std::min<size_t>(1ull << 30, freeBytes / 3);
  if (Buffer from, to; copyBytes >= (64u << 20) &&
                       cudaMalloc(&from.pointer, copyBytes) == cudaSuccess &&
                       cudaMalloc(&to.pointer, copyBytes) == cudaSuccess) {
    double milliseconds = timeMedian(s.stream, 5, [&] {
      return cudaMemcpyAsync(to.pointer, from.pointer, copyBytes,
                             cudaMemcpyDeviceToDevice, s.stream) == cudaSuccess;
    });
    if (milliseconds > 0)
      result.bytesPerSecond = 2.0 * copyBytes / (milliseconds / 1e3);
  }

  // The GEMM rate: a square product of random values in the type that
  // most of the step's multiply-adds read.
  std::map<artifact::ElementType, double> flopsByType;
  for (const artifact::Operation *operation : *model->operations())
    if (const artifact::Gemm *g = operation->gemm())
      flopsByType[g->input_type()] += static_cast<double>(operation->flops());
  if (flopsByType.empty())
    return true;
  artifact::ElementType type =
      std::max_element(flopsByType.begin(), flopsByType.end(),
                       [](auto &a, auto &b) { return a.second < b.second; })
          ->first;
  size_t width = artifact::elementBytes(type);
  uint64_t n = 8192;
  while (n >= 1024 && 2 * n * n * width + n * n * 4 > freeBytes / 2)
    n /= 2;
  if (n < 1024)
    return true;
  Buffer operand, product;
  std::vector<uint8_t> values = randomElements(type, n * n);
  bool f64 = type == artifact::ElementType::F64;
  cudaDataType_t in = cudaType(type), out = f64 ? CUDA_R_64F : CUDA_R_32F;
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  size_t workspace = kWorkspaceBytes;
  bool ok =
      cudaMalloc(&operand.pointer, values.size()) == cudaSuccess &&
      cudaMalloc(&product.pointer, n * n * (f64 ? 8 : 4)) == cudaSuccess &&
      cudaMemcpyAsync(operand.pointer, values.data(), values.size(),
                      cudaMemcpyHostToDevice, s.stream) == cudaSuccess &&
      cublasLtMatmulDescCreate(&operation,
                               f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                               out) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&a, in, n, n, n) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&d, out, n, n, n) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceSetAttribute(
          preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
          sizeof(workspace)) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulAlgoGetHeuristic(s.blas, operation, a, a, d, d, preference,
                                     1, &heuristic,
                                     &found) == CUBLAS_STATUS_SUCCESS &&
      found > 0;
  if (ok) {
    float one = 1, zero = 0;
    double oneD = 1, zeroD = 0;
    const void *alpha = f64 ? static_cast<const void *>(&oneD) : &one;
    const void *beta = f64 ? static_cast<const void *>(&zeroD) : &zero;
    double milliseconds = timeMedian(s.stream, 5, [&] {
      return cublasLtMatmul(s.blas, operation, alpha, operand.pointer, a,
                            operand.pointer, a, beta, product.pointer, d,
                            product.pointer, d, &heuristic.algo, s.workspace,
                            workspace, s.stream) == CUBLAS_STATUS_SUCCESS;
    });
    if (milliseconds > 0)
      result.flopsPerSecond = 2.0 * n * n * n / (milliseconds / 1e3);
  }
  if (preference)
    cublasLtMatmulPreferenceDestroy(preference);
  if (a)
    cublasLtMatrixLayoutDestroy(a);
  if (d)
    cublasLtMatrixLayoutDestroy(d);
  if (operation)
    cublasLtMatmulDescDestroy(operation);
  return true;
}

} // namespace kiln::runtime
