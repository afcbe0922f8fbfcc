//===- PadTensorCores.h - tensor-core padding of GEMM dimensions -*- C++
//-*-===//
//
// Pads weights whose dimensions make odd GEMM shapes (PadTensorCores.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PADTENSORCORES_H
#define KILN_TRANSFORMS_PADTENSORCORES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// The cost table: the size a GEMM dimension of `size` is padded to, or
/// `size` itself when it is a multiple of 8 already or padding does not
/// pay. It takes the widest alignment of 128, 64, 32, 16 and 8 whose extra
/// work stays within `maxOverhead` (a fraction) of the dimension: GPT-2's
/// 50257 becomes 50304 (128 x 393, 0.09% more).
int64_t paddedSize(int64_t size, double maxOverhead);

/// Pads, in `function`, every 2-D float parameter dimension that becomes a
/// GEMM's M or N and that `paddedSize` enlarges; returns how many
/// dimensions it padded. The function computes exactly what it did.
int padTensorCores(mlir::func::FuncOp function, double maxOverhead);

} // namespace kiln

#endif // KILN_TRANSFORMS_PADTENSORCORES_H
