//===- Outline.h - making kiln.fusion regions -------------------*- C++ -*-===//
//
// Internal to the fusion passes (Fuse.cpp, FuseGemmEpilogues.cpp): when a
// group of ops can become one fusion, and making it one.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_OUTLINE_H
#define KILN_LIB_TRANSFORMS_OUTLINE_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/ADT/DenseSet.h"

namespace kiln {

/// Whether every use of `group`'s values outside `members` comes after
/// `last`.
bool usesFollow(llvm::ArrayRef<mlir::Operation *> group,
                const llvm::DenseSet<mlir::Operation *> &members,
                mlir::Operation *last);

/// Replaces `group` (in block order) by one kiln.fusion placed at its last
/// op, which it returns.
FusionOp outline(llvm::ArrayRef<mlir::Operation *> group);

} // namespace kiln

#endif // KILN_LIB_TRANSFORMS_OUTLINE_H
