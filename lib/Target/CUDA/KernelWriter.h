//===- KernelWriter.h - one kernel as lambdas over indices ------*- C++ -*-===//
//
// Every value a kernel computes becomes a lambda `v(i)` giving its element
// at linear index i: a double for floats (rounded to the value's type after
// every op, as the interpreter rounds), an i64 for integers, a bool for i1.
// Indices are of the kernel's index type `idx`: 32-bit where every tensor
// the kernel touches is small enough (KernelPlan::indexBound), since 64-bit
// integer arithmetic, a division by a constant above all, takes a GPU
// several instructions per operation.
// Views, broadcasts and slices are index arithmetic; reductions are loops
// that keep their last result, so that a thread walking a row computes the
// row's statistics once. Four schedules (Schedule): a thread per element
// (or per row, when rows have statistics), a block per result element (its
// threads share the outermost reductions), a block per row (its threads
// share the row's statistics, then store the row's elements side by side)
// and a block per 32 columns (its warps share column sums). The last two
// also store results of another granularity that they compute on the way
// (side results: a row's statistics, the elements a column sum reads).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TARGET_CUDA_KERNELWRITER_H
#define KILN_LIB_TARGET_CUDA_KERNELWRITER_H

#include "Emitter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/StridedViews.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

namespace kiln::cuda {

//===- Source text helpers ------------------------------------------------===//

/// The type a value of `elementType` is computed in: double, i64 or bool.
std::string computeType(mlir::Type elementType);
/// `x` rounded to `type` as the interpreter stores it (integers wrapped).
std::string rounded(mlir::Type type, const std::string &x);
/// The compute-type value of the stored element `element`.
std::string loaded(mlir::Type type, const std::string &element);
/// The stored form of the compute-type value `x`.
std::string stored(mlir::Type type, const std::string &x);
/// The stored form of `x`, a value of `type` already (every lambda's value
/// is rounded to its type): converted, not rounded again.
std::string storedExact(mlir::Type type, const std::string &x);
std::string literal(double value);
std::string literal(int64_t value);
/// An index constant, in the kernel's index type `idx` where it fits in 32
/// bits (KernelPlan::indexBound): a `ll` suffix would widen every
/// expression it takes part in to 64 bits.
std::string indexConstant(int64_t value);

/// `base + sum_d coordinate_d(var in shape) * strides[d]`.
std::string remap(llvm::ArrayRef<int64_t> shape,
                  llvm::ArrayRef<int64_t> strides, int64_t base,
                  const std::string &var);
/// Coordinate `d` of the linear index `var` in `shape`.
std::string coordinate(llvm::ArrayRef<int64_t> shape, int64_t d,
                       const std::string &var);
/// The index into `operand` that NumPy broadcasting to `shape` reads at `var`.
std::string broadcastIndex(mlir::Value operand, llvm::ArrayRef<int64_t> shape,
                           const std::string &var);

mlir::Type elementTypeOf(mlir::Value value);
llvm::ArrayRef<int64_t> shapeOf(mlir::Value value);
int64_t countOf(mlir::Value value);

/// A shape split around one axis: `outer` elements before it, `extent`
/// along it, `inner` after it. A row is one (outer, inner) pair.
struct AxisSplit {
  AxisSplit(llvm::ArrayRef<int64_t> shape, int64_t axis);
  /// The linear index of element `k` of row `row`.
  std::string at(const std::string &row, const std::string &k) const;
  /// The row of linear index `i`.
  std::string row(const std::string &i) const;
  int64_t outer = 1, extent = 1, inner = 1;
};

/// `finish(combine over k < extent of term)`, where `term` may use the
/// reduction's own index `o` and `k`, and `finish` uses `acc` and `o`.
struct Reduction {
  /// Sum, Prod, Max or Min (prelude functors over doubles), or LogSumExp
  /// (over MaxSum, `accumulator`).
  const char *combiner;
  std::string init;
  int64_t extent;
  std::string term;
  std::string finish = "acc";
  /// Whether consecutive k are neighbours in memory (a row's statistics,
  /// which threads then reuse along the row) rather than a column's.
  bool contiguous = true;
  /// Where a block-per-row or block-per-columns kernel shares it among its
  /// threads: the reduction's index `o` for the whole row starting at
  /// element `i0` (a statistic of the row), or for the thread's element `i`
  /// (a column sum). Empty: each thread computes it alone.
  std::string sharedAt;
  /// Whether every thread of a block evaluates the term for every k, so
  /// that the term's own reductions are shared by the block (a loss over
  /// rows whose log-sum-exp the block computes together); otherwise the
  /// threads split the k between them.
  bool uniform = false;
  /// Whether a block computes it alone even in a kernel that splits its
  /// top-level reductions over blocks (a statistic read inside a uniform
  /// term).
  bool withinBlock = false;
  /// The linear index of the element the term reads (a sum of a tensor's
  /// elements), where a block per columns may store side results; empty
  /// for other terms.
  std::string element;
  /// Whether k counts the rows of the reduced tensor, a term per row (a
  /// loss over rows): a block-per-row kernel over the same rows may add it
  /// up in its row loop (KernelWriter::addSumsInRows).
  bool overRows = false;
  /// Reductions the term or the finish reads at the same index `o`: they
  /// are computed first, by every thread, so that a block reduction is
  /// never first reached from a loop only some threads run.
  llvm::SmallVector<std::string, 1> prerequisites;
  /// The type the loop accumulates in; other than double only for
  /// statistics that a block computes alone (never stored as partials).
  const char *accumulator = "double";
  /// The type of the terms, and of the finished value where it is not the
  /// result's (SumPair: two sums in one loop).
  const char *termType = "double";
  const char *valueType = nullptr;
};

//===- The writer ---------------------------------------------------------===//

/// Threads per block of the generated kernels (at most, for a block per
/// row).
constexpr int64_t kThreads = 256;

/// A scalar result over a large reduction is computed by two kernels: many
/// blocks reduce chunks into partials, one combines them.
enum class SplitPhase { None, Partials, Combine };

/// How the threads of a kernel share its work.
enum class Schedule {
  /// A thread per element, or per row where rows have statistics.
  Thread,
  /// A block per result element: its threads share the outermost
  /// reductions (a sum over rows, a loss).
  BlockPerElement,
  /// A block per row of the results: its threads share the statistics of
  /// the row (a norm, a softmax, a cross-entropy's log-sum-exp), then store
  /// neighbouring elements.
  BlockPerRow,
  /// A block per 32 neighbouring results that reduce columns (a bias
  /// gradient): each warp of the block reads 32 neighbouring elements of a
  /// row, its warps take different rows, and their sums combine in shared
  /// memory.
  BlockPerColumns,
};

class KernelWriter {
public:
  KernelWriter(llvm::function_ref<mlir::Value(mlir::Value)> external,
               llvm::ArrayRef<mlir::Value> materialized, Schedule schedule,
               SplitPhase phase = SplitPhase::None, int64_t blocks = 0)
      : external(external),
        materialized(materialized.begin(), materialized.end()),
        schedule(schedule) {
    split.phase = phase;
    split.blocks = blocks;
  }

