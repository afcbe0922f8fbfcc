//===- UntiedCopies.cpp - trained parameters that hold one weight twice ---===//
//
// A weight that PyTorch ties (an embedding and the output projection) is
// one parameter there, but an exporter may write it twice: torch.onnx's
// constant folding turns its transpose into an initializer of its own, the
// dynamo exporter copies it. kiln trains what the graph says, two
// parameters, which then drift apart; this says so. Only matrices and
// larger, not constant, are compared: a copy of random values is no
// coincidence, while equal norm weights or zero biases are.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"

#include "StoredBytes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;

namespace kiln {

namespace {
struct Candidate {
  ParameterOp op;
  ArrayRef<char> bytes;
  ArrayRef<int64_t> shape;
  unsigned width;
};
} // namespace

/// `c`'s bytes read as its transpose (rank 2).
static std::vector<char> transposed(const Candidate &c) {
  int64_t rows = c.shape[0], columns = c.shape[1];
  std::vector<char> result(c.bytes.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t col = 0; col < columns; ++col)
      std::memcpy(&result[(col * rows + r) * c.width],
                  &c.bytes[(r * columns + col) * c.width], c.width);
  return result;
}

static uint64_t hashOf(ArrayRef<char> bytes) {
  return llvm::xxh3_64bits(ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
}

void warnAboutUntiedCopies(ArrayRef<ParameterOp> parameters) {
  std::vector<Candidate> candidates;
  llvm::StringSet<> seen;
  for (ParameterOp op : parameters) {
    auto type = cast<ShapedType>(op.getResult().getType());
    std::optional<ElementsAttr> value = op.getInitialValue();
    if (!value || type.getRank() < 2 || !seen.insert(op.getName()).second)
      continue;
    // A padded parameter's value has its logical shape.
    auto valueType = cast<ShapedType>(value->getType());
    Candidate c{op, storedBytes(*value), valueType.getShape(), 0};
    if (c.bytes.empty() || valueType.getNumElements() < 2)
      continue;
    c.width = c.bytes.size() / valueType.getNumElements();
    if (!holdsOneValue(c.bytes, c.width))
      candidates.push_back(c);
  }
  llvm::DenseMap<uint64_t, SmallVector<size_t>> byHash;
  for (auto [i, c] : llvm::enumerate(candidates))
    byHash[hashOf(c.bytes)].push_back(i);
  // The earlier of two equal parameters is the original, the later the copy.
  auto findEarlier = [&](size_t i, ArrayRef<char> bytes,
                         ArrayRef<int64_t> shape) -> const Candidate * {
    for (size_t j : byHash.lookup(hashOf(bytes)))
      if (j < i && candidates[j].width == candidates[i].width &&
          candidates[j].shape == shape && candidates[j].bytes == bytes)
        return &candidates[j];
    return nullptr;
  };
  for (size_t i = 0; i < candidates.size(); ++i) {
    Candidate &c = candidates[i];
    bool transpose = false;
    const Candidate *original = findEarlier(i, c.bytes, c.shape);
    std::vector<char> flipped;
    if (!original && c.shape.size() == 2) {
      flipped = transposed(c);
      int64_t swapped[] = {c.shape[1], c.shape[0]};
      original = findEarlier(i, flipped, swapped);
      transpose = true;
    }
    if (!original)
      continue;
    ParameterOp copy = c.op, first = original->op;
    copy.emitWarning() << "parameter '" << copy.getName() << "' holds exactly "
                       << (transpose ? "the transpose of" : "the values of")
                       << " '" << first.getName()
                       << "', and kiln trains the two apart: if they are one "
                          "tied weight in PyTorch, the exporter wrote it twice "
                          "(torch.onnx.export's constant folding writes a "
                          "weight's transpose as an initializer of its own: "
                          "export with do_constant_folding=False)";
  }
}

} // namespace kiln
