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

/// The type tensor cores read GEMM and attention operands in.
enum class Precision { FP32, TF32, BF16, FP16 };

/// Parses "fp32", "tf32", "bf16" or "fp16".
std::optional<Precision> parsePrecision(llvm::StringRef text);

/// The name parsePrecision reads.
llvm::StringRef precisionName(Precision precision);

/// Whether `precision` needs loss scaling: fp16's 5 exponent bits flush
/// small gradients to zero unless the loss is scaled up first.
inline bool needsLossScaling(Precision precision) {
  return precision == Precision::FP16;
}

/// Applies the precision policy to `function`: with tf32, bf16 or fp16,
/// every matrix product and attention of f32 operands reads them rounded to
/// that type and accumulates and stores in f32 (the tensor-core form);
/// everything else (softmax, norms, reductions, elementwise math, the loss,
/// the optimizer and its state, the master weights) stays f32. With
/// `narrowNorms` (bf16 and fp16), layer and RMS norms read their input
/// rounded to 16 bits, which their gradients read too, and store their
/// output in 16 bits; statistics, parameters and gradients stay f32. Casts
/// that undo each other are removed. With `geluEpilogue` (bf16 and fp16), a
/// tanh GELU of a biased product reads the f32 sum, as cuBLASLt's GELU
/// epilogue computes it, rather than the stored 16-bit sum; without it,
/// recomputation can recompute the GELU alone from the stored sum.
void assignPrecision(mlir::func::FuncOp function, Precision precision,
                     bool narrowNorms = false, bool geluEpilogue = true);

} // namespace kiln

#endif // KILN_TRANSFORMS_ASSIGNPRECISION_H
