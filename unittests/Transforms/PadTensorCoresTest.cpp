//===- PadTensorCoresTest.cpp - padding changes no number -----------------===//
//
// Trains a tiny language model whose vocabulary (37) is not a multiple of 8
// for three AdamW steps, padded (37 -> 40 in the tied embedding and in an
// untied output projection) and not, in fp32 on the interpreter. Padding
// adds only zero terms to sums, and the losses ignore the padding classes,
// so every loss, gradient and updated parameter must be equal bit for bit,
// and the padding of every parameter and optimizer state must stay exactly
// zero.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/PadTensorCores.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Training/Trainer.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

constexpr const char *kModel = R"mlir(
func.func @main(%tokens: tensor<2x5xi64>, %labels: tensor<2x5xi64>) -> (tensor<f32>, tensor<2x5x37xf32>) {
  %wte = kiln.parameter "wte" : tensor<37x16xf32>
  %w1 = kiln.parameter "w1" : tensor<16x16xf32>
  %head = kiln.parameter "head" : tensor<37x16xf32>
  %e = kiln.gather %wte, %tokens {axis = 0 : i64} : (tensor<37x16xf32>, tensor<2x5xi64>) -> tensor<2x5x16xf32>
  %h = kiln.matmul %e, %w1 : (tensor<2x5x16xf32>, tensor<16x16xf32>) -> tensor<2x5x16xf32>
  %t = kiln.tanh %h : tensor<2x5x16xf32>
  %wt = kiln.transpose %wte {permutation = array<i64: 1, 0>} : (tensor<37x16xf32>) -> tensor<16x37xf32>
  %tied = kiln.matmul %t, %wt : (tensor<2x5x16xf32>, tensor<16x37xf32>) -> tensor<2x5x37xf32>
  %untied = kiln.matmul %t, %head {transpose_rhs} : (tensor<2x5x16xf32>, tensor<37x16xf32>) -> tensor<2x5x37xf32>
  %logits = kiln.add %tied, %untied : (tensor<2x5x37xf32>, tensor<2x5x37xf32>) -> tensor<2x5x37xf32>
  %flat = kiln.reshape %tied : tensor<2x5x37xf32> to tensor<10x37xf32>
  %l = kiln.reshape %labels : tensor<2x5xi64> to tensor<10xi64>
  %a = kiln.cross_entropy %flat, %l reduction = mean : (tensor<10x37xf32>, tensor<10xi64>) -> tensor<f32>
  %uflat = kiln.reshape %untied : tensor<2x5x37xf32> to tensor<10x37xf32>
  %b = kiln.cross_entropy %uflat, %l reduction = mean : (tensor<10x37xf32>, tensor<10xi64>) -> tensor<f32>
  %loss = kiln.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<2x5x37xf32>
}
)mlir";

struct TrainingRun {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<Trainer> trainer;
};

void createTrainer(TrainingRun &run, double padMaxOverhead) {
  registerKilnDialects(run.context);
  run.module = mlir::parseSourceString<mlir::ModuleOp>(kModel, &run.context);
  ASSERT_TRUE(run.module);
  auto forward = *run.module->getOps<mlir::func::FuncOp>().begin();
  TrainingSpec spec;
  spec.pipeline.optimizer = torchDefaults(OptimizerKind::AdamW);
  spec.pipeline.optimizer.clipGradNorm = 1.0;
  spec.pipeline.padMaxOverhead = padMaxOverhead;
  spec.schedule.lr = 1e-2;
  spec.totalSteps = 3;
  spec.seed = 5;
  auto trainer = Trainer::create(*run.module, forward, spec);
  ASSERT_TRUE(mlir::succeeded(trainer));
  run.trainer = std::move(*trainer);
}

Tensor tokens(std::initializer_list<int64_t> values) {
  Tensor tensor(DType::I64, {2, 5});
  std::copy(values.begin(), values.end(), tensor.ints().begin());
  return tensor;
}

TEST(PadTensorCoresTest, CostTablePadsGpt2VocabularyTo50304) {
  EXPECT_EQ(paddedSize(50257, 0.01), 50304);
  EXPECT_EQ(paddedSize(768, 0.01), 768);
  EXPECT_EQ(paddedSize(2, 0.01), 2) << "a tiny GEMM is not worth 4x the work";
  EXPECT_EQ(paddedSize(37, 0.1), 40);
  EXPECT_EQ(paddedSize(37, 1.0), 64) << "the widest alignment that pays";
}

TEST(PadTensorCoresTest, PaddedTrainingIsBitForBitUnpadded) {
  TrainingRun plain, padded;
  ASSERT_NO_FATAL_FAILURE(createTrainer(plain, 0.0));
  ASSERT_NO_FATAL_FAILURE(createTrainer(padded, 0.1));
  auto parameter = [&](TrainingRun &run, llvm::StringRef name) {
    ParameterOp found;
    run.trainer->stepFunction()->getParentOfType<mlir::ModuleOp>().walk(
        [&](ParameterOp op) {
          if (op.getName() == name)
            found = op;
        });
    return found;
  };
  for (const char *name : {"wte", "head"})
    ASSERT_EQ(parameter(padded, name).getType().getDimSize(0), 40) << name;
  EXPECT_FALSE(parameter(padded, "w1").getLogicalShape());

  llvm::SmallVector<Tensor> batch = {tokens({1, 36, 4, 4, 0, 7, 8, 9, 35, 2}),
                                     tokens({36, 4, 4, 0, 7, 8, 9, 35, 2, 1})};
  for (int step = 0; step < 3; ++step) {
    auto expected = plain.trainer->step(batch);
    auto actual = padded.trainer->step(batch);
    ASSERT_TRUE(mlir::succeeded(expected) && mlir::succeeded(actual));
    EXPECT_EQ(actual->loss, expected->loss) << "step " << step;
    EXPECT_EQ(actual->gradNorm, expected->gradNorm) << "step " << step;
  }
  auto plainGrads = plain.trainer->gradients(batch);
  auto paddedGrads = padded.trainer->gradients(batch);
  ASSERT_TRUE(mlir::succeeded(plainGrads) && mlir::succeeded(paddedGrads));
  for (auto [expected, actual] : llvm::zip(*plainGrads, *paddedGrads)) {
    EXPECT_EQ(actual.first, expected.first);
    EXPECT_EQ(actual.second.getShape(), expected.second.getShape());
    EXPECT_EQ(actual.second.floats(), expected.second.floats()) << actual.first;
  }
  for (const std::string &name : plain.trainer->parameterNames()) {
    const Tensor &stored = padded.trainer->parameters()[name];
    Tensor logical = padded.trainer->logical(name, stored);
    EXPECT_EQ(logical.floats(), plain.trainer->parameters()[name].floats())
        << name;
    // Re-padding the logical value gives back the stored one: the padding
    // is exactly zero.
    EXPECT_EQ(padded.trainer->stored(name, logical).floats(), stored.floats())
        << name;
  }
  for (const auto &[name, stored] : padded.trainer->state())
    EXPECT_EQ(
        padded.trainer->stored(name, padded.trainer->logical(name, stored))
            .floats(),
        stored.floats())
        << name;
}

} // namespace
