//===- Artifact.cpp - reading, verifying and writing .kiln files ----------===//

#include "kiln/Artifact/Artifact.h"

#include <cstdio>
#include <fstream>
#include <iterator>

namespace kiln::artifact {

int64_t elementBytes(ElementType type) {
  switch (type) {
  case ElementType::F64:
  case ElementType::I64:
    return 8;
  case ElementType::F32:
  case ElementType::I32:
    return 4;
  case ElementType::F16:
  case ElementType::BF16:
  case ElementType::I16:
    return 2;
  default:
    return 1;
  }
}

bool readsBias(Epilogue epilogue) {
  return epilogue == Epilogue::Bias || epilogue == Epilogue::GeluBias ||
         epilogue == Epilogue::GeluAuxBias;
}

bool usesAux(Epilogue epilogue) {
  return epilogue == Epilogue::DGelu || epilogue == Epilogue::GeluAuxBias;
}

bool writesBiasGradient(Epilogue epilogue) {
  return epilogue == Epilogue::BiasGradA || epilogue == Epilogue::BiasGradB;
}

Summary summarize(const ArtifactT &artifact) {
  Summary summary;
  summary.operations = artifact.operations.size();
  summary.kernels = artifact.kernel_names.size();
  for (const auto &op : artifact.operations) {
    summary.fallbacks += op->epilogue_fallback_of >= 0;
    summary.libraryAttentions += op->attention != nullptr;
    if (!op->gemm)
      continue;
    Epilogue epilogue = op->gemm->epilogue;
    ++summary.gemms;
    summary.bias += epilogue == Epilogue::Bias;
    summary.gelu +=
        epilogue == Epilogue::GeluBias || epilogue == Epilogue::GeluAuxBias;
    summary.dgelu += epilogue == Epilogue::DGelu;
    summary.biasGradients += writesBiasGradient(epilogue);
  }
  summary.launches = summary.operations - summary.gemms - summary.fallbacks -
                     summary.libraryAttentions;
  return summary;
}

int64_t biasLength(Epilogue epilogue, int64_t m, int64_t n) {
  if (epilogue == Epilogue::BiasGradA)
    return m;
  return readsBias(epilogue) || epilogue == Epilogue::BiasGradB ? n : 0;
}

std::vector<std::pair<int64_t, int64_t>>
attentionOperands(const LibraryAttention &a) {
  std::vector<std::pair<int64_t, int64_t>> operands = {{a.query(), a.rows()},
                                                       {a.key(), a.keys()},
                                                       {a.value(), a.keys()},
                                                       {a.output(), a.rows()}};
  if (a.backward())
    operands.insert(operands.end(), {{a.output_grad(), a.rows()},
                                     {a.query_grad(), a.rows()},
                                     {a.key_grad(), a.keys()},
                                     {a.value_grad(), a.keys()}});
  return operands;
}

int64_t elementCount(const flatbuffers::Vector<int64_t> *shape) {
  int64_t count = 1;
  if (shape)
    for (int64_t size : *shape)
      count *= size;
  return count;
}

std::vector<int64_t> dimensions(const flatbuffers::Vector<int64_t> *shape) {
  if (!shape)
    return {};
  return std::vector<int64_t>(shape->begin(), shape->end());
}

namespace {
/// Semantic checks after the structural ones of the FlatBuffers verifier.
class Checker {
public:
  Checker(const Artifact &artifact, std::string &error)
      : artifact(artifact), error(error), arena(artifact.arena_bytes()) {}

