//===- AssignPrecision.h - mixed-precision assignment -----------*- C++ -*-===//
//
// The policy that decides in which float type each op of a training step
// computes. Used by the kiln-assign-precision pass and by the trainer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_ASSIGNPRECISION_H
#define KILN_TRANSFORMS_ASSIGNPRECISION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace kiln {

enum class Precision { FP32, BF16 };

/// Parses "fp32" or "bf16".
std::optional<Precision> parsePrecision(llvm::StringRef text);

/// "fp32" or "bf16", as parsePrecision reads it.
llvm::StringRef precisionName(Precision precision);

/// Applies the precision policy to `function`: with bf16, every matrix
/// product of f32 operands reads them rounded to bf16 and accumulates and
/// stores in f32 (the tensor-core form); everything else (softmax, norms,
/// reductions, elementwise math, the loss, the optimizer and its state, the
/// master weights) stays f32. Casts that undo each other are removed.
void assignPrecision(mlir::func::FuncOp function, Precision precision);

} // namespace kiln

#endif // KILN_TRANSFORMS_ASSIGNPRECISION_H
