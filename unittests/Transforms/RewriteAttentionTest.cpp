//===- RewriteAttentionTest.cpp - the rewrite keeps every function --------===//
//
// Runs each function of test/Transforms/rewrite-attention.mlir (matched
// patterns and deliberately unmatched ones) before and after the rewrite on
// random inputs. The rewritten function must agree within 1e-6 relative
// (error norm over norm): attention rounds where the eager ops round, so the
// only differences come from where a pattern scaled q and k, or divided,
// before the product, ~1e-7 per score in fp32.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/RewriteAttention.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Tools/ModelLoading.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;

namespace {

/// The functions of the lit test, one per split.
std::vector<std::string> testFunctions() {
  auto file = llvm::MemoryBuffer::getFile(
      KILN_SOURCE_DIR "/test/Transforms/rewrite-attention.mlir");
  if (!file)
    return {};
  std::vector<std::string> splits;
  llvm::SmallVector<llvm::StringRef> parts;
  (*file)->getBuffer().split(parts, "// -----");
  for (llvm::StringRef part : parts)
    splits.push_back(part.str());
  return splits;
}

Tensor randomTensor(mlir::RankedTensorType type, std::mt19937_64 &generator) {
  Tensor tensor(*dtypeOf(type.getElementType()), type.getShape());
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  for (int64_t i = 0; i < tensor.getNumElements(); ++i)
    tensor.setFromDouble(i, tensor.isFloat() ? uniform(generator)
                                             : uniform(generator) > -1.0);
  return tensor;
}

double relativeError(const Tensor &actual, const Tensor &expected) {
  double error = 0.0, total = 0.0;
  for (int64_t i = 0; i < expected.getNumElements(); ++i) {
    double d = actual.getAsDouble(i) - expected.getAsDouble(i);
    error += d * d;
    total += expected.getAsDouble(i) * expected.getAsDouble(i);
  }
  return std::sqrt(error / std::max(total, 1e-300));
}

class RewriteAttentionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RewriteAttentionTest, KeepsTheFunction) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  std::string errors;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    errors += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(GetParam(), &context);
  ASSERT_TRUE(module) << errors;
  auto original = *module->getOps<mlir::func::FuncOp>().begin();
  mlir::func::FuncOp rewritten = original.clone();
  module->push_back(rewritten);
  rewritten.setSymName("rewritten");
  ASSERT_TRUE(mlir::succeeded(rewriteAttention(rewritten, {}))) << errors;
  ASSERT_TRUE(mlir::succeeded(mlir::verify(rewritten))) << errors;

  std::mt19937_64 generator(7);
  for (int trial = 0; trial < 3; ++trial) {
    llvm::SmallVector<Tensor> inputs;
    for (mlir::Type type : original.getArgumentTypes())
      inputs.push_back(
          randomTensor(llvm::cast<mlir::RankedTensorType>(type), generator));
    auto before = interpret(original, inputs);
    auto after = interpret(rewritten, inputs);
    ASSERT_TRUE(mlir::succeeded(before) && mlir::succeeded(after)) << errors;
    for (auto [i, expected, actual] : llvm::enumerate(*before, *after))
      EXPECT_LE(relativeError(actual, expected), 1e-6)
          << original.getSymName().str() << " result " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(LitFunctions, RewriteAttentionTest,
                         ::testing::ValuesIn(testFunctions()));

TEST(RewriteAttentionTest, FindsTheLitFile) {
  EXPECT_GE(testFunctions().size(), 8u);
}

} // namespace
