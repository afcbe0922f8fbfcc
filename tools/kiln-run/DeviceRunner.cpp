//===- DeviceRunner.cpp - running a compiled artifact on a GPU ------------===//
//
// The GPU side of kiln-run: training with the device runner
// (kiln/DeviceTraining), and a forward run of an artifact compiled with
// `kiln-compile --forward`.
//
//===----------------------------------------------------------------------===//

#include "DeviceRunner.h"

#include "Training.h"

#include "kiln/DeviceTraining/DeviceRunner.h"
#include "kiln/Target/ArtifactTensors.h"
#include "kiln/TensorIO/TensorFiles.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <cstdint>

using namespace llvm;

namespace kiln {

int runArtifact(StringRef path, const StringMap<Tensor> &inputs,
                const ArtifactRunOptions &run,
                function_ref<void(StringRef, const Tensor &)> print) {
  auto fail = [](const Twine &message) {
    errs() << "kiln-run: error: " << message << "\n";
    return 1;
  };
  Expected<TrainingSpec> spec = trainingSpecFromOptions();
  if (!spec)
    return fail(toString(spec.takeError()));
  runtime::SessionOptions options;
  options.seed = spec->seed;
  options.tuneGemms = run.tuneGemms;
  options.gemmBiasGradients = run.gemmBiasGradients;
  options.cudaGraph = run.cudaGraph;
  options.deviceGrids = run.deviceGrids;
  if (run.profileSteps > 0 && !run.train)
    return fail("--profile times training steps: give --train");
  std::string error;
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<runtime::Session> session =
      runtime::Session::load(path.str(), options, error);
  if (!session)
    return fail(error);
  outs() << formatv(
      "loaded {0} on {1} in {2:f2} s: {3:f2} GiB of GPU memory\n", path,
      session->deviceName(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      session->deviceBytes() / double(1ull << 30));
  if (auto [inGemms, all] = session->gemmBiasGradients(); all > 0)
    outs() << formatv("cuBLASLt sums {0} of the step's {1} bias gradients "
                      "that GEMMs can sum; kernels sum the rest\n",
                      inGemms, all);
  if (auto [fewer, all] = session->launchesInOneWave(); fewer > 0)
    outs() << formatv("{0} of the step's {1} kernel launches run in one "
                      "wave of the GPU, fewer blocks than their grids\n",
                      fewer, all);
  if (run.train) {
    spec->totalSteps = trainingSteps();
    std::unique_ptr<StepRunner> runner = makeDeviceRunner(*session, *spec);
    CheckpointIdentity identity{digest(session->artifact().model_hash()->str() +
                                       "|" +
                                       session->artifact().options()->str()),
                                digest(trainingSpecIdentity())};
    int status = runTrainingLoop(*runner, path, identity, inputs,
                                 /*microBatches=*/1, /*reportEvery=*/10);
    if (status != 0 || run.profileSteps == 0)
      return status;
    // The last batch again, operation by operation.
    runtime::StepProfile profile;
    if (!session->profile(run.profileSteps, profile, error))
      return fail(error);
    outs() << runtime::formatProfile(session->artifact(), profile,
                                     run.profileRows > 0 ? run.profileRows
                                                         : SIZE_MAX);
    return 0;
  }
  // A forward function: inputs in, one run, outputs out.
  for (const artifact::Tensor *t : *session->artifact().tensors()) {
    if (t->role() != artifact::Role::Input)
      continue;
    auto it = inputs.find(t->name()->str());
    if (it == inputs.end())
      return fail("input '" + t->name()->str() +
                  "' is missing; give it with --input " + t->name()->str() +
                  "=FILE");
    if (it->second.getDType() != dtypeOf(t->element_type()) ||
        it->second.getShape() != ArrayRef(artifact::dimensions(t->shape())))
      return fail("input '" + t->name()->str() +
                  "' has another type or shape "
                  "than the artifact's");
    if (Error e = writeSessionTensor(*session, t->name()->str(), it->second))
      return fail(toString(std::move(e)));
  }
  if (!session->step(error))
    return fail(error);
  StringRef outputDirectory = run.outputDirectory;
  if (!outputDirectory.empty())
    if (std::error_code e = sys::fs::create_directories(outputDirectory))
      return fail("cannot create '" + outputDirectory + "': " + e.message());
  for (const artifact::Tensor *t : *session->artifact().tensors()) {
    if (t->role() != artifact::Role::Output)
      continue;
    Expected<Tensor> value = readSessionTensor(*session, t->name()->str());
    if (!value)
      return fail(toString(value.takeError()));
    print(t->name()->str(), *value);
    if (outputDirectory.empty())
      continue;
    SmallString<256> file(outputDirectory);
    sys::path::append(file, t->name()->str() + ".pb");
    if (Error e = writeTensorProtoFile(*value, t->name()->str(), file))
      return fail(toString(std::move(e)));
  }
  return 0;
}

} // namespace kiln
