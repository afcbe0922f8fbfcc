//===- Fuse.h - elementwise fusion ------------------------------*- C++ -*-===//
//
// Groups elementwise chains into kiln.fusion regions (Fuse.cpp), and GEMMs
// with what cuBLASLt computes around them (FuseGemmEpilogues.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_FUSE_H
#define KILN_TRANSFORMS_FUSE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Whether `op` computes each result element from the operand elements at
/// the same (broadcast) position: unary math, casts, broadcasting
/// arithmetic, comparisons, where.
bool isElementwise(mlir::Operation *op);

/// Whether `op` reduces every dimension but the last (a bias gradient): a
/// block-per-row kernel adds it up over the rows it computes.
bool sumsColumns(mlir::Operation *op);

/// Reductions that end a fusion: the elementwise chain producing their
/// first operand is computed in the reduction's kernel and never stored
/// (the cast of 16-bit logits before the loss, the residual add before a
/// norm, the squares of a gradient before their sum). Only elementwise
/// readers of a normalized row join after them.
bool isFusedReduction(mlir::Operation *op);

/// Outlines chains of elementwise ops of `function`'s body, with the data
/// movement between them (reshape, transpose, slice, insert_slice) and the
/// reductions that end them, into kiln.fusion ops; returns how many fusions
/// it made.
int fuseElementwise(mlir::func::FuncOp function);

/// Makes each product whose only reader adds a bias along its rows (a
/// vector of its last dimension) one fusion with that add, and with a tanh
/// GELU of the sum and a cast of the GELU when they follow: the epilogues
/// cuBLASLt applies as it stores the product (bias, GELU with the sum as
/// its aux output), which is then never stored unbiased; and, backward, a
/// product scaled by a tanh GELU's derivative (DGELU). Returns how many it
/// fused. Run before fuseElementwise.
int fuseGemmEpilogues(mlir::func::FuncOp function);

/// Makes each product of two matrices one fusion with the sum over its k
/// dimension of one of its operands (a bias gradient beside a weight
/// gradient), where that sum is alone in its fusion or in none, or computed
/// by a fusion that only rearranges or exactly assembles the operand (whose
/// kernel would read it back only to sum it), but not where a norm's
/// gradient kernel sums it as it computes it: cuBLASLt's BGRADA/BGRADB
/// epilogues sum the operand as the GEMM reads it. Returns how many it
/// fused. Run after fuseElementwise.
int fuseBiasGradients(mlir::func::FuncOp function);

/// Puts the first copies of parameters that no other fusion computes (the
/// 16-bit weights and biases that GEMMs read) into one kiln.fusion before
/// the first of their readers, copies of one type next to each other, so
/// that the CUDA target launches them a few times instead of once per
/// parameter. Later copies (recomputed for the backward pass) stay where
/// they are. Returns whether it did (fewer than two copies have nothing to
/// join).
bool fuseParameterCopies(mlir::func::FuncOp function);

/// Makes each run of consecutive fusions whose results are all scalars, and
/// that read none of each other's (the squares of each gradient that the
/// gradient norm adds up), one fusion: the CUDA target still gives each
/// its kernels, but places equal ones together, so that those over tensors
/// of one shape are one launch. Returns how many runs it merged.
int fuseScalarReductions(mlir::func::FuncOp function);

/// All of kiln-fuse, in its order: GEMM epilogues, elementwise chains (with
/// the reductions that end them), bias gradients beside weight gradients,
/// runs of scalar reductions, the multi-tensor optimizer update.
void fuse(mlir::func::FuncOp function);

/// Puts all optimizer updates of a training step into one kiln.fusion, the
/// multi-tensor update that one kernel applies to every parameter; returns
/// whether it did (a step with fewer than two updates has nothing to join).
bool fuseOptimizerUpdates(mlir::func::FuncOp function);

} // namespace kiln

#endif // KILN_TRANSFORMS_FUSE_H
