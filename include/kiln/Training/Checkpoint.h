//===- Checkpoint.h - training checkpoints -----------------------*- C++ -*-===//
//
// A checkpoint is a directory: `model.safetensors` (every parameter under its
// original name), `optimizer.safetensors` (state as "<parameter>.<slot>") and
// `meta.json` (format version, kiln's version, the step, the hashes of the
// model and of the training spec, and a checksum of each tensor file).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRAINING_CHECKPOINT_H
#define KILN_TRAINING_CHECKPOINT_H

#include "kiln/Training/Trainer.h"

#include "llvm/Support/Error.h"

namespace kiln {

/// What a checkpoint must agree with to be resumed.
struct CheckpointIdentity {
  std::string modelHash;
  std::string specHash;
};

/// What a checkpoint holds: every tensor in the model's (logical) shapes.
struct CheckpointContents {
  NamedTensors parameters, state;
  int64_t step = 0;
  uint64_t seed = 0;
};

/// Writes `contents` to `directory`. Everything is written into a sibling
/// directory first and renamed over `directory` only when complete, so an
/// existing checkpoint is never replaced by a partial one.
llvm::Error writeCheckpoint(llvm::StringRef directory,
                            const CheckpointContents &contents,
                            const CheckpointIdentity &identity);

/// Reads `directory`, refusing a checkpoint of another format, model or
/// training spec, one whose files fail their checksums, or one whose
/// tensors differ in names, types or shapes from `expected`'s.
llvm::Expected<CheckpointContents>
readCheckpoint(llvm::StringRef directory, const CheckpointContents &expected,
               const CheckpointIdentity &identity);

/// The trainer's parameters and state as checkpoints hold them: without
/// tensor-core padding, in the model's shapes.
CheckpointContents checkpointContents(Trainer &trainer);

/// Sets the trainer's parameters, state and step from `contents` (padded
/// again where the step stores padding).
void restoreCheckpointContents(Trainer &trainer,
                               const CheckpointContents &contents);

/// A hex digest of `bytes` (xxh3, 64 bits).
std::string digest(llvm::StringRef bytes);

constexpr const char *kKilnVersion = "0.1.0";

} // namespace kiln

#endif // KILN_TRAINING_CHECKPOINT_H
