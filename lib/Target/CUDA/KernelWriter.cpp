//===- KernelWriter.cpp - one kernel as lambdas over element indices ------===//

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Transforms/Fuse.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <functional>

using namespace mlir;

namespace kiln::cuda {

static constexpr int64_t kMaxBlocks = 4096;
static constexpr int64_t kThreads = 256;

//===----------------------------------------------------------------------===//
// Source text helpers
//===----------------------------------------------------------------------===//

int64_t storageBytes(Type type) {
  return type.isInteger(1) ? 1 : type.getIntOrFloatBitWidth() / 8;
}

std::string storageType(Type type) {
  if (type.isF32() || type.isTF32())
    return "float";
  if (type.isF64())
    return "double";
  if (type.isBF16() || type.isF16())
    return "u16";
  if (type.isInteger(1) || type.isUnsignedInteger(8))
    return "unsigned char";
  switch (type.getIntOrFloatBitWidth()) {
  case 8:
    return "signed char";
  case 16:
    return "short";
  case 32:
    return "int";
  default:
    return "i64";
  }
}

std::string computeType(Type type) {
  if (isa<FloatType>(type))
    return "double";
  return type.isInteger(1) ? "bool" : "i64";
}

std::string rounded(Type type, const std::string &x) {
  if (type.isF32())
    return "(double)(float)(" + x + ")";
  if (type.isBF16())
    return "round_bf16(" + x + ")";
  if (type.isF16())
    return "round_f16(" + x + ")";
  if (type.isTF32())
    return "round_tf32(" + x + ")";
  if (type.isF64() || type.isInteger(1) || type.getIntOrFloatBitWidth() == 64)
    return "(" + x + ")";
  return "(i64)(" + storageType(type) + ")(" + x + ")";
}

std::string loaded(Type type, const std::string &element) {
  if (type.isBF16())
    return "(double)bf16_to_f32(" + element + ")";
  if (type.isF16())
    return "(double)f16_to_f32(" + element + ")";
  if (isa<FloatType>(type))
    return "(double)" + element;
  if (type.isInteger(1))
    return "(" + element + " != 0)";
  return "(i64)" + element;
}

std::string stored(Type type, const std::string &x) {
  // Rounded once from double; the conversion to the storage bits is exact.
  if (type.isBF16())
    return "f32_to_bf16((float)round_bf16(" + x + "))";
  if (type.isF16())
    return "f32_to_f16((float)round_f16(" + x + "))";
  if (type.isTF32())
    return "(float)round_tf32(" + x + ")";
  return "(" + storageType(type) + ")(" + x + ")";
}

std::string literal(double value) {
  if (std::isnan(value))
    return "(0.0 / 0.0)";
  if (std::isinf(value))
    return value > 0 ? "(1.0 / 0.0)" : "(-1.0 / 0.0)";
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.17g", value);
  return "(" + text + ")";
}

std::string literal(int64_t value) {
  if (value == INT64_MIN)
    return "(-9223372036854775807ll - 1)";
  return "((i64)" + std::to_string(value) + "ll)";
}

std::string attentionAddressing(Operation *op, StridesOf stridesOf) {
  SmallVector<std::pair<const char *, Value>> tensors;
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    tensors = {{"q", attention.getQuery()},
               {"k", attention.getKey()},
               {"v", attention.getValue()},
               {"out", attention.getOutput()}};
  } else {
    auto gradient = cast<AttentionGradOp>(op);
    tensors = {
        {"q", gradient.getQuery()},         {"k", gradient.getKey()},
        {"v", gradient.getValue()},         {"o", gradient.getOutput()},
        {"dout", gradient.getOutputGrad()}, {"dq", gradient.getQueryGrad()},
        {"dk", gradient.getKeyGrad()},      {"dv", gradient.getValueGrad()}};
  }
  std::string text;
  for (auto [name, value] : tensors) {
    SmallVector<int64_t> strides = stridesOf(value);
    int64_t heads = shapeOf(value)[1];
    text += "  [[maybe_unused]] auto " + std::string(name) +
            "At = [](i64 head, i64 row) -> i64 { return head / " +
            literal(heads) + " * " + literal(strides[0]) + " + head % " +
            literal(heads) + " * " + literal(strides[1]) + " + row * " +
            literal(strides[2]) + "; };\n  [[maybe_unused]] constexpr i64 " +
            name + "Step = " + literal(strides[2]) + ";\n";
  }
  return text;
}