  /// The longest top-level reduction of a split kernel, or the longest
  /// column sum of a block-per-columns kernel.
  int64_t largestSplitExtent() const { return split.largestExtent; }

  /// The name of the lambda computing `value`; `nested` inside another
  /// reduction's term. Fails with an error on an op that cannot be compiled.
  mlir::FailureOr<std::string> lambda(mlir::Value value, bool nested);
  /// `lambda(value)(index)`.
  mlir::FailureOr<std::string> at(mlir::Value value, const std::string &index,
                                  bool nested);

  /// Defines `value` as a lambda with `body` (statements using `i`).
  std::string define(mlir::Value value, bool nested, const std::string &body);
  /// Defines `value` as the existing lambda `name` (a cast that changes no
  /// value), so that reductions over either are one. `name` is taken by
  /// value: one read from `names` would dangle once the insertion grows it.
  std::string alias(mlir::Value value, bool nested, std::string name) {
    names[{value, nested}] = name;
    return name;
  }
  /// `index` (an index read from a tensor) in [0, size): negative values
  /// count from the end when `wrapNegative`; any other value outside the
  /// range flags the launch's status word and reads element 0 or size - 1,
  /// so that no kernel reads outside a tensor.
  std::string checkedIndex(const std::string &index, int64_t size,
                           bool wrapNegative);
  /// An unnamed lambda `(idx i) -> type` with `body`, for terms that ops
  /// share between their results.
  std::string helper(const std::string &type, const std::string &body);
  /// A lambda `(idx) -> type` giving `expression`, which reads no element
  /// (an optimizer's bias corrections of the step), computed once per
  /// thread rather than once per element.
  std::string once(const std::string &type, const std::string &expression);
  /// `value` at the row `index` of a block per row, for `start` (rowStart)
  /// not empty: read once where the row loop starts the row (a norm's
  /// saved mean), so that each element's read is the value alone, not a
  /// load, a conversion and the division giving the row again. `at`
  /// otherwise.
  mlir::FailureOr<std::string> rowValue(mlir::Value value,
                                        const std::string &index,
                                        const std::string &start, bool nested);
  /// Defines `value` as `reduction` at index `o`.
  std::string defineReduction(mlir::Value value, bool nested,
                              const Reduction &reduction);
  /// A lambda computing `reduction`, rounded to `type` (unrounded for f64):
  /// the statistics ops compute on the way.
  std::string reduction(mlir::Type type, bool nested,
                        const Reduction &reduction);
  mlir::MLIRContext *context() const { return contextPtr; }

