//===- CudaEmulation.cpp - running an artifact on the CPU -----------------===//

#include "CudaEmulation.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <sstream>

namespace kiln::testing {

/// What NVRTC provides and host C++ lacks. One thread per block: shared
/// memory is a static array and barriers have nothing to wait for.
static const char *kShim = R"cpp(
#include <math.h>
#include <stdint.h>
struct kiln_dim3 { unsigned x = 0, y = 0, z = 0; };
static kiln_dim3 threadIdx, blockIdx, blockDim, gridDim;
extern "C" void kiln_emulation_configure(unsigned block, unsigned grid, unsigned threads) {
  blockIdx.x = block; gridDim.x = grid; blockDim.x = threads; threadIdx.x = 0;
}
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(n)
#define __shared__ static
static inline void __syncthreads() {}
static inline float atomicAdd(float *p, float v) { float old = *p; *p = old + v; return old; }
static inline double atomicAdd(double *p, double v) { double old = *p; *p = old + v; return old; }
)cpp";

CudaEmulation::~CudaEmulation() {
  if (library)
    dlclose(library);
  if (!directory.empty())
    llvm::sys::fs::remove_directories(directory);
}

std::unique_ptr<CudaEmulation> CudaEmulation::create(const artifact::ArtifactT &artifact,
                                                     std::string &error) {
  std::unique_ptr<CudaEmulation> emulation(new CudaEmulation(artifact));
  llvm::SmallString<128> directory;
  if (llvm::sys::fs::createUniqueDirectory("kiln-emulation", directory)) {
    error = "cannot create a temporary directory";
    return nullptr;
  }
  emulation->directory = directory.str().str();
  std::string source = emulation->directory + "/kernels.cpp";
  std::string object = emulation->directory + "/kernels.so";
  std::string log = emulation->directory + "/compile.log";
  {
    std::ofstream file(source);
    file << kShim << artifact.source;
  }
  auto compiler = llvm::sys::findProgramByName("c++");
  if (!compiler) {
    error = "no host C++ compiler (c++) on PATH";
    return nullptr;
  }
  llvm::StringRef args[] = {*compiler, "-std=c++17", "-O1", "-shared", "-fPIC",
                            "-w", "-o", object, source};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
  if (llvm::sys::ExecuteAndWait(*compiler, args, std::nullopt, redirects) != 0) {
    std::ifstream file(log);
    std::stringstream text;
    text << file.rdbuf();
    error = "the host compiler rejected the kernels:\n" + text.str();
    return nullptr;
  }
  emulation->library = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!emulation->library) {
    error = dlerror();
    return nullptr;
  }
  emulation->configure = reinterpret_cast<void (*)(unsigned, unsigned, unsigned)>(
      dlsym(emulation->library, "kiln_emulation_configure"));
  for (const std::string &name : artifact.kernel_names) {
    void *kernel = dlsym(emulation->library, name.c_str());
    if (!kernel) {
      error = "kernel " + name + " is missing";
      return nullptr;
    }
    emulation->kernels.push_back(reinterpret_cast<void (*)(void *const *)>(kernel));
  }
  emulation->arena.assign(artifact.arena_bytes, 0);
  for (const auto &constant : artifact.constants)
    std::memcpy(emulation->arena.data() + constant->offset, constant->data.data(),
                constant->data.size());
  return emulation;
}

bool CudaEmulation::has(const std::string &name) const {
  return llvm::any_of(artifact.tensors, [&](auto &t) { return t->name == name; });
}

const artifact::TensorT &CudaEmulation::tensor(const std::string &name) const {
  for (const auto &t : artifact.tensors)
    if (t->name == name)
      return *t;
  llvm::report_fatal_error(llvm::Twine("no tensor ") + name + " in the artifact");
}