std::string coordinate(ArrayRef<int64_t> shape, int64_t d,
                       const std::string &var) {
  int64_t inner = 1;
  for (int64_t size : shape.drop_front(d + 1))
    inner *= size;
  std::string q =
      inner == 1 ? var : "(" + var + " / " + std::to_string(inner) + "ll)";
  return d == 0 ? q : "(" + q + " % " + std::to_string(shape[d]) + "ll)";
}

std::string remap(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                  int64_t base, const std::string &var) {
  if (base == 0 && ArrayRef<int64_t>(contiguousStrides(shape)) == strides)
    return var;
  std::string expr = std::to_string(base) + "ll";
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && strides[d] != 0)
      expr += " + " + coordinate(shape, d, var) + " * " +
              std::to_string(strides[d]) + "ll";
  return "(" + expr + ")";
}

Type elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}
ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}
int64_t countOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

std::string broadcastIndex(Value operand, ArrayRef<int64_t> shape,
                           const std::string &var) {
  ArrayRef<int64_t> in = shapeOf(operand);
  if (in == shape)
    return var;
  SmallVector<int64_t> inStrides = contiguousStrides(in);
  SmallVector<int64_t> strides(shape.size(), 0);
  size_t lead = shape.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    strides[lead + d] = in[d] == 1 ? 0 : inStrides[d];
  return remap(shape, strides, 0, var);
}

AxisSplit::AxisSplit(ArrayRef<int64_t> shape, int64_t axis) {
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < axis ? outer : d == axis ? extent : inner) *= shape[d];
}

std::string AxisSplit::at(const std::string &row, const std::string &k) const {
  std::string in = std::to_string(inner) + "ll";
  return "((" + row + ") / " + in + " * " + std::to_string(extent * inner) +
         "ll + (" + k + ") * " + in + " + (" + row + ") % " + in + ")";
}

std::string AxisSplit::row(const std::string &i) const {
  std::string in = std::to_string(inner) + "ll";
  return "((" + i + ") / " + std::to_string(extent * inner) + "ll * " + in +
         " + (" + i + ") % " + in + ")";
}

//===----------------------------------------------------------------------===//
// The writer
//===----------------------------------------------------------------------===//

std::string KernelWriter::pointerTo(Value memory) {
  auto [it, added] = pointers.try_emplace(memory, "");
  if (added) {
    it->second = "in" + std::to_string(plan.operands.size());
    plan.operands.push_back(memory);
  }
  return it->second;
}

std::string KernelWriter::constantPointer(Operation *constant) {
  auto [it, added] = pointers.try_emplace(constant->getResult(0), "");
  if (added) {
    it->second = "cst" + std::to_string(plan.constants.size());
    plan.constants.push_back(constant);
  }
  return it->second;
}

std::string KernelWriter::define(Value value, bool nested,
                                 const std::string &body) {
  std::string name = "v" + std::to_string(counter++);
  code += "  auto " + name + " = [&](i64 i) -> " +
          computeType(elementTypeOf(value)) + " {\n" + body + "  };\n";
  names[{value, nested}] = name;
  return name;
}

std::string KernelWriter::checkedIndex(const std::string &index, int64_t size,
                                       bool wrapNegative) {
  checksIndices = true;
  std::string n = std::to_string(size) + "ll";
  return "[&] { i64 q = " + index + "; " +
         (wrapNegative ? "if (q < 0) q += " + n + "; " : std::string()) +
         "if (q < 0 || q >= " + n + ") { *status = 1u; q = q < 0 ? 0 : " + n +
         " - 1; } return q; }()";
}

std::string KernelWriter::helper(const std::string &type,
                                 const std::string &body) {
  std::string name = "h" + std::to_string(counter++);
  code +=
      "  auto " + name + " = [&](i64 i) -> " + type + " {\n" + body + "  };\n";
  return name;
}

