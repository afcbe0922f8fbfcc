//===- KernelGroups.cpp - a region's results grouped into launches -------===//
//
// Which results of a fusion region (or op) share a kernel, and with which
// schedule: results that share no computation get kernels of their own,
// results of one granularity one kernel, results of two granularities one
// kernel where one schedule computes the other's on the way (side
// results), and long reductions are split over blocks whose partials a
// second kernel combines.
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "llvm/ADT/STLExtras.h"

#include <functional>

using namespace mlir;

namespace kiln::cuda {

/// Scalar reductions at least this long are split into kSplitParts parts,
/// which a grid of at most as many blocks takes in turn: one wave of 8
/// blocks of 256 threads per SM of a large GPU, so that a sum over a whole
/// gradient has loads enough in flight to keep memory busy (256 blocks, two
/// per SM, had half as many as its bandwidth needs).
static constexpr int64_t kSplitExtent = 8192;
static constexpr int64_t kSplitParts = 1024;
/// Column sums are split over parts of at least kColumnPartRows rows until
/// about kColumnBlocks blocks (8 blocks of 256 threads per SM of a large
/// GPU) share them.
static constexpr int64_t kColumnBlocks = 1024;
static constexpr int64_t kColumnPartRows = 128;
/// A block per row adds up sums over its rows in registers (column sums for
/// rows up to kRowColumns long), over kRowBlocks blocks (eight of 256
/// threads per SM of a large GPU: a block's rows wait on their statistics'
/// block reductions, so it takes many blocks to keep the GPU busy; every
/// block stores a partial per column and sum, 19 MB for GPT-2's norm
/// gradients, about 10 us of the GPU's bandwidth), which a second kernel
/// combines.
static constexpr int64_t kRowColumns = 4096;
static constexpr int64_t kRowBlocks = 1024;

FailureOr<SmallVector<KernelPlan>>
planElementKernels(ArrayRef<Value> results,
                   function_ref<Value(Value)> externalValue,
                   ArrayRef<Value> materialized) {
  // The results are computed, never read, even those already in memory.
  llvm::DenseSet<Value> computed(results.begin(), results.end());
  auto external = [&](Value value) {
    return computed.contains(value) ? Value() : externalValue(value);
  };
  // Results that share no computation and read no tensor in common (the
  // updates of different parameters in a multi-tensor optimizer region) go
  // to separate launches: kernels of equal shapes are then one kernel,
  // compiled once. Results reading one tensor (a gradient's column sum and
  // its bf16 copy) may share a kernel that reads it once.
  SmallVector<size_t> parent(results.size());
  for (size_t i = 0; i < parent.size(); ++i)
    parent[i] = i;
  std::function<size_t(size_t)> root = [&](size_t i) {
    return parent[i] == i ? i : parent[i] = root(parent[i]);
  };
  llvm::DenseMap<Operation *, size_t> firstReader;
  llvm::DenseMap<Value, size_t> firstReaderOfTensor;
  for (auto [index, result] : llvm::enumerate(results)) {
    SmallVector<Value> work = {result};
    llvm::DenseSet<Value> seen;
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (!seen.insert(v).second)
        continue;
      // A fusion's block argument is the tensor its operand holds.
      Value tensor = v;
      if (auto argument = dyn_cast<BlockArgument>(v))
        if (auto fusion =
                dyn_cast<FusionOp>(argument.getOwner()->getParentOp()))
          tensor = fusion->getOperand(argument.getArgNumber());
      if (tensor != result && external(tensor) && countOf(tensor) > 1) {
        auto [it, added] = firstReaderOfTensor.try_emplace(tensor, index);
        if (!added)
          parent[root(index)] = root(it->second);
      }
      if ((v != result && external(v)) || llvm::is_contained(materialized, v))
        continue;
      Operation *op = v.getDefiningOp();
      if (!op)
        continue;
      auto [it, added] = firstReader.try_emplace(op, index);
      if (!added)
        parent[root(index)] = root(it->second);
      llvm::append_range(work, op->getOperands());
    }
  }
  // Within a cluster, results are grouped by schedule and element count:
  // every thread of a group computes all of the group's results at its
  // index before storing any, so that a result may update its own operand
  // in place.
  struct Group {
    size_t cluster;
    bool cooperative;
    int64_t count;
    SmallVector<Value> results;
  };
  SmallVector<Group> groups;
  for (auto [index, result] : llvm::enumerate(results)) {
    auto notResult = [&](Value v) {
      return v == result ? Value() : externalValue(v);
    };
    KernelWriter probe(notResult, materialized, Schedule::Thread);
    bool cooperative = probe.atReductionGranularity(result);
    size_t cluster = root(index);
    auto it = llvm::find_if(groups, [&](const Group &g) {
      return g.cluster == cluster && g.cooperative == cooperative &&
             g.count == countOf(result);
    });
    if (it == groups.end())
      groups.push_back({cluster, cooperative, countOf(result), {result}});
    else
      it->results.push_back(result);
  }
  SmallVector<KernelPlan> plans;
  struct Written {
    KernelPlan plan;
    int64_t splitExtent;
    /// Whether a block-per-row (-columns) kernel shares the statistics of
    /// rows (only sums of columns) among a block's threads.
    bool shares;
    unsigned unsharedReductions;
    bool storesSide;
  };
  auto write = [&](const Group &group, Schedule schedule, SplitPhase phase,
                   int64_t blocks,
                   ArrayRef<Value> sideResults = {}) -> FailureOr<Written> {
    KernelWriter writer(external, materialized, schedule, phase, blocks);
    writer.planSharing(group.results, sideResults);
    // Side results first: a column sum stores them from its loop.
    for (Value value : llvm::concat<const Value>(sideResults, group.results))
      if (failed(writer.lambda(value, false)))
        return failure();
    int64_t extent = writer.largestSplitExtent();
    bool shares = schedule == Schedule::BlockPerColumns
                      ? writer.sharesOnlyColumns()
                      : writer.sharesStatistics();
    bool storesSide = writer.storesSideResults();
    KernelPlan plan;
    if (sideResults.empty() || storesSide)
      plan = writer.finish(group.results);
    return Written{std::move(plan), extent, shares,
                   writer.unsharedReductions(), storesSide};
  };
  // Sums of many rows but few columns would leave most of the GPU idle
  // with a block per 32 columns (GPT-2's bias gradients: 24 blocks for 768
  // columns): several blocks then share each tile's rows, and a second
  // kernel combines their partials.
  auto columnKernels = [&](const Group &group, ArrayRef<Value> sideResults,
                           Written whole) -> FailureOr<SmallVector<KernelPlan>> {
    int64_t tiles = (group.count + 31) / 32;
    int64_t parts = std::min(kColumnBlocks / tiles,
                             whole.splitExtent / kColumnPartRows);
    SmallVector<KernelPlan> kernels;
    if (parts >= 2) {
      auto partials = write(group, Schedule::BlockPerColumns,
                            SplitPhase::Partials, parts, sideResults);
      auto combine = write(group, Schedule::BlockPerColumns,
                           SplitPhase::Combine, parts, sideResults);
      if (failed(partials) || failed(combine))
        return failure();
      if (partials->storesSide || sideResults.empty()) {
        kernels.push_back(std::move(partials->plan));
        kernels.push_back(std::move(combine->plan));
        return kernels;
      }
    }
    kernels.push_back(std::move(whole.plan));
    return kernels;
  };
  // Rows with statistics and sums over the same rows: column sums (a
  // norm's input gradient and its scale and bias gradients), or sums of a
  // term per row (a loss's gradient and the loss, whose log-sum-exps they
  // share). The block-per-row kernel adds up each block's share of the sums
  // as it reads its rows, and a second kernel combines the shares; the rows
  // are read once. None if a sum does not go that way (or the rows'
  // statistics are not shared).
  auto rowsWithSums = [&](const Group &rows, const Group &sums,
                          bool perRow) -> FailureOr<SmallVector<KernelPlan>> {
    int64_t rowCount = rows.count / shapeOf(rows.results.front()).back();
    int64_t blocks = std::min(rowCount, kRowBlocks);
    KernelWriter writer(external, materialized, Schedule::BlockPerRow,
                        SplitPhase::Partials, blocks);
    writer.planSharing(rows.results);
    for (Value value : rows.results)
      if (failed(writer.lambda(value, false)))
        return failure();
    unsigned unshared = writer.unsharedReductions();
    if (llvm::any_of(sums.results, [&](Value value) {
          return writer.readsSumAcrossRows(value);
        }))
      return SmallVector<KernelPlan>();
    writer.addSumsInRows();
    for (Value value : sums.results)
      if (failed(writer.lambda(value, false)))
        return failure();
    if (!writer.sharesStatistics() || writer.sumsAddedInRows(perRow) == 0 ||
        writer.sumsAddedInRows(!perRow) != 0 ||
        writer.unsharedReductions() != unshared)
      return SmallVector<KernelPlan>();
    KernelPlan rowKernel = writer.finish(rows.results);
    auto combine = write(
        sums, perRow ? Schedule::BlockPerElement : Schedule::BlockPerColumns,
        SplitPhase::Combine, blocks);
    if (failed(combine))
      return failure();
    // Both kernels count the same sums, in the order the sums' lambdas
    // define them.
    if (combine->plan.partialBytes != rowKernel.partialBytes)
      return SmallVector<KernelPlan>();
    return SmallVector<KernelPlan>{std::move(rowKernel),
                                   std::move(combine->plan)};
  };
  // One kernel for results of two granularities where one's schedule
  // computes the other's on the way: a block per row stores its row's
  // statistics (a norm's mean and inverse deviation) after its elements, a
  // block per 32 columns the elements its column sums read (the bf16 copy
  // of a gradient whose bias gradient it sums). What both read is then
  // read once, by one kernel; unless a thread would compute a reduction
  // alone that it did not before.
  llvm::DenseMap<size_t, SmallVector<KernelPlan>> withSideResults;
  llvm::DenseSet<size_t> storedAside;
  for (auto [index, host] : llvm::enumerate(groups)) {
    ArrayRef<int64_t> shape = shapeOf(host.results.front());
    if (host.cooperative || shape.empty())
      continue;
    // Column sums are held in registers: rows up to kRowColumns.
    auto sumsOverRows = [&](const Group &g, bool perRow) {
      return g.cluster == host.cluster && g.cooperative &&
             host.count > g.count &&
             (perRow ? g.count == 1
                     : g.count == shape.back() && shape.back() <= kRowColumns);
    };
    for (bool perRow : {false, true}) {
      auto sums = llvm::find_if(
          groups, [&](const Group &g) { return sumsOverRows(g, perRow); });
      size_t sumsIndex = sums - groups.begin();
      if (sums == groups.end() || storedAside.contains(sumsIndex) ||
          withSideResults.count(sumsIndex))
        continue;
      auto kernels = rowsWithSums(host, *sums, perRow);
      if (failed(kernels))
        return failure();
      if (kernels->empty())
        continue;
      withSideResults[index] = std::move(*kernels);
      storedAside.insert(sumsIndex);
      break;
    }
  }
  for (auto [index, host] : llvm::enumerate(groups)) {
    ArrayRef<int64_t> shape = shapeOf(host.results.front());
    if (shape.empty() || host.count == 1 || storedAside.contains(index) ||
        withSideResults.count(index))
      continue;
    auto side = llvm::find_if(groups, [&](const Group &g) {
      if (g.cluster != host.cluster || g.cooperative == host.cooperative)
        return false;
      return host.cooperative ? g.count % host.count == 0
                              : g.count * shape.back() == host.count;
    });
    size_t sideIndex = side - groups.begin();
    if (side == groups.end() || storedAside.contains(sideIndex) ||
        withSideResults.count(sideIndex))
      continue;
    Schedule schedule = host.cooperative ? Schedule::BlockPerColumns
                                         : Schedule::BlockPerRow;
    auto alone = write(host, schedule, SplitPhase::None, 0);
    auto merged = write(host, schedule, SplitPhase::None, 0, side->results);
    if (failed(alone) || failed(merged))
      return failure();
    if (!merged->shares || !merged->storesSide ||
        merged->unsharedReductions > alone->unsharedReductions)
      continue;
    if (host.cooperative) {
      auto kernels = columnKernels(host, side->results, std::move(*merged));
      if (failed(kernels))
        return failure();
      withSideResults[index] = std::move(*kernels);
    } else {
      withSideResults[index] = {std::move(merged->plan)};
    }
    storedAside.insert(sideIndex);
  }
  for (auto [index, group] : llvm::enumerate(groups)) {
    if (storedAside.contains(index))
      continue;
    if (auto it = withSideResults.find(index); it != withSideResults.end()) {
      llvm::append_range(plans, std::move(it->second));
      continue;
    }
    // A scalar over a long reduction (a loss, a gradient norm) would keep
    // one block busy with all of it: many blocks reduce chunks instead.
    if (group.cooperative && group.count == 1) {
      auto partials = write(group, Schedule::BlockPerElement,
                            SplitPhase::Partials, kSplitParts);
      if (failed(partials))
        return failure();
      if (partials->splitExtent >= kSplitExtent) {
        auto combine = write(group, Schedule::BlockPerElement,
                             SplitPhase::Combine, kSplitParts);
        if (failed(combine))
          return failure();
        plans.push_back(std::move(partials->plan));
        plans.push_back(std::move(combine->plan));
        continue;
      }
    }
    // Rows with statistics the threads of a block can share get a block
    // each; sums of columns a block per 32 of them.
    Schedule sharing =
        group.cooperative ? Schedule::BlockPerColumns : Schedule::BlockPerRow;
    auto shared = write(group, sharing, SplitPhase::None, 0);
    if (failed(shared))
      return failure();
    if (shared->shares && group.cooperative) {
      auto kernels = columnKernels(group, {}, std::move(*shared));
      if (failed(kernels))
        return failure();
      llvm::append_range(plans, std::move(*kernels));
      continue;
    }
    if (shared->shares) {
      plans.push_back(std::move(shared->plan));
      continue;
    }
    auto single = write(
        group, group.cooperative ? Schedule::BlockPerElement : Schedule::Thread,
        SplitPhase::None, 0);
    if (failed(single))
      return failure();
    plans.push_back(std::move(single->plan));
  }
  return plans;
}

} // namespace kiln::cuda
