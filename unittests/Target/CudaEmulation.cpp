//===- CudaEmulation.cpp - running an artifact on the CPU -----------------===//

#include "CudaEmulation.h"

#include "kiln/Target/ArtifactTensors.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <sstream>

namespace kiln::testing {

#include "EmulationShim.inc"

CudaEmulation::~CudaEmulation() {
  if (library)
    dlclose(library);
  if (!directory.empty())
    llvm::sys::fs::remove_directories(directory);
}

void *openHostLibrary(const std::string &source, const std::string &directory,
                      std::string &error) {
  std::string file = directory + "/kernels.cpp";
  std::string object = directory + "/kernels.so";
  std::string log = directory + "/compile.log";
  {
    std::ofstream out(file);
    out << kShim << source;
  }
  auto compiler = llvm::sys::findProgramByName("c++");
  if (!compiler) {
    error = "no host C++ compiler (c++) on PATH";
    return nullptr;
  }
  // _longjmp between fiber stacks is what the fortified longjmp refuses.
  llvm::StringRef args[] = {*compiler, "-std=c++17", "-O1", "-U_FORTIFY_SOURCE",
                            "-shared", "-fPIC",      "-w",  "-o",
                            object,    file};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
  if (llvm::sys::ExecuteAndWait(*compiler, args, std::nullopt, redirects) !=
      0) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    error = "the host compiler rejected the kernels:\n" + text.str();
    return nullptr;
  }
  void *library = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    error = dlerror();
  return library;
}

std::unique_ptr<CudaEmulation>
CudaEmulation::create(const artifact::ArtifactT &artifact,
                      const ExecutorOptions &options, std::string &error) {
  std::unique_ptr<CudaEmulation> emulation(
      new CudaEmulation(artifact, options));
  llvm::SmallString<128> directory;
  if (llvm::sys::fs::createUniqueDirectory("kiln-emulation", directory)) {
    error = "cannot create a temporary directory";
    return nullptr;
  }
  emulation->directory = directory.str().str();
  emulation->library =
      openHostLibrary(artifact.source, emulation->directory, error);
  if (!emulation->library)
    return nullptr;
  emulation->launchKernel = reinterpret_cast<LaunchFunction>(
      dlsym(emulation->library, "kiln_emulation_launch"));
  for (const std::string &name : artifact.kernel_names) {
    void *kernel = dlsym(emulation->library, name.c_str());
    if (!kernel) {
      error = "kernel " + name + " is missing";
      return nullptr;
    }
    emulation->kernels.push_back(
        reinterpret_cast<void (*)(void *const *)>(kernel));
  }
  emulation->arena.assign(artifact.arena_bytes, 0xff);
  for (const auto &check : artifact.checks)
    std::memset(emulation->arena.data() + check->offset, 0, 4);
  for (const auto &constant : artifact.constants)
    std::memcpy(emulation->arena.data() + constant->offset,
                constant->data.data(), constant->data.size());
  return emulation;
}

bool CudaEmulation::has(const std::string &name) const {
  return llvm::any_of(artifact.tensors,
                      [&](auto &t) { return t->name == name; });
}

const artifact::TensorT &CudaEmulation::tensor(const std::string &name) const {
  for (const auto &t : artifact.tensors)
    if (t->name == name)
      return *t;
  llvm::report_fatal_error(llvm::Twine("no tensor ") + name +
                           " in the artifact");
}

void CudaEmulation::write(const std::string &name, const Tensor &value) {
  const artifact::TensorT &t = tensor(name);
  std::vector<uint8_t> bytes = encodeTensor(value, t.element_type);
  std::memcpy(arena.data() + t.offset, bytes.data(), bytes.size());
}

Tensor CudaEmulation::read(const std::string &name) {
  const artifact::TensorT &t = tensor(name);
  return decodeTensor(arena.data() + t.offset, t.element_type, t.shape);
}

/// `count` elements of `type` at `offset`, as a flat tensor.
static Tensor slice(const std::vector<uint8_t> &arena, int64_t offset,
                    artifact::ElementType type, int64_t count) {
  return decodeTensor(arena.data() + offset, type, {count});
}

