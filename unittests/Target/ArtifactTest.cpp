//===- ArtifactTest.cpp - the artifact verifier ---------------------------===//
//
// A runtime must refuse an artifact it cannot trust before it allocates or
// launches anything: truncated or corrupted files, other format versions,
// offsets outside the arena.
//
//===----------------------------------------------------------------------===//

#include "kiln/Artifact/Artifact.h"

#include <gtest/gtest.h>

using namespace kiln::artifact;

namespace {

/// A small valid artifact: one kernel launch and one GEMM in a 4 KiB arena.
ArtifactT sample() {
  ArtifactT a;
  a.format_version = kFormatVersion;
  a.kiln_version = "test";
  a.arena_bytes = 4096;
  a.kernel_names = {"kiln_kernel_0"};
  a.ptx = "// ptx";
  auto tensor = std::make_unique<TensorT>();
  tensor->name = "loss";
  tensor->role = Role::Output;
  tensor->offset = 0;
  a.tensors.push_back(std::move(tensor));
  auto launch = std::make_unique<OperationT>();
  launch->kernel = std::make_unique<KernelLaunchT>();
  launch->kernel->grid = launch->kernel->block = 1;
  launch->kernel->args = {0, 256};
  a.operations.push_back(std::move(launch));
  auto gemm = std::make_unique<OperationT>();
  gemm->gemm = std::make_unique<GemmT>();
  gemm->gemm->batch = gemm->gemm->m = gemm->gemm->n = gemm->gemm->k = 8;
  gemm->gemm->stride_a = gemm->gemm->stride_b = gemm->gemm->stride_d = 64;
  gemm->gemm->b = 1024;
  gemm->gemm->d = 2048;
  gemm->gemm->output_type = ElementType::F32;
  gemm->gemm->input_type = ElementType::BF16;
  a.operations.push_back(std::move(gemm));
  return a;
}

std::vector<uint8_t> pack(const ArtifactT &a) {
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(Artifact::Pack(builder, &a), ArtifactIdentifier());
  return {builder.GetBufferPointer(),
          builder.GetBufferPointer() + builder.GetSize()};
}

TEST(ArtifactTest, AcceptsAValidArtifact) {
  std::string error;
  EXPECT_NE(verify(pack(sample()), error), nullptr) << error;
}

TEST(ArtifactTest, RefusesTruncatedAndForeignFiles) {
  std::vector<uint8_t> bytes = pack(sample());
  std::string error;
  std::vector<uint8_t> truncated(bytes.begin(),
                                 bytes.begin() + bytes.size() / 2);
  EXPECT_EQ(verify(truncated, error), nullptr);
  EXPECT_NE(error.find("truncated or corrupted"), std::string::npos) << error;
  std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o', ' ',
                               'w', 'o', 'r', 'l', 'd'};
  EXPECT_EQ(verify(text, error), nullptr);
  EXPECT_NE(error.find("not a kiln artifact"), std::string::npos) << error;
}

TEST(ArtifactTest, RefusesAnotherFormatVersion) {
  ArtifactT a = sample();
  a.format_version = kFormatVersion + 1;
  std::string error;
  EXPECT_EQ(verify(pack(a), error), nullptr);
  EXPECT_NE(error.find("format version"), std::string::npos) << error;
}

TEST(ArtifactTest, RefusesAnArtifactWithoutTensors) {
  ArtifactT a = sample();
  a.tensors.clear();
  std::string error;
  EXPECT_EQ(verify(pack(a), error), nullptr);
  EXPECT_NE(error.find("no tensor table"), std::string::npos) << error;
}

TEST(ArtifactTest, RefusesOffsetsOutsideTheArena) {
  std::string error;
  ArtifactT a = sample();
  a.operations[0]->kernel->args.push_back(4097);
  EXPECT_EQ(verify(pack(a), error), nullptr);
  EXPECT_NE(error.find("outside the arena"), std::string::npos) << error;

  ArtifactT b = sample();
  b.operations[1]->gemm->d = 4000; // 8 x 8 x 8 f32 do not fit
  EXPECT_EQ(verify(pack(b), error), nullptr);
  EXPECT_NE(error.find("GEMM operand"), std::string::npos) << error;

  ArtifactT c = sample();
  c.operations[0]->kernel->kernel = 3;
  EXPECT_EQ(verify(pack(c), error), nullptr);

  ArtifactT added = sample();
  added.operations[1]->gemm->c = 4000; // C, laid out as D, does not fit
  EXPECT_EQ(verify(pack(added), error), nullptr);
  EXPECT_NE(error.find("GEMM operand"), std::string::npos) << error;

  ArtifactT gradient = sample();
  gradient.operations[1]->gemm->epilogue = Epilogue::BiasGradA;
  gradient.operations[1]->gemm->bias = 4096 - 16; // 8 f32 do not fit
  EXPECT_EQ(verify(pack(gradient), error), nullptr);
  EXPECT_NE(error.find("GEMM operand"), std::string::npos) << error;
}

