//===- KernelLoops.cpp - a kernel's body around its lambdas ---------------===//
//
// KernelWriter::finish: the arguments, and the loop over the results that
// each schedule runs (a thread per element or 16-byte piece, a block per
// row, per 32 columns or per element, the partials and combine kernels of
// split reductions), with the stores of results and side results.
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;

namespace kiln::cuda {

static constexpr int64_t kMaxBlocks = 4096;
/// Column sums a block-per-row thread holds in shared memory rather than
/// registers: at least this many doubles, in at most this many bytes per
/// block (half of the 48 KiB a block may declare).
static constexpr int64_t kSharedColumnSums = 8;
static constexpr int64_t kMaxSharedColumnSumBytes = 24 * 1024;
/// A block per row prefetches its next row's pieces into L2 where a row's
/// pieces are at most this many bytes: a norm's rows (768 columns of three
/// operands, 8 KiB), not a loss's over a vocabulary (100 KiB), whose
/// blocks' next rows together would not fit in L2.
static constexpr int64_t kMaxPrefetchedRowBytes = 16 * 1024;

int64_t KernelWriter::partialsPerBlock() const {
  if (schedule == Schedule::BlockPerColumns)
    return resultCount;
  return sumsAddedInRows(/*perRow=*/false) ? rowLength : 1;
}

int64_t KernelWriter::pieceLength(ArrayRef<Value> results) const {
  int64_t smallest = 16;
  for (Value result : results)
    smallest = std::min<int64_t>(smallest, storageBytes(elementTypeOf(result)));
  int64_t vector = 16 / smallest;
  // A block per row takes 16-byte pieces of its row when rows are whole
  // pieces, so that every piece is aligned as the row's start is.
  bool whole = countOf(results.front()) % vector == 0 &&
               (schedule != Schedule::BlockPerRow || rowLength % vector == 0);
  return whole ? vector : 1;
}

KernelPlan KernelWriter::finish(ArrayRef<Value> results) {
  assert((sideResults.empty() || storesSideResults()) &&
         "side results that the kernel does not store");
  int64_t count = countOf(results.front());
  plan.results.assign(results.begin(), results.end());
  plan.results.append(sideResults.begin(), sideResults.end());
  plan.block = kThreads;
  // Arguments: operands, constants, results, then the partials of a split
  // reduction and the status word of index checks.
  std::string prologue;
  auto pointer = [&](const std::string &qualifier, Type type,
                     const std::string &name, size_t index) {
    std::string t = qualifier + storageType(type) + " *";
    prologue += "  " + t + name + " = (" + t + ")args[" +
                std::to_string(index) + "];\n  assume_global(" + name + ");\n";
  };
  size_t next = 0;
  for (auto [n, operand] : llvm::enumerate(plan.operands))
    pointer("const ", elementTypeOf(operand), "in" + std::to_string(n), next++);
  // 16 bytes of every result per thread and step, where the results' type
  // allows and their count is a multiple: every thread computes that many
  // elements, reading the operands it reads at the results' index from
  // 16-byte chunks it loaded, and stores 16-byte pieces, when every pointer
  // involved is 16-byte aligned (arena tensors are; the loop falls back to
  // element accesses otherwise).
  int64_t vector = pieceLength(results);
  bool vectorized =
      vector > 1 && (schedule == Schedule::BlockPerRow
                         ? split.phase == SplitPhase::None || sumsInRows
                         : schedule == Schedule::Thread && !rowMemo &&
                               split.phase == SplitPhase::None);
  std::string aligned = "0", chunks, prefetches;
  int64_t chunkedRowBytes = 0;
  for (auto [n, operand] : llvm::enumerate(plan.operands)) {
    std::string in = "in" + std::to_string(n);
    int64_t bytes = vector * storageBytes(elementTypeOf(operand));
    if (vectorized && memoryAtResultIndex.contains(operand) &&
        countOf(operand) == count && bytes % 16 == 0) {
      std::string t = storageType(elementTypeOf(operand));
      prologue += "  alignas(16) " + t + " chunk_" + in + "[" +
                  std::to_string(vector) + "];\n  auto read_" + in +
                  " = [&](idx i) { return chunked && (u64)(i - first) < " +
                  std::to_string(vector) + "ull ? chunk_" + in +
                  "[i - first] : " + in + "[i]; };\n";
      aligned += " | (u64)" + in;
      chunks += "      copy16(chunk_" + in + ", " + in + " + first, " +
                std::to_string(bytes / 16) + ");\n";
      prefetches += "    prefetch_l2(" + in + " + at);\n";
      chunkedRowBytes += rowLength * storageBytes(elementTypeOf(operand));
    } else {
      prologue +=
          "  auto read_" + in + " = [&](idx i) { return " + in + "[i]; };\n";
    }
  }
  // The piece the loop (or a row statistic's loop) holds: its first
  // element, and whether its operands' pieces are loaded (16-byte
  // aligned). `first` is set whether or not, so that the reads of piece
  // elements index the pieces by constants, and `chunked` is false outside
  // a piece, so that no other read indexes them at all: an index the
  // compiler cannot resolve would put them in local memory.
  if (vectorized)
    prologue = "  idx first = 0;\n  bool chunked = false;\n" + prologue;
  for (auto [n, constant] : llvm::enumerate(plan.constants))
    pointer("const ", elementTypeOf(constant->getResult(0)),
            "cst" + std::to_string(n), next++);
  // A split kernel that combines partials stores no side results.
  bool storesSide = split.phase != SplitPhase::Combine;
  if (!storesSide)
    plan.results.resize(results.size());
  size_t trailing = next + plan.results.size();
  if (split.phase != SplitPhase::None) {
    int64_t sums = sumsInRows ? rowSums.size() : split.reductions.size();
    plan.partialBytes = sums * split.blocks * partialsPerBlock() * 8;
    plan.combinesPartials = split.phase == SplitPhase::Combine;
    prologue += "  double *partials = (double *)args[" +
                std::to_string(trailing++) + "];\n  assume_global(partials);\n";
  }
  // The results are values the kernel computes (lambda), so the bound
  // holds their indices already.
  plan.indexBound = std::max(largestIndexRange, plan.partialBytes / 8);
  if (checksIndices) {
    plan.checksIndices = true;
    prologue += "  unsigned *status = (unsigned *)args[" +
                std::to_string(trailing) + "];\n";
  }
  if (split.phase == SplitPhase::Partials &&
      schedule == Schedule::BlockPerColumns) {
    // A block per tile and part: its column sums store partials (and the
    // side results of their rows).
    for (auto [n, side] : llvm::enumerate(sideResults))
      pointer("", elementTypeOf(side), "side_out" + std::to_string(n),
              next + results.size() + n);
    std::string n32 = indexConstant(count);
    std::string body = "  {\n    const idx c0 = blockIdx.x % " +
                       indexConstant(columnTiles()) +
                       " * 32;\n    const idx lane = c0 + threadIdx.x % "
                       "32;\n    const idx i = lane < " +
                       n32 + " ? lane : " + n32 + " - 1;\n";
    for (auto &[name, start] : shared)
      body += "    " + name + "_compute(" + start + ");\n";
    plan.grid = columnTiles() * split.blocks;
    plan.body = prologue + code + body + "  }\n";
    return std::move(plan);
  }
  if (split.phase == SplitPhase::Partials && !sumsInRows) {
    // The blocks take the parts in turn, each part's sums computed anew.
    std::string calls = "  for (part = blockIdx.x; part < " +
                        indexConstant(split.blocks) +
                        "; part += gridDim.x) {\n";
    for (const std::string &name : split.reductions)
      calls += "    " + name + "_at = -1;\n    " + name + "_compute(0);\n";
    calls += "  }\n";
    plan.grid = split.blocks;
    plan.gridStrided = true;
    plan.body = prologue + "  idx part = 0;\n" + code + calls;
    return std::move(plan);
  }
  std::string compute, store, buffers, buffered, vectorStore, elementStore,
      rowStore;
  for (auto [n, result] : llvm::enumerate(results)) {
    std::string r = std::to_string(n), out = "out" + r;
    Type type = elementTypeOf(result);
    pointer("", type, out, next++);
    compute += "    " + computeType(type) + " r" + r + " = " +
               names.lookup({result, false}) + "(i);\n";
    store += "    " + out + "[i] = " + storedExact(type, "r" + r) + ";\n";
    buffered += "    s" + r + "[v] = " + storedExact(type, "r" + r) + ";\n";
    aligned += " | (u64)" + out;
    buffers += "    alignas(16) " + storageType(type) + " s" + r + "[" +
               std::to_string(vector) + "];\n";
    vectorStore += "      copy16(" + out + " + c * " + std::to_string(vector) +
                   ", s" + r + ", " +
                   std::to_string(vector * storageBytes(type) / 16) + ");\n";
    elementStore += "      for (int v = 0; v < " + std::to_string(vector) +
                    "; ++v) " + out + "[c * " + std::to_string(vector) +
                    " + v] = s" + r + "[v];\n";
  }
  for (auto [n, result] : llvm::enumerate(sideResults)) {
    // A block per row: every thread asks (a block reduction needs them
    // all), one stores; after the row's elements, so that no thread still
    // reads what it overwrites. (A block per columns stores them in its
    // column sum.)
    if (!storesSide)
      break;
    std::string r = std::to_string(n), out = "side_out" + r;
    Type type = elementTypeOf(result);
    pointer("", type, out, next++);
    if (schedule != Schedule::BlockPerRow)
      continue;
    rowStore += "    const " + computeType(type) + " q" + r + " = " +
                names.lookup({result, false}) + "(row);\n    if (threadIdx.x " +
                "== 0)\n      " + out +
                "[row] = " + storedExact(type, "q" + r) + ";\n";
  }
  std::string n = indexConstant(count);
  // The elements of piece c: loaded, computed (then `extra`), stored.
  std::string v = std::to_string(vector);
  auto piece = [&](const std::string &extra) {
    return "    load_pieces(c * " + v + ");\n" + buffers +
           "    #pragma unroll\n    for (int v = 0; v < " + v +
           "; ++v) {\n    const idx i = c * " + v + " + v;\n" + compute +
           extra + buffered + "    }\n    chunked = false;\n" +
           "    if (aligned) {\n" + vectorStore + "    } else {\n" +
           elementStore + "    }\n";
  };
  // Whether the row loop prefetches the block's next row: its loads then
  // wait on L2 rather than memory, the statistics' and the elements' alike.
  // A block per row waits on its row's loads once or twice per row (its
  // statistics, then the operands they do not read), with few other rows
  // in flight on its SM to hide it.
  bool prefetchesRows = vectorized && schedule == Schedule::BlockPerRow &&
                        !prefetches.empty() &&
                        chunkedRowBytes <= kMaxPrefetchedRowBytes;
  // After every pointer the alignment test reads.
  auto loadPieces = [&] {
    if (!vectorized)
      return std::string();
    std::string code = "  const bool aligned = ((" + aligned +
                       ") & 15) == 0;\n  auto load_pieces = [&](idx at) "
                       "{\n    first = at;\n    chunked = aligned;\n"
                       "    if (aligned) {\n" +
                       chunks + "    }\n  };\n";
    if (prefetchesRows)
      code +=
          "  auto prefetch_pieces = [&](idx at) {\n" + prefetches + "  };\n";
    return code;
  };
  std::string loop;
  // Whether the row loop stores to shared memory between reads of pieces
  // (column sums held there).
  bool storesShared = false;
  if (vectorized && schedule == Schedule::Thread) {
    loop = "  for (idx c = global_thread<idx>(); c < " +
           indexConstant(count / vector) + "; c += thread_count<idx>()) {\n" +
           piece("") + "  }\n";
    plan.grid = std::clamp<int64_t>((count / vector + kThreads - 1) / kThreads,
                                    1, kMaxBlocks);
  } else if (schedule == Schedule::BlockPerRow) {
    // Every thread computes the row's statistics together, in the order
    // they depend on each other, then its share of the row's elements (or
    // of its 16-byte pieces).
    int64_t rows = count / rowLength;
    int64_t perRow = vectorized ? rowLength / vector : rowLength;
    plan.grid =
        sumsInRows ? split.blocks : std::clamp<int64_t>(rows, 1, kMaxBlocks);
    // Whole warps, as many as a row's elements (or pieces) need: a row of
    // 768 bf16 is 96 pieces, 3 warps, where a power of two would leave a
    // quarter of a 128-thread block idle.
    plan.block = std::clamp<int64_t>(llvm::alignTo(perRow, 32), 32, kThreads);
    std::string len = indexConstant(rowLength);
    // Column sums added up on the way: each thread holds those of the
    // columns it takes (its elements, or pieces, of every row), then
    // stores them as its block's partials. It takes them in `rounds`
    // unrolled rounds, so that they stay in registers: the index of a
    // column's sum is a constant, the round (and the element of a piece).
    int64_t rounds = (perRow + plan.block - 1) / plan.block;
    int64_t held = rounds * (vectorized ? vector : 1);
    std::string slot = vectorized ? "round * " + v + " + v" : "round";
    // Many held sums take shared memory instead, each thread its own
    // column of them (no barriers): their registers would cost the
    // kernel blocks per SM (GPT-2's norm gradients, three sums of eight
    // columns each: 128 registers and 5 blocks per SM, 95 and 6 so).
    int64_t columnSums = llvm::count_if(
        rowSums, [](const RowSum &sum) { return !sum.perRow; });
    bool sumsInShared =
        held * columnSums >= kSharedColumnSums &&
        held * columnSums * plan.block * 8 <= kMaxSharedColumnSumBytes;
    storesShared = sumsInShared;
    auto heldSum = [&](const std::string &sums, const std::string &h) {
      return sums + "[" + h + "]" + (sumsInShared ? "[threadIdx.x]" : "");
    };
    // Sums of a term per row: every thread adds the row's term (the same
    // value, from the row's shared statistics), one stores the partial.
    std::string hold, add, addRows, flush, flushRows;
    for (auto [j, sum] : llvm::enumerate(rowSums)) {
      std::string sums =
          (sum.perRow ? "row_sum" : "column_sums") + std::to_string(j);
      // The block's partials go to its slot; the slots of blocks that a
      // smaller grid does not have hold the sums' initial values, which the
      // combining kernel adds without changing anything.
      std::string part = "partials[(" + std::to_string(j) + " * " +
                         indexConstant(split.blocks) + " + slot) * " +
                         indexConstant(partialsPerBlock());
      if (sum.perRow) {
        hold += "  double " + sums + " = " + sum.init + ";\n";
        addRows += "    " + sums + " = " + sum.combiner + "()(" + sums + ", " +
                   sum.term + "(row, 0));\n";
        flushRows += "    if (threadIdx.x == 0)\n      " + part +
                     "] = mine ? " + sums + " : " + sum.init + ";\n";
        continue;
      }
      std::string at = heldSum(sums, slot);
      hold += sumsInShared
                  ? "  __shared__ double " + sums + "[" +
                        std::to_string(held) + "][" +
                        std::to_string(plan.block) + "];\n"
                  : "  double " + sums + "[" + std::to_string(held) + "];\n";
      hold += "  for (int h = 0; h < " + std::to_string(held) + "; ++h) " +
              heldSum(sums, "h") + " = " + sum.init + ";\n";
      add += "    " + at + " = " + sum.combiner + "()(" + at + ", " + sum.term +
             "(row, i - i0));\n";
      flush += "        " + part + " + o] = mine ? " + heldSum(sums, "h") +
               " : " + sum.init + ";\n";
    }
    if (!flush.empty()) {
      std::string column = vectorized
                               ? "(threadIdx.x + h / " + v +
                                     " * blockDim.x) * " + v + " + h % " + v
                               : "threadIdx.x + h * blockDim.x";
      flush = "    #pragma unroll\n    for (int h = 0; h < " +
              std::to_string(held) + "; ++h) {\n      const idx o = " + column +
              ";\n      if (o < " + len + ") {\n" + flush + "      }\n    }\n";
    }
    if (!rowSums.empty())
      flush = "  for (idx slot = blockIdx.x; slot < " +
              indexConstant(split.blocks) +
              "; slot += gridDim.x) {\n    const bool mine = slot == "
              "blockIdx.x;\n" +
              flush + flushRows + "  }\n";
    // The row's first element, which lambdas read elements of the row
    // through (KernelWriter::rowStart).
    prologue += "  idx i0 = 0;\n";
    loop = hold + "  for (idx row = blockIdx.x; row < " + indexConstant(rows) +
           "; row += gridDim.x) {\n    i0 = row * " + len + ";\n";
    for (auto &[name, start] : shared)
      loop += "    " + name + "_compute(" + start + ");\n";
    if (prefetchesRows)
      loop += "    if (row + gridDim.x < " + indexConstant(rows) +
              ") {\n      const idx next = (row + gridDim.x) * " + len +
              ";\n      for (idx c = next / " + v +
              " + threadIdx.x; c < (next + " + len + ") / " + v +
              "; c += blockDim.x)\n        prefetch_pieces(c * " + v +
              ");\n    }\n";
    // The row's terms of sums over rows read the row (a loss, the label's
    // logit) before any thread of the block writes it, so that a result
    // may take the memory of the operand it overwrites row by row
    // (rowsReadBeforeWritten).
    if (!addRows.empty())
      loop += addRows + "    __syncthreads();\n";
    std::string block = indexConstant(plan.block);
    if (!add.empty())
      loop +=
          "    #pragma unroll\n    for (int round = 0; round < " +
          std::to_string(rounds) + "; ++round) {\n      const idx " +
          (vectorized ? "c = i0 / " + v : "i = i0") +
          " + threadIdx.x + round * " + block + ";\n      if (" +
          (vectorized ? "c >= (i0 + " + len + ") / " + v : "i >= i0 + " + len) +
          ")\n        break;\n" +
          (vectorized ? piece(add) : compute + add + store) + "    }\n";
    else if (vectorized && !shared.empty() &&
             chunkedRowBytes > kMaxPrefetchedRowBytes)
      // A long row that the statistics just read front to back (a loss's
      // over a vocabulary, of which the blocks in flight hold more than L2
      // does): its pieces last first, those the statistics read last and
      // L2 is the likeliest to hold still, where the other order would
      // find each piece evicted by the rest of the row.
      loop += "    for (idx c = (i0 + " + len + ") / " + v +
              " - 1 - threadIdx.x; c >= i0 / " + v + "; c -= blockDim.x) {\n" +
              piece(add) + "    }\n";
    else if (vectorized)
      loop += "    for (idx c = i0 / " + v + " + threadIdx.x; c < (i0 + " +
              len + ") / " + v + "; c += blockDim.x) {\n" + piece(add) +
              "    }\n";
    else
      loop += "    for (idx i = i0 + threadIdx.x; i < i0 + " + len +
              "; i += blockDim.x) {\n" + compute + add + store + "    }\n";
    loop += rowStore + "  }\n" + flush;
    plan.rowsReadBeforeWritten = unshared == 0 && add.empty();
  } else if (schedule == Schedule::BlockPerColumns) {
    // Thread t takes result c0 + t % 32 (the last one past the end), with
    // the threads of its lane in the other warps; one warp stores.
    std::string n32 = indexConstant(count);
    loop = "  for (idx c0 = blockIdx.x * 32; c0 < " + n32 +
           "; c0 += gridDim.x * 32) {\n    const idx lane = c0 + threadIdx.x "
           "% 32;\n    const idx i = lane < " +
           n32 + " ? lane : " + n32 + " - 1;\n";
    for (auto &[name, start] : shared)
      loop += "    " + name + "_compute(" + start + ");\n";
    loop += compute + "    if (threadIdx.x < 32 && lane < " + n32 + ") {\n" +
            store + "    }\n  }\n";
    plan.grid = std::clamp<int64_t>((count + 31) / 32, 1, kMaxBlocks);
  } else if (schedule == Schedule::BlockPerElement) {
    // Every thread of the block computes element i; one stores it.
    loop = "  for (idx i = blockIdx.x; i < " + n + "; i += gridDim.x) {\n" +
           compute + "    if (threadIdx.x == 0) {\n" + store + "    }\n  }\n";
    plan.grid = std::clamp<int64_t>(count, 1, kMaxBlocks);
  } else if (rowMemo) {
    // Each thread walks whole rows, so that row statistics are computed
    // once per row.
    int64_t rowLength =
        shapeOf(results.front()).empty() ? 1 : shapeOf(results.front()).back();
    int64_t rows = (count + rowLength - 1) / rowLength;
    std::string len = indexConstant(rowLength);
    loop = "  for (idx row = global_thread<idx>(); row < " +
           indexConstant(rows) +
           "; row += thread_count<idx>()) {\n    for (idx i = row * " + len +
           "; i < (row + 1) * " + len + " && i < " + n + "; ++i) {\n" +
           compute + store + "    }\n  }\n";
    plan.grid =
        std::clamp<int64_t>((rows + kThreads - 1) / kThreads, 1, kMaxBlocks);
  } else {
    loop = "  for (idx i = global_thread<idx>(); i < " + n +
           "; i += thread_count<idx>()) {\n" + compute + store + "  }\n";
    plan.grid =
        std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks);
  }
  // A loop that stores column sums to shared memory runs twice, for
  // 16-byte aligned pointers and for others: in the first the compiler
  // knows that every read of a piece's element is of the registers the
  // piece was loaded to (`chunked`), and computes each value once where a
  // read that may go to memory after such a store would load it, convert
  // it and compute with it again. (Other loops compute each value once
  // either way, GPT-2's loss kernel in the same instructions: the copy
  // would only cost them registers, 48 -> 80 there.)
  if (vectorized && storesShared)
    loop = "  auto loop = [&]() {\n" + loop +
           "  };\n  if (aligned)\n    loop();\n  else\n    loop();\n";
  plan.body = prologue + loadPieces() + code + loop;
  // Every loop above strides over the grid, and the slots of partials
  // follow the grid too.
  plan.gridStrided = true;
  return std::move(plan);
}

} // namespace kiln::cuda
