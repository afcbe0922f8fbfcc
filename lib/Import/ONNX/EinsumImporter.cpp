//===- EinsumImporter.cpp - ONNX Einsum as kiln contractions --------------===//
//
// Einsum becomes the ops a compiler can fuse and map to GEMMs: labels summed
// in one operand only are reduced first, two operands contract as one batched
// kiln.matmul (batch labels, then the labels each side keeps, then the
// contracted ones, flattened), and the result is transposed into the output
// order. More than two operands contract pairwise from the left, keeping the
// labels that later operands or the output still need. An ellipsis stands
// for the same trailing-aligned dimensions in every operand. A label
// repeated in one term takes that operand's diagonal first.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace kiln {

namespace {
/// An operand (or intermediate result) with one label per dimension.
struct Labeled {
  Value value;
  std::string labels;
  ArrayRef<int64_t> shape() const {
    return cast<RankedTensorType>(value.getType()).getShape();
  }
  int64_t size(char label) const { return shape()[labels.find(label)]; }
};

class EinsumBuilder {
public:
  explicit EinsumBuilder(NodeContext &node) : node(node) {}

  /// `value`, whose dimensions `labels` names, with each label that repeats
  /// reduced to its diagonal: the two dimensions moved last, flattened, and
  /// every (n+1)-th element kept.
  FailureOr<Labeled> diagonal(Value value, std::string labels) {
    // Where the first label that repeats is, twice.
    auto repeat = [&]() -> std::optional<std::pair<size_t, size_t>> {
      for (size_t first = 0; first < labels.size(); ++first)
        if (size_t second = labels.find(labels[first], first + 1);
            second != std::string::npos)
          return std::make_pair(first, second);
      return std::nullopt;
    };
    while (std::optional<std::pair<size_t, size_t>> at = repeat()) {
      auto [first, second] = *at;
      char label = labels[first];
      ArrayRef<int64_t> shape =
          cast<RankedTensorType>(value.getType()).getShape();
      int64_t n = shape[first];
      if (shape[second] != n)
        return node.error("Einsum label '")
               << label << "' has sizes " << n << " and " << shape[second]
               << " in one term";
      SmallVector<int64_t> permutation, kept;
      std::string rest;
      for (size_t d = 0; d < labels.size(); ++d)
        if (d != first && d != second) {
          permutation.push_back(d);
          kept.push_back(shape[d]);
          rest += labels[d];
        }
      permutation.append(
          {static_cast<int64_t>(first), static_cast<int64_t>(second)});
      FailureOr<Value> moved = node.transpose(value, permutation);
      if (failed(moved))
        return failure();
      SmallVector<int64_t> flat(kept);
      flat.push_back(n * n);
      FailureOr<Value> square = node.reshape(*moved, flat);
      if (failed(square))
        return failure();
      SmallVector<int64_t> start(flat.size(), 0), stride(flat.size(), 1);
      stride.back() = n + 1;
      SmallVector<int64_t> diagonalShape(kept);
      diagonalShape.push_back(n);
      FailureOr<Value> taken =
          node.slice(*square, start, stride, diagonalShape);
      if (failed(taken))
        return failure();
      value = *taken;
      labels = rest + label;
    }
    return Labeled{value, labels};
  }

  /// Sums `operand` over every label not in `keep`.
  FailureOr<Labeled> sumOut(Labeled operand, StringRef keep) {
    SmallVector<int64_t> axes;
    std::string kept;
    for (auto [i, label] : llvm::enumerate(operand.labels)) {
      if (keep.contains(label))
        kept += label;
      else
        axes.push_back(i);
    }
    if (axes.empty())
      return operand;
    FailureOr<Value> sum = node.create1<ReduceSumOp>(
        {operand.value},
        {node.builder.getNamedAttr("axes",
                                   node.builder.getDenseI64ArrayAttr(axes))});
    if (failed(sum))
      return failure();
    return Labeled{*sum, kept};
  }

  /// Transposes `operand` so that its labels read `order`.
  FailureOr<Labeled> permute(Labeled operand, StringRef order) {
    if (operand.labels == order)
      return operand;
    SmallVector<int64_t> permutation;
    for (char label : order)
      permutation.push_back(operand.labels.find(label));
    FailureOr<Value> transposed = node.transpose(operand.value, permutation);
    if (failed(transposed))
      return failure();
    return Labeled{*transposed, order.str()};
  }

