//===- MemoryPlanTest.cpp - the static memory plan is sound ---------------===//
//
// Executes the training step of the bundled GPT-2 in its op order (the order
// the interpreter runs it in) against the plan's arena: every value written
// marks its bytes, and every operand read must still find its own marks, so
// a plan that placed two simultaneously live values on the same bytes fails.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"
#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Transforms/AssignPrecision.h"
#include "kiln/Transforms/Fuse.h"
#include "kiln/Transforms/MemoryPlan.h"
#include "kiln/Transforms/Recompute.h"
#include "kiln/Transforms/RewriteAttention.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

/// What the step recomputes before it is planned.
enum class Recompute { None, Activations, Products };

/// The step in a precision, with or without recomputation.
class MemoryPlanTest
    : public ::testing::TestWithParam<std::tuple<Precision, Recompute>> {};

TEST_P(MemoryPlanTest, LiveValuesNeverShareBytes) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  mlir::OwningOpRef<mlir::ModuleOp> module = importONNXModel(
      KILN_SOURCE_DIR "/examples/gpt2_tiny/model.onnx", &context, {});
  ASSERT_TRUE(module);
  auto forward = *module->getOps<mlir::func::FuncOp>().begin();
  ASSERT_TRUE(mlir::succeeded(rewriteAttention(forward, {})));
  auto gradient = buildGradientFunction(forward, {});
  ASSERT_TRUE(mlir::succeeded(gradient));
  OptimizerOptions options;
  options.microBatches = 2;
  auto step = buildTrainingStep(*gradient, options);
  ASSERT_TRUE(mlir::succeeded(step));
  auto [precision, recompute] = GetParam();
  assignPrecision(*step, precision);
  fuse(*step);
  if (recompute != Recompute::None) {
    EXPECT_GT(recomputeActivations(*step, recompute == Recompute::Products), 0);
  }
  // Attention's gradient and the products use scratch (what kiln's CUDA
  // kernels for attention's gradient do), as large as their first operand.
  auto scratchBytes = [](mlir::Operation *op) -> int64_t {
    if (!mlir::isa<AttentionGradOp, MatmulOp>(op))
      return 0;
    auto type = mlir::cast<mlir::RankedTensorType>(op->getOperand(0).getType());
    return type.getNumElements() * elementBytes(type.getElementType());
  };
  MemoryPlan plan = planMemory(*step, {}, scratchBytes);
  EXPECT_FALSE(plan.scratchOf.empty());

  // Owner of every byte of the arena; -1 for none.
  std::vector<int> owner(plan.arenaBytes, -1);
  auto write = [&](size_t id) {
    const Buffer &buffer = plan.buffers[id];
    ASSERT_LE(buffer.offset + buffer.bytes, plan.arenaBytes);
    std::fill(owner.begin() + buffer.offset,
              owner.begin() + buffer.offset + buffer.bytes, id);
  };
  auto check = [&](size_t id, mlir::Operation *reader) {
    const Buffer &buffer = plan.buffers[id];
    for (int64_t b = buffer.offset; b < buffer.offset + buffer.bytes; ++b)
      if (owner[b] != static_cast<int>(id)) {
        ADD_FAILURE() << "buffer " << id << " was overwritten before "
                      << reader->getName().getStringRef().str() << " read it";
        return;
      }
  };
  // Persistent buffers (arguments, parameters) hold their values from the
  // start; every other buffer is written by the op that defines it (a view
  // writes nothing, unless it fills its storage: attention's output).
  for (auto [i, buffer] : llvm::enumerate(plan.buffers))
    if (buffer.kind == BufferKind::Input ||
        buffer.kind == BufferKind::OptimizerState ||
        buffer.kind == BufferKind::Parameter)
      write(i);
  int reads = 0;
  unsigned filledViews = 0;
  for (mlir::Operation &op : step->getBody().front()) {
    for (mlir::Value operand : op.getOperands()) {
      auto it = plan.bufferOf.find(operand);
      if (it != plan.bufferOf.end()) {
        check(it->second, &op);
        ++reads;
      }
    }
    for (mlir::Value result : op.getResults()) {
      auto it = plan.bufferOf.find(result);
      if (it == plan.bufferOf.end())
        continue;
      auto view = plan.views.find(result);
      bool fills = view != plan.views.end() && view->second.writes;
      if (fills || (plan.buffers[it->second].value == result &&
                    plan.buffers[it->second].kind != BufferKind::Parameter &&
                    !plan.computedElsewhere(result)))
        write(it->second);
      if (fills)
        ++filledViews;
    }
    // Scratch, written while the op reads its operands and writes its
    // results, overwrites none of them (nor, checked by later readers,
    // anything else live).
    if (auto scratch = plan.scratchOf.find(&op);
        scratch != plan.scratchOf.end()) {
      write(scratch->second);
      llvm::SmallVector<mlir::Value> touched(op.getOperands());
      llvm::append_range(touched, op.getResults());
      for (mlir::Value value : touched)
        if (auto it = plan.bufferOf.find(value); it != plan.bufferOf.end())
          check(it->second, &op);
    }
  }
  EXPECT_GT(reads, 100);
  // GPT-2's attention reads its heads from the packed projection (q, k
  // and v of 2 layers in 2 micro-batches at least) and writes its output
  // where the output projection reads it (what recomputation rearranges
  // again for the backward pass is that same value).
  EXPECT_GE(plan.views.size(), 3u * 2 * 2 + filledViews);
  EXPECT_GT(filledViews, 0u);
  EXPECT_GE(plan.arenaBytes, plan.peakLiveBytes);
  EXPECT_GT(plan.bytesByKind[static_cast<int>(BufferKind::Parameter)], 0);
}

