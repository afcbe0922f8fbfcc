//===- Shapes.h - element counts and shapes as text ------------*- C++ -*-===//
//
// A shape's element count, computed without overflow. The importer refuses
// tensors beyond kMaxElements, so that every size kiln computes from a
// shape later (bytes, offsets, the arena) fits in 64 bits.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_SHAPES_H
#define KILN_SUPPORT_SHAPES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

/// 2^44 elements, 64 TiB of f32: hundreds of times what any device holds.
constexpr int64_t kMaxElements = int64_t(1) << 44;

/// The number of elements of `shape`; std::nullopt where a size is
/// negative (dynamic) or the product overflows 64 bits.
inline std::optional<int64_t> elementCount(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    if (size < 0 || llvm::MulOverflow(count, size, count))
      return std::nullopt;
  return count;
}

/// Whether a tensor of `shape` has more than kMaxElements elements (or
/// more than 64 bits count).
inline bool exceedsMaxElements(llvm::ArrayRef<int64_t> shape) {
  std::optional<int64_t> count = elementCount(shape);
  return !count || *count > kMaxElements;
}

/// `shape` as messages write it: [2, 3].
inline std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, ", ");
  os << "]";
  return text;
}

} // namespace kiln

#endif // KILN_SUPPORT_SHAPES_H
