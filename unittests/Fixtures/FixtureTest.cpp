//===- FixtureTest.cpp - kiln against PyTorch on exported HF models -------===//
//
// Imports each fixture model (both exporters), runs its forward pass on the
// reference interpreter and compares with PyTorch's fp32 results:
//  - the loss within 1e-5 relative: the interpreter accumulates in fp64, so
//    its loss differs from PyTorch's fp32 one by fp32 rounding only (~1e-7);
//  - the logits within 1e-4 of max|logits| (max abs error over max abs
//    value): fp32 GEMMs in PyTorch reassociate sums, giving errors of a few
//    ulps of the largest products.
// Also imports the full-size graph-only exports at their benchmark shapes.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/TensorIO/TensorFiles.h"
#include "kiln/Tools/ModelLoading.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {

std::string fixture(const std::string &relative) {
  return std::string(KILN_FIXTURES_DIR) + "/" + relative;
}

Tensor readOrDie(const std::string &path) {
  llvm::Expected<Tensor> tensor = readTensorFile(path);
  if (!tensor) {
    ADD_FAILURE() << llvm::toString(tensor.takeError());
    return Tensor();
  }
  return std::move(*tensor);
}

/// Imports a model, reporting any diagnostic as a test failure.
mlir::OwningOpRef<mlir::ModuleOp> import(mlir::MLIRContext &context,
                                         const std::string &path,
                                         const ImportOptions &options = {}) {
  registerKilnDialects(context);
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &d) {
    ADD_FAILURE() << d.str();
    return mlir::success();
  });
  return importONNXModel(path, &context, options);
}

struct Model {
  std::string name, file;
};

class FixtureForward : public ::testing::TestWithParam<Model> {};

TEST_P(FixtureForward, MatchesPyTorch) {
  const Model &model = GetParam();
  std::string directory = "hf/" + model.name + "/";
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      import(context, fixture(directory + model.file));
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  llvm::SmallVector<Tensor> inputs{
      readOrDie(fixture(directory + "ref/input_ids.pb")),
      readOrDie(fixture(directory + "ref/labels.pb"))};
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &d) {
    ADD_FAILURE() << d.str();
    return mlir::success();
  });
  mlir::FailureOr<llvm::SmallVector<Tensor>> results =
      interpret(function, inputs);
  ASSERT_TRUE(mlir::succeeded(results));
  ASSERT_EQ(resultName(function, 0), "loss");
  ASSERT_EQ(resultName(function, 1), "logits");

  Tensor loss = readOrDie(fixture(directory + "ref/loss.pb"));
  double expectedLoss = loss.getAsDouble(0);
  double actualLoss = (*results)[0].getAsDouble(0);
  EXPECT_LE(std::fabs(actualLoss - expectedLoss), 1e-5 * std::fabs(expectedLoss))
      << "loss " << actualLoss << " vs PyTorch " << expectedLoss;

  Tensor logits = readOrDie(fixture(directory + "ref/logits.pb"));
  const Tensor &actual = (*results)[1];
  ASSERT_EQ(actual.getShape(), logits.getShape());
  double maxError = 0.0, maxValue = 0.0;
  for (int64_t i = 0; i < logits.getNumElements(); ++i) {
    maxError = std::max(maxError,
                        std::fabs(actual.getAsDouble(i) - logits.getAsDouble(i)));
    maxValue = std::max(maxValue, std::fabs(logits.getAsDouble(i)));
  }
  EXPECT_LE(maxError, 1e-4 * maxValue)
      << "max |logits error| " << maxError << ", max |logit| " << maxValue;
}

INSTANTIATE_TEST_SUITE_P(
    HuggingFace, FixtureForward,
    ::testing::Values(Model{"gpt2_tiny", "model.onnx"},
                      Model{"gpt2_tiny", "model.dynamo.onnx"},
                      Model{"gpt2_tiny_sdpa", "model.onnx"},
                      Model{"gpt2_tiny_sdpa", "model.dynamo.onnx"},
                      Model{"bert_tiny_cls", "model.onnx"},
                      Model{"bert_tiny_cls", "model.dynamo.onnx"}),
    [](const ::testing::TestParamInfo<Model> &info) {
      std::string name = info.param.name + "_" + info.param.file;
      for (char &c : name)
        if (!isalnum(static_cast<unsigned char>(c)))
          c = '_';
      return name;
    });

double norm(const Tensor &tensor) {
  double sum = 0.0;
  for (int64_t i = 0; i < tensor.getNumElements(); ++i)
    sum += tensor.getAsDouble(i) * tensor.getAsDouble(i);
  return std::sqrt(sum);
}

/// Error norm over reference norm. A reference whose norm is below `floor`
/// is roundoff of an analytically zero gradient (BERT's attention key bias:
/// softmax ignores a constant added along the keys), so it is compared on
/// the scale of `floor` instead.
double relativeError(const Tensor &actual, const Tensor &expected,
                     double floor = 0.0) {
  double error = 0.0;
  for (int64_t i = 0; i < expected.getNumElements(); ++i) {
    double d = actual.getAsDouble(i) - expected.getAsDouble(i);
    error += d * d;
  }
  return std::sqrt(error) / std::max({norm(expected), floor, 1e-30});
}