// A result the executor writes over an operand (Overwrites) takes that
// operand's buffer where its op reads the operand last, and only there.
TEST(MemoryPlanOverwritesTest, ResultsTakeBuffersTheirOpReadsLast) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%x: tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>) {
      %a = kiln.exp %x : tensor<64x32xf32>
      %b = kiln.neg %a : tensor<64x32xf32>
      %c = kiln.exp %b : tensor<64x32xf32>
      %d = kiln.add %c, %b : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
      return %c, %d : tensor<64x32xf32>, tensor<64x32xf32>
    })",
                                                        &context);
  ASSERT_TRUE(module);
  auto step = *module->getOps<mlir::func::FuncOp>().begin();
  auto values = llvm::to_vector(
      llvm::map_range(step.getBody().front().without_terminator(),
                      [](mlir::Operation &op) { return op.getResult(0); }));
  auto overwrites = [](mlir::Operation *op, unsigned, unsigned) {
    return mlir::isa<NegOp, ExpOp>(op);
  };
  MemoryPlan plan = planMemory(step, overwrites);
  // %b is the last read of %a; %c is not of %b (%d reads it after), and
  // %a does not take %x's: an input is never overwritten.
  EXPECT_EQ(plan.bufferOf.at(values[1]), plan.bufferOf.at(values[0]));
  EXPECT_NE(plan.bufferOf.at(values[2]), plan.bufferOf.at(values[1]));
  EXPECT_NE(plan.bufferOf.at(values[0]), plan.bufferOf.at(step.getArgument(0)));
  // The shared buffer lives to the last read of either value.
  const Buffer &shared = plan.buffers[plan.bufferOf.at(values[0])];
  EXPECT_EQ(shared.end, 3);
  MemoryPlan separate = planMemory(step);
  EXPECT_NE(separate.bufferOf.at(values[1]), separate.bufferOf.at(values[0]));
  EXPECT_EQ(plan.buffers.size() + 1, separate.buffers.size());
  EXPECT_LE(plan.arenaBytes, separate.arenaBytes);
}

// An op's scratch is a buffer live while the op runs: it takes bytes no
// value holds then (those of a value read last before it), and adds to the
// arena only what no such gap holds.
TEST(MemoryPlanScratchTest, ScratchTakesMemoryFreeWhileItsOpRuns) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
      %a = kiln.exp %x : tensor<64x32xf32>
      %b = kiln.neg %x : tensor<64x32xf32>
      %c = kiln.add %a, %b : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
      %d = kiln.exp %c : tensor<64x32xf32>
      return %d : tensor<64x32xf32>
    })",
                                                        &context);
  ASSERT_TRUE(module);
  auto step = *module->getOps<mlir::func::FuncOp>().begin();
  auto ops = llvm::to_vector(
      llvm::map_range(step.getBody().front().without_terminator(),
                      [](mlir::Operation &op) { return &op; }));
  int64_t bytes = 64 * 32 * 4;
  auto plan = [&](int64_t scratch) {
    return planMemory(step, {}, [&](mlir::Operation *op) {
      return op == ops[3] ? scratch : 0;
    });
  };
  MemoryPlan without = planMemory(step);
  // The arena holds four values at %c; while %d is computed, three.
  MemoryPlan fits = plan(bytes);
  ASSERT_EQ(fits.scratchOf.size(), 1u);
  const Buffer &scratch = fits.buffers[fits.scratchOf.at(ops[3])];
  EXPECT_EQ(scratch.scratchOf, ops[3]);
  EXPECT_EQ(scratch.start, 3);
  EXPECT_EQ(scratch.end, 3);
  EXPECT_EQ(fits.arenaBytes, without.arenaBytes);
  mlir::Value live[] = {step.getArgument(0), ops[2]->getResult(0),
                        ops[3]->getResult(0)};
  for (mlir::Value value : live) {
    const Buffer &buffer = fits.buffers[fits.bufferOf.at(value)];
    EXPECT_TRUE(scratch.offset + scratch.bytes <= buffer.offset ||
                buffer.offset + buffer.bytes <= scratch.offset);
  }
  // Twice that is more than any gap: the arena grows by the rest.
  MemoryPlan grows = plan(2 * bytes);
  EXPECT_GT(grows.arenaBytes, without.arenaBytes);
  EXPECT_LE(grows.arenaBytes, without.arenaBytes + 2 * bytes);
  EXPECT_TRUE(plan(0).scratchOf.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Steps, MemoryPlanTest,
    ::testing::Combine(::testing::Values(Precision::FP32, Precision::BF16),
                       ::testing::Values(Recompute::None,
                                         Recompute::Activations,
                                         Recompute::Products)));

} // namespace