std::string KernelWriter::defineReduction(Value value, bool nested,
                                          const Reduction &r) {
  // A column sum read at the results' index is one per thread, which the
  // thread's warp mates in other rows help compute.
  Reduction withSharing = r;
  if (schedule == Schedule::BlockPerColumns && !r.contiguous &&
      readAtResultIndex.contains(value))
    withSharing.sharedAt = "i";
  std::string name = reduction(elementTypeOf(value), nested, withSharing);
  names[{value, nested}] = name;
  return name;
}

std::string KernelWriter::reduction(Type resultType, bool nested,
                                    const Reduction &r) {
  std::string type = computeType(resultType);
  bool isShared =
      !nested && (schedule == Schedule::BlockPerElement || !r.sharedAt.empty());
  // Results of one op share their statistics (a layer norm's mean).
  std::string key = std::string(r.combiner) + "|" + r.init + "|" +
                    std::to_string(r.extent) + "|" + r.term + "|" + r.finish +
                    "|" + rounded(resultType, "x") + "|" +
                    (isShared ? "1" : "0") + (r.uniform ? "u" : "") +
                    (r.withinBlock ? "b" : "");
  auto [known, added] = reductions.try_emplace(key, "");
  if (!added)
    return known->second;
  std::string name = "v" + std::to_string(counter++);
  known->second = name;
  if (columnsInRows && !nested && !r.contiguous &&
      r.extent * rowLength == resultCount) {
    // Added up in the row loop; the combining kernel has the whole sum.
    std::string term = "column_term" + std::to_string(rowColumnSums.size());
    rowColumnSums.push_back({r.combiner, r.init, term});
    code += "  auto " + term + " = [&](i64 k, i64 o) -> double { return " +
            "(double)(" + r.term + "); };\n  auto " + name + " = [&](i64) -> " +
            type + " { return 0; };\n";
    return name;
  }
  std::string extent = std::to_string(r.extent) + "ll";
  std::string combine = "        acc = " + std::string(r.combiner) +
                        "()(acc, (double)(" + r.term + "));\n";
  std::string loop;
  if (isShared)
    for (const std::string &prerequisite : r.prerequisites)
      loop += "      (void)" + prerequisite + "(o);\n";
  loop += "      double acc = " + r.init + ";\n";
  if (!isShared) {
    loop += "      for (i64 k = 0; k < " + extent + "; ++k)\n" + combine;
  } else if (schedule == Schedule::BlockPerColumns) {
    split.largestExtent = std::max(split.largestExtent, r.extent);
    if (split.phase == SplitPhase::None) {
      loop += "      for (i64 k = threadIdx.x / 32; k < " + extent +
              "; k += blockDim.x / 32) {\n" + combine + storeSideResults(r) +
              "      }\n      acc = column_reduce(acc, " + r.combiner +
              "());\n";
    } else {
      // Split over blocks: the blocks of one tile of 32 columns each reduce
      // a chunk of the rows into partials (part-major per reduction); the
      // next kernel combines a column's parts in order.
      std::string parts = std::to_string(split.blocks) + "ll";
      std::string at = "(" + std::to_string(split.reductions.size()) + " * " +
                       parts + " + part) * " + std::to_string(resultCount) +
                       "ll + o";
      split.reductions.push_back(name);
      if (split.phase == SplitPhase::Partials)
        loop += "      const i64 part = blockIdx.x / " +
                std::to_string(columnTiles()) + "ll;\n"
                "      const i64 chunk = (" + extent + " + " + parts +
                " - 1) / " + parts + ";\n"
                "      const i64 end = (part + 1) * chunk < " + extent +
                " ? (part + 1) * chunk : " + extent + ";\n"
                "      for (i64 k = part * chunk + threadIdx.x / 32; k < end; "
                "k += blockDim.x / 32) {\n" + combine + storeSideResults(r) +
                "      }\n      acc = column_reduce(acc, " + r.combiner +
                "());\n      if (threadIdx.x < 32)\n        partials[" + at +
                "] = acc;\n";
      else
        loop += "      for (i64 part = 0; part < " + parts +
                "; ++part)\n        acc = " + r.combiner +
                "()(acc, partials[" + at + "]);\n";
    }
  } else if (split.phase == SplitPhase::None || r.withinBlock ||
             schedule == Schedule::BlockPerRow) {
    // A block per row splits only the column sums it adds up, not its
    // rows' statistics.
    loop += r.uniform
                ? "      for (i64 k = 0; k < " + extent + "; ++k)\n" + combine
                : "      for (i64 k = threadIdx.x; k < " + extent +
                      "; k += blockDim.x)\n" + combine +
                      "      acc = block_reduce(acc, " + r.combiner + "());\n";
  } else {
    // Split over blocks: each block reduces one chunk of k into the
    // partials; the next kernel combines them.
    std::string slot = std::to_string(split.reductions.size()) + " * " +
                       std::to_string(split.blocks) + "ll";
    split.reductions.push_back(name);
    split.largestExtent = std::max(split.largestExtent, r.extent);
    if (split.phase == SplitPhase::Partials)
      loop += "      const i64 chunk = (" + extent +
              " + gridDim.x - 1) / gridDim.x;\n"
              "      const i64 end = (blockIdx.x + 1) * chunk < " +
              extent + " ? (blockIdx.x + 1) * chunk : " + extent + ";\n" +
              (r.uniform ? "      for (i64 k = blockIdx.x * chunk; k < end; "
                           "++k)\n" +
                               combine
                         : "      for (i64 k = blockIdx.x * chunk + "
                           "threadIdx.x; k < end; k += blockDim.x)\n" +
                               combine + "      acc = block_reduce(acc, " +
                               r.combiner + "());\n") +
              "      if (threadIdx.x == 0) partials[" + slot +
              " + blockIdx.x] = acc;\n";
    else
      loop += "      for (i64 b = 0; b < " + std::to_string(split.blocks) +
              "ll; ++b)\n        acc = " + r.combiner + "()(acc, partials[" +
              slot + " + b]);\n";
  }
  code +=
      "  i64 " + name + "_at = -1;\n  " + type + " " + name + "_value = 0;\n";
  code += "  auto " + name + " = [&](i64 o) -> " + type +
          " {\n    if (o != " + name + "_at) {\n" + loop + "      " + name +
          "_value = " + rounded(resultType, r.finish) + ";\n      " + name +
          "_at = o;\n    }\n    return " + name + "_value;\n  };\n";
  // Threads walk rows when they reuse a row's statistics.
  rowMemo |= !isShared && r.contiguous;
  unshared += !isShared;
  if (isShared && schedule != Schedule::BlockPerElement) {
    shared.push_back({name, r.sharedAt});
    sharesRows |= r.contiguous;
  }
  return name;
}

