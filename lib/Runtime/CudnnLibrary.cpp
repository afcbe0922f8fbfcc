//===- CudnnLibrary.cpp - cuDNN, loaded when an artifact needs it ---------===//

#include "CudnnLibrary.h"

#include <dlfcn.h>

namespace kiln::runtime {

/// Resolves `name` into `entry`; false (with `error`) when it is missing.
template <typename Function>
static bool resolve(void *library, const char *name, Function &entry,
                    std::string &error) {
  entry = reinterpret_cast<Function>(dlsym(library, name));
  if (!entry)
    error = std::string("cuDNN has no ") + name + " (kiln needs cuDNN 9)";
  return entry != nullptr;
}

const CudnnLibrary *loadCudnn(std::string &error) {
  static CudnnLibrary library;
  static std::string failure;
  static bool loaded = [] {
    void *handle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      failure = std::string("cannot open cuDNN (libcudnn.so.9: ") + dlerror() +
                "); put its directory on LD_LIBRARY_PATH, or compile with "
                "--attention=kiln";
      return false;
    }
    CudnnLibrary &l = library;
    return resolve(handle, "cudnnCreate", l.create, failure) &&
           resolve(handle, "cudnnDestroy", l.destroy, failure) &&
           resolve(handle, "cudnnSetStream", l.setStream, failure) &&
           resolve(handle, "cudnnGetErrorString", l.errorString, failure) &&
           resolve(handle, "cudnnGetLastErrorString", l.lastErrorString,
                   failure) &&
           resolve(handle, "cudnnBackendCreateDescriptor", l.createDescriptor,
                   failure) &&
           resolve(handle, "cudnnBackendDestroyDescriptor", l.destroyDescriptor,
                   failure) &&
           resolve(handle, "cudnnBackendSetAttribute", l.setAttribute,
                   failure) &&
           resolve(handle, "cudnnBackendGetAttribute", l.getAttribute,
                   failure) &&
           resolve(handle, "cudnnBackendFinalize", l.finalize, failure) &&
           resolve(handle, "cudnnBackendExecute", l.execute, failure);
  }();
  if (!loaded) {
    error = failure;
    return nullptr;
  }
  return &library;
}

} // namespace kiln::runtime
