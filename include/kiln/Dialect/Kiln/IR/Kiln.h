//===- Kiln.h - the kiln dialect ---------------------------------*- C++ -*-===//
//
// Declares the kiln dialect, its enums and its ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILN_H
#define KILN_DIALECT_KILN_IR_KILN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/Dialect/Kiln/IR/KilnOpsDialect.h.inc"
#include "kiln/Dialect/Kiln/IR/KilnEnums.h.inc"

namespace kiln {
/// The keys `[first, last)` of `keys` that query row `i` of attention may
/// attend to, before its mask: all, at most `i` when `causal`, within
/// `window` = [left, right] of `i` (a negative bound is none).
std::pair<int64_t, int64_t>
attentionKeyRange(bool causal, std::optional<llvm::ArrayRef<int64_t>> window,
                  int64_t i, int64_t keys);
} // namespace kiln

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.h.inc"

namespace kiln {
/// The offset operand, given or not, of an op that draws random numbers
/// (kiln.dropout, kiln.random_uniform, kiln.random_normal, attention and its
/// gradient with dropout); std::nullopt for an op that draws none. Such an
/// op is a function of its seed and offset, which a training step sets to
/// its step number: evaluated once (folded), it would draw once for all.
std::optional<mlir::MutableOperandRange> randomOffset(mlir::Operation *op);
} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_KILN_H