std::string KernelWriter::storeSideResults(const Reduction &r) {
  // Once, in the first column sum that reads as many elements as the side
  // results have (a thread past the last column repeats the last column's
  // stores, of the same values).
  if (sideStores || sideResults.empty() || r.element.empty() ||
      llvm::any_of(sideResults, [&](Value side) {
        return countOf(side) != r.extent * resultCount;
      }))
    return "";
  sideStores = true;
  std::string stores = "        const i64 e = " + r.element + ";\n";
  for (auto [n, side] : llvm::enumerate(sideResults))
    stores += "        side_out" + std::to_string(n) + "[e] = " +
              stored(elementTypeOf(side), names.lookup({side, false}) + "(e)") +
              ";\n";
  return stores;
}

FailureOr<std::string> KernelWriter::lambda(Value value, bool nested) {
  contextPtr = value.getContext();
  // Only kernels whose blocks share reductions compute values differently
  // inside and outside them; the row loop evaluates the terms of the column
  // sums it adds up where it computes its results, outside any reduction.
  nested &= schedule != Schedule::Thread && !columnsInRows;
  // A fusion's block argument is the fusion's operand.
  if (auto argument = dyn_cast<BlockArgument>(value))
    if (auto fusion = dyn_cast<FusionOp>(argument.getOwner()->getParentOp()))
      return lambda(fusion->getOperand(argument.getArgNumber()), nested);
  auto it = names.find({value, nested});
  if (it != names.end())
    return it->second;
  Value memory = materialized.contains(value) ? value : external(value);
  if (memory) {
    Type type = elementTypeOf(value);
    // Through the pointer's reader, which a vectorized loop serves from the
    // 16-byte chunks it loaded (finish()).
    std::string pointer = pointerTo(memory);
    return define(value, nested,
                  "    return " + loaded(type, "read_" + pointer + "(i)") +
                      ";\n");
  }
  if (auto constant = value.getDefiningOp<ConstantOp>()) {
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense || !dense.isSplat()) {
      Type type = elementTypeOf(value);
      return define(value, nested,
                    "    return " +
                        loaded(type, constantPointer(constant) + "[i]") +
                        ";\n");
    }
  }
  return emit(value, nested);
}

