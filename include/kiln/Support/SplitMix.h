//===- SplitMix.h - the stateless hash behind every random draw -*- C++ -*-===//
//
// kiln draws random values as pure functions of a key and an element's
// index, so that any element can be drawn alone, on any thread, in any
// order (the interpreter's random ops, the token batches, the parameters'
// first values; the generated kernels' prelude writes the same function).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_SPLITMIX_H
#define KILN_SUPPORT_SPLITMIX_H

#include <cstdint>

namespace kiln {

/// SplitMix64's finalizer: 64 well-mixed bits of `x`.
inline uint64_t splitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A value in [0, 1) from the top 53 bits of splitMix64(key ^ index).
inline double uniformDraw(uint64_t key, uint64_t index) {
  return (splitMix64(key ^ index) >> 11) * 0x1.0p-53;
}

} // namespace kiln

#endif // KILN_SUPPORT_SPLITMIX_H
