//===- StructuredOps.cpp - data movement, reductions, norms, losses -------===//
//
// Ops whose elements read other positions of their operands. Each follows
// its op's description in the dialect and the interpreter's order of
// computation (statistics in double, rounded once where the op stores
// them). Indices a kernel cannot check (gather, labels) are clamped into
// range so that a bad index never reads outside its tensor.
//
//===----------------------------------------------------------------------===//

#include "StructuredEmitter.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::cuda {


FailureOr<std::string> StructuredEmitter::reduction(Value input,
                                                    ArrayRef<int64_t> axes,
                                                    const char *combiner,
                                                    const std::string &init,
                                                    bool mean) {
  ArrayRef<int64_t> in = shapeOf(input);
  SmallVector<int64_t> inStrides = contiguousStrides(in);
  SmallVector<int64_t> keptShape, keptStrides, reducedShape, reducedStrides;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    (reduced ? reducedShape : keptShape).push_back(in[d]);
    (reduced ? reducedStrides : keptStrides).push_back(inStrides[d]);
  }
  int64_t extent = 1;
  for (int64_t size : reducedShape)
    extent *= size;
  std::string index = remap(keptShape, keptStrides, 0, "o") + " + " +
                      remap(reducedShape, reducedStrides, 0, "k");
  Reduction r{combiner, init, extent, at(input, index, true)};
  r.element = index;
  if (mean)
    r.finish = "acc / " + std::to_string(extent) + ".0";
  r.contiguous = llvm::is_contained(axes, static_cast<int64_t>(in.size()) - 1);
  return reduces(r);
}

/// Output j of a row is its j-th best element: j + 1 passes over the row,
/// each taking the best of those after the previous pass's in the order
/// (value, NaN as the largest, then index), k * n reads per row element,
/// for the small k of routers and samplers.
FailureOr<std::string> StructuredEmitter::topK(TopKOp op) {
  AxisSplit in(shapeOf(op.getInput()), op.getAxis()), out(shape, op.getAxis());
  bool largest = op.getLargest();
  std::string x = at(op.getInput(), in.at("row", "k"));
  return returns(
      "    auto before = [](double x, i64 ix, double y, i64 iy) {\n"
      "      bool nx = x != x, ny = y != y;\n"
      "      if (nx || ny) return nx && ny ? ix < iy : " +
      std::string(largest ? "nx" : "ny") +
      ";\n"
      "      return x != y ? x " +
      (largest ? ">" : "<") +
      " y : ix < iy;\n"
      "    };\n"
      "    const i64 row = " +
      out.row("i") + ";\n    const i64 rank = (i / " +
      indexConstant(out.inner) + ") % " + indexConstant(out.extent) +
      ";\n    i64 previous = -1; double last = 0;\n"
      "    for (i64 r = 0; r <= rank; ++r) {\n"
      "      i64 best = -1; double top = 0;\n"
      "      for (i64 k = 0; k < " +
      indexConstant(in.extent) + "; ++k) {\n        double x = (double)" + x +
      ";\n"
      "        if (previous >= 0 && !before(last, previous, x, k)) continue;\n"
      "        if (best < 0 || before(x, k, top, best)) { best = k; top = x; "
      "}\n"
      "      }\n"
      "      previous = best; last = top;\n"
      "    }\n    return previous;\n");
}

FailureOr<std::string> StructuredEmitter::argReduction(Value input,
                                                       int64_t axis, bool max,
                                                       bool last) {
  AxisSplit split(shapeOf(input), axis);
  std::string better = max ? (last ? ">=" : ">") : (last ? "<=" : "<");
  std::string x = at(input, split.at("i", "k"));
  return returns("    i64 best = 0; double top = 0;\n    for (i64 k = 0; k < " +
                 indexConstant(split.extent) +
                 "; ++k) {\n      double x = (double)" + x +
                 ";\n      if (k == 0 || x " + better +
                 " top || (x != x && top == top)) { top = x; best = k; }\n" +
                 "      if (top != top) break;\n    }\n    return best;\n");
}

