//===- ProfileTest.cpp - what kiln-run --profile reports ------------------===//
//
// The profile's arithmetic needs no GPU: the bytes and operations the
// compiler records for every operation of a step, and the report that
// groups timed operations by kernel and compares them with the ceilings.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/Profile.h"

#include "ExampleStep.h"

#include "kiln/Artifact/Artifact.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Target/CUDATarget.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

const artifact::Artifact &unpack(const artifact::ArtifactT &a,
                                 flatbuffers::FlatBufferBuilder &builder) {
  builder.Finish(artifact::Artifact::Pack(builder, &a),
                 artifact::ArtifactIdentifier());
  return *artifact::GetArtifact(builder.GetBufferPointer());
}

std::unique_ptr<artifact::OperationT>
launch(unsigned kernel, int64_t bytes,
       std::string origin = "kiln.fusion at loc(\"/ln\")") {
  auto operation = std::make_unique<artifact::OperationT>();
  operation->kernel = std::make_unique<artifact::KernelLaunchT>();
  operation->kernel->kernel = kernel;
  operation->origin = std::move(origin);
  operation->bytes = bytes;
  return operation;
}

// Two launches of one kernel become one row; a GEMM is named by its shape;
// floors are the larger of bytes over bandwidth and operations over the
// GEMM rate; rows come the most time first; GEMMs, attention and the other
// kernels are summed apart.
TEST(ProfileTest, GroupsByKernelAndComparesWithTheCeilings) {
  artifact::ArtifactT a;
  a.kernel_names = {"kiln_kernel_0", "kiln_kernel_1"};
  a.operations.push_back(launch(0, 4000000));
  a.operations.push_back(
      launch(1, 2000000, "kiln.attention at loc(\"/attn\")"));
  a.operations.push_back(launch(0, 2000000));
  auto gemm = std::make_unique<artifact::OperationT>();
  gemm->gemm = std::make_unique<artifact::GemmT>();
  gemm->gemm->batch = 1;
  gemm->gemm->m = 1024;
  gemm->gemm->n = 2048;
  gemm->gemm->k = 512;
  gemm->gemm->input_type = artifact::ElementType::BF16;
  gemm->gemm->output_type = artifact::ElementType::F32;
  gemm->gemm->epilogue = artifact::Epilogue::Bias;
  gemm->bytes = 1024 * 512 * 2 + 512 * 2048 * 2 + 1024 * 2048 * 4;
  gemm->flops = 2ll * 1024 * 2048 * 512;
  gemm->origin = "kiln.fusion at \"/mlp\"";
  a.operations.push_back(std::move(gemm));
  flatbuffers::FlatBufferBuilder builder;
  const artifact::Artifact &artifact = unpack(a, builder);

  runtime::StepProfile profile;
  profile.milliseconds = {0.004, 0.002, 0.003, 0.010};
  profile.stepMilliseconds = 0.018;
  profile.bytesPerSecond = 2e12;   // 2 bytes per ns
  profile.flopsPerSecond = 500e12; // 500 operations per ns
  std::vector<runtime::ProfileRow> rows =
      runtime::profileRows(artifact, profile);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].what, "GEMM 1024x2048x512 bf16->f32 +Bias");
  EXPECT_EQ(rows[0].origin, "kiln.fusion at \"/mlp\"");
  // 2.1 GFLOP at 500 TFLOP/s: 4.29 us; 11.5 MB at 2 TB/s: 5.77 us.
  EXPECT_NEAR(rows[0].floorMilliseconds, 11534336.0 / 2e12 * 1e3, 1e-12);
  EXPECT_EQ(rows[1].what, "kiln_kernel_0");
  EXPECT_EQ(rows[1].launches, 2);
  EXPECT_DOUBLE_EQ(rows[1].milliseconds, 0.007);
  EXPECT_DOUBLE_EQ(rows[1].bytes, 6e6);
  EXPECT_NEAR(rows[1].floorMilliseconds, 6e6 / 2e12 * 1e3, 1e-12);
  EXPECT_EQ(rows[2].what, "kiln_kernel_1");

  std::string report = runtime::formatProfile(artifact, profile, /*top=*/2);
  EXPECT_NE(report.find("step: 0.018 ms replayed as a CUDA graph; 0.019 ms "
                        "launched operation by operation (4 operations)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("ceilings measured: 2000 GB/s (copy), 500.0 TFLOP/s"),
            std::string::npos)
      << report;
  // By kind: 1 us of attention's floor (2 MB), 3 of the other kernels'.
  EXPECT_NE(report.find("by kind: GEMMs 0.010 ms (floor 0.006 ms, 1.73x); "
                        "attention 0.002 ms (floor 0.001 ms, 2.00x); other "
                        "kernels 0.007 ms (floor 0.003 ms, 2.33x)\n"),
            std::string::npos)
      << report;
  // The GEMM: 52.6% of 0.019 ms, 214.7 TFLOP/s, 1.73x its floor.
  EXPECT_NE(report.find("52.6%"), std::string::npos) << report;
  EXPECT_NE(report.find("214.7 TFLOP/s"), std::string::npos) << report;
  EXPECT_NE(report.find("1.73"), std::string::npos) << report;
  // The kernel: 6 MB in 7 us, 857 GB/s.
  EXPECT_NE(report.find("857 GB/s"), std::string::npos) << report;
  EXPECT_EQ(report.find("kiln_kernel_1"), std::string::npos)
      << "only the top 2 rows:\n"
      << report;
  // The third row, left out, is summed: 0.002 ms of 0.019, one launch.
  EXPECT_NE(report.find("  10.5%      0.002        1  the other 1 rows"),
            std::string::npos)
      << report;
  EXPECT_EQ(
      runtime::formatProfile(artifact, profile, /*top=*/3).find("the other"),
      std::string::npos);

  // A launch the step skips (it sums a bias gradient its GEMM summed) has
  // no row and no share.
  profile.skipped = {false, true, false, false};
  rows = runtime::profileRows(artifact, profile);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].what, "kiln_kernel_0");
  report = runtime::formatProfile(artifact, profile, /*top=*/2);
  EXPECT_NE(report.find("0.017 ms launched operation by operation (3 "
                        "operations)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("by kind: GEMMs 0.010 ms (floor 0.006 ms, 1.73x); "
                        "other kernels"),
            std::string::npos)
      << report;

  // Without the CUDA graph, the step's time is that of its launches.
  profile.launchedEachStep = true;
  report = runtime::formatProfile(artifact, profile, /*top=*/2);
  EXPECT_NE(report.find("step: 0.018 ms launched without a CUDA graph;"),
            std::string::npos)
      << report;
}

