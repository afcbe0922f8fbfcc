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
#include "kiln/Interpreter/TensorAttr.h"
#include "kiln/TensorIO/TensorFiles.h"
#include "kiln/Training/Trainer.h"
#include "kiln/Transforms/AssignPrecision.h"
#include "kiln/Transforms/Fuse.h"
#include "kiln/Transforms/RecognizeGelu.h"
#include "kiln/Transforms/RewriteAttention.h"
#include "kiln/Tools/ModelLoading.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

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

/// Reports every error and warning of `context` as a test failure while it
/// lives; remarks (what is not trained, as a user sees it) pass.
struct FailOnDiagnostics : mlir::ScopedDiagnosticHandler {
  explicit FailOnDiagnostics(mlir::MLIRContext &context)
      : ScopedDiagnosticHandler(&context, [](mlir::Diagnostic &d) {
          if (d.getSeverity() != mlir::DiagnosticSeverity::Remark)
            ADD_FAILURE() << d.str();
          return mlir::success();
        }) {}
};

/// Imports a model, reporting any diagnostic as a test failure.
mlir::OwningOpRef<mlir::ModuleOp> import(mlir::MLIRContext &context,
                                         const std::string &path,
                                         const ImportOptions &options = {}) {
  registerKilnDialects(context);
  FailOnDiagnostics failures(context);
  return importONNXModel(path, &context, options);
}

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

/// A fixture's model, its reference batch and, once differentiated, its
/// gradient function and the warnings differentiating it gave.
struct FixtureModel {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp forward, gradient;
  llvm::SmallVector<Tensor> inputs;
  std::vector<std::string> warnings;
};

/// Collects the warnings of `context` while it lives, and reports every
/// error as a test failure.
struct RecordWarnings : mlir::ScopedDiagnosticHandler {
  RecordWarnings(mlir::MLIRContext &context, std::vector<std::string> &warnings)
      : ScopedDiagnosticHandler(&context, [&warnings](mlir::Diagnostic &d) {
          if (d.getSeverity() == mlir::DiagnosticSeverity::Warning)
            warnings.push_back(d.str());
          else if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
            ADD_FAILURE() << d.str();
          return mlir::success();
        }) {}
};

/// Imports `directory + file` and reads the reference batch; any error fails
/// the test.
void loadFixture(const std::string &directory, const std::string &file,
                 FixtureModel &model) {
  model.module = import(model.context, fixture(directory + file));
  ASSERT_TRUE(model.module);
  model.forward = *model.module->getOps<mlir::func::FuncOp>().begin();
  model.inputs = {readOrDie(fixture(directory + "ref/input_ids.pb")),
                  readOrDie(fixture(directory + "ref/labels.pb"))};
}

/// Loads a fixture, recognizes its GELU, rewrites its attention and
/// differentiates its forward function, as the training pipeline does.
/// Errors fail the test; warnings are kept in `model.warnings`.
void differentiate(const std::string &directory, const std::string &file,
                   FixtureModel &model) {
  ASSERT_NO_FATAL_FAILURE(loadFixture(directory, file, model));
  RecordWarnings warnings(model.context, model.warnings);
  ASSERT_TRUE(mlir::succeeded(recognizeGelu(model.forward, {})));
  ASSERT_TRUE(mlir::succeeded(rewriteAttention(model.forward, {})));
  mlir::FailureOr<mlir::func::FuncOp> gradient =
      buildGradientFunction(model.forward, {});
  ASSERT_TRUE(mlir::succeeded(gradient));
  model.gradient = *gradient;
}

struct Model {
  std::string name, file;
  /// Attention patterns the rewrite must find (BERT's dynamo export folds
  /// its all-zero mask into an initializer named `where`, which is not
  /// trained: the mask disappears), and whether their scale follows the
  /// product, so that kiln.attention rounds exactly as the spelled-out ops
  /// did.
  int attentions;
  bool exact;
};

class FixtureForward : public ::testing::TestWithParam<Model> {};

