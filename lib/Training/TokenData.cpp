//===- TokenData.cpp - nanoGPT-style token files --------------------------===//
//
// Loading, validation and stateless window sampling of token files.
//
//===----------------------------------------------------------------------===//

#include "kiln/Training/TokenData.h"
#include "kiln/Support/SplitMix.h"

#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;

namespace kiln {

static Error dataError(StringRef path, const Twine &reason) {
  return createStringError(inconvertibleErrorCode(), path + ": " + reason);
}

Expected<TokenDataset> TokenDataset::open(StringRef path, unsigned bytesPerToken,
                                          int64_t seq, int64_t vocabulary) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
  if (!file)
    return dataError(path, "cannot read: " + file.getError().message());
  StringRef bytes = (*file)->getBuffer();
  if (bytes.size() % bytesPerToken != 0)
    return dataError(path, "holds " + Twine(bytes.size()) +
                               " bytes, not a whole number of " +
                               Twine(8 * bytesPerToken) + "-bit tokens");
  TokenDataset dataset;
  dataset.tokens.resize(bytes.size() / bytesPerToken);
  const auto *data = reinterpret_cast<const unsigned char *>(bytes.data());
  for (size_t i = 0; i < dataset.tokens.size(); ++i) {
    uint64_t token = 0;
    for (unsigned b = 0; b < bytesPerToken; ++b)
      token |= static_cast<uint64_t>(data[i * bytesPerToken + b]) << (8 * b);
    if (vocabulary > 0 && static_cast<int64_t>(token) >= vocabulary)
      return dataError(path, "token " + Twine(token) + " at position " +
                                 Twine(i) +
                                 " is outside the model's vocabulary of " +
                                 Twine(vocabulary));
    dataset.tokens[i] = token;
  }
  if (static_cast<int64_t>(dataset.tokens.size()) < seq + 1)
    return dataError(path, "holds " + Twine(dataset.tokens.size()) +
                               " tokens, fewer than one window of " +
                               Twine(seq + 1));
  return dataset;
}

void TokenDataset::batch(uint64_t seed, int64_t step, int64_t batch,
                         int64_t seq, bool nextToken, Tensor &inputs,
                         Tensor &labels) const {
  inputs = Tensor(DType::I64, {batch, seq});
  labels = Tensor(DType::I64, {batch, seq});
  uint64_t windows = tokens.size() - seq; // offsets leaving room for labels
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t offset =
        splitMix64(splitMix64(seed) ^ static_cast<uint64_t>(step * batch + b)) %
        windows;
    for (int64_t t = 0; t < seq; ++t) {
      inputs.ints()[b * seq + t] = tokens[offset + t];
      labels.ints()[b * seq + t] = tokens[offset + t + (nextToken ? 1 : 0)];
    }
  }
}

} // namespace kiln