FailureOr<std::string> StructuredEmitter::softmax(Value input, int64_t axis,
                                                  bool log) {
  AxisSplit split(shapeOf(input), axis);
  std::string x = at(input, split.at("o", "k"), true);
  // An all -inf row: maximum 0, so that the sum is 0 and the result NaN.
  Reduction maxR{"Max", literal(-INFINITY), split.extent, x};
  maxR.finish = "acc == (-1.0 / 0.0) ? 0.0 : acc";
  maxR.sharedAt = rowStart(split);
  std::string maximum = stat(maxR);
  Reduction sumR{"Sum", "0.0", split.extent,
                 "exp(" + x + " - " + maximum + "(o))"};
  sumR.sharedAt = maxR.sharedAt;
  sumR.prerequisites = {maximum};
  std::string sum = stat(sumR);
  std::string row = split.row("i"), xi = at(input, "i");
  std::string shifted = "(" + xi + " - " + maximum + "(" + row + "))";
  return returnsExpr(log ? shifted + " - log(" + sum + "(" + row + "))"
                         : "exp(" + shifted + ") / " + sum + "(" + row + ")");
}

FailureOr<std::string>
StructuredEmitter::normalization(Value input, Value centered, Value scale,
                                 Value bias, int64_t axis, double epsilon) {
  // Shared by layer_norm (centered) and rms_norm: results are the output,
  // then the statistics.
  ArrayRef<int64_t> in = shapeOf(input);
  ArrayRef<int64_t> normalized = in.drop_front(axis);
  int64_t n = 1;
  for (int64_t size : normalized)
    n *= size;
  std::string x = at(input, "o * " + indexConstant(n) + " + k", true);
  unsigned result = cast<OpResult>(value).getResultNumber();
  // The output's elements of one row share its statistics, which a
  // block-per-row kernel may store too.
  std::string start =
      result == 0 || w.isSideResult(value) ? rowStart(n) : "";
  std::string mean = "[](idx) { return 0.0; }";
  std::string deviation = x;
  Reduction squares{"Sum", "0.0", n, ""};
  if (centered) {
    Reduction r{"Sum", "0.0", n, x};
    r.finish = "acc / " + std::to_string(n) + ".0";
    r.sharedAt = start;
    mean = stat(r);
    deviation = "(" + x + " - " + mean + "(o))";
    squares.prerequisites = {mean};
  }
  squares.term = deviation + " * " + deviation;
  squares.finish = "1.0 / sqrt(acc / " + std::to_string(n) + ".0 + " +
                   literal(epsilon) + ")";
  squares.sharedAt = start;
  std::string rstd = stat(squares);
  if (result == 1 && centered)
    return returnsExpr(mean + "(i)");
  if (result > 0)
    return returnsExpr(rstd + "(i)");
  std::string c = "(i % " + indexConstant(n) + ")",
              r = "(i / " + indexConstant(n) + ")";
  std::string y = "(" + at(input, "i") + " - " + mean + r + ") * " + rstd + r;
  if (scale)
    y += " * " + at(scale, broadcastIndex(scale, normalized, c));
  if (bias)
    y += " + " + at(bias, broadcastIndex(bias, normalized, c));
  return returnsExpr(y);
}

