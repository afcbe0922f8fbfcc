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

std::string storedExact(Type type, const std::string &x) {
  if (type.isBF16())
    return "f32_to_bf16((float)(" + x + "))";
  if (type.isF16())
    return "f32_to_f16((float)(" + x + "))";
  if (type.isTF32())
    return "(float)(" + x + ")";
  return stored(type, x);
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

std::string indexConstant(int64_t value) {
  bool narrow = value >= INT32_MIN && value <= INT32_MAX;
  return std::to_string(value) + (narrow ? "" : "ll");
}

std::string coordinate(ArrayRef<int64_t> shape, int64_t d,
                       const std::string &var) {
  int64_t inner = 1;
  for (int64_t size : shape.drop_front(d + 1))
    inner *= size;
  std::string q =
      inner == 1 ? var : "(" + var + " / " + indexConstant(inner) + ")";
  return d == 0 ? q : "(" + q + " % " + indexConstant(shape[d]) + ")";
}

std::string remap(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                  int64_t base, const std::string &var) {
  // Neighbouring dimensions whose strides continue each other are one (the
  // dimensions a reshape merged): a division and a modulo fewer, and the
  // index is `var * stride` where it is, as the compiler can then see.
  SmallVector<int64_t> sizes, steps;
  for (auto [size, stride] : llvm::zip_equal(shape, strides)) {
    if (size == 1)
      continue;
    if (!sizes.empty() && steps.back() == size * stride) {
      sizes.back() *= size;
      steps.back() = stride;
    } else {
      sizes.push_back(size);
      steps.push_back(stride);
    }
  }
  if (base == 0 && sizes.size() == 1 && steps[0] == 1)
    return var;
  std::string expr = indexConstant(base);
  for (size_t d = 0; d < sizes.size(); ++d)
    if (steps[d] != 0)
      expr +=
          " + " + coordinate(sizes, d, var) + " * " + indexConstant(steps[d]);
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
  std::string in = indexConstant(inner);
  return "((" + row + ") / " + in + " * " + indexConstant(extent * inner) +
         " + (" + k + ") * " + in + " + (" + row + ") % " + in + ")";
}

std::string AxisSplit::row(const std::string &i) const {
  std::string in = indexConstant(inner);
  return "((" + i + ") / " + indexConstant(extent * inner) + " * " + in +
         " + (" + i + ") % " + in + ")";
}

//===----------------------------------------------------------------------===//
// The writer
//===----------------------------------------------------------------------===//

std::string KernelWriter::pointerTo(Value memory) {
  auto [it, added] = pointers.try_emplace(memory, "");
  if (added) {
    it->second = "in" + std::to_string(plan.operands.size());
    largestIndexRange = std::max(largestIndexRange, countOf(memory));
    plan.operands.push_back(memory);
  }
  return it->second;
}

std::string KernelWriter::constantPointer(Operation *constant) {
  auto [it, added] = pointers.try_emplace(constant->getResult(0), "");
  if (added) {
    it->second = "cst" + std::to_string(plan.constants.size());
    largestIndexRange =
        std::max(largestIndexRange, countOf(constant->getResult(0)));
    plan.constants.push_back(constant);
  }
  return it->second;
}

std::string KernelWriter::define(Value value, bool nested,
                                 const std::string &body) {
  std::string name = lambdaOf("v", computeType(elementTypeOf(value)), body);
  names[{value, nested}] = name;
  return name;
}

std::string KernelWriter::lambdaOf(const char *prefix, const std::string &type,
                                   const std::string &body) {
  // Lambdas are pure functions of the index, so one text is one function:
  // values defined alike (a cast inside a reduction's term and the same
  // cast outside it) share it, and so do the reductions over them.
  auto [known, added] = lambdas.try_emplace(type + "|" + body, "");
  if (!added)
    return known->second;
  known->second = prefix + std::to_string(counter++);
  code += "  auto " + known->second + " = [&](idx i) -> " + type + " {\n" +
          body + "  };\n";
  return known->second;
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
  return lambdaOf("h", type, body);
}

std::string KernelWriter::once(const std::string &type,
                               const std::string &expression) {
  auto [known, added] =
      lambdas.try_emplace("once|" + type + "|" + expression, "");
  if (!added)
    return known->second;
  std::string name = "h" + std::to_string(counter++);
  known->second = name;
  code += "  bool " + name + "_known = false;\n  " + type + " " + name +
          "_value = 0;\n  auto " + name + " = [&](idx) -> " + type +
          " {\n    if (!" + name + "_known) {\n      " + name +
          "_value = " + expression + ";\n      " + name +
          "_known = true;\n    }\n    return " + name + "_value;\n  };\n";
  return name;
}

/// Code defining `name(o)`, a value of `type` at index o that
/// `name_compute(o)` computes unless it holds o's already: `statements`,
/// then `value`. Where `computedByLoop` (a row or column loop calls
/// name_compute where it starts a row), a read checks that it did.
static std::string memoized(const std::string &name, const std::string &type,
                            const std::string &statements,
                            const std::string &value, bool computedByLoop) {
  return "  idx " + name + "_at = -1;\n  " + type + " " + name +
         "_value{};\n  auto " + name +
         "_compute = [&](idx o) {\n    if (o != " + name + "_at) {\n" +
         statements + "      " + name + "_value = " + value + ";\n      " +
         name + "_at = o;\n    }\n  };\n  auto " + name + " = [&](idx o) -> " +
         type + " {\n    " +
         (computedByLoop ? "kiln_expect(o == " + name + "_at);\n"
                         : name + "_compute(o);\n") +
         "    return " + name + "_value;\n  };\n";
}

FailureOr<std::string> KernelWriter::rowValue(Value value,
                                              const std::string &index,
                                              const std::string &start,
                                              bool nested) {
  if (start.empty())
    return at(value, index, nested);
  FailureOr<std::string> read = at(value, "o", nested);
  if (failed(read))
    return failure();
  auto [known, added] = lambdas.try_emplace("row|" + *read + "|" + start, "");
  if (added) {
    std::string name = "v" + std::to_string(counter++);
    known->second = name;
    code += memoized(name, computeType(elementTypeOf(value)), "", *read, true);
    shared.push_back({name, start});
  }
  return known->second + "(" + index + ")";
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
  std::string type = r.valueType ? r.valueType : computeType(resultType);
  std::string termType = r.termType;
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
  // Added up in the row loop, a term per element of each row (a column
  // sum) or one per row (a sum over rows that no row of the kernel reads);
  // the combining kernel has the whole sum.
  bool perRow = r.overRows && r.sharedAt.empty();
  if (sumsInRows && !nested && (perRow || !r.contiguous) &&
      r.extent * rowLength == resultCount) {
    std::string term = "sum_term" + std::to_string(rowSums.size());
    rowSums.push_back({r.combiner, r.init, term, perRow});
    code += "  auto " + term + " = [&](idx k, idx o) -> double { return " +
            "(double)(" + r.term + "); };\n  auto " + name + " = [&](idx) -> " +
            type + " { return 0; };\n";
    return name;
  }
  std::string extent = indexConstant(r.extent);
  // The terms for k from `first` below `end` by `step`, combined in order
  // (a combining kernel's terms are the partials).
  auto combineAll = [&](const std::string &first, const std::string &end,
                        const std::string &step, const std::string &term = "") {
    return "      acc = strided_reduce<idx>(acc, " + first + ", " + end + ", " +
           step + ", " + r.combiner + "(), [&](idx k) { return (" + termType +
           ")(" + (term.empty() ? r.term : term) + "); });\n";
  };
  // A column's terms from row `first` below `end`, a row per warp; in a
  // loop of its own where the kernel stores side results as it reads them.
  auto combineColumn = [&](const std::string &first, const std::string &end) {
    SideStores side = storeSideResults(r);
    if (side.stores.empty())
      return combineAll(first, end, "blockDim.x / 32");
    return "      for (idx k = " + first + "; k < " + end +
           "; k += blockDim.x / 32) {\n" + side.values +
           "        acc = " + r.combiner + "()(acc, (" + termType + ")(" +
           (side.term.empty() ? r.term : side.term) + "));\n" + side.stores +
           "      }\n";
  };
  std::string loop;
  if (isShared)
    for (const std::string &prerequisite : r.prerequisites)
      loop += "      " + prerequisite + "_compute(o);\n";
  loop += "      " + std::string(r.accumulator) + " acc = " + r.init + ";\n";
  if (!isShared) {
    loop += combineAll("0", extent, "1");
  } else if (schedule == Schedule::BlockPerColumns) {
    split.largestExtent = std::max(split.largestExtent, r.extent);
    if (split.phase == SplitPhase::None) {
      loop += combineColumn("threadIdx.x / 32", extent) +
              "      acc = column_reduce(acc, " + r.combiner + "());\n";
    } else {
      // Split over blocks: the blocks of one tile of 32 columns each reduce
      // a chunk of the rows into partials (part-major per reduction); the
      // next kernel's warps share a column's parts.
      std::string parts = indexConstant(split.blocks);
      std::string index = std::to_string(split.reductions.size());
      auto at = [&](const std::string &part) {
        return "(" + index + " * " + parts + " + " + part + ") * " +
               indexConstant(resultCount) + " + o";
      };
      split.reductions.push_back(name);
      if (split.phase == SplitPhase::Partials)
        loop += "      const idx part = blockIdx.x / " +
                indexConstant(columnTiles()) +
                ";\n"
                "      const idx chunk = (" +
                extent + " + " + parts + " - 1) / " + parts +
                ";\n"
                "      const idx end = (part + 1) * chunk < " +
                extent + " ? (part + 1) * chunk : " + extent + ";\n" +
                combineColumn("part * chunk + threadIdx.x / 32", "end") +
                "      acc = column_reduce(acc, " + r.combiner +
                "());\n      if (threadIdx.x < 32)\n        partials[" +
                at("part") + "] = acc;\n";
      else
        loop += combineAll("threadIdx.x / 32", parts, "blockDim.x / 32",
                           "partials[" + at("k") + "]") +
                "      acc = column_reduce(acc, " + r.combiner + "());\n";
    }
  } else if (rowPieces > 1 && !r.uniform && !r.overRows && r.contiguous &&
             r.extent <= rowLength) {
    // A statistic of the row: its terms in the pieces the loop over the
    // row loads (the row's first `extent` elements; the last ones, fewer
    // than a piece, element by element). Not a sum over rows (a loss's
    // total weight), whose terms read none of them.
    int64_t pieces = r.extent / rowPieces;
    std::string v = std::to_string(rowPieces);
    loop += "      acc = piece_reduce<idx, " + v + ">(acc, threadIdx.x, " +
            indexConstant(pieces) + ", blockDim.x, " + r.combiner +
            "(), [&](idx p) { load_pieces(o * " + indexConstant(rowLength) +
            " + p * " + v + "); }, [&](idx k) { return (" + termType + ")(" +
            r.term + "); });\n      chunked = false;\n";
    if (pieces * rowPieces < r.extent)
      loop += combineAll(indexConstant(pieces * rowPieces) + " + threadIdx.x",
                         extent, "blockDim.x");
    loop +=
        "      acc = block_reduce(acc, " + std::string(r.combiner) + "());\n";
  } else if (split.phase == SplitPhase::None || r.withinBlock ||
             schedule == Schedule::BlockPerRow ||
             StringRef(r.accumulator) != "double") {
    // A block per row splits only the column sums it adds up, not its
    // rows' statistics.
    loop += r.uniform
                ? combineAll("0", extent, "1")
                : combineAll("threadIdx.x", extent, "blockDim.x") +
                      "      acc = block_reduce(acc, " + r.combiner + "());\n";
  } else {
    // Split into parts: each part (of the kernel's `part` loop, over the
    // grid) reduces one chunk of k into the partials; the next kernel's
    // threads share combining them. The chunks follow the parts, not the
    // grid, so that any grid gives the same partials.
    std::string parts = indexConstant(split.blocks);
    std::string slot = std::to_string(split.reductions.size()) + " * " + parts;
    split.reductions.push_back(name);
    split.largestExtent = std::max(split.largestExtent, r.extent);
    if (split.phase == SplitPhase::Partials)
      loop += "      const idx chunk = (" + extent + " + " + parts +
              " - 1) / " + parts +
              ";\n"
              "      const idx end = (part + 1) * chunk < " +
              extent + " ? (part + 1) * chunk : " + extent + ";\n" +
              (r.uniform ? combineAll("part * chunk", "end", "1")
                         : combineAll("part * chunk + threadIdx.x", "end",
                                      "blockDim.x") +
                               "      acc = block_reduce(acc, " + r.combiner +
                               "());\n") +
              "      if (threadIdx.x == 0) partials[" + slot +
              " + part] = acc;\n";
    else
      loop += combineAll("threadIdx.x", indexConstant(split.blocks),
                         "blockDim.x", "partials[" + slot + " + k]") +
              "      acc = block_reduce(acc, " + r.combiner + "());\n";
  }
  // `name_compute(o)` computes the reduction at o unless it holds it
  // already. A statistic that the row (or column) loop computes where it
  // starts a row is only read after: its reader is then the value alone,
  // not a copy of the loop inlined wherever it is read.
  bool computedByLoop = isShared && schedule != Schedule::BlockPerElement;
  code += memoized(name, type, loop,
                   r.valueType ? "(" + r.finish + ")"
                               : rounded(resultType, r.finish),
                   computedByLoop);
  // Threads walk rows when they reuse a row's statistics.
  rowMemo |= !isShared && r.contiguous;
  unshared += !isShared;
  if (computedByLoop) {
    shared.push_back({name, r.sharedAt});
    sharesRows |= r.contiguous;
  }
  return name;
}

KernelWriter::SideStores KernelWriter::storeSideResults(const Reduction &r) {
  // Once, in the first column sum that reads as many elements as the side
  // results have (a thread past the last column repeats the last column's
  // stores, of the same values).
  if (sideStores || sideResults.empty() || r.element.empty() ||
      llvm::any_of(sideResults, [&](Value side) {
        return countOf(side) != r.extent * resultCount;
      }))
    return {};
  sideStores = true;
  SideStores side;
  side.values = "        const idx e = " + r.element + ";\n";
  for (auto [n, result] : llvm::enumerate(sideResults)) {
    std::string held = "side" + std::to_string(n);
    std::string value = names.lookup({result, false});
    Type type = elementTypeOf(result);
    side.values += "        const " + storageType(type) + " " + held + " = " +
                   storedExact(type, value + "(e)") + ";\n";
    side.stores +=
        "        side_out" + std::to_string(n) + "[e] = " + held + ";\n";
    // A sum of the side result itself (a bias gradient of the gradient the
    // kernel stores) adds the value it stores, exactly, rather than
    // computing it again: its rounded functions' calls keep the compiler
    // from finding the two the same.
    if (r.term == value + "(" + r.element + ")")
      side.term = loaded(type, held);
  }
  return side;
}

FailureOr<std::string> KernelWriter::lambda(Value value, bool nested) {
  contextPtr = value.getContext();
  // Every index the kernel computes lies within a value it computes or
  // reads (a row of it, an element, a term of a reduction over it).
  largestIndexRange = std::max(largestIndexRange, countOf(value));
  // Only kernels whose blocks share reductions compute values differently
  // inside and outside them; the row loop evaluates the terms of the column
  // sums it adds up where it computes its results, outside any reduction.
  nested &= schedule != Schedule::Thread && !sumsInRows;
  // A fusion's block argument is the fusion's operand.
  if (auto argument = dyn_cast<BlockArgument>(value))
    if (auto fusion = dyn_cast<FusionOp>(argument.getOwner()->getParentOp()))
      return lambda(fusion->getOperand(argument.getArgNumber()), nested);
  auto it = names.find({value, nested});
  if (it != names.end())
    return it->second;
  Value memory = materialized.contains(value) ? value : external(value);
  if (memory) {
    // Memory reads the same inside reductions and out: one lambda.
    if (auto other = names.find({value, !nested}); other != names.end())
      return alias(value, nested, other->second);
    // Through the pointer's reader, which a vectorized loop serves from the
    // 16-byte chunks it loaded (finish()); in the memory's type, which may
    // be narrower than the value's when it holds the value exactly (an
    // assembly, StridedViews.h).
    std::string pointer = pointerTo(memory);
    return define(value, nested,
                  "    return " +
                      loaded(elementTypeOf(memory), "read_" + pointer + "(i)") +
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
  // A row's statistics read the operands' 16-byte pieces, as the loop over
  // the row's elements does: one load of 16 bytes where element loads read
  // 2 or 4 (a loss's log-sum-exp over 50304 bf16 logits: 25 loads per
  // thread instead of 197), every operand of a piece at once. A norm
  // gradient's row of 768 is one piece per thread: its statistics wait on
  // memory once, where element loads, four at a time, waited twice. (That
  // costs BERT's norm gradients 16 registers, 80 to 96, and 8 blocks per
  // SM to 6: a quarter fewer rows in flight for half the waits.)
  int64_t piece = pieceLength(results);
  if (schedule == Schedule::BlockPerRow && piece > 1)
    rowPieces = piece;
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
  // Values that a reader the kernel computes reads at the results' own
  // index: an elementwise op, or the element of a row op (which reads the
  // row for its statistics besides, from memory: pieces serve only the
  // reads the loop makes while it holds them).
  llvm::DenseSet<Value> readsOwnIndex(results.begin(), results.end());
  for (Value v : llvm::reverse(order))
    if (llvm::any_of(v.getUsers(), [&](Operation *user) {
          return user->getNumResults() &&
                 readsOwnIndex.contains(user->getResult(0)) &&
                 countOf(v) == countOf(user->getResult(0)) &&
                 (isElementwise(user) ||
                  isa<ReshapeOp, LayerNormOp, LayerNormGradOp, RmsNormOp,
                      RmsNormGradOp, SoftmaxOp, SoftmaxGradOp, LogSoftmaxOp,
                      LogSoftmaxGradOp, CrossEntropyGradOp>(user));
        }))
      readsOwnIndex.insert(v);
  // Their memory, which the loop over the results loads in 16-byte pieces
  // (the memory lambda() reads for a fusion's block argument is the
  // fusion's operand).
  for (Value v : order) {
    if (!readsOwnIndex.contains(v))
      continue;
    if (auto argument = dyn_cast<BlockArgument>(v))
      if (auto fusion = dyn_cast<FusionOp>(argument.getOwner()->getParentOp()))
        v = fusion->getOperand(argument.getArgNumber());
    if (Value memory = materialized.contains(v) ? v : external(v))
      memoryAtResultIndex.insert(memory);
  }
}

std::string KernelWriter::rowOfSum(int64_t rows, int64_t length,
                                   const std::string &index) const {
  return sumsInRows && length == rowLength && rows * length == resultCount
             ? index
             : "";
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

} // namespace kiln::cuda
