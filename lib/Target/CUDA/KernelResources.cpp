//===- KernelResources.cpp - what ptxas allots a kernel, and its occupancy ===//
//
// ptxas's -v report of each compiled kernel, and how many of its blocks one
// SM holds at once, by CUDA's own occupancy calculator (cuda_occupancy.h,
// which needs no GPU) over the published limits of each architecture.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDATarget.h"

#include <cuda_occupancy.h>

#include <climits>
#include <optional>

namespace kiln::cuda {

std::vector<KernelResources> parsePtxasInfo(llvm::StringRef ptxasInfo) {
  // ptxas -v says, per kernel:
  //   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
  //   ptxas info    : Function properties for NAME
  //       S bytes stack frame, T bytes spill stores, L bytes spill loads
  //   ptxas info    : Used R registers, used 1 barriers, M bytes smem
  std::vector<KernelResources> kernels;
  llvm::SmallVector<llvm::StringRef> lines;
  ptxasInfo.split(lines, '\n');
  // The number before `unit` in `line`, if any.
  auto number = [](llvm::StringRef line, llvm::StringRef unit) -> int64_t {
    size_t at = line.find(unit);
    if (at == llvm::StringRef::npos)
      return 0;
    llvm::StringRef digits = line.take_front(at).rtrim().rsplit(' ').second;
    int64_t value = 0;
    return digits.getAsInteger(10, value) ? 0 : value;
  };
  for (llvm::StringRef line : lines) {
    if (line.contains("Compiling entry function '")) {
      llvm::StringRef name =
          line.split("Compiling entry function '").second.split('\'').first;
      kernels.push_back({name.str()});
    } else if (!kernels.empty() && line.contains("bytes stack frame")) {
      kernels.back().stackBytes = number(line, " bytes stack frame");
      kernels.back().spillStoreBytes = number(line, " bytes spill stores");
      kernels.back().spillLoadBytes = number(line, " bytes spill loads");
    } else if (!kernels.empty() && line.contains(" registers")) {
      kernels.back().registers = number(line, " registers");
      kernels.back().sharedBytes = number(line, " bytes smem");
    }
  }
  return kernels;
}

/// The limits of an SM of `arch` that occupancy depends on, as
/// cudaGetDeviceProperties reports them for an A100 (sm_80) and an H100
/// (sm_90); none for other architectures.
static std::optional<cudaOccDeviceProp> multiprocessor(llvm::StringRef arch) {
  cudaOccDeviceProp p;
  p.computeMajor = arch == "sm_80" ? 8 : 9;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsPerMultiprocessor = 2048;
  p.regsPerBlock = p.regsPerMultiprocessor = 65536;
  p.warpSize = 32;
  p.sharedMemPerBlock = 48 << 10;
  p.reservedSharedMemPerBlock = 1 << 10;
  if (arch == "sm_80") {
    p.numSms = 108;
    p.sharedMemPerMultiprocessor = 164 << 10;
  } else if (arch == "sm_90") {
    p.numSms = 132;
    p.sharedMemPerMultiprocessor = 228 << 10;
  } else {
    return std::nullopt;
  }
  p.sharedMemPerBlockOptin =
      p.sharedMemPerMultiprocessor - p.reservedSharedMemPerBlock;
  return p;
}

int64_t residentBlocks(llvm::StringRef arch, int64_t block,
                       const KernelResources &kernel) {
  std::optional<cudaOccDeviceProp> properties = multiprocessor(arch);
  if (!properties)
    return 0;
  cudaOccFuncAttributes attributes;
  attributes.maxThreadsPerBlock = INT_MAX;
  attributes.numRegs = kernel.registers;
  attributes.sharedSizeBytes = kernel.sharedBytes;
  attributes.numBlockBarriers = 1;
  cudaOccDeviceState state;
  cudaOccResult result;
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &*properties,
                                              &attributes, &state, block,
                                              0) != CUDA_OCC_SUCCESS)
    return 0;
  return result.activeBlocksPerMultiprocessor;
}

} // namespace kiln::cuda
