//===- TokenData.h - nanoGPT-style token files ------------------*- C++ -*-===//
//
// A flat file of little-endian uint16 or uint32 token ids, cut into random
// windows. The window offsets of a step are a pure function of (seed, step),
// so a resumed run reads exactly the batches an uninterrupted one would.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRAINING_TOKENDATA_H
#define KILN_TRAINING_TOKENDATA_H

#include "kiln/Interpreter/Tensor.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace kiln {

class TokenDataset {
public:
  /// Reads `path` (`bytesPerToken` 2 or 4) and checks that it holds whole
  /// tokens, at least one window of `seq + 1` tokens, and only ids below
  /// `vocabulary` (when nonzero).
  static llvm::Expected<TokenDataset> open(llvm::StringRef path,
                                           unsigned bytesPerToken, int64_t seq,
                                           int64_t vocabulary);

  /// The batch of `step`: `batch` windows of `seq` tokens as int64 [batch,
  /// seq] inputs, and labels that are the same tokens (models that shift
  /// inside, like Hugging Face's) or, with `nextToken`, the tokens one
  /// position later (nanoGPT-style models).
  void batch(uint64_t seed, int64_t step, int64_t batch, int64_t seq,
             bool nextToken, Tensor &inputs, Tensor &labels) const;

  int64_t size() const { return tokens.size(); }

private:
  std::vector<int64_t> tokens;
};

} // namespace kiln

#endif // KILN_TRAINING_TOKENDATA_H