FailureOr<std::string>
StructuredEmitter::normalizationGrad(Value input, Value mean, Value rstd,
                                     Value grad, Value scale, int64_t axis) {
  ArrayRef<int64_t> normalized = shapeOf(input).drop_front(axis);
  int64_t n = 1;
  for (int64_t size : normalized)
    n *= size;
  int64_t rows = countOf(input) / n;
  unsigned result = cast<OpResult>(value).getResultNumber();
  if (result > 0 && countOf(value) != n)
    return unsupported("a scale or bias smaller than the normalized shape");
  // The row's saved statistics, read once per row where a block per row
  // computes the input's gradient: every read of the kernel (its column
  // sums' too) is then of the row the loop holds.
  std::string start =
      w.rowStart(op->getResult(0), n, "(i0 / " + indexConstant(n) + ")");
  auto ofRow = [&](Value statistic, const std::string &row, bool inTerm) {
    FailureOr<std::string> x =
        w.rowValue(statistic, row, start, nested || inTerm);
    failedOperand |= failed(x);
    return succeeded(x) ? *x : std::string("0");
  };
  // x^ and g = dy * scale at element i of the input, inside reduction terms
  // and outside.
  auto terms = [&](bool inTerm) {
    std::string r = "(i / " + indexConstant(n) + ")",
                c = "(i % " + indexConstant(n) + ")";
    std::string xhat = "(" + at(input, "i", inTerm);
    xhat += mean ? " - " + ofRow(mean, r, inTerm) + ")" : ")";
    xhat += " * " + ofRow(rstd, r, inTerm);
    std::string g = at(grad, "i", inTerm);
    if (scale)
      g += " * " + at(scale, broadcastIndex(scale, normalized, c), inTerm);
    return std::make_pair(w.helper("double", "    return " + xhat + ";\n"),
                          w.helper("double", "    return " + g + ";\n"));
  };
  auto [xhatTerm, gTerm] = terms(true);
  std::string element = "o * " + indexConstant(n) + " + k";
  if (result == 0) {
    auto [xhat, g] = terms(false);
    std::string gx = gTerm + "(" + element + ") * " + xhatTerm + "(" +
                     element + ")",
                count = std::to_string(n) + ".0",
                row = "(i / " + indexConstant(n) + ")";
    // dx = rstd (g - x^ mean(g x^) - mean(g)); with a mean, both means in
    // one pass over the row (SumPair: the same sums, one loop and one block
    // reduction fewer).
    Reduction means{"Sum", "0.0", n, gx};
    means.finish = "acc / " + count;
    if (mean) {
      means = Reduction{"PairSum", "SumPair{0.0, 0.0}", n,
                        "SumPair{" + gx + ", " + gTerm + "(" + element + ")}"};
      means.accumulator = means.termType = means.valueType = "SumPair";
      means.finish = "SumPair{acc.a / " + count + ", acc.b / " + count + "}";
    }
    means.sharedAt = rowStart(n);
    std::string statistic = stat(means) + row;
    std::string dx =
        mean ? g + "(i) - " + xhat + "(i) * " + statistic + ".a - " +
                   statistic + ".b"
             : g + "(i) - " + xhat + "(i) * " + statistic;
    return returnsExpr(ofRow(rstd, row, false) + " * (" + dx + ")");
  }
  // Parameter gradients: sums over rows at normalized position o.
  std::string column = "k * " + indexConstant(n) + " + o";
  std::string dy = at(grad, column, true);
  bool isBias = mean && result == 2;
  Reduction columnSum{"Sum", "0.0", rows,
                      isBias ? dy : dy + " * " + xhatTerm + "(" + column + ")"};
  columnSum.contiguous = false;
  return reduces(columnSum);
}