FailureOr<std::string> KernelWriter::at(Value value, const std::string &index,
                                        bool nested) {
  FailureOr<std::string> name = lambda(value, nested);
  if (failed(name))
    return failure();
  return *name + "(" + index + ")";
}

FailureOr<std::string> KernelWriter::emit(Value value, bool nested) {
  bool handled = false;
  FailureOr<std::string> name = emitElementwise(*this, value, nested, handled);
  if (handled)
    return name;
  return emitStructured(*this, value, nested);
}

namespace {
/// How a value reduces: not at all, over contiguous elements (a row's
/// trailing elements), or over strided ones (a column, across rows).
enum class ReductionKind { None, Contiguous, Strided };
} // namespace

static ReductionKind reductionKind(Value value) {
  Operation *op = value.getDefiningOp();
  auto over = [](bool contiguous) {
    return contiguous ? ReductionKind::Contiguous : ReductionKind::Strided;
  };
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp>(
          op)) {
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
    int64_t rank = shapeOf(op->getOperand(0)).size();
    return over(llvm::is_contained(axes, rank - 1));
  }
  // A loss per row reduces the row's classes (its log-sum-exp), which are
  // neighbours when the class axis is the last.
  if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
    if (loss.getReduction() != LossReduction::None)
      return ReductionKind::Strided;
    ArrayRef<int64_t> shape = shapeOf(loss.getInput());
    return AxisSplit(shape, shape.size() > 1 ? 1 : 0).inner == 1
               ? ReductionKind::Contiguous
               : ReductionKind::None;
  }
  if (auto loss = dyn_cast<NllLossOp>(op))
    return loss.getReduction() == LossReduction::None ? ReductionKind::None
                                                      : ReductionKind::Strided;
  if (value == op->getResult(0))
    return ReductionKind::None;
  // Statistics of norms reduce rows; gradients of their parameters reduce
  // across rows.
  if (isa<LayerNormOp, RmsNormOp>(op))
    return ReductionKind::Contiguous;
  if (isa<LayerNormGradOp, RmsNormGradOp>(op))
    return ReductionKind::Strided;
  return ReductionKind::None;
}

bool KernelWriter::readsSumAcrossRows(Value value) {
  llvm::DenseSet<Value> seen;
  std::function<bool(Value)> reads = [&](Value v) -> bool {
    if (!seen.insert(v).second || materialized.contains(v) || external(v))
      return false;
    Operation *op = v.getDefiningOp();
    if (!op)
      return false;
    if (v != value && reductionKind(v) == ReductionKind::Strided)
      return true;
    return llvm::any_of(op->getOperands(), reads);
  };
  return reads(value);
}

bool KernelWriter::atReductionGranularity(Value value) {
  // A block per result element when its threads can share a row's
  // contiguous elements, or when a thread per result would leave the GPU
  // idle (a block's strided reads waste bandwidth, but hundreds of blocks
  // still outrun a few thousand serial threads); only very many results
  // over strided elements read coalesced with a thread each. Tiling columns
  // across a block would serve both.
  constexpr int64_t kFewResults = 65536;
  int64_t count = countOf(value);
  llvm::DenseSet<Value> seen;
  std::function<bool(Value)> reaches = [&](Value v) -> bool {
    if (!seen.insert(v).second || materialized.contains(v) || external(v))
      return false;
    Operation *op = v.getDefiningOp();
    if (!op)
      return false;
    ReductionKind kind = reductionKind(v);
    if (kind != ReductionKind::None)
      return countOf(v) == count &&
             (kind == ReductionKind::Contiguous || count < kFewResults);
    return llvm::any_of(op->getOperands(), reaches);
  };
  return reaches(value);
}