namespace {
double readElement(const uint8_t *at, artifact::ElementType type) {
  using artifact::ElementType;
  switch (type) {
  case ElementType::F32: { float f; std::memcpy(&f, at, 4); return f; }
  case ElementType::F64: { double d; std::memcpy(&d, at, 8); return d; }
  case ElementType::BF16: {
    uint32_t bits = uint32_t(at[0] | (at[1] << 8)) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  case ElementType::F16: {
    _Float16 h;
    std::memcpy(&h, at, 2);
    return static_cast<double>(h);
  }
  case ElementType::I64: { int64_t v; std::memcpy(&v, at, 8); return v; }
  case ElementType::I32: { int32_t v; std::memcpy(&v, at, 4); return v; }
  case ElementType::I16: { int16_t v; std::memcpy(&v, at, 2); return v; }
  case ElementType::I8: return static_cast<int8_t>(at[0]);
  default: return at[0];
  }
}

void writeElement(uint8_t *at, artifact::ElementType type, double value) {
  using artifact::ElementType;
  switch (type) {
  case ElementType::F32: { float f = value; std::memcpy(at, &f, 4); return; }
  case ElementType::F64: std::memcpy(at, &value, 8); return;
  case ElementType::BF16: { // to nearest, ties to even
    float f = value;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint16_t half = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    std::memcpy(at, &half, 2);
    return;
  }
  case ElementType::F16: { _Float16 h = value; std::memcpy(at, &h, 2); return; }
  case ElementType::I64: { int64_t v = value; std::memcpy(at, &v, 8); return; }
  case ElementType::I32: { int32_t v = value; std::memcpy(at, &v, 4); return; }
  case ElementType::I16: { int16_t v = value; std::memcpy(at, &v, 2); return; }
  default: at[0] = static_cast<uint8_t>(static_cast<int64_t>(value)); return;
  }
}
} // namespace

void CudaEmulation::write(const std::string &name, const Tensor &value) {
  const artifact::TensorT &t = tensor(name);
  int64_t width = artifact::elementBytes(t.element_type);
  for (int64_t i = 0; i < value.getNumElements(); ++i) {
    double element = isFloat(value.getDType()) ? value.getAsDouble(i)
                                               : static_cast<double>(value.ints()[i]);
    writeElement(arena.data() + t.offset + i * width, t.element_type, element);
  }
}

Tensor CudaEmulation::read(const std::string &name) const {
  const artifact::TensorT &t = tensor(name);
  bool floating = t.element_type == artifact::ElementType::F32 ||
                  t.element_type == artifact::ElementType::F64 ||
                  t.element_type == artifact::ElementType::BF16 ||
                  t.element_type == artifact::ElementType::F16;
  Tensor value(floating ? DType::F64 : DType::I64, t.shape);
  int64_t width = artifact::elementBytes(t.element_type);
  for (int64_t i = 0; i < value.getNumElements(); ++i) {
    double element = readElement(arena.data() + t.offset + i * width, t.element_type);
    if (floating)
      value.floats()[i] = element;
    else
      value.ints()[i] = static_cast<int64_t>(element);
  }
  return value;
}

void CudaEmulation::gemm(const artifact::GemmT &g) {
  int64_t in = artifact::elementBytes(g.input_type);
  int64_t out = artifact::elementBytes(g.output_type);
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t m = 0; m < g.m; ++m)
      for (int64_t n = 0; n < g.n; ++n) {
        double acc = 0.0;
        for (int64_t k = 0; k < g.k; ++k) {
          int64_t a = g.transpose_a ? k * g.m + m : m * g.k + k;
          int64_t bb = g.transpose_b ? n * g.k + k : k * g.n + n;
          acc += readElement(&arena[g.a + (b * g.stride_a + a) * in], g.input_type) *
                 readElement(&arena[g.b + (b * g.stride_b + bb) * in], g.input_type);
        }
        // Round as the interpreter does: the product to the output type
        // first, then the bias added and rounded again.
        uint8_t *d = &arena[g.d + (b * g.stride_d + m * g.n + n) * out];
        writeElement(d, g.output_type, acc);
        if (g.epilogue == artifact::Epilogue::Bias)
          writeElement(d, g.output_type,
                       readElement(d, g.output_type) +
                           readElement(&arena[g.bias + n * out], g.output_type));
      }
}

void CudaEmulation::run() {
  std::vector<void *> pointers;
  for (const auto &operation : artifact.operations) {
    if (operation->gemm) {
      gemm(*operation->gemm);
      continue;
    }
    const artifact::KernelLaunchT &launch = *operation->kernel;
    pointers.clear();
    for (int64_t offset : launch.args)
      pointers.push_back(arena.data() + offset);
    for (unsigned block = 0; block < launch.grid; ++block) {
      configure(block, launch.grid, 1);
      kernels[launch.kernel](pointers.data());
    }
  }
}

} // namespace kiln::testing