// The compiler records every operation's bytes (at least what it writes)
// and the operations of its products: a GEMM's 2 m n k per batch, the
// attention kernels' Q K^T-sized products (two forward; five in the
// gradient, seven where its query kernel recomputes the scores), none for
// element kernels.
TEST(ProfileTest, StepOperationsCarryBytesAndFlops) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  kiln::testing::ExampleStep example(context);
  mlir::func::FuncOp step = example.step;
  ASSERT_TRUE(step);
  // What each kernel of attention's gradient touches, its scratch counted
  // whole (each row's delta, then, where the key/value kernel sums dq, the
  // rows' f32 sums, where it stores dS, the blocks of dS^T). Summed by
  // atomics: the first kernel reads the output and its gradient, writes
  // the deltas and clears the sums; the key/value kernel reads the
  // operands and the deltas, adds to the sums and writes dk and dv; the
  // last stores the sums as dq. Recomputed (the default): the query kernel
  // reads the operands, the output and its gradient and writes dq and the
  // deltas; the key/value kernel reads the deltas instead of the output
  // and writes dk and dv. Stored: the first kernel writes the deltas
  // alone; the key/value kernel stores dS^T where the atomic one adds to
  // sums, the last reads it and K and writes dq.
  // Both layers' gradients have the same shapes.
  std::vector<int64_t> atomicBytes, recomputedBytes, storedBytes;
  step.walk([&](AttentionGradOp op) {
    auto bytes = [](mlir::Value value) {
      auto type = llvm::cast<mlir::RankedTensorType>(value.getType());
      return type.getNumElements() * type.getElementTypeBitWidth() / 8;
    };
    // One f32 per row, as many as log-sum-exps.
    int64_t delta = bytes(op.getLogsumexp());
    int64_t sums = delta * llvm::cast<mlir::RankedTensorType>(
                               op.getQuery().getType()).getShape()[3];
    int64_t operands = bytes(op.getQuery()) + bytes(op.getKey()) +
                       bytes(op.getValue()) + bytes(op.getLogsumexp()) +
                       bytes(op.getOutputGrad());
    int64_t keyValue =
        operands + bytes(op.getKeyGrad()) + bytes(op.getValueGrad());
    llvm::append_range(
        atomicBytes,
        std::vector<int64_t>{
            delta + sums + bytes(op.getOutput()) + bytes(op.getOutputGrad()),
            delta + sums + keyValue, delta + sums + bytes(op.getQueryGrad())});
    llvm::append_range(
        recomputedBytes,
        std::vector<int64_t>{delta + operands + bytes(op.getOutput()) +
                                 bytes(op.getQueryGrad()),
                             delta + keyValue});
    // Blocks of 64 keys by 64 queries of 2 bytes, for each head and pair
    // of tiles the causal mask leaves.
    llvm::ArrayRef<int64_t> shape =
        llvm::cast<mlir::RankedTensorType>(op.getQuery().getType()).getShape();
    int64_t tiles = 0;
    for (int64_t q0 = 0; q0 < shape[2]; q0 += 64)
      tiles += q0 / 64 + 1;
    int64_t scores = shape[0] * shape[1] * tiles * 64 * 64 * 2;
    llvm::append_range(
        storedBytes,
        std::vector<int64_t>{
            delta + bytes(op.getOutput()) + bytes(op.getOutputGrad()),
            delta + scores + keyValue,
            delta + scores + bytes(op.getKey()) + bytes(op.getQueryGrad())});
  });
  int64_t recomputedFlops = 0;
  for (cuda::QueryGradient queryGradient :
       {cuda::QueryGradient::Recomputed, cuda::QueryGradient::Atomic,
        cuda::QueryGradient::Stored}) {
    bool atomic = queryGradient == cuda::QueryGradient::Atomic;
    bool stored = queryGradient == cuda::QueryGradient::Stored;
    SCOPED_TRACE(atomic   ? "dq summed by atomics"
                 : stored ? "dq from stored dS"
                          : "dq recomputed");
    cuda::TargetOptions options;
    options.queryGradient = queryGradient;
    auto compiled = cuda::compileFunction(step, options);
    ASSERT_TRUE(mlir::succeeded(compiled));
    int gemms = 0, attention = 0;
    std::vector<int64_t> gradientBytes;
    int64_t gradientFlops = 0;
    for (const auto &operation : (*compiled)->operations) {
      EXPECT_GT(operation->bytes, 0) << operation->origin;
      llvm::StringRef origin = operation->origin;
      if (const auto &g = operation->gemm) {
        ++gemms;
        EXPECT_EQ(operation->flops, 2 * g->batch * g->m * g->n * g->k)
            << origin.str();
        EXPECT_GE(operation->bytes, g->batch * g->m * g->n *
                                        artifact::elementBytes(g->output_type))
            << origin.str();
      } else if (origin.starts_with("kiln.attention_grad")) {
        ++attention;
        gradientBytes.push_back(operation->bytes);
        gradientFlops += operation->flops;
      } else if (origin.starts_with("kiln.attention")) {
        ++attention;
        EXPECT_GT(operation->flops, 0) << origin.str();
      } else {
        EXPECT_EQ(operation->flops, 0) << origin.str();
      }
    }
    EXPECT_GT(gemms, 0);
    // Two layers: one forward launch and three gradient launches each (two
    // where the query kernel recomputes the scores).
    EXPECT_EQ(attention, atomic || stored ? 8 : 6);
    EXPECT_EQ(gradientBytes, atomic   ? atomicBytes
                             : stored ? storedBytes
                                      : recomputedBytes);
    // Five products (FlashAttention-2's) against seven.
    EXPECT_GT(gradientFlops, 0);
    if (atomic || stored)
      EXPECT_EQ(gradientFlops * 7, recomputedFlops * 5);
    else
      recomputedFlops = gradientFlops;
  }
}

} // namespace