/// The tanh GELU and its derivative, as kiln.gelu and kiln.gelu_grad
/// define them.
static double geluTanh(double x) {
  double k = 0.7978845608028654;
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
static double geluTanhDerivative(double x) {
  double k = 0.7978845608028654, c = 0.044715,
         t = std::tanh(k * (x + c * x * x * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * c * x * x);
}

void CudaEmulation::gemm(const artifact::GemmT &g) {
  auto span = [&](int64_t stride, int64_t matrix) {
    return (g.batch - 1) * stride + matrix;
  };
  Tensor a = slice(arena, g.a, g.input_type, span(g.stride_a, g.m * g.k));
  Tensor b = slice(arena, g.b, g.input_type, span(g.stride_b, g.k * g.n));
  Tensor d(dtypeOf(g.output_type), {span(g.stride_d, g.m * g.n)});
  using artifact::Epilogue;
  Tensor bias = artifact::readsBias(g.epilogue)
                    ? slice(arena, g.bias, g.output_type, g.n)
                    : Tensor();
  bool gelu =
      g.epilogue == Epilogue::GeluBias || g.epilogue == Epilogue::GeluAuxBias;
  Tensor aux =
      artifact::usesAux(g.epilogue)
          ? slice(arena, g.aux, g.output_type, span(g.stride_d, g.m * g.n))
          : Tensor();
  Tensor c = g.c >= 0
                 ? slice(arena, g.c, g.output_type, span(g.stride_d, g.m * g.n))
                 : Tensor();
  for (int64_t batch = 0; batch < g.batch; ++batch)
    for (int64_t m = 0; m < g.m; ++m)
      for (int64_t n = 0; n < g.n; ++n) {
        double acc = 0.0;
        for (int64_t k = 0; k < g.k; ++k)
          acc += a.floats()[batch * g.stride_a +
                            (g.transpose_a ? k * g.m + m : m * g.k + k)] *
                 b.floats()[batch * g.stride_b +
                            (g.transpose_b ? n * g.k + k : k * g.n + n)];
        // As the interpreter rounds: the bare product once to the output
        // type; with an epilogue, the product and the epilogue's result to
        // f32 (the accumulation type), then that to the output type.
        int64_t at = batch * g.stride_d + m * g.n + n;
        if (g.c >= 0) // an f32 product plus C, as the interpreter's add
          acc = static_cast<float>(static_cast<float>(acc) + c.floats()[at]);
        if (artifact::readsBias(g.epilogue))
          acc = static_cast<float>(static_cast<float>(acc) + bias.floats()[n]);
        if (g.epilogue == Epilogue::GeluAuxBias)
          aux.setFromDouble(at, acc);
        if (gelu)
          acc = static_cast<float>(geluTanh(acc));
        if (g.epilogue == Epilogue::DGelu)
          acc = static_cast<float>(static_cast<float>(acc) *
                                   geluTanhDerivative(aux.floats()[at]));
        d.setFromDouble(at, acc);
      }
  // Only the matrices: a batch stride may leave gaps that hold other values.
  int64_t width = artifact::elementBytes(g.output_type);
  auto store = [&](const Tensor &matrices, int64_t offset) {
    std::vector<uint8_t> bytes = encodeTensor(matrices, g.output_type);
    for (int64_t batch = 0; batch < g.batch; ++batch)
      std::memcpy(arena.data() + offset + batch * g.stride_d * width,
                  bytes.data() + batch * g.stride_d * width, g.m * g.n * width);
  };
  store(d, g.d);
  if (g.epilogue == Epilogue::GeluAuxBias)
    store(aux, g.aux);
  if (artifact::writesBiasGradient(g.epilogue) && options.gemmBiasGradients)
    storeBiasGradient(g, a, b);
}

void CudaEmulation::storeBiasGradient(const artifact::GemmT &g, const Tensor &a,
                                      const Tensor &b) {
  // The sum over k of op(A)[i, k] (BiasGradA) or op(B)[k, i] (BiasGradB),
  // of the one matrix the target gives such a GEMM.
  bool ofA = g.epilogue == artifact::Epilogue::BiasGradA;
  int64_t length = ofA ? g.m : g.n;
  Tensor sums(dtypeOf(g.output_type), {length});
  for (int64_t i = 0; i < length; ++i) {
    double sum = 0.0;
    for (int64_t k = 0; k < g.k; ++k)
      sum += ofA ? a.floats()[g.transpose_a ? k * g.m + i : i * g.k + k]
                 : b.floats()[g.transpose_b ? i * g.k + k : k * g.n + i];
    sums.setFromDouble(i, sum);
  }
  std::vector<uint8_t> bytes = encodeTensor(sums, g.output_type);
  std::memcpy(arena.data() + g.bias, bytes.data(), bytes.size());
}

std::string CudaEmulation::indexError() {
  for (const auto &check : artifact.checks) {
    uint32_t flag;
    std::memcpy(&flag, arena.data() + check->offset, 4);
    if (flag)
      return artifact.operations[check->operation]->origin;
  }
  return "";
}

void CudaEmulation::run() {
  std::vector<void *> pointers;
  for (const auto &operation : artifact.operations) {
    // A GEMM that sums a bias gradient leaves its fallback nothing to do.
    if (operation->epilogue_fallback_of >= 0 && options.gemmBiasGradients)
      continue;
    if (operation->gemm) {
      gemm(*operation->gemm);
      continue;
    }
    if (operation->attention) {
      libraryAttention(*operation->attention);
      continue;
    }
    const artifact::KernelLaunchT &launch = *operation->kernel;
    pointers.clear();
    for (int64_t offset : launch.args)
      pointers.push_back(arena.data() + offset);
    unsigned grid = launch.grid;
    if (options.deviceGrids && launch.grid_strided)
      grid = std::min(grid, kEmulatedResidentBlocks);
    if (launch.grid_strided && options.gridLimit > 0)
      grid = std::min(grid, options.gridLimit);
    int failure = launchKernel(kernels[launch.kernel], pointers.data(), grid,
                               launch.batches, launch.block);
    if (failure != 0)
      ADD_FAILURE()
          << "kernel " << artifact.kernel_names[launch.kernel] << " of "
          << operation->origin << ": "
          << (failure == 1
                  ? "a barrier that only some threads of a block reach"
                  : "a kiln_expect failed (a statistic read before its "
                    "loop computed it)");
  }
}

} // namespace kiln::testing

namespace kiln::testing {

std::unique_ptr<Executor> makeExecutor(const artifact::ArtifactT &artifact,
                                       std::string &error,
                                       const ExecutorOptions &options) {
  return CudaEmulation::create(artifact, options, error);
}

std::vector<std::string> executorArchitectures() { return {}; }

bool gemmsAccumulateInF32() { return false; }

} // namespace kiln::testing
