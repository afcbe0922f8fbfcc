//===- StridedViews.h - values that live inside another's buffer -*- C++
//-*-===//
//
// Attention reads and writes its heads through strides, as FlashAttention's
// kernels take a batch, a head and a row stride for each tensor. So the
// head split of a packed projection (reshape, slice, transpose) need not be
// copied before attention reads it, nor attention's output be copied into
// the token-major layout the next product reads: those values become
// strided views of the buffer around them. The memory plan gives them no
// buffer of their own, and targets address them through their strides.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_STRIDEDVIEWS_H
#define KILN_TRANSFORMS_STRIDEDVIEWS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln {

class SliceOp;

/// Where a value's elements lie in the buffer of `storage`: element
/// `[i0, i1, ...]` at element `offset + i0 * strides[0] + i1 * strides[1] ...`.
struct StridedView {
  mlir::Value storage;
  int64_t offset = 0;
  llvm::SmallVector<int64_t> strides;
  /// Whether the view's defining op fills the storage (attention writing
  /// its output or gradients in place), whose definer then computes nothing
  /// of it; otherwise the view only reads what the storage's definer wrote.
  bool writes = false;
};

/// The values of `step` (a single-block function) that are strided views:
///   - a fusion result that reshapes, slices and transposes one operand, read
///     only as attention's query, key, value, output or output gradient;
///   - attention's output, when its other readers are fusions that reshape
///     and transpose it, all the same way, into values of the same
///     elements: the first holds it and computes nothing, and the others
///     (recomputed for the backward pass) are that value, contiguous;
///   - attention's gradients, read only by one fusion whose result
///     assembles them: each rearranged, maybe widened exactly, inserted
///     into zeros at disjoint places that cover the whole, added up, and
///     rounded back if widened. The result holds them; the fusion's other
///     results read the assembly from it (exact: it holds every value,
///     though a -0 that the assembly's added zeros would make +0 stays -0);
///   - attention's gradients that a transpose alone reads, which holds them;
///   - a slice (outside fusions) of a contiguous block of a stored input.
/// Every view's innermost stride is 1.
llvm::DenseMap<mlir::Value, StridedView>
findStridedViews(mlir::func::FuncOp step);

/// Whether `result` of `fusion` (a kiln.fusion) rounds back an assembly of
/// exact widenings, as findStridedViews recognizes one: the unrounded
/// assembly then holds exactly the values of the result widened (up to the
/// sign of a zero), so what the fusion computes from it could be computed
/// from the result.
bool roundsExactAssembly(mlir::Operation *fusion, unsigned result);

/// Whether `slice` (of `step`) takes a contiguous block of its input that
/// starts as aligned as a buffer (kBufferAlignment: a GEMM may read it),
/// both plain buffers the step computes, the input one stored whatever
/// reads it (a product, a fusion's result, a reduction's): findStridedViews
/// makes it a view unless its input is one, so fusion leaves it out of
/// kernels.
bool slicesContiguousBlock(SliceOp slice, mlir::func::FuncOp step);

/// The strides of a row-major tensor of `shape`.
llvm::SmallVector<int64_t> contiguousStrides(llvm::ArrayRef<int64_t> shape);

} // namespace kiln

#endif // KILN_TRANSFORMS_STRIDEDVIEWS_H