void KernelWriter::planSharing(ArrayRef<Value> results,
                               ArrayRef<Value> sideResults) {
  ArrayRef<int64_t> shape = shapeOf(results.front());
  rowLength = shape.empty() ? 1 : shape.back();
  resultCount = countOf(results.front());
  this->sideResults.assign(sideResults.begin(), sideResults.end());
  llvm::DenseSet<Value> isResult(results.begin(), results.end());
  isResult.insert(sideResults.begin(), sideResults.end());
  auto inMemory = [&](Value v) {
    return !isResult.contains(v) && (materialized.contains(v) || external(v));
  };
  // The values the kernel computes, each after every value it reads.
  SmallVector<Value> order;
  llvm::DenseSet<Value> computed;
  llvm::DenseSet<Value> visited;
  std::function<void(Value)> visit = [&](Value v) {
    if (!visited.insert(v).second)
      return;
    if (!inMemory(v)) {
      computed.insert(v);
      if (Operation *op = v.getDefiningOp())
        llvm::for_each(op->getOperands(), visit);
    }
    order.push_back(v);
  };
  llvm::for_each(results, visit);
  llvm::for_each(sideResults, visit);
  // Readers first: a value is read at the results' index if every reader
  // the kernel computes is, and reads it element for element.
  for (Value v : llvm::reverse(order)) {
    bool atResultIndex = llvm::all_of(v.getUsers(), [&](Operation *user) {
      if (llvm::none_of(user->getResults(),
                        [&](Value r) { return computed.contains(r); }))
        return true;
      return (isElementwise(user) || isa<ReshapeOp>(user)) &&
             countOf(v) == countOf(user->getResult(0)) &&
             readAtResultIndex.contains(user->getResult(0));
    });
    if (atResultIndex)
      readAtResultIndex.insert(v);
  }
  // Memory every read of which is at the results' index.
  for (Value v : order) {
    if (computed.contains(v))
      continue;
    Value memory = materialized.contains(v) ? v : external(v);
    auto [it, added] = memoryAtResultIndex.try_emplace(memory, true);
    it->second &= readAtResultIndex.contains(v);
  }
}

