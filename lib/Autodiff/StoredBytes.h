//===- StoredBytes.h - the bytes behind a parameter's value -----*- C++ -*-===//

#ifndef KILN_LIB_AUTODIFF_STOREDBYTES_H
#define KILN_LIB_AUTODIFF_STOREDBYTES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cstring>

namespace kiln {

/// The stored bytes of `attr`, or empty where it is splat or not in memory.
inline llvm::ArrayRef<char> storedBytes(mlir::ElementsAttr attr) {
  if (auto resource = llvm::dyn_cast<mlir::DenseResourceElementsAttr>(attr)) {
    mlir::AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    return blob ? blob->getData() : llvm::ArrayRef<char>();
  }
  auto dense = llvm::dyn_cast<mlir::DenseElementsAttr>(attr);
  return dense && !dense.isSplat() ? dense.getRawData()
                                   : llvm::ArrayRef<char>();
}

/// Whether `bytes`, elements `width` bytes wide, hold one value repeated.
inline bool holdsOneValue(llvm::ArrayRef<char> bytes, size_t width) {
  for (size_t i = width; i < bytes.size(); i += width)
    if (std::memcmp(&bytes[i], bytes.data(), width))
      return false;
  return true;
}

} // namespace kiln

#endif // KILN_LIB_AUTODIFF_STOREDBYTES_H