  /// Contracts two operands into one with labels `result` (a subset of
  /// theirs).
  FailureOr<Labeled> contract(Labeled a, Labeled b, StringRef result) {
    std::string batch, kept, keptB, contracted;
    for (char label : a.labels) {
      bool inB = b.labels.find(label) != std::string::npos;
      bool inResult = result.contains(label);
      if (inB && inResult)
        batch += label;
      else if (inB)
        contracted += label;
      else
        kept += label;
    }
    for (char label : b.labels)
      if (a.labels.find(label) == std::string::npos)
        keptB += label;
    // Labels that only one side has and the result drops are summed first.
    FailureOr<Labeled> lhs = sumOut(a, (batch + kept + contracted));
    FailureOr<Labeled> rhs = sumOut(b, (batch + keptB + contracted));
    if (failed(lhs) || failed(rhs))
      return failure();
    llvm::erase_if(kept, [&](char l) { return !result.contains(l); });
    llvm::erase_if(keptB, [&](char l) { return !result.contains(l); });
    lhs = permute(*lhs, batch + kept + contracted);
    rhs = permute(*rhs, batch + contracted + keptB);
    if (failed(lhs) || failed(rhs))
      return failure();

    auto sizes = [](const Labeled &x, StringRef labels) {
      SmallVector<int64_t> result;
      for (char label : labels)
        result.push_back(x.size(label));
      return result;
    };
    for (char label : contracted)
      if (lhs->size(label) != rhs->size(label))
        return node.error("Einsum label '")
               << label << "' has sizes " << lhs->size(label) << " and "
               << rhs->size(label);
    SmallVector<int64_t> lhsShape = sizes(*lhs, batch);
    SmallVector<int64_t> rhsShape = sizes(*rhs, batch);
    int64_t m = product(sizes(*lhs, kept));
    int64_t n = product(sizes(*rhs, keptB));
    int64_t k = product(sizes(*lhs, contracted));
    lhsShape.append({m, k});
    rhsShape.append({k, n});
    FailureOr<Value> left = node.reshape(lhs->value, lhsShape);
    FailureOr<Value> right = node.reshape(rhs->value, rhsShape);
    if (failed(left) || failed(right))
      return failure();
    FailureOr<Value> product = node.create1<MatmulOp>({*left, *right});
    if (failed(product))
      return failure();
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(product->getType()).getShape().drop_back(2));
    llvm::append_range(shape, sizes(*lhs, kept));
    llvm::append_range(shape, sizes(*rhs, keptB));
    FailureOr<Value> unflattened = node.reshape(*product, shape);
    if (failed(unflattened))
      return failure();
    return permute(Labeled{*unflattened, batch + kept + keptB}, result);
  }

private:
  NodeContext &node;
};
} // namespace

/// Replaces "..." in `term` by `count` labels from `ellipsis` (the last ones,
/// since ellipsis dimensions align at the right).
static std::string expandEllipsis(StringRef term, StringRef ellipsis,
                                  size_t count) {
  size_t at = term.find("...");
  if (at == StringRef::npos)
    return term.str();
  return (term.take_front(at) + ellipsis.take_back(count) +
          term.drop_front(at + 3))
      .str();
}

static LogicalResult importEinsum(NodeContext &node) {
  FailureOr<std::string> equationAttr = node.stringAttr("equation", std::nullopt);
  if (failed(equationAttr) ||
      failed(node.requireInputs(std::max(node.node.input_size(), 1))))
    return failure();
  std::string equation;
  for (char c : *equationAttr)
    if (c != ' ')
      equation += c;
  auto [inputsText, outputText] = StringRef(equation).split("->");
  bool explicitOutput = StringRef(equation).contains("->");
  SmallVector<StringRef> terms;
  inputsText.split(terms, ',');
  if (static_cast<int>(terms.size()) != node.node.input_size())
    return node.error("equation '") << *equationAttr << "' has " << terms.size()
                                    << " operands, the node "
                                    << node.node.input_size();

  // Digits cannot be ONNX labels, so they name the ellipsis dimensions.
  size_t ellipsisRank = 0;
  SmallVector<Labeled> operands;
  for (auto [i, term] : llvm::enumerate(terms)) {
    size_t letters = llvm::count_if(term, llvm::isAlpha);
    int64_t rank = node.inputRank(i);
    if (term.contains("...") && static_cast<int64_t>(letters) <= rank)
      ellipsisRank = std::max<size_t>(ellipsisRank, rank - letters);
  }
  std::string ellipsis;
  for (size_t i = 0; i < ellipsisRank; ++i)
    ellipsis += static_cast<char>('0' + i);
  EinsumBuilder builder(node);
  // Every term's labels, as written (before diagonals).
  std::string all;
  for (auto [i, term] : llvm::enumerate(terms)) {
    int64_t rank = node.inputRank(i);
    size_t letters = llvm::count_if(term, llvm::isAlpha);
    std::string labels = expandEllipsis(term, ellipsis, rank - letters);
    if (static_cast<int64_t>(labels.size()) != rank ||
        !llvm::all_of(labels, [](char c) { return llvm::isAlnum(c); }))
      return node.error("term '") << term << "' does not fit operand " << i
                                  << " of rank " << rank;
    all += labels;
    FailureOr<Labeled> operand = builder.diagonal(node.input(i), labels);
    if (failed(operand))
      return failure();
    operands.push_back(*operand);
  }

  std::string output;
  if (explicitOutput) {
    output = expandEllipsis(outputText, ellipsis, ellipsis.size());
  } else {
    // Implicit output: the ellipsis, then the labels written once, in order.
    output = ellipsis;
    std::string once;
    for (char c : all)
      if (llvm::isAlpha(c) && llvm::count(all, c) == 1)
        once += c;
    llvm::sort(once);
    output += once;
  }
  for (char label : output)
    if (!llvm::any_of(operands, [&](const Labeled &operand) {
          return operand.labels.find(label) != std::string::npos;
        }))
      return node.error("output label '") << label << "' is in no operand";

  Labeled acc = operands.front();
  for (size_t i = 1; i < operands.size(); ++i) {
    // Keep what the output or a later operand still needs.
    std::string needed = output;
    for (size_t j = i + 1; j < operands.size(); ++j)
      needed += operands[j].labels;
    std::string keep;
    for (char label : acc.labels + operands[i].labels)
      if (StringRef(needed).contains(label) && !StringRef(keep).contains(label))
        keep += label;
    FailureOr<Labeled> next = builder.contract(acc, operands[i], keep);
    if (failed(next))
      return failure();
    acc = *next;
  }
  FailureOr<Labeled> summed = builder.sumOut(acc, output);
  if (failed(summed))
    return failure();
  FailureOr<Labeled> result = builder.permute(*summed, output);
  if (failed(result))
    return failure();
  node.setOutput(0, result->value);
  return success();
}

void registerEinsumImporter(OpImporterTable &table) {
  table.add("Einsum", importEinsum);
}

} // namespace kiln
