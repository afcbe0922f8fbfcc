//===- CudnnLibrary.h - cuDNN, loaded when an artifact needs it -*- C++ -*-===//
//
// kiln-run needs cuDNN only for artifacts compiled with --attention=cudnn,
// and GPU machines often have it where the dynamic linker does not look (a
// Python package's directory): it is opened on first use, by name
// (`libcudnn.so.9`, found through LD_LIBRARY_PATH), and every entry point
// kiln calls is resolved then, so a missing library or symbol is one clear
// error at load time rather than a failure to start.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_RUNTIME_CUDNNLIBRARY_H
#define KILN_LIB_RUNTIME_CUDNNLIBRARY_H

#include <cudnn.h>

#include <string>

namespace kiln::runtime {

struct CudnnLibrary {
  decltype(&::cudnnCreate) create;
  decltype(&::cudnnDestroy) destroy;
  decltype(&::cudnnSetStream) setStream;
  decltype(&::cudnnGetErrorString) errorString;
  decltype(&::cudnnGetLastErrorString) lastErrorString;
  decltype(&::cudnnBackendCreateDescriptor) createDescriptor;
  decltype(&::cudnnBackendDestroyDescriptor) destroyDescriptor;
  decltype(&::cudnnBackendSetAttribute) setAttribute;
  decltype(&::cudnnBackendGetAttribute) getAttribute;
  decltype(&::cudnnBackendFinalize) finalize;
  decltype(&::cudnnBackendExecute) execute;
};

/// cuDNN's entry points, opening the library on the first call; null with
/// `error` set when it or one of them is missing.
const CudnnLibrary *loadCudnn(std::string &error);

} // namespace kiln::runtime

#endif // KILN_LIB_RUNTIME_CUDNNLIBRARY_H
