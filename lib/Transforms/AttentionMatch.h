//===- AttentionMatch.h - what the attention rewrite matched ----*- C++ -*-===//
//
// Internal to the attention rewrite: what a match found, and where its
// heads are (AttentionHeads.cpp): the layouts exporters give them, and the
// moves to and from kiln.attention's [B, H, T, D].
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_ATTENTIONMATCH_H
#define KILN_LIB_TRANSFORMS_ATTENTIONMATCH_H

#include "AttentionMasks.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {

/// What a match found, before anything is rewritten.
struct AttentionMatch {
  mlir::Value query, key, value; // key may still be transposed
  bool keyTransposed = false, valueTransposed = false, queryTransposed = false;
  double scale = 1.0;
  /// [B, H] of the scores: the products' leading dimensions, or, where
  /// they are 3-D, the split that a reshape between them shows ([B * H, 1]
  /// where none does).
  llvm::SmallVector<int64_t> heads;
  /// [Tq, H] in the row layout of GPTBigCode's multi-query attention, empty
  /// otherwise: the 3-D products fold the heads into the query rows,
  /// position-major ([B, Tq * H, D] queries, one [B, Tk, D] key and value
  /// head), and the 4-D scores between them are [B, Tq, H, Tk].
  llvm::SmallVector<int64_t> rows;
  /// An additive mask (float), and a boolean one: true where a key is kept,
  /// or, with `negateKeep`, where it is dropped. Each with the shape of the
  /// scores it applies to (3-D where the heads are flattened).
  mlir::Value bias, keep;
  llvm::SmallVector<int64_t> biasScores, keepScores;
  bool negateKeep = false;
  /// The score the boolean mask gives a dropped key (see excludesScore).
  mlir::Value excluded;
  /// The product of the scales applied after the bias is added (GPT-J and
  /// CodeGen divide the masked scores): attention adds the bias times it to
  /// the scaled scores.
  double biasScale = 1.0;
  /// Gemma 2's soft cap of the scaled scores, `tanh(s / c) * c`; 0 for none.
  double softcap = 0.0;
  DropoutOp dropout;
  MatmulOp output;
  llvm::SetVector<mlir::Operation *> replaced;
};

/// Records the [B, H] split that 4-D scores of `shape` show ([B, H, Tq, Tk],
/// or [B, Tq, H, Tk] in the row layout); false if it contradicts one
/// recorded before.
bool recordHeads(llvm::ArrayRef<int64_t> shape, AttentionMatch &match);

/// Peels a reshape that moves the heads (between the batch or the rows of
/// 3-D products and a dimension of their own) off `value`, recording them.
mlir::Value peelHeadReshape(mlir::Value value, AttentionMatch &match);

/// Follows `value`'s only user if it is such a reshape.
mlir::Value peelHeadReshapeForward(mlir::Value value, AttentionMatch &match);

/// Whether q, k, v and the output are [B, H, x, y] with the match's B and
/// H, or k and v [B, 1, x, y] that the products broadcast over the heads
/// (multi-query attention, Falcon's: one key/value head for all); in the
/// row layout, q and the output [B, Tq * H, D] and k and v [B, x, y].
bool hasAttentionShapes(AttentionMatch &match);

/// The band of keys a constant mask over `scores` keeps (keptBand, which
/// reads scores [B, H, Tq, Tk]): in the row layout, with its flags split
/// like the rows and the heads moved before them.
std::optional<KeyBand> bandOf(const ConstantMask &mask,
                              llvm::ArrayRef<int64_t> scores,
                              const AttentionMatch &match);

/// A mask of `scores` as one of [B, H, Tq, Tk]: a mask of 3-D scores
/// [B * H, Tq, Tk] over all of B * H split as the scores, any other with
/// unit B and H; in the row layout, split like the rows, heads moved
/// before them.
mlir::Value maskToHeads(mlir::OpBuilder &builder, mlir::Location loc,
                        mlir::Value mask, llvm::ArrayRef<int64_t> scores,
                        AttentionMatch &match);

/// The match's query, key and value as kiln.attention reads them:
/// [B, H, T, D], key and value heads no longer repeated.
struct HeadOperands {
  mlir::Value query, key, value;
};
HeadOperands operandsAsHeads(mlir::OpBuilder &builder, mlir::Location loc,
                             AttentionMatch &match);

/// The type of kiln.attention's output for `heads`.
mlir::RankedTensorType headsOutputType(const AttentionMatch &match,
                                       const HeadOperands &heads);

/// kiln.attention's `output` in the layout of the product it replaces.
mlir::Value outputFromHeads(mlir::OpBuilder &builder, mlir::Location loc,
                            mlir::Value output, const AttentionMatch &match);

} // namespace kiln

#endif // KILN_LIB_TRANSFORMS_ATTENTIONMATCH_H
