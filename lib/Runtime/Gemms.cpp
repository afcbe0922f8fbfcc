//===- Gemms.cpp - a session's GEMMs through cuBLASLt ---------------------===//
//
// Every GEMM of the artifact becomes a cuBLASLt matmul whose descriptors
// are built from the artifact at load time, with the algorithm cuBLASLt's
// heuristic proposes first (or, with --tune-gemms, the fastest of several,
// timed against the plain GEMM followed by the kernels that sum its bias
// gradient). Row-major products are computed as their column-major
// transposes: D^T = op(B)^T op(A)^T, which is what cuBLASLt sees.
//
//===----------------------------------------------------------------------===//

#include "SessionState.h"

#include <functional>

namespace kiln::runtime {

using artifact::ElementType;

/// How many algorithms --tune-gemms times for each GEMM.
static constexpr int kTunedCandidates = 8;

/// cuBLASLt's name for an artifact's epilogue (not None).
static cublasLtEpilogue_t cublasEpilogue(artifact::Epilogue epilogue) {
  switch (epilogue) {
  case artifact::Epilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case artifact::Epilogue::DGelu:
    return CUBLASLT_EPILOGUE_DGELU;
  case artifact::Epilogue::GeluBias:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  case artifact::Epilogue::GeluAuxBias:
    return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  // cuBLASLt's A is the artifact's B (column-major views), and the reverse.
  case artifact::Epilogue::BiasGradA:
    return CUBLASLT_EPILOGUE_BGRADB;
  case artifact::Epilogue::BiasGradB:
    return CUBLASLT_EPILOGUE_BGRADA;
  case artifact::Epilogue::None:
    break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// Sets the epilogue of a matmul description.
static bool setEpilogue(cublasLtMatmulDesc_t operation,
                        cublasLtEpilogue_t epilogue) {
  return cublasLtMatmulDescSetAttribute(operation,
                                        CUBLASLT_MATMUL_DESC_EPILOGUE,
                                        &epilogue, sizeof(epilogue)) ==
         CUBLAS_STATUS_SUCCESS;
}

static bool setBias(cublasLtMatmulDesc_t operation, const void *bias) {
  return cublasLtMatmulDescSetAttribute(
             operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
             sizeof(bias)) == CUBLAS_STATUS_SUCCESS;
}

/// A bias gradient GEMM as a plain one (kernels sum the bias gradient):
/// cuBLASLt refuses a bias pointer without its epilogue.
static bool dropBiasGradient(cublasLtMatmulDesc_t operation) {
  return setEpilogue(operation, CUBLASLT_EPILOGUE_DEFAULT) &&
         setBias(operation, nullptr);
}

/// The algorithms cuBLASLt proposes for `plan`, at most `count`, best
/// first.
static std::vector<cublasLtMatmulAlgo_t>
proposeAlgorithms(cublasLtHandle_t blas, const GemmPlan &plan, int count) {
  std::vector<cublasLtMatmulAlgo_t> algorithms;
  cublasLtMatmulPreference_t preference = nullptr;
  if (cublasLtMatmulPreferenceCreate(&preference) != CUBLAS_STATUS_SUCCESS)
    return algorithms;
  std::vector<cublasLtMatmulHeuristicResult_t> heuristics(count);
  int found = 0;
  size_t workspace = kWorkspaceBytes;
  if (cublasLtMatmulPreferenceSetAttribute(
          preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
          sizeof(workspace)) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulAlgoGetHeuristic(
          blas, plan.operation, plan.a, plan.b, plan.d, plan.d, preference,
          count, heuristics.data(), &found) == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < found; ++i)
      algorithms.push_back(heuristics[i].algo);
  cublasLtMatmulPreferenceDestroy(preference);
  return algorithms;
}

bool Session::planGemms(const SessionOptions &options, std::string &error) {
  State &s = *state;
  // cuBLASLt: descriptors from the artifact, an algorithm per GEMM.
  cublasStatus_t blasStatus = cublasLtCreate(&s.blas);
  if (blasStatus != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cannot start cuBLASLt: ") +
            cublasLtGetStatusString(blasStatus);
    return false;
  }
  size_t operations = model->operations() ? model->operations()->size() : 0;
  for (size_t i = 0; i < operations; ++i) {
    const artifact::Gemm *g = model->operations()->Get(i)->gemm();
    if (!g)
      continue;
    GemmPlan plan;
    plan.gemm = g;
    plan.index = i;
    bool biasGradient = artifact::writesBiasGradient(g->epilogue());
    plan.withoutEpilogue = biasGradient && !options.gemmBiasGradients;
    bool f64 = g->input_type() == ElementType::F64;
    cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
    cublasOperation_t opB = g->transpose_b() ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = g->transpose_a() ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t in = cudaType(g->input_type()),
                   out = cudaType(g->output_type());
    // Column-major views: B^T is n x k, A^T is k x m, D^T is n x m.
    uint64_t bRows = g->transpose_b() ? g->k() : g->n(),
             bCols = g->transpose_b() ? g->n() : g->k();
    uint64_t aRows = g->transpose_a() ? g->m() : g->k(),
             aCols = g->transpose_a() ? g->k() : g->m();
    bool ok =
        cublasLtMatmulDescCreate(&plan.operation, compute, scale) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(plan.operation,
                                       CUBLASLT_MATMUL_DESC_TRANSA, &opB,
                                       sizeof(opB)) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(plan.operation,
                                       CUBLASLT_MATMUL_DESC_TRANSB, &opA,
                                       sizeof(opA)) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&plan.a, in, bRows, bCols, bRows) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&plan.b, in, aRows, aCols, aRows) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&plan.d, out, g->n(), g->m(), g->n()) ==
            CUBLAS_STATUS_SUCCESS;
    if (ok && g->batch() > 1) {
      int32_t batch = static_cast<int32_t>(g->batch());
      int64_t strideB = g->stride_b(), strideA = g->stride_a(),
              strideD = g->stride_d();
      for (auto [layout, stride] :
           {std::pair{plan.a, strideB}, std::pair{plan.b, strideA},
            std::pair{plan.d, strideD}})
        ok = ok &&
             cublasLtMatrixLayoutSetAttribute(
                 layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                 sizeof(batch)) == CUBLAS_STATUS_SUCCESS &&
             cublasLtMatrixLayoutSetAttribute(
                 layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                 sizeof(stride)) == CUBLAS_STATUS_SUCCESS;
    }
    if (ok && g->epilogue() != artifact::Epilogue::None &&
        !plan.withoutEpilogue)
      ok = setEpilogue(plan.operation, cublasEpilogue(g->epilogue()));
    // Bias, bias gradient and aux have D's type, cuBLASLt's default; aux is
    // laid out as D. A GEMM whose kernels sum the bias gradient has no bias
    // pointer (cuBLASLt refuses one without its epilogue).
    if (ok && (artifact::readsBias(g->epilogue()) || biasGradient) &&
        !plan.withoutEpilogue)
      ok = setBias(plan.operation, s.arena + g->bias());
    if (ok && artifact::usesAux(g->epilogue())) {
      const void *aux = s.arena + g->aux();
      int64_t leading = g->n(), stride = g->stride_d();
      ok = cublasLtMatmulDescSetAttribute(
               plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
               sizeof(aux)) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulDescSetAttribute(
               plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &leading,
               sizeof(leading)) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulDescSetAttribute(
               plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
               &stride, sizeof(stride)) == CUBLAS_STATUS_SUCCESS;
    }
    int count = options.tuneGemms ? kTunedCandidates : 1;
    if (ok)
      plan.candidates = proposeAlgorithms(s.blas, plan, count);
    // No algorithm sums the bias gradient for this layout: the plain GEMM,
    // and the artifact's kernels sum it.
    if (ok && biasGradient && plan.candidates.empty() &&
        !plan.withoutEpilogue) {
      plan.withoutEpilogue = true;
      ok = dropBiasGradient(plan.operation);
      if (ok)
        plan.candidates = proposeAlgorithms(s.blas, plan, count);
    }
    ok = ok && !plan.candidates.empty();
    if (ok)
      plan.algorithm = plan.candidates.front();
    s.gemms.push_back(plan);
    if (!ok) {
      error = "cuBLASLt has no algorithm for GEMM " +
              std::to_string(s.gemms.size()) + " (" + std::to_string(g->m()) +
              "x" + std::to_string(g->n()) + "x" + std::to_string(g->k()) + ")";
      return false;
    }
  }
  return true;
}

