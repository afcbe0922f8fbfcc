//===- MemoryPlan.cpp - static memory planning of a step ------------------===//
//
// Live ranges come from the step's op order (the order every executor of
// the step follows); buffers are placed first-fit by decreasing size, the
// classic offline heuristic, at 256-byte alignment. Parameters and optimizer
// state persist and are updated in place, so their updated values share
// their buffers.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/MemoryPlan.h"

#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPLANMEMORY
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

#include "llvm/ADT/StringMap.h"

#include <map>

using namespace mlir;

namespace kiln {

int64_t elementBytes(Type type) {
  if (type.isInteger(1))
    return 1;
  if (type.isTF32())
    return 4; // 19 bits in a 32-bit container
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

StringRef bufferKindName(BufferKind kind) {
  switch (kind) {
  case BufferKind::Parameter: return "parameters";
  case BufferKind::OptimizerState: return "optimizer state";
  case BufferKind::Input: return "inputs";
  case BufferKind::Gradient: return "gradients";
  case BufferKind::Activation: return "activations and temporaries";
  }
  return "";
}

static int64_t bytesOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() * elementBytes(type.getElementType());
}

static bool isTransient(BufferKind kind) {
  return kind == BufferKind::Gradient || kind == BufferKind::Activation;
}

/// Places `buffers` first-fit by decreasing size and returns the arena size.
static int64_t placeBuffers(std::vector<Buffer> &buffers) {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::vector<size_t> placed;
  int64_t arena = 0;
  for (size_t i : order) {
    Buffer &buffer = buffers[i];
    // Ranges taken by placed buffers whose lifetimes overlap this one.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed)
      if (buffers[j].start <= buffer.end && buffer.start <= buffers[j].end)
        taken.emplace_back(buffers[j].offset,
                           buffers[j].offset + buffers[j].bytes);
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + buffer.bytes <= begin)
        break;
      offset = std::max(offset, (end + kBufferAlignment - 1) /
                                    kBufferAlignment * kBufferAlignment);
    }
    buffer.offset = offset;
    arena = std::max(arena, offset + buffer.bytes);
    placed.push_back(i);
  }
  return arena;
}

