//===- Artifact.h - the compiled step on disk --------------------*- C++
//-*-===//
//
// Reading, verifying and writing `.kiln` artifacts. Shared by the compiler
// and the runtime, so it depends on nothing but FlatBuffers and the C++
// library.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ARTIFACT_ARTIFACT_H
#define KILN_ARTIFACT_ARTIFACT_H

#include "kiln/Artifact/Artifact_generated.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::artifact {

/// Bumped whenever the meaning of a field changes: a runtime refuses any
/// other version.
constexpr uint32_t kFormatVersion = 6;

/// Bytes of one element of `type`.
int64_t elementBytes(ElementType type);
/// Elements of a shape.
int64_t elementCount(const flatbuffers::Vector<int64_t> *shape);
/// The sizes of a shape; a scalar's, which FlatBuffers leaves out (null),
/// has none.
std::vector<int64_t> dimensions(const flatbuffers::Vector<int64_t> *shape);
/// Whether a GEMM with `epilogue` reads its bias vector, and whether it
/// reads or writes its aux matrix.
bool readsBias(Epilogue epilogue);
bool usesAux(Epilogue epilogue);
/// Whether a GEMM with `epilogue` writes a bias gradient to its bias vector.
bool writesBiasGradient(Epilogue epilogue);
/// The elements of the bias vector a GEMM of `m` x `n` with `epilogue` reads
/// or writes (0: none).
int64_t biasLength(Epilogue epilogue, int64_t m, int64_t n);
/// The arena offsets of a library attention's [batch, heads, rows, head_dim]
/// tensors in the order of its strides (query, key, value, output, then the
/// four gradients when backward), and each one's rows (keys for the key
/// and value and their gradients).
std::vector<std::pair<int64_t, int64_t>>
attentionOperands(const LibraryAttention &attention);

/// What an artifact runs, as kiln-compile reports it.
struct Summary {
  size_t operations = 0, gemms = 0;
  /// GEMMs by epilogue: bias, bias and GELU, DGELU, a bias gradient.
  size_t bias = 0, gelu = 0, dgelu = 0, biasGradients = 0;
  /// Kernel launches every step, and those that run only where cuBLASLt
  /// cannot sum a bias gradient.
  size_t launches = 0, fallbacks = 0;
  size_t kernels = 0;
  /// Attention forward and backward passes by cuDNN.
  size_t libraryAttentions = 0;
};
Summary summarize(const ArtifactT &artifact);

/// Checks that `bytes` hold a well-formed artifact of this format version
/// whose every offset lies inside its arena. On failure `error` says why.
const Artifact *verify(const std::vector<uint8_t> &bytes, std::string &error);

/// Reads and verifies `path`; on failure `error` names the file and why.
bool read(const std::string &path, std::vector<uint8_t> &bytes,
          const Artifact *&artifact, std::string &error);

/// Serializes `artifact` to `path`, through a temporary file renamed into
/// place, so that an existing artifact is never left half-written.
bool write(const ArtifactT &artifact, const std::string &path,
           std::string &error);

} // namespace kiln::artifact

#endif // KILN_ARTIFACT_ARTIFACT_H