cublasStatus_t runGemm(cublasLtHandle_t blas, const GemmPlan &plan,
                       const cublasLtMatmulAlgo_t &algorithm, char *arena,
                       void *workspace, cudaStream_t stream) {
  const artifact::Gemm *g = plan.gemm;
  float one = 1.0f, zero = 0.0f;
  double oneD = 1.0, zeroD = 0.0;
  bool f64 = g->input_type() == ElementType::F64;
  // D = P + C where the artifact names a C (of D's layout), else D = P.
  bool addsC = g->c() >= 0;
  const void *alpha = f64 ? static_cast<const void *>(&oneD) : &one;
  const void *beta = addsC ? alpha
                     : f64 ? static_cast<const void *>(&zeroD)
                           : &zero;
  char *d = arena + g->d();
  char *c = addsC ? arena + g->c() : d;
  return cublasLtMatmul(blas, plan.operation, alpha, arena + g->b(), plan.a,
                        arena + g->a(), plan.b, beta, c, plan.d, d, plan.d,
                        &algorithm, workspace, kWorkspaceBytes, stream);
}

bool Session::tuneGemms(std::string &error) {
  // Each candidate runs once to warm up, then three times between events;
  // the arena's current contents are as good inputs as any.
  State &s = *state;
  cudaEvent_t start, stop;
  if (cudaEventCreate(&start) != cudaSuccess ||
      cudaEventCreate(&stop) != cudaSuccess) {
    error = "cannot create events to time GEMMs";
    return false;
  }
  // The fastest of `plan`'s candidates, each followed by `after`, into
  // `chosen`; its milliseconds, or -1 if none ran.
  auto fastest = [&](const GemmPlan &plan, const std::function<bool()> &after,
                     cublasLtMatmulAlgo_t &chosen) {
    float best = -1.0f;
    for (const cublasLtMatmulAlgo_t &algorithm : plan.candidates) {
      auto run = [&] {
        return runGemm(s.blas, plan, algorithm, s.arena, s.workspace,
                       s.stream) == CUBLAS_STATUS_SUCCESS &&
               after();
      };
      if (!run())
        continue;
      cudaEventRecord(start, s.stream);
      for (int i = 0; i < 3; ++i)
        run();
      cudaEventRecord(stop, s.stream);
      float milliseconds = 0.0f;
      if (cudaEventSynchronize(stop) != cudaSuccess ||
          cudaEventElapsedTime(&milliseconds, start, stop) != cudaSuccess)
        continue;
      if (best < 0.0f || milliseconds < best) {
        best = milliseconds;
        chosen = algorithm;
      }
    }
    return best;
  };
  bool restored = true;
  for (GemmPlan &plan : s.gemms) {
    float best = fastest(plan, [] { return true; }, plan.algorithm);
    if (!artifact::writesBiasGradient(plan.gemm->epilogue()) ||
        plan.withoutEpilogue)
      continue;
    // Against the plain GEMM followed by the kernels that sum the bias
    // gradient instead.
    auto fallbacks = [&] {
      for (size_t i = 0; i < model->operations()->size(); ++i) {
        const artifact::Operation *operation = model->operations()->Get(i);
        if (operation->epilogue_fallback_of() == int64_t(plan.index) &&
            launchKernel(s.kernels[operation->kernel()->kernel()], s.tables[i],
                         s.grids[i], *operation->kernel(),
                         s.stream) != cudaSuccess)
          return false;
      }
      return true;
    };
    GemmPlan plain = plan;
    cublasLtMatmulAlgo_t plainAlgorithm{};
    float plainBest = -1.0f;
    if (dropBiasGradient(plan.operation)) {
      plain.candidates = proposeAlgorithms(s.blas, plan, kTunedCandidates);
      plainBest = fastest(plain, fallbacks, plainAlgorithm);
    }
    if (plainBest >= 0.0f && (best < 0.0f || plainBest < best)) {
      plan.candidates = plain.candidates;
      plan.algorithm = plainAlgorithm;
      plan.withoutEpilogue = true;
    } else if (!setEpilogue(plan.operation,
                            cublasEpilogue(plan.gemm->epilogue())) ||
               !setBias(plan.operation, s.arena + plan.gemm->bias())) {
      error = "cannot restore the bias gradient epilogue of " +
              model->operations()->Get(plan.index)->origin()->str();
      restored = false;
      break;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!restored)
    return false;
  skipFallbacks();
  // GEMMs and fallbacks write activations and gradients only, which every
  // step rewrites before reading: the timing runs leave nothing behind.
  return true;
}

} // namespace kiln::runtime