MemoryPlan planMemory(func::FuncOp step, Overwrites overwrites,
                      ScratchBytes scratchBytes) {
  MemoryPlan plan;
  Block &body = step.getBody().front();
  DenseMap<Operation *, int64_t> position;
  int64_t index = 0;
  for (Operation &op : body)
    position[&op] = index++;
  int64_t last = index - 1;

  // Values an optimizer reads as gradients (through the inputs of the
  // multi-tensor update's fusion).
  DenseSet<Value> gradients;
  step.walk([&](Operation *op) {
    if (!isa<AdamWOp, SgdOp, AdagradOp>(op))
      return;
    Value grad = op->getOperand(1);
    if (auto argument = dyn_cast<BlockArgument>(grad))
      if (auto fusion = dyn_cast<FusionOp>(argument.getOwner()->getParentOp()))
        grad = fusion.getOperand(argument.getArgNumber());
    gradients.insert(grad);
  });
  // Values the step returns as updated parameters, buffers or state share
  // those buffers.
  DenseSet<Value> updates;
  auto terminator = body.getTerminator();
  for (auto [i, value] : llvm::enumerate(terminator->getOperands()))
    if (writesBack(step, i))
      updates.insert(value);

  auto lastUse = [&](Value value, int64_t from) {
    int64_t end = from;
    for (Operation *user : value.getUsers())
      end = std::max(end, position.lookup(user));
    return end;
  };
  for (BlockArgument argument : body.getArguments()) {
    bool state = step.getArgAttr(argument.getArgNumber(), kStateOfAttr) != nullptr;
    plan.buffers.push_back({argument,
                            state ? BufferKind::OptimizerState : BufferKind::Input,
                            bytesOf(argument), 0, last});
  }
  llvm::StringMap<size_t> parameters;
  // A reshape is a view: its result is its input's buffer, which then lives
  // until the view's last use.
  DenseMap<Value, size_t> &bufferOf = plan.bufferOf;
  for (auto [i, buffer] : llvm::enumerate(plan.buffers))
    bufferOf[buffer.value] = i;
  plan.views = findStridedViews(step);
  // Buffers a strided view reads or fills live longer than their values'
  // uses say (below): none is overwritten.
  DenseSet<Value> viewed;
  for (auto &[value, view] : plan.views) {
    viewed.insert(value);
    viewed.insert(view.storage);
  }
  auto holdsViewed = [&](size_t id) {
    return llvm::any_of(viewed, [&](Value value) {
      auto it = bufferOf.find(value);
      return it != bufferOf.end() && it->second == id;
    });
  };
  // The buffer of an operand of `op` that its result `index` may take: a
  // transient one of the result's size, whose values `op` reads last.
  auto overwritten = [&](Operation &op,
                         unsigned index) -> std::optional<size_t> {
    if (!overwrites)
      return std::nullopt;
    for (auto [number, operand] : llvm::enumerate(op.getOperands())) {
      auto it = bufferOf.find(operand);
      if (it == bufferOf.end())
        continue;
      const Buffer &buffer = plan.buffers[it->second];
      if (isTransient(buffer.kind) && buffer.end == position.lookup(&op) &&
          buffer.bytes == bytesOf(op.getResult(index)) &&
          !holdsViewed(it->second) && overwrites(&op, index, number))
        return it->second;
    }
    return std::nullopt;
  };
  for (Operation &op : body.without_terminator()) {
    if (isa<ConstantOp>(op))
      continue;
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      auto it = bufferOf.find(reshape.getInput());
      if (it != bufferOf.end() && !updates.contains(reshape.getResult())) {
        Buffer &buffer = plan.buffers[it->second];
        buffer.end = std::max(buffer.end,
                              lastUse(reshape.getResult(), position.lookup(&op)));
        bufferOf[reshape.getResult()] = it->second;
        continue;
      }
    }
    if (auto parameter = dyn_cast<ParameterOp>(op)) {
      // Every read of one parameter is the same persistent buffer.
      auto [it, added] =
          parameters.try_emplace(parameter.getName(), plan.buffers.size());
      if (added)
        plan.buffers.push_back({parameter, BufferKind::Parameter,
                                bytesOf(parameter), 0, last});
      bufferOf[parameter] = it->second;
      continue;
    }
    for (Value result : op.getResults()) {
      if (updates.contains(result) || plan.views.count(result))
        continue;
      int64_t start = position.lookup(&op);
      if (std::optional<size_t> taken =
              overwritten(op, cast<OpResult>(result).getResultNumber())) {
        Buffer &buffer = plan.buffers[*taken];
        buffer.end = std::max(buffer.end, lastUse(result, start));
        bufferOf[result] = *taken;
        continue;
      }
      BufferKind kind = gradients.contains(result) ? BufferKind::Gradient
                                                   : BufferKind::Activation;
      bufferOf[result] = plan.buffers.size();
      plan.buffers.push_back(
          {result, kind, bytesOf(result), start, lastUse(result, start)});
    }
  }
  // A strided view's storage lives from the earlier of its and the view's
  // definitions to the last use of either.
  for (auto &[value, view] : plan.views) {
    size_t id = bufferOf.at(view.storage);
    Buffer &buffer = plan.buffers[id];
    int64_t defined = position.lookup(value.getDefiningOp());
    buffer.start = std::min(buffer.start, defined);
    buffer.end = std::max(buffer.end, lastUse(value, defined));
    bufferOf[value] = id;
  }
  for (Operation &op : body) {
    int64_t bytes = scratchBytes ? scratchBytes(&op) : 0;
    if (bytes <= 0)
      continue;
    int64_t at = position.lookup(&op);
    plan.scratchOf[&op] = plan.buffers.size();
    plan.buffers.push_back(
        {Value(), BufferKind::Activation, bytes, at, at, 0, &op});
  }
  plan.arenaBytes = placeBuffers(plan.buffers);

  // Peaks by sweeping starts and ends.
  std::map<int64_t, int64_t> all, transient;
  std::map<int64_t, int64_t> byKind[5];
  for (const Buffer &buffer : plan.buffers) {
    int kind = static_cast<int>(buffer.kind);
    if (!isTransient(buffer.kind)) {
      plan.bytesByKind[kind] += buffer.bytes;
    } else {
      transient[buffer.start] += buffer.bytes;
      transient[buffer.end + 1] -= buffer.bytes;
      byKind[kind][buffer.start] += buffer.bytes;
      byKind[kind][buffer.end + 1] -= buffer.bytes;
    }
    all[buffer.start] += buffer.bytes;
    all[buffer.end + 1] -= buffer.bytes;
  }
  auto peak = [](const std::map<int64_t, int64_t> &events,
                 int64_t *position = nullptr) {
    int64_t live = 0, highest = 0;
    for (auto &[at, delta] : events) {
      live += delta;
      if (live > highest && position)
        *position = at;
      highest = std::max(highest, live);
    }
    return highest;
  };
  plan.peakLiveBytes = peak(all);
  plan.peakTransientBytes = peak(transient, &plan.peakPosition);
  for (int kind = 0; kind < 5; ++kind)
    if (isTransient(static_cast<BufferKind>(kind)))
      plan.bytesByKind[kind] = peak(byKind[kind]);
  return plan;
}

int64_t MemoryPlan::offsetOf(Value value) const {
  auto it = bufferOf.find(value);
  if (it == bufferOf.end())
    return -1;
  int64_t offset = buffers[it->second].offset;
  if (auto view = views.find(value); view != views.end())
    offset += view->second.offset *
              elementBytes(cast<ShapedType>(value.getType()).getElementType());
  return offset;
}

bool MemoryPlan::computedElsewhere(Value value) const {
  return views.count(value) || llvm::any_of(views, [&](auto &entry) {
           return entry.second.writes && entry.second.storage == value;
         });
}

} // namespace kiln

namespace {
struct PlanMemoryPass : kiln::impl::KilnPlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (!function.getBody().hasOneBlock())
      return;
    kiln::MemoryPlan plan = kiln::planMemory(function);
    Builder builder(function.getContext());
    function->setAttr("kiln.arena_bytes",
                      builder.getI64IntegerAttr(plan.arenaBytes));
    function->setAttr("kiln.peak_live_bytes",
                      builder.getI64IntegerAttr(plan.peakLiveBytes));
    // Ops inside fusions keep their values in registers: no offsets.
    for (Operation &op : function.getBody().front()) {
      if (op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value result : op.getResults())
        offsets.push_back(plan.offsetOf(result));
      op.setAttr("kiln.offsets", builder.getDenseI64ArrayAttr(offsets));
    }
  }
};
} // namespace