std::string KernelWriter::rowStart(Value value, int64_t period,
                                   const std::string &index) const {
  if (schedule != Schedule::BlockPerRow)
    return "";
  // A side result is the statistic of its own row.
  if (isSideResult(value))
    return period == rowLength ? index : "";
  if (!readAtResultIndex.contains(value) ||
      (period != 0 && period % rowLength != 0))
    return "";
  return index;
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
                std::to_string(index) + "];\n";
  };
  size_t next = 0;
  for (auto [n, operand] : llvm::enumerate(plan.operands))
    pointer("const ", elementTypeOf(operand), "in" + std::to_string(n), next++);
  // 16 bytes of every result per thread and step, where the results' type
  // allows and their count is a multiple: every thread computes that many
  // elements, reading the operands it reads only at the results' index from
  // 16-byte chunks it loaded, and stores 16-byte pieces, when every pointer
  // involved is 16-byte aligned (arena tensors are; the loop falls back to
  // element accesses otherwise).
  int64_t smallest = 16;
  for (Value result : results)
    smallest = std::min<int64_t>(smallest, storageBytes(elementTypeOf(result)));
  int64_t vector = 16 / smallest;
  // A block per row takes 16-byte pieces of its row when rows are whole
  // pieces, so that every piece is aligned as the row's start is.
  bool pieceSchedule =
      (schedule == Schedule::Thread && !rowMemo) ||
      (schedule == Schedule::BlockPerRow && rowLength % vector == 0);
  bool vectorized = pieceSchedule &&
                    (split.phase == SplitPhase::None || columnsInRows) &&
                    vector > 1 && count % vector == 0;
  std::string aligned = "0", chunks;
  for (auto [n, operand] : llvm::enumerate(plan.operands)) {
    std::string in = "in" + std::to_string(n);
    int64_t bytes = vector * storageBytes(elementTypeOf(operand));
    if (vectorized && memoryAtResultIndex.lookup(operand) &&
        countOf(operand) == count && bytes % 16 == 0) {
      std::string t = storageType(elementTypeOf(operand));
      prologue += "  alignas(16) " + t + " chunk_" + in + "[" +
                  std::to_string(vector) + "];\n  auto read_" + in +
                  " = [&](i64 i) { return (u64)(i - first) < " +
                  std::to_string(vector) + "ull ? chunk_" + in +
                  "[i - first] : " + in + "[i]; };\n";
      aligned += " | (u64)" + in;
      chunks += "      copy16(chunk_" + in + ", " + in + " + first, " +
                std::to_string(bytes / 16) + ");\n";
    } else {
      prologue +=
          "  auto read_" + in + " = [&](i64 i) { return " + in + "[i]; };\n";
    }
  }
  if (vectorized)
    prologue = "  i64 first = -(1ll << 62);\n" + prologue;
  for (auto [n, constant] : llvm::enumerate(plan.constants))
    pointer("const ", elementTypeOf(constant->getResult(0)),
            "cst" + std::to_string(n), next++);
  // A split kernel that combines partials stores no side results.
  bool storesSide = split.phase != SplitPhase::Combine;
  if (!storesSide)
    plan.results.resize(results.size());
  size_t trailing = next + plan.results.size();
  if (split.phase != SplitPhase::None) {
    int64_t sums =
        columnsInRows ? rowColumnSums.size() : split.reductions.size();
    int64_t perBlock = schedule == Schedule::BlockPerColumns ? resultCount
                       : columnsInRows                       ? rowLength
                                                             : 1;
    plan.partialBytes = sums * split.blocks * perBlock * 8;
    plan.combinesPartials = split.phase == SplitPhase::Combine;
    prologue += "  double *partials = (double *)args[" +
                std::to_string(trailing++) + "];\n";
  }
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
    std::string n32 = std::to_string(count) + "ll";
    std::string body = "  {\n    const i64 c0 = blockIdx.x % " +
                       std::to_string(columnTiles()) +
                       "ll * 32ll;\n    const i64 lane = c0 + threadIdx.x % "
                       "32;\n    const i64 i = lane < " +
                       n32 + " ? lane : " + n32 + " - 1;\n";
    for (auto &[name, start] : shared)
      body += "    (void)" + name + "(" + start + ");\n";
    plan.grid = columnTiles() * split.blocks;
    plan.body = prologue + code + body + "  }\n";
    return std::move(plan);
  }
  if (split.phase == SplitPhase::Partials && !columnsInRows) {
    std::string calls;
    for (const std::string &name : split.reductions)
      calls += "  (void)" + name + "(0);\n";
    plan.grid = split.blocks;
    plan.body = prologue + code + calls;
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
    store += "    " + out + "[i] = " + stored(type, "r" + r) + ";\n";
    buffered += "    s" + r + "[v] = " + stored(type, "r" + r) + ";\n";
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
                "== 0)\n      " + out + "[row] = " + stored(type, "q" + r) +
                ";\n";
  }
  std::string n = std::to_string(count) + "ll";
  // The elements of piece c: loaded, computed (then `extra`), stored.
  std::string v = std::to_string(vector);
  auto piece = [&](const std::string &extra) {
    return "    if (aligned) {\n      first = c * " + v + ";\n" + chunks +
           "    }\n" + buffers + "    for (int v = 0; v < " + v +
           "; ++v) {\n    const i64 i = c * " + v + " + v;\n" + compute +
           extra + buffered + "    }\n    if (aligned) {\n" + vectorStore +
           "    } else {\n" + elementStore + "    }\n";
  };
  std::string alignment =
      vectorized ? "  const bool aligned = ((" + aligned + ") & 15) == 0;\n"
                 : "";
  std::string loop;
  if (vectorized && schedule == Schedule::Thread) {
    loop = alignment + "  for (i64 c = global_thread(); c < " +
           std::to_string(count / vector) + "ll; c += thread_count()) {\n" +
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
        columnsInRows ? split.blocks : std::clamp<int64_t>(rows, 1, kMaxBlocks);
    plan.block = std::clamp<int64_t>(llvm::PowerOf2Ceil(perRow), 32, kThreads);
    std::string len = std::to_string(rowLength) + "ll";
    // Column sums added up on the way: each thread holds those of the
    // columns it takes (its elements, or pieces, of every row), then
    // stores them as its block's partials.
    int64_t held =
        (perRow + plan.block - 1) / plan.block * (vectorized ? vector : 1);
    std::string slot = "((i - i0) / " + v + " - threadIdx.x) / blockDim.x * " +
                       v + " + (i - i0) % " + v;
    if (!vectorized)
      slot = "(i - i0 - threadIdx.x) / blockDim.x";
    std::string hold, add, flush;
    for (auto [j, sum] : llvm::enumerate(rowColumnSums)) {
      std::string sums = "column_sums" + std::to_string(j);
      std::string at = sums + "[" + slot + "]";
      hold += "  double " + sums + "[" + std::to_string(held) + "];\n  for " +
              "(double &s : " + sums + ") s = " + sum.init + ";\n";
      add += "    " + at + " = " + sum.combiner + "()(" + at + ", " + sum.term +
             "(row, i - i0));\n";
      flush += "      partials[(" + std::to_string(j) + " * " +
               std::to_string(split.blocks) + "ll + blockIdx.x) * " + len +
               " + o] = " + sums + "[h];\n";
    }
    if (!flush.empty()) {
      std::string column = vectorized
                               ? "(threadIdx.x + h / " + v +
                                     " * blockDim.x) * " + v + " + h % " + v
                               : "threadIdx.x + h * blockDim.x";
      flush = "  for (i64 h = 0; h < " + std::to_string(held) +
              "; ++h) {\n    const i64 o = " + column + ";\n    if (o < " +
              len + ") {\n" + flush + "    }\n  }\n";
    }
    loop = alignment + hold + "  for (i64 row = blockIdx.x; row < " +
           std::to_string(rows) +
           "ll; row += gridDim.x) {\n    const i64 i0 = row * " + len + ";\n";
    for (auto &[name, start] : shared)
      loop += "    (void)" + name + "(" + start + ");\n";
    if (vectorized)
      loop += "    for (i64 c = i0 / " + v + " + threadIdx.x; c < (i0 + " +
              len + ") / " + v + "; c += blockDim.x) {\n" + piece(add) +
              "    }\n";
    else
      loop += "    for (i64 i = i0 + threadIdx.x; i < i0 + " + len +
              "; i += blockDim.x) {\n" + compute + add + store + "    }\n";
    loop += rowStore + "  }\n" + flush;
  } else if (schedule == Schedule::BlockPerColumns) {
    // Thread t takes result c0 + t % 32 (the last one past the end), with
    // the threads of its lane in the other warps; one warp stores.
    std::string n32 = std::to_string(count) + "ll";
    loop = "  for (i64 c0 = blockIdx.x * 32ll; c0 < " + n32 +
           "; c0 += gridDim.x * 32ll) {\n    const i64 lane = c0 + threadIdx.x "
           "% 32;\n    const i64 i = lane < " +
           n32 + " ? lane : " + n32 + " - 1;\n";
    for (auto &[name, start] : shared)
      loop += "    (void)" + name + "(" + start + ");\n";
    loop += compute + "    if (threadIdx.x < 32 && lane < " + n32 + ") {\n" +
            store + "    }\n  }\n";
    plan.grid = std::clamp<int64_t>((count + 31) / 32, 1, kMaxBlocks);
  } else if (schedule == Schedule::BlockPerElement) {
    // Every thread of the block computes element i; one stores it.
    loop = "  for (i64 i = blockIdx.x; i < " + n + "; i += gridDim.x) {\n" +
           compute + "    if (threadIdx.x == 0) {\n" + store + "    }\n  }\n";
    plan.grid = std::clamp<int64_t>(count, 1, kMaxBlocks);
  } else if (rowMemo) {
    // Each thread walks whole rows, so that row statistics are computed
    // once per row.
    int64_t rowLength =
        shapeOf(results.front()).empty() ? 1 : shapeOf(results.front()).back();
    int64_t rows = (count + rowLength - 1) / rowLength;
    std::string len = std::to_string(rowLength) + "ll";
    loop = "  for (i64 row = global_thread(); row < " + std::to_string(rows) +
           "ll; row += thread_count()) {\n    for (i64 i = row * " + len +
           "; i < (row + 1) * " + len + " && i < " + n + "; ++i) {\n" +
           compute + store + "    }\n  }\n";
    plan.grid =
        std::clamp<int64_t>((rows + kThreads - 1) / kThreads, 1, kMaxBlocks);
  } else {
    loop = "  for (i64 i = global_thread(); i < " + n +
           "; i += thread_count()) {\n" + compute + store + "  }\n";
    plan.grid =
        std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks);
  }
  plan.body = prologue + code + loop;
  return std::move(plan);
}

} // namespace kiln::cuda