FailureOr<std::string>
StructuredEmitter::classification(Value input, Value labels, Value weight,
                                  Value grad, LossReduction reduction,
                                  std::optional<int64_t> ignoreIndex,
                                  std::optional<int64_t> classes, bool logits) {
  AxisSplit split(shapeOf(input), shapeOf(input).size() > 1 ? 1 : 0);
  int64_t valid = classes.value_or(split.extent);
  int64_t rows = countOf(labels);
  // Lambdas of a row r (a position of `labels`): its class, its weight (0
  // when ignored) and whether it is ignored (empty without ignore_index);
  // with its loss, also its log-sum-exp (logits) and its weighted loss. The
  // log-sum-exp is shared by a block when `start` is its index for the
  // kernel's row (KernelWriter::rowStart), or `withinBlock` when every
  // thread reads the same row (Reduction::uniform).
  struct Row {
    std::string label, weight, ignored, lse, loss;
  };
  auto rowClass = [&](bool inTerm) {
    Row row;
    // A label outside [0, classes) is an error, unless it is ignore_index.
    std::string label = at(labels, "i", inTerm);
    std::string ignored =
        ignoreIndex ? "(" + label + " == " + indexConstant(*ignoreIndex) + ")"
                    : "false";
    row.label =
        w.helper("i64", "    return " + ignored + " ? (i64)0 : " +
                            w.checkedIndex(label, valid, false) + ";\n");
    std::string wy = weight ? at(weight, row.label + "(i)", inTerm) : "1.0";
    row.weight =
        w.helper("double", "    return " + ignored + " ? 0.0 : " + wy + ";\n");
    if (ignoreIndex)
      row.ignored = w.helper("bool", "    return " + ignored + ";\n");
    return row;
  };
  auto rowLoss = [&](bool inTerm, const std::string &start = "",
                     bool withinBlock = false) {
    Row row = rowClass(inTerm);
    std::string lse = "0.0";
    if (logits) {
      // One pass over the row (LogSumExp); where the maximum is infinite,
      // NaN, as max + log(sum exp(x - max)) is.
      std::string x = at(input, split.at("o", "k"), true);
      Reduction sum{"LogSumExp", "MaxSum{" + literal(-INFINITY) + ", 0.0}",
                    valid, x};
      sum.accumulator = "MaxSum";
      sum.finish = "acc.m == 1.0 / 0.0 || acc.m == -1.0 / 0.0 ? 0.0 / 0.0 : "
                   "acc.m + log(acc.s)";
      sum.sharedAt = start;
      sum.withinBlock = withinBlock;
      row.lse = stat(sum, inTerm);
      lse = row.lse + "(i)";
    }
    std::string picked = at(input, split.at("i", row.label + "(i)"), inTerm);
    row.loss = w.helper("double", "    return " + row.weight + "(i) * (" + lse +
                                      " - " + picked + ");\n");
    return row;
  };
  // Read at index 0 by every element.
  auto totalWeight = [&] {
    Reduction total{"Sum", "0.0", rows, rowClass(true).weight + "(k)"};
    total.sharedAt = w.rowStart(value, 0, "0");
    total.overRows = true;
    return stat(total);
  };
  if (!grad) {
    if (reduction == LossReduction::None)
      return returnsExpr(rowLoss(false).loss + "(i)");
    // With logits, a block computes each row's log-sum-exp together: all
    // of them, or, in a row loop over the logits' rows (the gradient's
    // kernel), that of its row, which the row's elements share.
    std::string rowOfSum =
        split.inner == 1 ? w.rowOfSum(rows, split.extent, split.row("i0")) : "";
    Row terms = !logits            ? rowLoss(true)
                : rowOfSum.empty() ? rowLoss(false, "", true)
                                   : rowLoss(false, rowOfSum);
    Reduction total{"Sum", "0.0", rows, terms.loss + "(k)"};
    total.uniform = logits;
    total.overRows = true;
    if (reduction == LossReduction::Mean)
      total.finish = "acc / " + totalWeight() + "(o)";
    return reduces(total);
  }
  // The gradient at element i of the input, of row r and class c, in the
  // interpreter's order: the share (the output's gradient over the total
  // weight, the same for every element) times the row's weight, times p
  // minus the label's indicator.
  Row row = rowLoss(false, rowStart(split));
  std::string share = at(grad, reduction == LossReduction::None ? "r" : "0");
  if (reduction == LossReduction::Mean)
    share += " / " + totalWeight() + "(0)";
  // One share for all elements: once per thread, not a division per logit.
  if (reduction != LossReduction::None)
    share = w.once("double", share) + "(0)";
  std::string shifted = at(input, "i") + " - " + row.lse + "(r)";
  std::string p = logits ? "exp(" + shifted + ")" : "0.0";
  // In a block per row, the row is the block's, from its first element:
  // no division per element (GPT-2's loss kernel: 2 divisions or
  // remainders in its PTX instead of 11), and the row's label and weight
  // are invariant in the loop over its elements.
  std::string blockRow = rowStart(split);
  std::string r = blockRow.empty() ? split.row("i") : blockRow;
  std::string c = blockRow.empty() ? "i / " + indexConstant(split.inner) +
                                         " % " + indexConstant(split.extent)
                                   : "i - r * " + indexConstant(split.extent);
  std::string scale = "(" + share + ") * " + row.weight + "(r)",
              indicator = "(c == " + row.label + "(r) ? 1.0 : 0.0)";
  // A 16-bit gradient (bf16 and fp16 steps) of 16-bit logits is computed
  // in f32 where that rounds as double would (rounded_exp_term).
  bool sixteenBits = type.isBF16() || type.isF16();
  std::string value =
      logits && sixteenBits && elementTypeOf(input) == type
          ? "rounded_exp_term<" + std::string(type.isBF16() ? "Bf16" : "F16") +
                ">(" + scale + ", " + at(input, "i") + ", " + row.lse +
                "(r), c == " + row.label + "(r))"
          : rounded(type, scale + " * (" + p + " - " + indicator + ")");
  // An ignored row's gradient is +0, as the interpreter leaves it, whatever
  // the sign of its share (times its weight, 0, a zero of that sign).
  std::string skipped =
      row.ignored.empty() ? "" : " || " + row.ignored + "(r)";
  return returns("    const idx r = " + r + ", c = " + c + ";\n    if (c >= " +
                 indexConstant(valid) + skipped + ") return 0.0;\n    return " +
                 value + ";\n");
}

