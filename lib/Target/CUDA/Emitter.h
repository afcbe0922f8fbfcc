//===- Emitter.h - CUDA C++ for the ops of a planned step -------*- C++ -*-===//
//
// The pieces of the CUDA target that turn kiln IR into kernel source. The
// generated code is deliberately plain: every value of a kernel is a device
// lambda from an element index to the value at that index, so that any
// fusion region, broadcast and view composes without special cases.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TARGET_CUDA_EMITTER_H
#define KILN_LIB_TARGET_CUDA_EMITTER_H

#include "kiln/Artifact/Artifact.h"
#include "kiln/Target/CUDATarget.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace kiln::cuda {

/// Helpers, conversions and reductions every kernel source starts with.
llvm::StringRef kernelPrelude();

/// One kernel launch to be: the `__global__` function's body and how many
/// threads run it. Every kernel takes `void *const *args`, the arena
/// pointers of `operands` followed by those of `results`.
struct KernelPlan {
  std::string body;
  /// Blocks and threads per block.
  int64_t grid = 1, block = 256;
  /// Blocks one SM is to hold at once, which ptxas then fits its
  /// registers to (spilling if it must; `__launch_bounds__`'s second
  /// bound); 0 leaves that to ptxas.
  int64_t minBlocksPerSM = 0;
  /// Whether its loops stride over the grid, so that any number of blocks
  /// up to `grid` computes the same results: the runtime then launches no
  /// more than the device holds at once (one wave, its blocks sharing the
  /// work evenly, instead of a last wave that leaves SMs idle).
  bool gridStrided = false;
  llvm::SmallVector<mlir::Value, 4> operands, results;
  /// Dense constants the body reads, in the order of their pointers after
  /// `operands` (they get buffers in the arena).
  llvm::SmallVector<mlir::Operation *, 2> constants;
  /// Bytes of scratch for the partial results of a split reduction; its
  /// pointer follows the results.
  int64_t partialBytes = 0;
  /// Which part of the step's partials area it uses, in units of
  /// `partialBytes`: a kernel writing partials and the kernel combining
  /// them share one; equal writers placed in a run (batched into one
  /// launch) take consecutive ones (Lowering::emitElementKernels).
  int64_t partialSlot = 0;
  /// Whether the kernel combines partials, reading none of its operands.
  bool combinesPartials = false;
  /// Operands and results it neither reads nor writes, though they are in
  /// its argument list (which the kernels of attention's gradient share):
  /// left out of the bytes it is charged with.
  llvm::SmallVector<mlir::Value, 0> untouched;
  /// Whether a block per row computes every reduction it reads (the
  /// row's statistics, its terms of sums over rows) before any of its
  /// threads writes the row's results, and sums no columns: it then reads
  /// an operand only at the results' own index once it writes, where the
  /// ops it computes read that operand only so (a loss and its gradient
  /// over logits), and the results may take the operand's memory.
  bool rowsReadBeforeWritten = false;
  /// Whether the kernel checks indices it reads from tensors: its last
  /// argument is then a status word it sets when one is out of range.
  bool checksIndices = false;
  /// Floating-point operations of its products (attention), for profiles.
  int64_t flops = 0;
  /// The most elements any index of the body ranges over (a tensor it
  /// reads or writes, its partials): a body that declares its indices
  /// `idx` computes them in 32 bits when this bound leaves room for the
  /// loops' steps past the end (Lowering::emitKernels); unknown, in 64.
  int64_t indexBound = INT64_MAX;
};

/// Kernels computing `results` (values defined by ops of `region`, a fusion
/// body, or the results of a single op when `region` is null) from the
/// values the ops read from outside, which `externalValue` maps to the value
/// holding them in memory (a fusion's operand for its block argument).
/// `materialized` are values inside the region already in memory (a GEMM's
/// product): they are read, not computed. Fails with an error on the op that
/// cannot be compiled.
mlir::FailureOr<llvm::SmallVector<KernelPlan>>
planElementKernels(llvm::ArrayRef<mlir::Value> results,
                   llvm::function_ref<mlir::Value(mlir::Value)> externalValue,
                   llvm::ArrayRef<mlir::Value> materialized);

/// The strides, in elements, of a value in its buffer.
using StridesOf = llvm::function_ref<llvm::SmallVector<int64_t>(mlir::Value)>;

/// Kernels of ops with a schedule of their own: attention and its gradient
/// (on tensor cores where they apply, unless `options.exactAttention`,
/// tiled and with the query gradient as `options` say; their tensors
/// addressed through `stridesOf`), the scatter-add of gather_grad.
mlir::FailureOr<llvm::SmallVector<KernelPlan>>
planTemplateKernels(mlir::Operation *op, const TargetOptions &options,
                    StridesOf stridesOf);

/// Why cuDNN's fused attention cannot compute attention or its gradient
/// `op` (LibraryAttention.cpp): its mask, dropout, grouped-query heads,
/// types, head dimension or layout; nothing when it can.
std::optional<std::string> cudnnAttentionUnsupported(mlir::Operation *op,
                                                     StridesOf stridesOf);
/// The artifact operation in which cuDNN computes `op`, which it supports,
/// its tensors at `offsetOf` with `stridesOf`.
std::unique_ptr<artifact::OperationT>
cudnnAttention(mlir::Operation *op,
               llvm::function_ref<int64_t(mlir::Value)> offsetOf,
               StridesOf stridesOf);

/// The C type a tensor of `elementType` is stored as, and its size.
std::string storageType(mlir::Type elementType);
int64_t storageBytes(mlir::Type elementType);

} // namespace kiln::cuda

#endif // KILN_LIB_TARGET_CUDA_EMITTER_H