  /// Whether `value` reaches, through ops that are not reductions, a
  /// reduction with as many results as `value` has elements: it is then
  /// computed by one block per element.
  bool atReductionGranularity(mlir::Value value);

  /// Prepares a kernel computing `results` to share statistics or to read
  /// and write 16 bytes at a time: finds the values every read of which is
  /// at the results' own index, and the memory some read of which is. The
  /// kernel also stores
  /// `sideResults`, which it computes on the way: a block per row one
  /// element per row of `results` (a norm's statistics), a block per 32
  /// columns every element its column sums read (the bf16 copy of a
  /// gradient whose bias gradient it sums).
  void planSharing(llvm::ArrayRef<mlir::Value> results,
                   llvm::ArrayRef<mlir::Value> sideResults = {});
  /// In a block-per-row kernel, `index` (the index `o`, written in terms of
  /// the row's first element `i0`) of a statistic that `value` reads for
  /// each of `period` consecutive elements (0: one for all) — if every
  /// element of the row reads that one: `value` is read only at the
  /// results' index and `period` is a multiple of the row. Empty otherwise,
  /// and the statistic is computed per thread.
  std::string rowStart(mlir::Value value, int64_t period,
                       const std::string &index) const;
  /// Whether `value` is one of the side results planSharing was given.
  bool isSideResult(mlir::Value value) const {
    return llvm::is_contained(sideResults, value);
  }
  /// Whether the kernel stores its side results: a block per 32 columns
  /// does in the loop of a column sum over as many elements as they have
  /// (and of a split one, its partials kernel).
  bool storesSideResults() const {
    return schedule == Schedule::BlockPerRow || sideStores ||
           split.phase == SplitPhase::Combine;
  }
  /// The tiles of 32 columns of a block-per-columns kernel.
  int64_t columnTiles() const { return (resultCount + 31) / 32; }
  /// Whether a block-per-row or block-per-columns kernel shares a
  /// statistic among the threads of a block, and whether all it shares
  /// reduce columns.
  bool sharesStatistics() const { return !shared.empty(); }
  bool sharesOnlyColumns() const { return sharesStatistics() && !sharesRows; }
  /// How many reductions a thread computes alone (outside its block).
  unsigned unsharedReductions() const { return unshared; }

  /// In a block-per-row kernel with partials (SplitPhase::Partials): the
  /// sums over the kernel's rows that lambdas define from now on are not
  /// computed whole: the row loop adds them up into its block's partial
  /// sums, which a second kernel combines (SplitPhase::Combine, as many
  /// blocks). Sums column by column (a norm's scale and bias gradients) add
  /// each element's term, and a block-per-columns kernel combines them;
  /// sums of a term per row (Reduction::overRows: a loss over the rows
  /// whose log-sum-exps the kernel shares, and the rows' total weight) add
  /// each row's, and a block-per-element kernel combines them. The rows
  /// are then read once for both.
  void addSumsInRows() { sumsInRows = true; }
  /// Whether computing `value` reads a sum across rows other than its own
  /// (a variance of columns reads their means): the row loop cannot add up
  /// such a sum, whose terms need the whole inner sum first.
  bool readsSumAcrossRows(mlir::Value value);
  /// How many sums the row loop adds up, of a term per element (column
  /// sums) or of a term per row.
  size_t sumsAddedInRows(bool perRow) const {
    return llvm::count_if(rowSums,
                          [&](const RowSum &s) { return s.perRow == perRow; });
  }
  /// `index` (in terms of the row's first element `i0`) when the row loop
  /// adds up sums and the kernel's rows are `rows` rows of `length`
  /// elements, so that a sum over those rows may read their shared
  /// statistics; empty otherwise.
  std::string rowOfSum(int64_t rows, int64_t length,
                       const std::string &index) const;