FailureOr<std::string> StructuredEmitter::matmul(MatmulOp mm) {
  // The product as a loop, for batch broadcasts a GEMM cannot express.
  ArrayRef<int64_t> lhs = shapeOf(mm.getLhs());
  int64_t rank = shape.size(),
          k = mm.getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
  auto operandIndex = [&](Value operand, bool transposed, bool isLhs) {
    ArrayRef<int64_t> s = shapeOf(operand);
    SmallVector<int64_t> strides = contiguousStrides(s);
    std::string index;
    size_t lead = rank - s.size();
    for (int64_t d = 0; d + 2 < rank; ++d) {
      int64_t od = d - lead;
      if (od >= 0 && s[od] != 1)
        index += coordinate(shape, d, "o") + " * " +
                 indexConstant(strides[od]) + " + ";
    }
    int64_t rowStride = strides[s.size() - 2], colStride = strides.back();
    if (transposed)
      std::swap(rowStride, colStride);
    std::string outer = coordinate(shape, rank - (isLhs ? 2 : 1), "o");
    if (isLhs)
      index += outer + " * " + indexConstant(rowStride) + " + k * " +
               indexConstant(colStride);
    else
      index += "k * " + indexConstant(rowStride) + " + " + outer + " * " +
               indexConstant(colStride);
    return "(" + index + ")";
  };
  std::string a = at(
      mm.getLhs(), operandIndex(mm.getLhs(), mm.getTransposeLhs(), true), true);
  std::string b =
      at(mm.getRhs(), operandIndex(mm.getRhs(), mm.getTransposeRhs(), false),
         true);
  Reduction product{"Sum", "0.0", k, a + " * " + b};
  product.contiguous = false;
  return reduces(product);
}

FailureOr<std::string> StructuredEmitter::pad(PadOp p) {
  ArrayRef<int64_t> in = shapeOf(p.getInput());
  SmallVector<int64_t> strides = contiguousStrides(in);
  std::string body = "    i64 j = 0;\n";
  for (size_t d = 0; d < in.size(); ++d) {
    std::string x = "x" + std::to_string(d), n = indexConstant(in[d]);
    body += "    i64 " + x + " = " + coordinate(shape, d, "i") + " - " +
            indexConstant(p.getLow()[d]) + ";\n";
    switch (p.getMode()) {
    case PadMode::Constant:
      body += "    if (" + x + " < 0 || " + x + " >= " + n + ") return " +
              rounded(type, literal(p.getValue().convertToDouble())) + ";\n";
      break;
    case PadMode::Edge:
      body += "    " + x + " = " + x + " < 0 ? 0 : " + x + " >= " + n + " ? " +
              n + " - 1 : " + x + ";\n";
      break;
    case PadMode::Reflect:
      if (in[d] == 1) {
        body += "    " + x + " = 0;\n";
        break;
      }
      body += "    { i64 period = 2 * ((i64)" + n + " - 1); i64 m = ((" + x +
              " % period) + period) % period; " + x + " = m >= " + n +
              " ? period - m : m; }\n";
      break;
    case PadMode::Wrap:
      body += "    " + x + " = ((" + x + " % " + n + ") + " + n + ") % " + n +
              ";\n";
      break;
    }
    body += "    j += " + x + " * " + indexConstant(strides[d]) + ";\n";
  }
  return returns(body + "    return " + at(p.getInput(), "j") + ";\n");
}

