//===- Checkpoint.cpp - training checkpoints ------------------------------===//
//
// Writing, verifying and restoring checkpoint directories.
//
//===----------------------------------------------------------------------===//

#include "kiln/Training/Checkpoint.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

using namespace llvm;

namespace kiln {

static constexpr int64_t kFormatVersion = 1;
static const char *const kTensorFiles[] = {"model.safetensors",
                                           "optimizer.safetensors"};

static Error checkpointError(StringRef directory, const Twine &reason) {
  return createStringError(inconvertibleErrorCode(),
                           "checkpoint " + directory + ": " + reason);
}

std::string digest(StringRef bytes) {
  return utohexstr(xxh3_64bits(bytes), /*LowerCase=*/true);
}

static std::string join(StringRef directory, StringRef file) {
  SmallString<256> path(directory);
  sys::path::append(path, file);
  return std::string(path);
}

static Expected<std::string> fileDigest(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
  if (!file)
    return createStringError(file.getError(), "cannot read " + path);
  return digest((*file)->getBuffer());
}

Error writeCheckpoint(StringRef directory, const CheckpointContents &contents,
                      const CheckpointIdentity &identity) {
  std::string partial = (directory + ".partial").str();
  sys::fs::remove_directories(partial);
  if (std::error_code error = sys::fs::create_directories(partial))
    return checkpointError(directory, "cannot create " + partial + ": " +
                                          error.message());
  if (Error error = writeSafetensors(join(partial, kTensorFiles[0]),
                                     contents.parameters, {{"format", "pt"}}))
    return error;
  if (Error error =
          writeSafetensors(join(partial, kTensorFiles[1]), contents.state, {}))
    return error;
  json::Object files;
  for (const char *file : kTensorFiles) {
    Expected<std::string> hash = fileDigest(join(partial, file));
    if (!hash)
      return hash.takeError();
    files[file] = *hash;
  }
  json::Object meta{{"format", "kiln-checkpoint"},
                    {"format_version", kFormatVersion},
                    {"kiln_version", kKilnVersion},
                    {"step", contents.step},
                    {"seed", static_cast<int64_t>(contents.seed)},
                    {"model_hash", identity.modelHash},
                    {"spec_hash", identity.specHash},
                    {"files", std::move(files)}};
  std::string text;
  raw_string_ostream os(text);
  os << formatv("{0:2}", json::Value(std::move(meta))) << "\n";
  os.flush();
  if (Error error = writeFileAtomically(join(partial, "meta.json"), text))
    return error;

  // Swap the complete directory in; the previous checkpoint survives until
  // the new one is in place.
  std::string previous = (directory + ".previous").str();
  sys::fs::remove_directories(previous);
  bool existed = sys::fs::exists(directory);
  if (existed)
    if (std::error_code error = sys::fs::rename(directory, previous))
      return checkpointError(directory, "cannot move the previous checkpoint "
                                        "aside: " + error.message());
  if (std::error_code error = sys::fs::rename(partial, directory)) {
    if (existed)
      sys::fs::rename(previous, directory);
    return checkpointError(directory, "cannot rename the new checkpoint into "
                                      "place: " + error.message());
  }
  if (existed)
    sys::fs::remove_directories(previous);
  return Error::success();
}

/// Checks that `source` holds exactly the tensors of `expected`: the same
/// names, types and shapes.
static Error checkTensors(StringRef directory, StringRef file,
                          const NamedTensors &source,
                          const NamedTensors &expected) {
  if (source.size() != expected.size())
    return checkpointError(directory, file + " holds " + Twine(source.size()) +
                                          " tensors, the model needs " +
                                          Twine(expected.size()));
  for (const auto &[name, tensor] : source) {
    auto it = llvm::find_if(expected, [&](auto &e) { return e.first == name; });
    if (it == expected.end())
      return checkpointError(directory, file + " holds '" + name +
                                            "', which the model does not have");
    if (it->second.getDType() != tensor.getDType() ||
        it->second.getShape() != tensor.getShape())
      return checkpointError(directory, "'" + name + "' in " + file +
                                            " has another type or shape than "
                                            "the model's");
  }
  return Error::success();
}

Expected<CheckpointContents> readCheckpoint(StringRef directory,
                                            const CheckpointContents &expected,
                                            const CheckpointIdentity &identity) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> metaFile =
      MemoryBuffer::getFile(join(directory, "meta.json"));
  if (!metaFile)
    return checkpointError(directory, "cannot read meta.json: " +
                                          metaFile.getError().message());
  Expected<json::Value> meta = json::parse((*metaFile)->getBuffer());
  json::Object *object = meta ? meta->getAsObject() : nullptr;
  if (!object) {
    if (!meta)
      consumeError(meta.takeError());
    return checkpointError(directory, "meta.json is damaged");
  }
  if (object->getString("format") != StringRef("kiln-checkpoint") ||
      object->getInteger("format_version") != kFormatVersion)
    return checkpointError(directory, "is not a kiln checkpoint of format "
                                      "version " + Twine(kFormatVersion));
  if (object->getString("model_hash") != StringRef(identity.modelHash))
    return checkpointError(directory, "was written for another model");
  if (object->getString("spec_hash") != StringRef(identity.specHash))
    return checkpointError(directory, "was written with another training spec "
                                      "(optimizer, hyperparameters, schedule, "
                                      "data or seed)");
  std::optional<int64_t> step = object->getInteger("step");
  json::Object *files = object->getObject("files");
  if (!step || *step < 0 || !files)
    return checkpointError(directory, "meta.json is damaged");
  for (const char *file : kTensorFiles) {
    Expected<std::string> hash = fileDigest(join(directory, file));
    if (!hash)
      return checkpointError(directory, toString(hash.takeError()));
    if (files->getString(file) != StringRef(*hash))
      return checkpointError(directory, Twine(file) +
                                            " is damaged (checksum mismatch)");
  }
  Expected<SafetensorsFile> model = readSafetensors(join(directory, kTensorFiles[0]));
  if (!model)
    return model.takeError();
  Expected<SafetensorsFile> optimizer =
      readSafetensors(join(directory, kTensorFiles[1]));
  if (!optimizer)
    return optimizer.takeError();
  if (Error error = checkTensors(directory, kTensorFiles[0], model->tensors,
                                 expected.parameters))
    return std::move(error);
  if (Error error = checkTensors(directory, kTensorFiles[1], optimizer->tensors,
                                 expected.state))
    return std::move(error);
  CheckpointContents contents;
  contents.parameters = std::move(model->tensors);
  contents.state = std::move(optimizer->tensors);
  contents.step = *step;
  contents.seed = expected.seed;
  return contents;
}

CheckpointContents checkpointContents(Trainer &trainer) {
  CheckpointContents contents;
  for (const std::string &name : trainer.parameterNames())
    contents.parameters.emplace_back(
        name, trainer.logical(name, trainer.parameters()[name]));
  for (const auto &[name, tensor] : trainer.state())
    contents.state.emplace_back(name, trainer.logical(name, tensor));
  contents.step = trainer.completedSteps();
  contents.seed = trainer.spec().seed;
  return contents;
}

void restoreCheckpointContents(Trainer &trainer,
                               const CheckpointContents &contents) {
  for (const auto &[name, tensor] : contents.parameters)
    trainer.parameters()[name] = trainer.stored(name, tensor);
  for (const auto &[name, tensor] : contents.state)
    for (auto &entry : trainer.state())
      if (entry.first == name)
        entry.second = trainer.stored(name, tensor);
  trainer.setCompletedSteps(contents.step);
}

} // namespace kiln
