//===- RecomputeTest.cpp - recomputation changes no number ----------------===//
//
// Trains the bundled GPT-2 for two bf16 AdamW steps with and without
// --recompute (and --recompute-products, which recomputes GEMMs too): the
// losses, gradient norms and parameters must be equal bit for bit (the
// recomputed ops are the same deterministic ops), while the step's planned
// arena must shrink.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Training/Trainer.h"
#include "kiln/Transforms/MemoryPlan.h"

#include "mlir/IR/Diagnostics.h"

#include <gtest/gtest.h>

#include <random>

using namespace kiln;

namespace {

struct TrainedModel {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<Trainer> trainer;
};

/// What a test recomputes: activations only, or products too (at most
/// `maxProducts` of them when not negative).
struct Recomputation {
  const char *name;
  bool products;
  int64_t maxProducts = -1;
};

void createTrainer(TrainedModel &model, bool recompute,
                   Recomputation what = {"", false}) {
  registerKilnDialects(model.context);
  model.module = importONNXModel(
      KILN_SOURCE_DIR "/examples/gpt2_tiny/model.onnx", &model.context, {});
  ASSERT_TRUE(model.module);
  auto forward = *model.module->getOps<mlir::func::FuncOp>().begin();
  TrainingSpec spec;
  spec.pipeline.optimizer = torchDefaults(OptimizerKind::AdamW);
  spec.pipeline.precision = Precision::BF16;
  spec.pipeline.recompute = recompute;
  // As recomputing steps read GELU's input: the stored 16-bit sum.
  spec.pipeline.geluEpilogue = false;
  spec.pipeline.recomputeProducts = what.products;
  spec.pipeline.maxRecomputedProducts = what.maxProducts;
  spec.totalSteps = 2;
  auto trainer = Trainer::create(*model.module, forward, spec);
  ASSERT_TRUE(mlir::succeeded(trainer));
  model.trainer = std::move(*trainer);
}

class RecomputeTest : public ::testing::TestWithParam<Recomputation> {};

TEST_P(RecomputeTest, SameStepInLessMemory) {
  TrainedModel kept, recomputed;
  ASSERT_NO_FATAL_FAILURE(createTrainer(kept, false));
  ASSERT_NO_FATAL_FAILURE(createTrainer(recomputed, true, GetParam()));
  int64_t keptArena = planMemory(kept.trainer->stepFunction()).arenaBytes;
  int64_t recomputedArena =
      planMemory(recomputed.trainer->stepFunction()).arenaBytes;
  EXPECT_LT(recomputedArena, keptArena);
  auto products = [](mlir::func::FuncOp step) {
    int count = 0;
    step.walk([&](MatmulOp) { ++count; });
    return count;
  };
  int extra = products(recomputed.trainer->stepFunction()) -
              products(kept.trainer->stepFunction());
  Recomputation what = GetParam();
  if (!what.products)
    EXPECT_EQ(extra, 0);
  else if (what.maxProducts >= 0)
    EXPECT_EQ(extra, what.maxProducts);
  else // the tiny model's peak is where its gradients pile up, late
    EXPECT_GE(extra, 1);

  auto tokenType = llvm::cast<mlir::RankedTensorType>(
      kept.trainer->stepFunction().getArgumentTypes()[0]);
  Tensor tokens(DType::I64, tokenType.getShape());
  std::mt19937_64 generator(3);
  for (int64_t i = 0; i < tokens.getNumElements(); ++i)
    tokens.ints()[i] = generator() % 512;
  llvm::SmallVector<Tensor> batch = {tokens, tokens};
  for (int step = 0; step < 2; ++step) {
    auto expected = kept.trainer->step(batch);
    auto actual = recomputed.trainer->step(batch);
    ASSERT_TRUE(mlir::succeeded(expected) && mlir::succeeded(actual));
    EXPECT_EQ(actual->loss, expected->loss);
    EXPECT_EQ(actual->gradNorm, expected->gradNorm);
  }
  for (const std::string &name : kept.trainer->parameterNames())
    EXPECT_EQ(recomputed.trainer->parameters()[name].floats(),
              kept.trainer->parameters()[name].floats())
        << name;
}

INSTANTIATE_TEST_SUITE_P(
    Recompute, RecomputeTest,
    ::testing::Values(Recomputation{"Activations", false},
                      Recomputation{"ActivationsAndProducts", true},
                      Recomputation{"ActivationsAndOneProduct", true, 1}),
    [](const ::testing::TestParamInfo<Recomputation> &info) {
      return info.param.name;
    });

} // namespace