// A batched launch's arguments are equal parts, one per batch.
TEST(ArtifactTest, RefusesBatchesThatDoNotDivideTheArguments) {
  std::string error;
  ArtifactT a = sample();
  a.operations[0]->kernel->batches = 2;
  EXPECT_NE(verify(pack(a), error), nullptr) << error;
  for (uint32_t batches : {0u, 3u}) {
    ArtifactT b = sample();
    b.operations[0]->kernel->batches = batches;
    EXPECT_EQ(verify(pack(b), error), nullptr);
    EXPECT_NE(error.find("kernel launch is malformed"), std::string::npos)
        << error;
  }
}

/// The sample with a launch after its GEMM that sums a bias gradient where
/// the GEMM does not.
ArtifactT withFallback() {
  ArtifactT a = sample();
  a.operations[1]->gemm->epilogue = Epilogue::BiasGradB;
  a.operations[1]->gemm->bias = 3072;
  auto fallback = std::make_unique<OperationT>();
  fallback->kernel = std::make_unique<KernelLaunchT>(*a.operations[0]->kernel);
  fallback->epilogue_fallback_of = 1;
  a.operations.push_back(std::move(fallback));
  return a;
}

TEST(ArtifactTest, FallbacksFollowTheirGemm) {
  std::string error;
  EXPECT_NE(verify(pack(withFallback()), error), nullptr) << error;

  ArtifactT ahead = withFallback();
  ahead.operations[2]->epilogue_fallback_of = 2; // itself, not a GEMM before
  EXPECT_EQ(verify(pack(ahead), error), nullptr);
  EXPECT_NE(error.find("fallback"), std::string::npos) << error;

  ArtifactT launch = withFallback();
  launch.operations[2]->epilogue_fallback_of = 0; // a kernel launch
  EXPECT_EQ(verify(pack(launch), error), nullptr);

  ArtifactT plain = withFallback();
  plain.operations[1]->gemm->epilogue =
      Epilogue::Bias; // nothing to stand in for
  EXPECT_EQ(verify(pack(plain), error), nullptr);
}

/// The sample with a cuDNN attention forward pass: [1, 2, 8, 16] bf16
/// tensors, contiguous, one after another.
ArtifactT withAttention() {
  ArtifactT a = sample();
  auto attention = std::make_unique<LibraryAttentionT>();
  attention->batch = 1;
  attention->heads = 2;
  attention->rows = attention->keys = 8;
  attention->head_dim = 16;
  attention->element_type = ElementType::BF16;
  attention->query = 0;
  attention->key = 512;
  attention->value = 1024;
  attention->output = 1536;
  attention->logsumexp = 2048;
  for (int tensor = 0; tensor < 4; ++tensor)
    attention->strides.insert(attention->strides.end(), {256, 128, 16, 1});
  auto operation = std::make_unique<OperationT>();
  operation->attention = std::move(attention);
  a.operations.push_back(std::move(operation));
  return a;
}

TEST(ArtifactTest, ChecksAttentionOperands) {
  std::string error;
  EXPECT_NE(verify(pack(withAttention()), error), nullptr) << error;

  ArtifactT outside = withAttention();
  outside.operations[2]->attention->strides[8] = 1024; // value's batch stride
  outside.operations[2]->attention->strides[10] = 512; // and its rows'
  EXPECT_EQ(verify(pack(outside), error), nullptr);
  EXPECT_NE(error.find("attention operand lies outside"), std::string::npos)
      << error;

  ArtifactT backward = withAttention();
  backward.operations[2]->attention->backward = true; // gradients missing
  EXPECT_EQ(verify(pack(backward), error), nullptr);
  EXPECT_NE(error.find("lacks strides"), std::string::npos) << error;

  ArtifactT statistics = withAttention();
  statistics.operations[2]->attention->logsumexp = 4090;
  EXPECT_EQ(verify(pack(statistics), error), nullptr);
  EXPECT_NE(error.find("log-sum-exp"), std::string::npos) << error;
}

} // namespace
