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

Error saveCheckpoint(StringRef directory, Trainer &trainer,
                     const CheckpointIdentity &identity) {
  std::string partial = (directory + ".partial").str();
  sys::fs::remove_directories(partial);
  if (std::error_code error = sys::fs::create_directories(partial))
    return checkpointError(directory, "cannot create " + partial + ": " +
                                          error.message());
  // Without tensor-core padding: a checkpoint holds the model's shapes.
  NamedTensors parameters, state;
  for (const std::string &name : trainer.parameterNames())
    parameters.emplace_back(name,
                            trainer.logical(name, trainer.parameters()[name]));
  for (const auto &[name, tensor] : trainer.state())
    state.emplace_back(name, trainer.logical(name, tensor));
  if (Error error = writeSafetensors(join(partial, kTensorFiles[0]),
                                     parameters, {{"format", "pt"}}))
    return error;
  if (Error error = writeSafetensors(join(partial, kTensorFiles[1]), state, {}))
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
                    {"step", trainer.completedSteps()},
                    {"seed", static_cast<int64_t>(trainer.spec().seed)},
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

/// Replaces each tensor of `target` by the one of the same name in `source`,
/// which must have exactly the same names, types and shapes.
template <typename Lookup>
static Error restore(StringRef directory, StringRef file,
                     const NamedTensors &source, ArrayRef<std::string> names,
                     const Trainer &trainer, Lookup lookup) {
  if (source.size() != names.size())
    return checkpointError(directory, file + " holds " + Twine(source.size()) +
                                          " tensors, the model needs " +
                                          Twine(names.size()));
  for (const auto &[name, tensor] : source) {
    Tensor *target = lookup(name);
    if (!target)
      return checkpointError(directory, file + " holds '" + name +
                                            "', which the model does not have");
    Tensor expected = trainer.logical(name, *target);
    if (expected.getDType() != tensor.getDType() ||
        expected.getShape() != tensor.getShape())
      return checkpointError(directory, "'" + name + "' in " + file +
                                            " has another type or shape than "
                                            "the model's");
  }
  for (const auto &[name, tensor] : source)
    *lookup(name) = trainer.stored(name, tensor);
  return Error::success();
}

Error loadCheckpoint(StringRef directory, Trainer &trainer,
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
  if (Error error = restore(directory, kTensorFiles[0], model->tensors,
                            trainer.parameterNames(), trainer,
                            [&](StringRef name) {
                              auto it = trainer.parameters().find(name);
                              return it == trainer.parameters().end()
                                         ? nullptr
                                         : &it->second;
                            }))
    return error;
  std::vector<std::string> stateNames;
  for (const auto &entry : trainer.state())
    stateNames.push_back(entry.first);
  if (Error error = restore(directory, kTensorFiles[1], optimizer->tensors,
                            stateNames, trainer,
                            [&](StringRef name) -> Tensor * {
                              for (auto &entry : trainer.state())
                                if (entry.first == name)
                                  return &entry.second;
                              return nullptr;
                            }))
    return error;
  trainer.setCompletedSteps(*step);
  return Error::success();
}

} // namespace kiln