TEST_P(FixtureForward, MatchesPyTorch) {
  std::string directory = "hf/" + GetParam().name + "/";
  FixtureModel model;
  ASSERT_NO_FATAL_FAILURE(loadFixture(directory, GetParam().file, model));
  FailOnDiagnostics failures(model.context);
  mlir::func::FuncOp function = model.forward;
  mlir::FailureOr<llvm::SmallVector<Tensor>> results =
      interpret(function, model.inputs);
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

// The rewritten forward computes what the exported one does: bit for bit
// where the scale multiplies the product (kiln.attention rounds where those
// ops round); where SDPA scales q and k by sqrt(scale) each before the
// product, each score differs by fp32 rounding (~1e-7 relative), which the
// softmax and the layers after it carry to the outputs: bound 1e-6.
TEST_P(FixtureForward, AttentionRewriteKeepsTheFunction) {
  const Model &fixtureModel = GetParam();
  FixtureModel model;
  ASSERT_NO_FATAL_FAILURE(loadFixture("hf/" + fixtureModel.name + "/",
                                      fixtureModel.file, model));
  FailOnDiagnostics failures(model.context);
  mlir::func::FuncOp exported = model.forward;
  mlir::func::FuncOp rewritten = exported.clone();
  model.module->push_back(rewritten);
  rewritten.setSymName("rewritten");
  EXPECT_EQ(rewriteAttention(rewritten, {}), fixtureModel.attentions);
  ASSERT_TRUE(mlir::succeeded(mlir::verify(rewritten)));
  int softmaxes = 0;
  rewritten.walk([&](SoftmaxOp) { ++softmaxes; });
  EXPECT_EQ(softmaxes, fixtureModel.attentions ? 0 : 2)
      << "attention left behind";

  auto before = interpret(exported, model.inputs);
  auto after = interpret(rewritten, model.inputs);
  ASSERT_TRUE(mlir::succeeded(before) && mlir::succeeded(after));
  for (auto [i, expected, actual] : llvm::enumerate(*before, *after)) {
    ASSERT_EQ(actual.getShape(), expected.getShape());
    if (fixtureModel.exact)
      EXPECT_EQ(actual.floats(), expected.floats()) << "result " << i;
    else
      EXPECT_LE(relativeError(actual, expected), 1e-6) << "result " << i;
  }
}

// Every fixture's GELU (GPT-2's tanh form, BERT's erf form; both exporters)
// becomes one kiln.gelu, which rounds once where the spelled-out ops rounded
// at each of their eight steps (~1e-7 relative each): outputs within 1e-6.
TEST_P(FixtureForward, GeluRecognitionKeepsTheFunction) {
  FixtureModel model;
  ASSERT_NO_FATAL_FAILURE(loadFixture("hf/" + GetParam().name + "/",
                                      GetParam().file, model));
  FailOnDiagnostics failures(model.context);
  mlir::func::FuncOp exported = model.forward;
  mlir::func::FuncOp rewritten = exported.clone();
  model.module->push_back(rewritten);
  rewritten.setSymName("rewritten");
  ASSERT_TRUE(mlir::succeeded(recognizeGelu(rewritten, {})));
  int gelus = 0;
  rewritten.walk([&](GeluOp) { ++gelus; });
  EXPECT_EQ(gelus, 2) << "one GELU per layer (dynamo's BERT has it already)";
  ASSERT_TRUE(mlir::succeeded(mlir::verify(rewritten)));
  auto before = interpret(exported, model.inputs);
  auto after = interpret(rewritten, model.inputs);
  ASSERT_TRUE(mlir::succeeded(before) && mlir::succeeded(after));
  for (auto [i, expected, actual] : llvm::enumerate(*before, *after))
    EXPECT_LE(relativeError(actual, expected), 1e-6) << "result " << i;
}

INSTANTIATE_TEST_SUITE_P(
    HuggingFace, FixtureForward,
    ::testing::Values(Model{"gpt2_tiny", "model.onnx", 2, true},
                      Model{"gpt2_tiny", "model.dynamo.onnx", 2, true},
                      Model{"gpt2_tiny_sdpa", "model.onnx", 2, false},
                      Model{"gpt2_tiny_sdpa", "model.dynamo.onnx", 2, false},
                      Model{"bert_tiny_cls", "model.onnx", 2, true},
                      Model{"bert_tiny_cls", "model.dynamo.onnx", 2, true}),
    [](const ::testing::TestParamInfo<Model> &info) {
      std::string name = info.param.name + "_" + info.param.file;
      for (char &c : name)
        if (!isalnum(static_cast<unsigned char>(c)))
          c = '_';
      return name;
    });

class FixtureGradients : public ::testing::TestWithParam<std::string> {};

/// The exported value of initializer `name` of the model at `path`.
Tensor initialParameter(mlir::MLIRContext &context, const std::string &path,
                        llvm::StringRef name) {
  mlir::OwningOpRef<mlir::ModuleOp> module = import(context, path);
  Tensor value;
  module->walk([&](ParameterOp op) {
    if (op.getName() == name)
      value = *tensorFromAttr(*op.getInitialValue());
  });
  EXPECT_GT(value.getNumElements(), 0) << name.str();
  return value;
}

// Every gradient of the TorchScript exports matches PyTorch autograd within
// 1e-4 relative (error norm over reference norm). The interpreter's fp64
// accumulation leaves only PyTorch's own fp32 rounding, ~1e-6.
TEST_P(FixtureGradients, MatchPyTorchAutograd) {
  std::string directory = "hf/" + GetParam() + "/";
  FixtureModel model;
  ASSERT_NO_FATAL_FAILURE(differentiate(directory, "model.onnx", model));
  FailOnDiagnostics failures(model.context);
  mlir::func::FuncOp gradient = model.gradient;
  mlir::FailureOr<llvm::SmallVector<Tensor>> results =
      interpret(gradient, model.inputs);
  ASSERT_TRUE(mlir::succeeded(results));
  llvm::StringMap<Tensor> references;
  double largest = 0.0;
  for (unsigned i = 0; i < gradient.getNumResults(); ++i)
    if (auto name = gradient.getResultAttrOfType<mlir::StringAttr>(
            i, kGradientOfAttr)) {
      Tensor &reference = references[name.getValue()] =
          readOrDie(fixture(directory + "ref/grad/" + name.str() + ".pb"));
      largest = std::max(largest, norm(reference));
    }
  // fp32 roundoff of the largest gradients: 1e-6 of their norm.
  double roundoff = 1e-6 * largest;
  int compared = 0;
  for (unsigned i = 0; i < gradient.getNumResults(); ++i) {
    auto name = gradient.getResultAttrOfType<mlir::StringAttr>(i, kGradientOfAttr);
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

/// How many ops of `function` read each parameter, by name.
llvm::StringMap<int> readsByName(mlir::func::FuncOp function) {
  llvm::StringMap<int> reads;
  function.walk([&](ParameterOp op) {
    reads[op.getName()] += std::distance(op->use_begin(), op->use_end());
  });
  return reads;
}

// The dynamo exports fold the position embedding into a constant and merge
// initializers of equal value (all zero biases, all unit norm weights) into
// one, so only their initializers that still stand for one PyTorch
// parameter, used by one op, can be compared; those match like the
// TorchScript ones. The merged ones get the sum of all their uses, which is
// what the graph says.
TEST_P(FixtureGradients, DynamoGradientsMatchWhereUnambiguous) {
  std::string directory = "hf/" + GetParam() + "/";
  FixtureModel model;
  ASSERT_NO_FATAL_FAILURE(differentiate(directory, "model.dynamo.onnx", model));
  FailOnDiagnostics failures(model.context);
  mlir::func::FuncOp gradient = model.gradient;
  llvm::StringMap<int> uses = readsByName(model.forward);
  mlir::FailureOr<llvm::SmallVector<Tensor>> results =
      interpret(gradient, model.inputs);
  ASSERT_TRUE(mlir::succeeded(results));
  int compared = 0;
  for (unsigned i = 0; i < gradient.getNumResults(); ++i) {
    auto name = gradient.getResultAttrOfType<mlir::StringAttr>(i, kGradientOfAttr);
    std::string reference =
        name ? fixture(directory + "ref/grad/" + name.str() + ".pb") : "";
    if (!name || uses[name.getValue()] != 1 || !llvm::sys::fs::exists(reference))
      continue;
    EXPECT_LE(relativeError((*results)[i], readOrDie(reference)), 1e-4)
        << name.str();
    ++compared;
  }
  EXPECT_GE(compared, 4) << "too few unambiguous parameters to compare";
}

// The dynamo exporter merged the fixtures' fresh norm weights and zero
// biases, each set into one initializer that many ops read. Autodiff warns
// about exactly those: the parameters more ops read than read the PyTorch
// parameter of that name in the TorchScript export (one initializer per
// parameter; GPT-2's tied output projection has no name of its own there),
// and about nothing in the TorchScript exports.
TEST_P(FixtureGradients, WarnsAboutExactlyTheMergedParameters) {
  std::string directory = "hf/" + GetParam() + "/";
  FixtureModel torchscript, dynamo;
  ASSERT_NO_FATAL_FAILURE(differentiate(directory, "model.onnx", torchscript));
  ASSERT_NO_FATAL_FAILURE(
      differentiate(directory, "model.dynamo.onnx", dynamo));
  EXPECT_EQ(torchscript.warnings, std::vector<std::string>());
  llvm::StringMap<int> apart = readsByName(torchscript.forward);
  std::set<std::string> merged, warned;
  for (const auto &[name, reads] : readsByName(dynamo.forward))
    if (reads > 1 && apart.contains(name) && reads > apart.lookup(name))
      merged.insert(name.str());
  for (llvm::StringRef warning : dynamo.warnings) {
    auto [before, named] = warning.split("parameter '");
    warned.insert(named.split('\'').first.str());
  }
  EXPECT_FALSE(merged.empty());
  EXPECT_EQ(warned, merged);
}

// With GEMMs in bf16 (fp32 accumulation, results stored in bf16 as autocast
// stores them, everything else fp32), the loss and gradients stay close to
// fp32's. bf16 keeps 8 significant bits, so each GEMM operand and result is
// rounded by at most 2^-9 (2e-3) relative; a gradient crosses up to a dozen
// GEMMs of the forward and backward passes, where such errors partly
// cancel. The gradients are compared as one vector (error norm over
// reference norm, all parameters together): a single tensor can be a sum
// that cancels (BERT's pooler bias adds two examples of opposite labels) and
// then carries bf16 roundoff of its terms, not of its small result. Observed:
// loss within 3e-5, gradients within 8e-3. The bounds, 1e-3 and 3e-2, leave
// a margin yet fail if a GEMM ran in bf16 without fp32 accumulation or a
// reduction dropped to bf16 (errors of 1e-1 and more).
/// The loss and all gradients (as one vector: error norm over reference
/// norm) of the gradient function of a fixture's `file` under `precision`,
/// against fp32's.
void expectFileNearFp32(const std::string &fixtureName, const char *file,
                        Precision precision, bool narrowNorms, double lossBound,
                        double gradientBound) {
  FixtureModel model;
  ASSERT_NO_FATAL_FAILURE(
      differentiate("hf/" + fixtureName + "/", file, model));
  FailOnDiagnostics failures(model.context);
  mlir::func::FuncOp fp32 = model.gradient;
  mlir::func::FuncOp narrow = fp32.clone();
  model.module->push_back(narrow);
  narrow.setSymName("narrow");
  assignPrecision(narrow, precision, narrowNorms);
  int products = 0, norms = 0, wideNorms = 0;
  narrow.walk([&](MatmulOp op) { products += bool(op.getAccumulate()); });
  narrow.walk([&](mlir::Operation *op) {
    if (!llvm::isa<LayerNormOp, RmsNormOp, LayerNormGradOp, RmsNormGradOp>(op))
      return;
    ++norms;
    wideNorms += mlir::getElementTypeOrSelf(op->getOperand(0)).isF32();
  });
  EXPECT_GT(products, 0);
  EXPECT_GT(norms, 0);
  EXPECT_EQ(wideNorms, narrowNorms ? 0 : norms);
  auto reference = interpret(fp32, model.inputs);
  auto mixed = interpret(narrow, model.inputs);
  ASSERT_TRUE(mlir::succeeded(reference) && mlir::succeeded(mixed));
  double lossError = relativeError((*mixed)[0], (*reference)[0]);
  double error = 0.0, total = 0.0;
  for (unsigned i = 0; i < fp32.getNumResults(); ++i) {
    if (!fp32.getResultAttrOfType<mlir::StringAttr>(i, kGradientOfAttr))
      continue;
    double n = norm((*reference)[i]);
    double e = relativeError((*mixed)[i], (*reference)[i]) * n;
    error += e * e;
    total += n * n;
  }
  double gradientError = std::sqrt(error / total);
  EXPECT_LE(lossError, lossBound) << "loss";
  EXPECT_LE(gradientError, gradientBound) << "all gradients together";
}

/// The same for both exporters' graphs.
void expectNearFp32(const std::string &fixtureName, Precision precision,
                    double lossBound, double gradientBound,
                    bool narrowNorms = false) {
  for (const char *file : {"model.onnx", "model.dynamo.onnx"}) {
    SCOPED_TRACE(file);
    expectFileNearFp32(fixtureName, file, precision, narrowNorms, lossBound,
                       gradientBound);
  }
}

TEST_P(FixtureGradients, Bf16GradientsStayNearFp32) {
  expectNearFp32(GetParam(), Precision::BF16, 1e-3, 3e-2);
}

// Narrow norms add one bf16 rounding of each norm's input (2^-9 relative,
// as for a GEMM operand) and keep statistics and gradients f32, so bf16's
// bounds hold. Observed: loss within 4e-5, gradients within 1.2e-2 (GEMMs
// alone: 3e-5 and 8e-3).
TEST_P(FixtureGradients, Bf16NarrowNormsGradientsStayNearFp32) {
  expectNearFp32(GetParam(), Precision::BF16, 1e-3, 3e-2,
                 /*narrowNorms=*/true);
}

// fp16 and tf32 keep 11 significant bits, 8x finer rounding than bf16, so
// the bounds are bf16's divided by 8, rounded up: 1.25e-4 and 4e-3.
// Observed: loss within 3e-6, gradients within 8e-4 (about the same for
// both, though fp16 also stores products in 16 bits: the tiny models' values
// stay inside fp16's range, so only the significand matters; the step's loss
// scaling keeps it so for real gradients).
TEST_P(FixtureGradients, Fp16GradientsStayNearFp32) {
  expectNearFp32(GetParam(), Precision::FP16, 1.25e-4, 4e-3);
}

TEST_P(FixtureGradients, Tf32GradientsStayNearFp32) {
  expectNearFp32(GetParam(), Precision::TF32, 1.25e-4, 4e-3);
}

/// The gradient function of a fixture's `file`, in bf16, computes the same
/// bits fused and unfused.
void expectFusionExact(const std::string &fixtureName, const char *file) {
  FixtureModel model;
  ASSERT_NO_FATAL_FAILURE(differentiate("hf/" + fixtureName + "/", file, model));
  FailOnDiagnostics failures(model.context);
  mlir::func::FuncOp unfused = model.gradient;
  assignPrecision(unfused, Precision::BF16);
  mlir::func::FuncOp fused = unfused.clone();
  model.module->push_back(fused);
  fused.setSymName("fused");
  // The dynamo exports of GPT-2 drop its all-zero biases: no epilogue there.
  // GPT-2's MLP bias gradient, which no norm's gradient sums, joins its
  // weight gradient's GEMM (the dynamo export has no biases).
  bool gpt2 = llvm::StringRef(fixtureName).starts_with("gpt2");
  int epilogues = fuseGemmEpilogues(fused);
  if (llvm::StringRef(file) == "model.onnx") {
    EXPECT_GT(epilogues, 0);
  }
  EXPECT_GT(fuseElementwise(fused), 0);
  int biasGradients = fuseBiasGradients(fused);
  if (gpt2 && llvm::StringRef(file) == "model.onnx") {
    EXPECT_GT(biasGradients, 0);
  }
  fuseScalarReductions(fused);
  ASSERT_TRUE(mlir::succeeded(mlir::verify(fused)));
  auto before = interpret(unfused, model.inputs);
  auto after = interpret(fused, model.inputs);
  ASSERT_TRUE(mlir::succeeded(before) && mlir::succeeded(after));
  ASSERT_EQ(before->size(), after->size());
  for (auto [i, expected, actual] : llvm::enumerate(*before, *after)) {
    EXPECT_EQ(actual.getShape(), expected.getShape()) << "result " << i;
    EXPECT_EQ(actual.floats(), expected.floats()) << "result " << i;
    EXPECT_EQ(actual.ints(), expected.ints()) << "result " << i;
  }
}

// Both exporters' graphs, in mixed precision so that casts fuse too.
TEST_P(FixtureGradients, FusionKeepsGradientsBitForBit) {
  for (const char *file : {"model.onnx", "model.dynamo.onnx"}) {
    SCOPED_TRACE(file);
    expectFusionExact(GetParam(), file);
  }
}

/// Runs kiln.adamw (lr 1e-3, step 1, PyTorch's defaults) on `param` and
/// `grad` with zero moments, through the interpreter.
Tensor adamwStep(mlir::MLIRContext &context, const Tensor &param,
                 const Tensor &grad) {
  std::string type;
  llvm::raw_string_ostream os(type);
  os << param.getType(&context);
  std::string source =
      "func.func @f(%p: " + type + ", %g: " + type + ", %lr: tensor<f32>, "
      "%t: tensor<i64>) -> " + type + " {\n"
      "  %z = kiln.constant dense<0.0> : " + type + "\n"
      "  %0, %1, %2 = kiln.adamw %p, %g, %z, %z, %lr, %t {beta1 = 0.9, beta2 "
      "= 0.999, epsilon = 1.0e-8, weight_decay = 0.01} : " + type +
      ", tensor<f32>, tensor<i64>\n  return %0 : " + type + "\n}";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  EXPECT_TRUE(module) << source;
  Tensor lr(DType::F32, {}), step(DType::I64, {});
  lr.setFromDouble(0, 1e-3);
  step.ints()[0] = 1;
  auto results = interpret(*module->getOps<mlir::func::FuncOp>().begin(),
                           {param, grad, lr, step});
  EXPECT_TRUE(mlir::succeeded(results));
  return (*results)[0];
}

// kiln.adamw on PyTorch's own gradients reproduces torch.optim.AdamW's first
// step (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every
// parameter) within 1e-5 relative for every parameter.
TEST_P(FixtureGradients, AdamWOnPyTorchGradientsMatches) {
  std::string directory = "hf/" + GetParam() + "/";
  mlir::MLIRContext context;
  registerKilnDialects(context);
  std::error_code error;
  int compared = 0;
  for (llvm::sys::fs::directory_iterator it(fixture(directory + "ref/grad"), error), end;
       it != end && !error; it.increment(error)) {
    std::string file = llvm::sys::path::filename(it->path()).str();
    // Initial weights are those the model was exported with.
    Tensor grad = readOrDie(it->path());
    Tensor expected = readOrDie(fixture(directory + "ref/adamw_step1/" + file));
    Tensor initial = initialParameter(context, fixture(directory + "model.onnx"),
                                      file.substr(0, file.size() - 3));
    EXPECT_LE(relativeError(adamwStep(context, initial, grad), expected), 1e-5)
        << file;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// The whole training step (kiln's gradients, then AdamW) matches PyTorch's
// step within 1e-5 relative, except where the first Adam step is
// ill-conditioned: it moves an element by lr * g / (|g| + eps), whose
// sensitivity to g, lr * eps / (|g| + eps)^2, makes a gradient below
// 100 * eps = 1e-6 amplify fp32 roundoff of the backward pass (which differs
// between any two implementations) into the update. That covers the
// analytically zero gradients of attention key biases (BERT's, GPT-2's fused
// block), which are pure roundoff. Those elements must still move by at most
// lr; kiln.adamw itself is checked on every element by
// AdamWOnPyTorchGradientsMatches.
TEST_P(FixtureGradients, AdamWStepMatchesPyTorch) {
  std::string directory = "hf/" + GetParam() + "/";
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      import(context, fixture(directory + "model.onnx"));
  ASSERT_TRUE(module);
  FailOnDiagnostics failures(context);
  TrainingSpec spec; // PyTorch's AdamW defaults, lr 1e-3, constant
  auto forward = *module->getOps<mlir::func::FuncOp>().begin();
  mlir::FailureOr<std::unique_ptr<Trainer>> trainer =
      Trainer::create(*module, forward, spec);
  ASSERT_TRUE(mlir::succeeded(trainer));
  llvm::SmallVector<Tensor> inputs{
      readOrDie(fixture(directory + "ref/input_ids.pb")),
      readOrDie(fixture(directory + "ref/labels.pb"))};
  ASSERT_TRUE(mlir::succeeded((*trainer)->step(inputs)));
  const double illConditioned = 100 * 1e-8; // 100 * eps
  int compared = 0;
  for (const std::string &name : (*trainer)->parameterNames()) {
    Tensor expected =
        readOrDie(fixture(directory + "ref/adamw_step1/" + name + ".pb"));
    Tensor grad = readOrDie(fixture(directory + "ref/grad/" + name + ".pb"));
    Tensor actual = (*trainer)->parameters()[name];
    // Replace those elements by PyTorch's after checking their bound.
    for (int64_t i = 0; i < grad.getNumElements(); ++i)
      if (std::fabs(grad.getAsDouble(i)) < illConditioned) {
        EXPECT_LE(std::fabs(actual.getAsDouble(i) - expected.getAsDouble(i)),
                  2e-3 + 1e-7)
            << name << "[" << i << "]";
        actual.setFromDouble(i, expected.getAsDouble(i));
      }
    EXPECT_LE(relativeError(actual, expected), 1e-5) << name;
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>((*trainer)->trainedParameters().size()));
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