  /// The kernel's plan, with the loop over `results` (and the side results
  /// planSharing was given) appended to the body.
  KernelPlan finish(llvm::ArrayRef<mlir::Value> results);

private:
  mlir::FailureOr<std::string> emit(mlir::Value value, bool nested);
  /// The lambda `(idx i) -> type` with `body`: a new one named `prefix`
  /// and a number, or the one already defined with that text.
  std::string lambdaOf(const char *prefix, const std::string &type,
                       const std::string &body);
  /// The side results of the loop of the column sum `r`, if it is the one
  /// that stores them: the code computing row k's values, and storing them;
  /// `term`, the sum's term read from the value held where the sum is of a
  /// side result. All empty otherwise.
  struct SideStores {
    std::string values, stores, term;
  };
  SideStores storeSideResults(const Reduction &r);
  std::string pointerTo(mlir::Value memory);
  /// The partials each block of a split kernel stores per sum: one per
  /// result of a block per columns, one per column of a row loop that adds
  /// up column sums, one otherwise.
  int64_t partialsPerBlock() const;
  /// Elements per 16-byte piece of the results (of the smallest type),
  /// where the loop over them can take pieces (their count, and a block
  /// per row's rows, are whole pieces); 1 otherwise.
  int64_t pieceLength(llvm::ArrayRef<mlir::Value> results) const;
  std::string constantPointer(mlir::Operation *constant);

