//===- NVRTC.cpp - compiling generated kernels without a GPU --------------===//

#include "kiln/Target/CUDATarget.h"

#include "llvm/ADT/STLExtras.h"

#include <nvrtc.h>

#include <memory>

namespace kiln::cuda {

bool isArchitectureName(llvm::StringRef arch) {
  return arch.starts_with("sm_") && arch.size() >= 5 &&
         llvm::all_of(arch.drop_front(3),
                      [](char c) { return c >= '0' && c <= '9'; });
}

llvm::Expected<std::vector<uint8_t>> compileWithNVRTC(const std::string &source,
                                                      const std::string &arch,
                                                      bool ptx,
                                                      std::string *ptxasInfo) {
  auto failure = [&](const std::string &what, nvrtcResult status,
                     const std::string &log = "") {
    return llvm::createStringError("NVRTC " + what + " for " + arch + ": " +
                                   nvrtcGetErrorString(status) +
                                   (log.empty() ? "" : "\n" + log));
  };
  nvrtcProgram program;
  nvrtcResult status = nvrtcCreateProgram(&program, source.c_str(),
                                          "kiln_step.cu", 0, nullptr, nullptr);
  if (status != NVRTC_SUCCESS)
    return failure("cannot create the program", status);
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram *)> release(
      &program, [](nvrtcProgram *p) { nvrtcDestroyProgram(p); });
  // A cubin is compiled for the exact architecture, PTX for its virtual one.
  std::string target =
      "--gpu-architecture=" + (ptx ? "compute_" + arch.substr(3) : arch);
  bool verbose = ptxasInfo && !ptx;
  const char *flags[] = {target.c_str(), "--std=c++17", "-default-device",
                         "--ptxas-options=-v"};
  status = nvrtcCompileProgram(program, verbose ? 4 : 3, flags);
  auto programLog = [&] {
    size_t size = 0;
    nvrtcGetProgramLogSize(program, &size);
    std::string log(size, '\0');
    nvrtcGetProgramLog(program, log.data());
    return log;
  };
  if (status != NVRTC_SUCCESS)
    return failure("compilation failed", status, programLog());
  if (verbose)
    *ptxasInfo = programLog();
  size_t size = 0;
  status =
      ptx ? nvrtcGetPTXSize(program, &size) : nvrtcGetCUBINSize(program, &size);
  if (status != NVRTC_SUCCESS)
    return failure("has no output", status);
  std::vector<uint8_t> image(size);
  status = ptx ? nvrtcGetPTX(program, reinterpret_cast<char *>(image.data()))
               : nvrtcGetCUBIN(program, reinterpret_cast<char *>(image.data()));
  if (status != NVRTC_SUCCESS)
    return failure("has no output", status);
  return image;
}

} // namespace kiln::cuda
