//===- PatternRewriteTest.cpp - pattern rewrites keep every function ------===//
//
// Runs each function of the lit tests of the pattern-matching passes
// (test/Transforms/rewrite-attention.mlir, recognize-gelu.mlir,
// recognize-norms.mlir, merge-projections.mlir: matched forms and
// deliberately unmatched ones)
// before and after the rewrite on random inputs. The rewritten function
// must agree within 1e-6 relative (error norm over norm): the fused ops
// round once where the spelled-out ones rounded at every step, ~1e-7 per
// element in fp32 (attention rounds where eager attention rounds; only a
// scale applied before the product or a division differs). Merged
// projections compute each column as before: they must agree exactly.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Transforms/MergeProjections.h"
#include "kiln/Transforms/RecognizeGelu.h"
#include "kiln/Transforms/RecognizeNorms.h"
#include "kiln/Transforms/RewriteAttention.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;

namespace {

using Rewrite = mlir::FailureOr<int> (*)(mlir::func::FuncOp,
                                         const AutodiffOptions &);

/// One function of a lit test, the rewrite it tests and the largest
/// relative error the rewrite may introduce.
struct PatternCase {
  std::string name, source;
  Rewrite rewrite;
  double tolerance;
};

/// The functions of the lit tests, one per split.
std::vector<PatternCase> testFunctions() {
  std::vector<PatternCase> cases;
  struct LitFile {
    const char *name;
    Rewrite rewrite;
    double tolerance;
  };
  for (auto [file, rewrite, tolerance] :
       {LitFile{"rewrite-attention", rewriteAttention, 1e-6},
        LitFile{"recognize-gelu", recognizeGelu, 1e-6},
        LitFile{"recognize-norms", recognizeNorms, 1e-6},
        LitFile{"merge-projections", mergeProjections, 0.0}}) {
    auto buffer = llvm::MemoryBuffer::getFile(
        std::string(KILN_SOURCE_DIR "/test/Transforms/") + file + ".mlir");
    if (!buffer)
      continue;
    llvm::SmallVector<llvm::StringRef> parts;
    (*buffer)->getBuffer().split(parts, "// -----");
    for (auto [i, part] : llvm::enumerate(parts))
      cases.push_back({std::string(file) + "_" + std::to_string(i), part.str(),
                       rewrite, tolerance});
  }
  return cases;
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

class PatternRewriteTest : public ::testing::TestWithParam<PatternCase> {};

TEST_P(PatternRewriteTest, KeepsTheFunction) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  std::string errors;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    errors += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(GetParam().source, &context);
  ASSERT_TRUE(module) << errors;
  auto original = *module->getOps<mlir::func::FuncOp>().begin();
  mlir::func::FuncOp rewritten = original.clone();
  module->push_back(rewritten);
  rewritten.setSymName("rewritten");
  ASSERT_TRUE(mlir::succeeded(GetParam().rewrite(rewritten, {}))) << errors;
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
      EXPECT_LE(relativeError(actual, expected), GetParam().tolerance)
          << original.getSymName().str() << " result " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(LitFunctions, PatternRewriteTest,
                         ::testing::ValuesIn(testFunctions()),
                         [](const ::testing::TestParamInfo<PatternCase> &info) {
                           std::string name = info.param.name;
                           for (char &c : name)
                             if (!isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return name;
                         });

TEST(PatternRewriteTest, FindsTheLitFiles) {
  EXPECT_GE(testFunctions().size(), 47u);
}

} // namespace