  llvm::function_ref<mlir::Value(mlir::Value)> external;
  mlir::MLIRContext *contextPtr = nullptr;
  llvm::DenseSet<mlir::Value> materialized;
  Schedule schedule;
  /// Block per row or columns: the results' row length, the values read
  /// only at the results' index, and the shared statistics (lambda, index)
  /// in the order they were defined, which is the order they depend on each
  /// other; whether one of them reduces rows.
  int64_t rowLength = 0;
  /// A block per row whose loop takes pieces, each thread one of a row's
  /// (a norm's row of 768 bf16: 96 pieces): their length, so that the
  /// row's statistics read their terms in the same pieces; 1 otherwise.
  int64_t rowPieces = 1;
  llvm::DenseSet<mlir::Value> readAtResultIndex;
  /// Memory the loop over the results reads at the results' own index
  /// (among other reads), which it loads 16 bytes a piece.
  llvm::DenseSet<mlir::Value> memoryAtResultIndex;
  llvm::SmallVector<std::pair<std::string, std::string>> shared;
  bool sharesRows = false;
  int64_t resultCount = 0;
  llvm::SmallVector<mlir::Value> sideResults;
  bool sideStores = false;
  unsigned unshared = 0;
  bool sumsInRows = false;
  /// Each sum the row loop adds up: its combiner, its initial value, its
  /// term, a lambda of the row `k` and the column `o`, and whether it takes
  /// one term per row (at column 0) rather than one per element.
  struct RowSum {
    const char *combiner;
    std::string init, term;
    bool perRow;
  };
  llvm::SmallVector<RowSum> rowSums;
  /// A reduction keeps its last result per thread: threads should walk
  /// rows in order.
  bool rowMemo = false;
  bool checksIndices = false;
  std::string code;
  llvm::DenseMap<std::pair<mlir::Value, unsigned>, std::string> names;
  llvm::DenseMap<mlir::Value, std::string> pointers;
  /// Lambdas and reductions by their text, so that each is computed once.
  llvm::StringMap<std::string> lambdas;
  llvm::StringMap<std::string> reductions;
  struct {
    SplitPhase phase;
    int64_t blocks;
    /// The top-level reductions, in the order their partials are stored.
    llvm::SmallVector<std::string> reductions;
    int64_t largestExtent = 0;
  } split;
  KernelPlan plan;
  /// The most elements of a value the kernel reads or computes.
  int64_t largestIndexRange = 0;
  unsigned counter = 0;
};

/// `text` with every `$name` replaced by its value (kernel templates).
std::string substitute(std::string text,
                       std::vector<std::pair<std::string, std::string>> values);

/// Floating-point operations (2 per multiply-add) of one product the size
/// of attention's Q K^T over the query-key pairs that take part (causal:
/// key j <= query i; within the window). The forward pass computes two such
/// products, the query gradient kernel three (S, dP, dQ), the key/value one
/// four.
template <typename AttentionOpTy>
int64_t attentionProductFlops(AttentionOpTy op) {
  llvm::ArrayRef<int64_t> qs = shapeOf(op.getQuery()),
                          ks = shapeOf(op.getKey());
  int64_t pairs = 0;
  for (int64_t i = 0; i < qs[2]; ++i) {
    auto [first, last] = op.keyRange(i, ks[2]);
    pairs += last - first;
  }
  return 2 * qs[0] * qs[1] * pairs * qs[3];
}

/// Device code for a lambda `outside(i, j)`: whether key j is outside the
/// keys query row i may attend to (causal, window), before the mask.
template <typename AttentionOpTy> std::string outsideKeys(AttentionOpTy op) {
  std::string test;
  auto either = [&](const std::string &clause) {
    test += (test.empty() ? "" : " || ") + clause;
  };
  if (op.getCausal())
    either("j > i");
  if (std::optional<llvm::ArrayRef<int64_t>> window = op.getWindow()) {
    if ((*window)[0] >= 0)
      either("j < i - " + indexConstant((*window)[0]));
    if ((*window)[1] >= 0)
      either("j > i + " + indexConstant((*window)[1]));
  }
  return "  auto outside = [&](idx i, idx j) -> bool { return " +
         (test.empty() ? std::string("false") : test) + "; };\n";
}

/// Device code addressing the rows of attention's [batch, heads, rows,
/// width] tensors, whose elements within a row are contiguous but whose
/// rows and heads may be strided (StridedViews.h): for each tensor `x` of
/// `op` (q, k, v and `out` of attention; q, k, v, o, dout, dq, dk, dv of its
/// gradient), `xAt(head, row)`, the offset of a row of a head counted over
/// batch x heads, and `xStep`, the distance between rows.
std::string attentionAddressing(mlir::Operation *op, StridesOf stridesOf);

/// The tiled attention kernels: the forward pass, and the query and the
/// key/value gradients.
KernelPlan attentionForward(AttentionOp op, StridesOf stridesOf);
llvm::SmallVector<KernelPlan> attentionGradient(AttentionGradOp op,
                                                StridesOf stridesOf);
/// The kernel of the gradient of a trained mask (`mask_grad`), which both
/// the tiled and the tensor-core gradients launch.
KernelPlan attentionMaskGradient(AttentionGradOp op, StridesOf stridesOf);
/// Why the tensor-core kernels do not compute attention or its gradient
/// `op` (it then runs on the exact kernels); none where they do.
std::optional<std::string> tensorCoreAttentionUnsupported(mlir::Operation *op);
/// The forward pass on tensor cores (TensorCoreAttention.cpp), for 16-bit
/// operands and head dimensions that are multiples of 16 up to 256, in
/// blocks of `options.attentionQueryTile` query rows (128 or 64; 64 above
/// head dimension 64 and with dropout), which take heads in groups whose
/// keys and values fit `options.attentionL2Bytes`; none otherwise.
std::optional<KernelPlan>
tensorCoreAttentionForward(AttentionOp op, const TargetOptions &options,
                           StridesOf stridesOf);
/// The gradient on tensor cores, for what the forward pass takes and a
/// gradient of the operands' type; none otherwise. dQ as
/// `options.queryGradient` says where the head dimension is at most 128
/// for atomics (their B fragments stay in registers) and 64 for stored dS,
/// by a query kernel that recomputes dS elsewhere, whose blocks own query
/// rows as the forward pass's do.
std::optional<llvm::SmallVector<KernelPlan>>
tensorCoreAttentionGradient(AttentionGradOp op, const TargetOptions &options,
                            StridesOf stridesOf);

/// The bytes of scratch the kernels compiled for `op` use while it runs,
/// which planTargetMemory places among the buffers: that of attention's
/// gradient on tensor cores; 0 for other ops.
int64_t kernelScratchBytes(mlir::Operation *op, const TargetOptions &options);

/// Defines `value`, a result of an elementwise op, or fails (without an
/// error) when its op is not elementwise.
mlir::FailureOr<std::string> emitElementwise(KernelWriter &writer,
                                             mlir::Value value, bool nested,
                                             bool &handled);
/// Defines `value`, a result of a data-movement, reduction, normalization,
/// loss or optimizer op.
mlir::FailureOr<std::string> emitStructured(KernelWriter &writer,
                                            mlir::Value value, bool nested);

} // namespace kiln::cuda

#endif // KILN_LIB_TARGET_CUDA_KERNELWRITER_H