class FixtureGradients : public ::testing::TestWithParam<std::string> {};

// Every gradient of the TorchScript exports matches PyTorch autograd within
// 1e-4 relative (error norm over reference norm). The interpreter's fp64
// accumulation leaves only PyTorch's own fp32 rounding, ~1e-6.
TEST_P(FixtureGradients, MatchPyTorchAutograd) {
  std::string directory = "hf/" + GetParam() + "/";
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      import(context, fixture(directory + "model.onnx"));
  ASSERT_TRUE(module);
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &d) {
    ADD_FAILURE() << d.str();
    return mlir::success();
  });
  auto forward = *module->getOps<mlir::func::FuncOp>().begin();
  mlir::FailureOr<mlir::func::FuncOp> gradient =
      buildGradientFunction(forward, {});
  ASSERT_TRUE(mlir::succeeded(gradient));
  llvm::SmallVector<Tensor> inputs{
      readOrDie(fixture(directory + "ref/input_ids.pb")),
      readOrDie(fixture(directory + "ref/labels.pb"))};
  mlir::FailureOr<llvm::SmallVector<Tensor>> results =
      interpret(*gradient, inputs);
  ASSERT_TRUE(mlir::succeeded(results));
  llvm::StringMap<Tensor> references;
  double largest = 0.0;
  for (unsigned i = 0; i < gradient->getNumResults(); ++i)
    if (auto name = gradient->getResultAttrOfType<mlir::StringAttr>(
            i, kGradientOfAttr)) {
      Tensor &reference = references[name.getValue()] =
          readOrDie(fixture(directory + "ref/grad/" + name.str() + ".pb"));
      largest = std::max(largest, norm(reference));
    }
  // fp32 roundoff of the largest gradients: 1e-6 of their norm.
  double roundoff = 1e-6 * largest;
  int compared = 0;
  for (unsigned i = 0; i < gradient->getNumResults(); ++i) {
    auto name = gradient->getResultAttrOfType<mlir::StringAttr>(i, kGradientOfAttr);
    if (!name)
      continue;
    const Tensor &expected = references[name.getValue()];
    ASSERT_EQ((*results)[i].getShape(), expected.getShape()) << name.str();
    EXPECT_LE(relativeError((*results)[i], expected, roundoff), 1e-4)
        << name.str();
    ++compared;
  }
  std::error_code error;
  int referenceFiles = 0;
  for (llvm::sys::fs::directory_iterator it(fixture(directory + "ref/grad"), error), end;
       it != end && !error; it.increment(error))
    ++referenceFiles;
  EXPECT_EQ(compared, referenceFiles)
      << "every parameter PyTorch trains gets a gradient";
}

INSTANTIATE_TEST_SUITE_P(HuggingFace, FixtureGradients,
                         ::testing::Values("gpt2_tiny", "gpt2_tiny_sdpa",
                                           "bert_tiny_cls"));

struct FullSizeGraph {
  std::string file;
  int64_t seq, vocabulary, parameters;
};

class FullSizeImport : public ::testing::TestWithParam<FullSizeGraph> {};

// The graph-only exports import at batch 16 as declared parameters, with the
// loss and the logits at their full shapes.
TEST_P(FullSizeImport, ImportsAtBenchmarkShape) {
  const FullSizeGraph &graph = GetParam();
  ImportOptions options;
  options.dimensions["batch"] = 16;
  options.dimensions["seq"] = graph.seq;
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      import(context, fixture("graphs/" + graph.file), options);
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  mlir::FunctionType type = function.getFunctionType();
  ASSERT_EQ(type.getNumResults(), 2u);
  EXPECT_EQ(llvm::cast<mlir::RankedTensorType>(type.getResult(0)).getRank(), 0);
  EXPECT_EQ(llvm::cast<mlir::RankedTensorType>(type.getResult(1)).getShape().back(),
            graph.vocabulary);
  int64_t parameters = 0, declared = 0;
  function.walk([&](ParameterOp op) {
    parameters += op.getType().getNumElements();
    declared += !op.getInitialValue();
  });
  EXPECT_EQ(parameters, graph.parameters);
  int64_t count = 0;
  function.walk([&](ParameterOp) { ++count; });
  EXPECT_EQ(declared, count) << "graph-only exports carry no values";
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, FullSizeImport,
    // GPT-2 small has 124,439,808 parameters counting its tied output matrix
    // once; BERT-base with its 2-label head 109,483,778.
    ::testing::Values(FullSizeGraph{"gpt2_124m.onnx", 1024, 50257, 124439808},
                      FullSizeGraph{"bert_base_cls.onnx", 256, 2, 109483778}),
    [](const ::testing::TestParamInfo<FullSizeGraph> &info) {
      return info.param.file.substr(0, info.param.file.find('.'));
    });

} // namespace