FailureOr<std::string> StructuredEmitter::emit() {
  return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(op)
      .Case([&](ReshapeOp r) { return moves(at(r.getInput(), "i")); })
      .Case([&](BroadcastOp b) {
        return moves(
            at(b.getInput(), broadcastIndex(b.getInput(), shape, "i")));
      })
      .Case([&](TransposeOp t) {
        SmallVector<int64_t> in = contiguousStrides(shapeOf(t.getInput()));
        SmallVector<int64_t> strides;
        for (int64_t d : t.getPermutation())
          strides.push_back(in[d]);
        return moves(at(t.getInput(), remap(shape, strides, 0, "i")));
      })
      .Case([&](SliceOp s) {
        SmallVector<int64_t> in = contiguousStrides(shapeOf(s.getInput()));
        SmallVector<int64_t> strides;
        int64_t base = 0;
        for (size_t d = 0; d < in.size(); ++d) {
          base += s.getStart()[d] * in[d];
          strides.push_back(s.getStride()[d] * in[d]);
        }
        return moves(at(s.getInput(), remap(shape, strides, base, "i")));
      })
      .Case([&](ConcatOp c) {
        int64_t axis = c.getAxis(), offset = 0;
        std::string body =
            "    const idx c = " + coordinate(shape, axis, "i") + ";\n";
        for (Value input : c.getInputs()) {
          SmallVector<int64_t> strides = contiguousStrides(shapeOf(input));
          int64_t size = shapeOf(input)[axis];
          std::string index =
              remap(shape, strides, -offset * strides[axis], "i");
          body += "    if (c < " + indexConstant(offset + size) + ") return " +
                  at(input, index) + ";\n";
          offset += size;
        }
        return returns(body + "    return 0;\n");
      })
      .Case([&](PadOp p) { return pad(p); })
      .Case([&](TriluOp t) {
        int64_t rank = shape.size();
        std::string diff = coordinate(shape, rank - 1, "i") + " - " +
                           coordinate(shape, rank - 2, "i");
        std::string keep = diff + (t.getUpper() ? " >= " : " <= ") +
                           indexConstant(t.getDiagonal());
        return moves("(" + keep + ") ? " + at(t.getInput(), "i") + " : 0");
      })
      .Case([&](GatherOp g) {
        ArrayRef<int64_t> data = shapeOf(g.getData());
        int64_t axis = g.getAxis(), inner = 1;
        for (int64_t size : data.drop_front(axis + 1))
          inner *= size;
        int64_t indices = countOf(g.getIndices());
        std::string k = w.checkedIndex(
            at(g.getIndices(), "(i / " + indexConstant(inner) + ") % " +
                                   indexConstant(indices)),
            data[axis], true);
        return moves(at(g.getData(), "(i / " + indexConstant(inner * indices) +
                                         " * " + indexConstant(data[axis]) +
                                         " + " + k + ") * " +
                                         indexConstant(inner) + " + i % " +
                                         indexConstant(inner)));
      })
      .Case([&](GatherElementsOp g) {
        ArrayRef<int64_t> data = shapeOf(g.getData());
        SmallVector<int64_t> strides = contiguousStrides(data);
        int64_t axis = g.getAxis();
        int64_t along = strides[axis];
        strides[axis] = 0;
        std::string k =
            w.checkedIndex(at(g.getIndices(), "i"), data[axis], true);
        return moves(at(g.getData(), remap(shape, strides, 0, "i") + " + " + k +
                                         " * " + indexConstant(along)));
      })
      .Case([&](InsertSliceOp s) {
        ArrayRef<int64_t> source = shapeOf(s.getSource());
        SmallVector<int64_t> strides = contiguousStrides(source);
        std::string body = "    i64 j = 0;\n";
        for (size_t d = 0; d < source.size(); ++d) {
          std::string q = "q" + std::to_string(d);
          body += "    i64 " + q + " = " + coordinate(shape, d, "i") + " - " +
                  indexConstant(s.getStart()[d]) + ";\n    if (" + q + " % " +
                  indexConstant(s.getStride()[d]) + " != 0) return " +
                  at(s.getDest(), "i") + ";\n    " + q +
                  " /= " + indexConstant(s.getStride()[d]) + ";\n    if (" + q +
                  " < 0 || " + q + " >= " + indexConstant(source[d]) +
                  ") return " + at(s.getDest(), "i") + ";\n    j += " + q +
                  " * " + indexConstant(strides[d]) + ";\n";
        }
        return returns(body + "    return " + at(s.getSource(), "j") + ";\n");
      })
      .Case([&](CumsumOp c) {
        AxisSplit split(shape, c.getAxis());
        std::string k = "(i / " + indexConstant(split.inner) + " % " +
                        indexConstant(split.extent) + ")";
        std::string from =
            c.getReverse() ? k + (c.getExclusive() ? " + 1" : "") : "0";
        std::string to = c.getReverse() ? indexConstant(split.extent)
                                        : k + (c.getExclusive() ? "" : " + 1");
        std::string ctype = computeType(type);
        return returns(
            "    const idx row = " + split.row("i") + ";\n    " + ctype +
            " acc = 0;\n    for (idx j = " + from + "; j < " + to +
            "; ++j) acc = " +
            rounded(type, "acc + " + at(c.getInput(), split.at("row", "j"))) +
            ";\n    return acc;\n");
      })
      .Case([&](ReduceSumOp r) {
        return reduction(r.getInput(), r.getAxes(), "Sum", "0.0", false);
      })
      .Case([&](ReduceMeanOp r) {
        return reduction(r.getInput(), r.getAxes(), "Sum", "0.0", true);
      })
      .Case([&](ReduceMaxOp r) {
        return reduction(r.getInput(), r.getAxes(), "Max", literal(-INFINITY),
                         false);
      })
      .Case([&](ReduceMinOp r) {
        return reduction(r.getInput(), r.getAxes(), "Min", literal(INFINITY),
                         false);
      })
      .Case([&](ReduceProdOp r) {
        return reduction(r.getInput(), r.getAxes(), "Prod", "1.0", false);
      })
      .Case([&](ArgMaxOp a) {
        return argReduction(a.getInput(), a.getAxis(), true,
                            a.getSelectLastIndex());
      })
      .Case([&](ArgMinOp a) {
        return argReduction(a.getInput(), a.getAxis(), false,
                            a.getSelectLastIndex());
      })
      .Case([&](TopKOp t) { return topK(t); })
      .Case([&](SoftmaxOp s) {
        return softmax(s.getInput(), s.getAxis(), false);
      })
      .Case([&](LogSoftmaxOp s) {
        return softmax(s.getInput(), s.getAxis(), true);
      })
      .Case([&](SoftmaxGradOp s) {
        AxisSplit split(shape, s.getAxis());
        std::string at_ = split.at("o", "k");
        Reduction r{"Sum", "0.0", split.extent,
                    at(s.getGrad(), at_, true) + " * " +
                        at(s.getOutput(), at_, true)};
        r.sharedAt = rowStart(split);
        return returnsExpr(at(s.getOutput(), "i") + " * (" +
                           at(s.getGrad(), "i") + " - " + stat(r) + "(" +
                           split.row("i") + "))");
      })
      .Case([&](LogSoftmaxGradOp s) {
        AxisSplit split(shape, s.getAxis());
        Reduction r{"Sum", "0.0", split.extent,
                    at(s.getGrad(), split.at("o", "k"), true)};
        r.sharedAt = rowStart(split);
        return returnsExpr(at(s.getGrad(), "i") + " - exp(" +
                           at(s.getOutput(), "i") + ") * " + stat(r) + "(" +
                           split.row("i") + ")");
      })
      .Case([&](LayerNormOp n) {
        return normalization(n.getInput(), n.getInput(), n.getScale(),
                             n.getBias(), n.getAxis(),
                             n.getEpsilon().convertToDouble());
      })
      .Case([&](RmsNormOp n) {
        return normalization(n.getInput(), Value(), n.getScale(), Value(),
                             n.getAxis(), n.getEpsilon().convertToDouble());
      })
      .Case([&](LayerNormGradOp g) {
        return normalizationGrad(g.getInput(), g.getMean(), g.getInvStdDev(),
                                 g.getGrad(), g.getScale(), g.getAxis());
      })
      .Case([&](RmsNormGradOp g) {
        return normalizationGrad(g.getInput(), Value(), g.getInvRms(),
                                 g.getGrad(), g.getScale(), g.getAxis());
      })
      .Case([&](CrossEntropyOp l) {
        return classification(l.getInput(), l.getLabels(), l.getWeight(),
                              Value(), l.getReduction(), l.getIgnoreIndex(),
                              l.getNumClasses(), true);
      })
      .Case([&](NllLossOp l) {
        return classification(l.getInput(), l.getLabels(), l.getWeight(),
                              Value(), l.getReduction(), l.getIgnoreIndex(),
                              l.getNumClasses(), false);
      })
      .Case([&](CrossEntropyGradOp l) {
        return classification(l.getInput(), l.getLabels(), l.getWeight(),
                              l.getGrad(), l.getReduction(), l.getIgnoreIndex(),
                              l.getNumClasses(), true);
      })
      .Case([&](NllLossGradOp l) {
        return classification(l.getInput(), l.getLabels(), l.getWeight(),
                              l.getGrad(), l.getReduction(), l.getIgnoreIndex(),
                              l.getNumClasses(), false);
      })
      .Case<AdamWOp, SgdOp, AdagradOp>(
          [&](Operation *) { return optimizerUpdate(); })
      .Case([&](MatmulOp m) { return matmul(m); })
      .Default(
          [&](Operation *) { return unsupported("no kernel for this op"); });
}

FailureOr<std::string> emitStructured(KernelWriter &writer, Value value,
                                      bool nested) {
  StructuredEmitter emitter{writer, value, nested};
  return emitter.emit();
}

} // namespace kiln::cuda
