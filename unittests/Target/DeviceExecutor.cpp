//===- DeviceExecutor.cpp - the CUDA target's tests on a GPU --------------===//
//
// kiln-gpu-tests: artifacts compiled for sm_80 and sm_90 (with PTX), run
// through the runtime exactly as kiln-run runs them, in a poisoned arena.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include "kiln/Runtime/Session.h"
#include "kiln/Target/ArtifactTensors.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::testing {

namespace {
class DeviceExecutor : public Executor {
public:
  bool open(const artifact::ArtifactT &artifact,
            const ExecutorOptions &executorOptions, std::string &error) {
    llvm::SmallString<128> path;
    if (llvm::sys::fs::createTemporaryFile("kiln-gpu-test", "kiln", path)) {
      error = "cannot create a temporary file";
      return false;
    }
    bool written = artifact::write(artifact, path.str().str(), error);
    runtime::SessionOptions options;
    options.poison = true;
    options.gemmBiasGradients = executorOptions.gemmBiasGradients;
    options.cudaGraph = executorOptions.cudaGraph;
    options.deviceGrids = executorOptions.deviceGrids;
    options.gridLimit = executorOptions.gridLimit;
    if (written)
      session = runtime::Session::load(path.str().str(), options, error);
    llvm::sys::fs::remove(path);
    return session != nullptr;
  }

  bool has(const std::string &name) const override {
    return session->tensor(name) != nullptr;
  }
  void write(const std::string &name, const Tensor &value) override {
    const artifact::Tensor *t = session->tensor(name);
    std::vector<uint8_t> bytes = encodeTensor(value, t->element_type());
    std::string error;
    if (!session->write(name, bytes.data(), bytes.size(), error))
      llvm::report_fatal_error(llvm::Twine(error));
  }
  Tensor read(const std::string &name) override {
    const artifact::Tensor *t = session->tensor(name);
    std::vector<uint8_t> bytes(artifact::elementCount(t->shape()) *
                               artifact::elementBytes(t->element_type()));
    std::string error;
    if (!session->read(name, bytes.data(), bytes.size(), error))
      llvm::report_fatal_error(llvm::Twine(error));
    return decodeTensor(bytes.data(), t->element_type(),
                        artifact::dimensions(t->shape()));
  }
  void run() override {
    std::string error;
    if (!session->step(error))
      llvm::report_fatal_error(llvm::Twine(error));
  }

  std::string indexError() override {
    std::string error;
    return session->checkIndices(error) ? "" : error;
  }

private:
  std::unique_ptr<runtime::Session> session;
};
} // namespace

std::unique_ptr<Executor> makeExecutor(const artifact::ArtifactT &artifact,
                                       std::string &error,
                                       const ExecutorOptions &options) {
  auto executor = std::make_unique<DeviceExecutor>();
  if (!executor->open(artifact, options, error))
    return nullptr;
  return executor;
}

std::vector<std::string> executorArchitectures() { return {"sm_80", "sm_90"}; }

bool gemmsAccumulateInF32() { return true; }

} // namespace kiln::testing