  bool run() {
    if (artifact.format_version() != kFormatVersion)
      return fail(
          "it is format version " + std::to_string(artifact.format_version()) +
          ", this kiln reads " + std::to_string(kFormatVersion) + " (kiln " +
          (artifact.kiln_version() ? artifact.kiln_version()->str() : "?") +
          " wrote it): compile the model again");
    if (arena < 0)
      return fail("its arena size is negative");
    if (!artifact.tensors())
      return fail("it has no tensor table");
    for (const Tensor *tensor : *artifact.tensors()) {
      int64_t count = elementCount(tensor->shape());
      if (!tensor->name() || count < 0 ||
          !inArena(tensor->offset(),
                   count * elementBytes(tensor->element_type())))
        return fail(
            "tensor '" +
            (tensor->name() ? tensor->name()->str() : std::string("?")) +
            "' lies outside the arena");
      if (tensor->data() && tensor->data()->size() &&
          static_cast<int64_t>(tensor->data()->size()) !=
              count * elementBytes(tensor->element_type()))
        return fail("the initial value of '" + tensor->name()->str() +
                    "' has the wrong size");
    }
    if (artifact.constants())
      for (const Constant *constant : *artifact.constants())
        if (!constant->data() ||
            !inArena(constant->offset(), constant->data()->size()))
          return fail("a constant lies outside the arena");
    uint32_t kernels =
        artifact.kernel_names() ? artifact.kernel_names()->size() : 0;
    if (artifact.operations())
      for (uint32_t i = 0; i < artifact.operations()->size(); ++i) {
        const Operation *operation = artifact.operations()->Get(i);
        if (!checkFallback(*operation, i))
          return false;
        if (const KernelLaunch *launch = operation->kernel()) {
          uint32_t arguments = launch->args() ? launch->args()->size() : 0;
          if (launch->kernel() >= kernels || launch->grid() == 0 ||
              launch->block() == 0 || launch->block() > 1024 ||
              launch->batches() == 0 || launch->batches() > 65535 ||
              arguments % launch->batches() != 0)
            return fail("a kernel launch is malformed");
          if (launch->args())
            for (int64_t offset : *launch->args())
              if (!inArena(offset, 0))
                return fail("a kernel argument lies outside the arena");
        } else if (const Gemm *gemm = operation->gemm()) {
          if (!checkGemm(*gemm))
            return false;
        } else if (const LibraryAttention *attention = operation->attention()) {
          if (!checkAttention(*attention))
            return false;
        } else {
          return fail("an operation is neither a kernel, a GEMM nor an "
                      "attention");
        }
      }
    if (artifact.checks())
      for (const IndexCheck *check : *artifact.checks())
        if (!inArena(check->offset(), 4) || !artifact.operations() ||
            check->operation() >= artifact.operations()->size())
          return fail("an index check lies outside the arena");
    if (kernels && (!artifact.cubins() || artifact.cubins()->size() == 0) &&
        (!artifact.ptx() || artifact.ptx()->size() == 0))
      return fail("it holds no compiled kernels (neither cubins nor PTX)");
    return true;
  }

private:
  bool fail(const std::string &why) {
    error = why;
    return false;
  }
  bool inArena(int64_t offset, int64_t bytes) const {
    return offset >= 0 && bytes >= 0 && offset <= arena &&
           bytes <= arena - offset;
  }
  /// A fallback launch follows a GEMM whose epilogue it stands in for.
  bool checkFallback(const Operation &operation, int64_t index) {
    int64_t of = operation.epilogue_fallback_of();
    if (of < 0)
      return true;
    const Gemm *gemm =
        of < index ? artifact.operations()->Get(of)->gemm() : nullptr;
    if (!operation.kernel() || !gemm || !writesBiasGradient(gemm->epilogue()))
      return fail("a fallback launch does not follow a GEMM with a bias "
                  "gradient epilogue");
    return true;
  }
  bool checkGemm(const Gemm &g) {
    if (g.batch() < 1 || g.m() < 1 || g.n() < 1 || g.k() < 1 ||
        g.stride_a() < 0 || g.stride_b() < 0 || g.stride_d() < 0)
      return fail("a GEMM has a non-positive dimension");
    int64_t in = elementBytes(g.input_type()),
            out = elementBytes(g.output_type());
    auto span = [&](int64_t stride, int64_t matrix) {
      return (g.batch() - 1) * stride + matrix;
    };
    if (!inArena(g.a(), span(g.stride_a(), g.m() * g.k()) * in) ||
        !inArena(g.b(), span(g.stride_b(), g.k() * g.n()) * in) ||
        !inArena(g.d(), span(g.stride_d(), g.m() * g.n()) * out) ||
        !inArena(g.bias(), biasLength(g.epilogue(), g.m(), g.n()) * out) ||
        (usesAux(g.epilogue()) &&
         !inArena(g.aux(), span(g.stride_d(), g.m() * g.n()) * out)) ||
        (g.c() >= 0 &&
         !inArena(g.c(), span(g.stride_d(), g.m() * g.n()) * out)))
      return fail("a GEMM operand lies outside the arena");
    return true;
  }

