//===- MemoryPlan.h - static memory planning of a step ----------*- C++ -*-===//
//
// Gives every tensor a training step holds an offset in one arena, from the
// live range of each value in the step's op order, so that peak memory is
// known before anything is allocated.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_MEMORYPLAN_H
#define KILN_TRANSFORMS_MEMORYPLAN_H

#include "kiln/Transforms/StridedViews.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace kiln {

/// Every buffer's offset in the arena is a multiple of this: what cuBLASLt
/// assumes of its operands, and more than 16-byte vector loads need.
constexpr int64_t kBufferAlignment = 256;

/// What a buffer holds, for the breakdown of the plan.
enum class BufferKind {
  Parameter,      // master weights, updated in place
  OptimizerState, // moments and accumulators, updated in place
  Input,          // the batch
  Gradient,       // gradients an optimizer op reads
  Activation,     // everything else the step computes
};

struct Buffer {
  /// The value it holds, or null for the scratch of `scratchOf`.
  mlir::Value value;
  BufferKind kind;
  int64_t bytes;
  /// The ops (by position in the step) from the one that defines the value
  /// to its last user; persistent buffers span the whole step.
  int64_t start, end;
  int64_t offset = 0;
  /// The op whose kernels use it as scratch while the op runs.
  mlir::Operation *scratchOf = nullptr;
};

struct MemoryPlan {
  std::vector<Buffer> buffers;
  /// The buffer (index into `buffers`) of every planned value, views
  /// (reshapes, strided views) and every read of a parameter included.
  llvm::DenseMap<mlir::Value, size_t> bufferOf;
  /// The buffer of every op's scratch.
  llvm::DenseMap<mlir::Operation *, size_t> scratchOf;
  /// Values whose elements lie, strided, in their storage's buffer.
  llvm::DenseMap<mlir::Value, StridedView> views;
  /// The arena: the end of the highest buffer.
  int64_t arenaBytes = 0;
  /// The largest sum of the bytes of the buffers live at one op.
  int64_t peakLiveBytes = 0;
  /// The same, over transient buffers only (gradients and activations),
  /// and the position of the first op where they weigh that much.
  int64_t peakTransientBytes = 0;
  int64_t peakPosition = 0;
  /// Bytes by kind: persistent kinds in full, transient kinds at their own
  /// peak.
  int64_t bytesByKind[5] = {};

  /// The arena offset of `value`'s first element, or -1 if it has no
  /// buffer.
  int64_t offsetOf(mlir::Value value) const;
  /// Whether the op defining `value` need not compute it: a strided view,
  /// or the storage a view's definer fills.
  bool computedElsewhere(mlir::Value value) const;
};

/// Whether the executor computes `op`'s result `result` over its operand
/// `operand` without changing what it reads (a row at a time, each row
/// read whole before it is written): the result may then take the
/// operand's buffer where `op` is its last reader.
using Overwrites = llvm::function_ref<bool(mlir::Operation *op, unsigned result,
                                           unsigned operand)>;
/// The bytes of scratch the executor's kernels for `op` use while `op`
/// runs, and nothing before or after (0 for none).
using ScratchBytes = llvm::function_ref<int64_t(mlir::Operation *op)>;

/// Plans the buffers of `step`, a single-block function. Constants are not
/// planned (they live with the code); a result that updates a parameter or
/// an optimizer state shares that buffer, a reshape is a view of its
/// input's buffer, and strided views (StridedViews.h) are views of their
/// storage's. With `overwrites`, a result may take the buffer of an
/// operand it overwrites (of its size, whose last reader is the op). With
/// `scratchBytes`, an op's scratch is a buffer live while the op runs.
MemoryPlan planMemory(mlir::func::FuncOp step, Overwrites overwrites = {},
                      ScratchBytes scratchBytes = {});

/// Bytes of one element of `type` in memory (i1 as one byte).
int64_t elementBytes(mlir::Type type);

llvm::StringRef bufferKindName(BufferKind kind);

} // namespace kiln

#endif // KILN_TRANSFORMS_MEMORYPLAN_H
