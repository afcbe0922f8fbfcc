//===- PyCompile.cpp - kiln.compile: a step as a CUDA artifact ------------===//

#include "PyCompile.h"

#include "Errors.h"
#include "PyOptions.h"

#include "kiln/Artifact/Artifact.h"
#include "kiln/Target/CUDATarget.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Training/Checkpoint.h"

#include "llvm/Support/MemoryBuffer.h"

#include <pybind11/stl.h>

#include <map>

namespace py = pybind11;

namespace kiln::python {

/// Per architecture, what ptxas allotted each kernel, as dicts.
static py::dict kernelResources(const cuda::TargetReport &report) {
  py::dict resources;
  for (const auto &[arch, kernels] : report.kernels) {
    py::list list;
    for (const cuda::KernelResources &k : kernels)
      list.append(py::dict(py::arg("kernel") = k.kernel,
                           py::arg("registers") = k.registers,
                           py::arg("shared_bytes") = k.sharedBytes,
                           py::arg("local_bytes") = k.stackBytes,
                           py::arg("spilled_bytes") = k.spillStoreBytes,
                           py::arg("block") = k.block,
                           py::arg("blocks_per_sm") = k.blocksPerSM));
    resources[py::str(arch)] = list;
  }
  return resources;
}

py::dict compileStep(Model &model, const std::string &output,
                     const std::vector<std::string> &archs, bool exactAttention,
                     bool batchLaunches, bool wideIndices,
                     const std::string &attention,
                     const std::string &attentionQueryGradient,
                     int64_t attentionQueryTile, const py::kwargs &keywords) {
  if (attention != "kiln" && attention != "cudnn")
    raise("attention must be 'kiln' or 'cudnn', got '" + attention + "'");
  const std::map<std::string, cuda::QueryGradient> queryGradients = {
      {"atomic", cuda::QueryGradient::Atomic},
      {"recompute", cuda::QueryGradient::Recomputed},
      {"stored", cuda::QueryGradient::Stored},
      {"auto", cuda::QueryGradient::Auto}};
  auto queryGradient = queryGradients.find(attentionQueryGradient);
  if (queryGradient == queryGradients.end())
    raise("attention_query_gradient must be 'atomic', 'recompute', 'stored' "
          "or 'auto', got '" +
          attentionQueryGradient + "'");
  if (attentionQueryTile != 64 && attentionQueryTile != 128)
    raise("attention_query_tile must be 64 or 128, got " +
          std::to_string(attentionQueryTile));
  TrainerOptions options = trainerOptions(keywords, OptionKinds::Step);
  TrainingPipelineConfig config = trainingSpecFrom(options).pipeline;
  if (archs.empty())
    raise("arch names no architecture (such as sm_90)");
  for (const std::string &arch : archs)
    if (!cuda::isArchitectureName(arch))
      raise("arch expects names like sm_80 or sm_90, got '" + arch + "'");

  mlir::OwningOpRef<mlir::ModuleOp> module = model.getModule().clone();
  config.function = model.getForward().getSymName().str();
  DiagnosticCapture diagnostics(model.getContext());
  mlir::FailureOr<TrainingFunctions> functions =
      runTrainingPipeline(*module, config);
  diagnostics.check(functions, "cannot build the training step");

  cuda::TargetOptions target;
  target.archs = archs;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> bytes =
      llvm::MemoryBuffer::getFile(model.getPath());
  target.modelHash = digest(bytes ? (*bytes)->getBuffer() : llvm::StringRef());
  target.initialAccumulator = options.initialAccumulator;
  target.exactAttention = exactAttention;
  target.batchLaunches = batchLaunches;
  target.wideIndices = wideIndices;
  if (attention == "cudnn")
    target.attention = cuda::AttentionBackend::Cudnn;
  target.queryGradient = queryGradient->second;
  target.attentionQueryTile = attentionQueryTile;
  target.optionsText =
      "python|" + identityOf(options) + cuda::targetOptionsText(target);
  cuda::TargetReport targetReport;
  mlir::FailureOr<std::unique_ptr<artifact::ArtifactT>> compiled =
      cuda::compileFunction(functions->step, target, &targetReport);
  diagnostics.check(compiled, "cannot compile the step");
  artifact::ArtifactT &result = **compiled;
  result.vocabulary = tokenVocabulary(
      module->lookupSymbol<mlir::func::FuncOp>(config.function));
  std::string error;
  if (!artifact::write(result, output, error))
    raise(error);

  artifact::Summary summary = artifact::summarize(result);
  py::dict report;
  report["operations"] = summary.operations;
  report["gemms"] = summary.gemms;
  report["kernel_launches"] = summary.launches;
  report["fallback_launches"] = summary.fallbacks;
  report["kernels"] = summary.kernels;
  report["cudnn_attentions"] = summary.libraryAttentions;
  report["kept_attention"] = targetReport.keptAttention;
  report["arena_bytes"] = result.arena_bytes;
  report["kernel_resources"] = kernelResources(targetReport);
  return report;
}

} // namespace kiln::python
