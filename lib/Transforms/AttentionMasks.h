//===- AttentionMasks.h - what attention's masks keep ------------*- C++
//-*-===//
//
// Internal to the attention rewrite: which scores a mask excludes, the
// keep flags of masks that constants alone compute, and the bands of keys
// (causal, sliding windows) they keep, which kiln.attention says with
// attributes instead of reading a mask.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_ATTENTIONMASKS_H
#define KILN_LIB_TRANSFORMS_ATTENTIONMASKS_H

#include "PatternSupport.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace kiln {

/// Scores at or below this are excluded from the softmax: -inf, a float
/// type's lowest value (masked_fill with finfo.min), and the -1e9 and -1e4
/// that hand-written models and older exports mask with. Such a score, even
/// scaled by 1/sqrt(d) of up to 256 dimensions (-625), is over 125 below
/// any score a trained attention keeps (above -500): its exp relative to
/// the row maximum is exactly 0 in fp32 and under 1e-54 in fp64, where
/// attention drops the key exactly.
constexpr double kExcludedScore = -1.0e4;

/// Whether score `x` of a float type is excluded from the softmax.
bool excludesScore(double x, mlir::Type elementType);

/// The keys a constant mask keeps, as kiln.attention's attributes say it.
struct KeyBand {
  bool causal = false;
  /// [left, right], a negative bound none; empty: no window.
  llvm::SmallVector<int64_t, 2> window;
};

/// The band of keys that the keep flags of a mask of `shape` keep for every
/// query row of `scores` [B, H, Tq, Tk]: j in [i - left, i + right], the
/// diagonal included and every row keeping some key (so that the keys it
/// drops contribute exactly 0). All of them, causal (right 0), a sliding
/// window (left too), a band; none if the flags are no such band.
std::optional<KeyBand> keptBand(llvm::ArrayRef<bool> keep,
                                llvm::ArrayRef<int64_t> shape,
                                llvm::ArrayRef<int64_t> scores);

/// The keys both `a` and `b` keep: a band too, the diagonal still in it.
KeyBand intersection(const KeyBand &a, const KeyBand &b);

/// Whether `shape` broadcasts to `target` without changing it.
bool broadcastsTo(llvm::ArrayRef<int64_t> shape,
                  llvm::ArrayRef<int64_t> target);

/// A mask computed from constants alone, as "keep" flags of its
/// pre-broadcast shape, which broadcasts to the scores.
struct ConstantMask {
  llvm::SmallVector<bool> keep;
  llvm::SmallVector<int64_t> shape;
  /// The ops computing it, which nothing else may need.
  llvm::SmallVector<mlir::Operation *> ops;
};

/// The keep flags of `mask` if constants alone compute it: a constant
/// (boolean, or additive with 0 and excluding values), a broadcast or the
/// logical not of one, or an additive mask that selects 0 or an excluding
/// value by a boolean one (GPT-2's triangle, broadcast over the batch, then
/// `where(keep, 0, finfo.min)`). `negate` flips the flags.
std::optional<ConstantMask> constantMask(const Literals &literals,
                                         mlir::Value mask, bool negate);

} // namespace kiln

#endif // KILN_LIB_TRANSFORMS_ATTENTIONMASKS_H