  bool checkAttention(const LibraryAttention &a) {
    std::vector<std::pair<int64_t, int64_t>> operands = attentionOperands(a);
    if (a.batch() < 1 || a.heads() < 1 || a.rows() < 1 || a.keys() < 1 ||
        a.head_dim() < 1 || !a.strides() ||
        a.strides()->size() != 4 * operands.size())
      return fail("an attention has a non-positive dimension or lacks "
                  "strides");
    int64_t width = elementBytes(a.element_type());
    for (size_t t = 0; t < operands.size(); ++t) {
      auto [offset, rows] = operands[t];
      int64_t sizes[4] = {a.batch(), a.heads(), rows, a.head_dim()};
      int64_t last = 0;
      for (int d = 0; d < 4; ++d) {
        int64_t stride = a.strides()->Get(4 * t + d);
        if (stride < 0)
          return fail("an attention has a negative stride");
        last += (sizes[d] - 1) * stride;
      }
      if (!inArena(offset, (last + 1) * width))
        return fail("an attention operand lies outside the arena");
    }
    if (!inArena(a.logsumexp(), a.batch() * a.heads() * a.rows() * 4))
      return fail("an attention's log-sum-exp lies outside the arena");
    return true;
  }

  const Artifact &artifact;
  std::string &error;
  int64_t arena;
};
} // namespace

const Artifact *verify(const std::vector<uint8_t> &bytes, std::string &error) {
  if (bytes.size() < 8 || !ArtifactBufferHasIdentifier(bytes.data())) {
    error = "it is not a kiln artifact (no 'KILN' identifier)";
    return nullptr;
  }
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), /*max_depth=*/64,
                                 /*max_tables=*/100000000);
  if (!VerifyArtifactBuffer(verifier)) {
    error = "it is truncated or corrupted (FlatBuffers verification failed)";
    return nullptr;
  }
  const Artifact *artifact = GetArtifact(bytes.data());
  if (!Checker(*artifact, error).run())
    return nullptr;
  return artifact;
}

bool read(const std::string &path, std::vector<uint8_t> &bytes,
          const Artifact *&artifact, std::string &error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    error = "cannot open '" + path + "'";
    return false;
  }
  bytes.assign(std::istreambuf_iterator<char>(file),
               std::istreambuf_iterator<char>());
  artifact = verify(bytes, error);
  if (!artifact)
    error = "'" + path + "' is refused: " + error;
  return artifact != nullptr;
}

bool write(const ArtifactT &artifact, const std::string &path,
           std::string &error) {
  flatbuffers::FlatBufferBuilder builder(1 << 20);
  builder.Finish(Artifact::Pack(builder, &artifact), ArtifactIdentifier());
  std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char *>(builder.GetBufferPointer()),
               builder.GetSize());
    if (!file.flush()) {
      error = "cannot write '" + temporary + "'";
      std::remove(temporary.c_str());
      return false;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot rename '" + temporary + "' to '" + path + "'";
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

} // namespace kiln::artifact
