//===- StoredBytes.h - the bytes behind a parameter's value -----*- C++ -*-===//

#ifndef KILN_LIB_AUTODIFF_STOREDBYTES_H
#define KILN_LIB_AUTODIFF_STOREDBYTES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

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

} // namespace kiln

#endif // KILN_LIB_AUTODIFF_STOREDBYTES_H
