//===- KernelTest.cpp - every kernel against the interpreter --------------===//
//
// One small function per op family, compiled as it is (no training) and run
// by the executor on random inputs (never zeros) in a poisoned arena; every
// output must equal the interpreter's to 2e-6 relative (a few f32 ulps: the
// kernels round where the interpreter rounds), or 1e-4 where a GEMM runs on
// cuBLAS, which accumulates in f32; cuDNN's attention, whose order of
// operations is its own, no less accurate than twice the interpreter
// against an exact result. Integer and boolean outputs are exact.
// An integer argument draws from [0, range) (`test.range`, default 8).
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Target/CUDATarget.h"
#include "kiln/Tools/ModelLoading.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace kiln;

namespace {

struct KernelCase {
  const char *name;
  const char *source;
  /// Whether a GEMM computes a result (cuBLAS accumulates in f32).
  bool gemm = false;
  /// Attention by the kernels that round as the interpreter does, or on
  /// tensor cores, whose results agree to `tolerance`.
  bool exactAttention = true;
  double tolerance = 2e-6;
  /// The GEMMs' epilogues in order, where the case is about them, and
  /// whether each adds a C matrix.
  std::vector<artifact::Epilogue> epilogues = {};
  std::vector<bool> addsC = {};
  /// Every 16-bit attention pass by cuDNN (--attention=cudnn), at
  /// `tolerance`.
  bool cudnnAttention = false;
  /// Results held to a bound of their own, tighter than `tolerance` (a
  /// mask's gradient, which is not rounded to 16 bits as dq, dk, dv are).
  std::vector<std::pair<size_t, double>> resultTolerances = {};
  /// Every kernel's indices in 64 bits (`--wide-indices`); small cases
  /// otherwise compute them in 32.
  bool wideIndices = false;
  /// Results checked against an exact one instead of the interpreter's
  /// (result, exact result): the largest error of the executor's result
  /// must be at most twice the interpreter's own, as FlashAttention's tests
  /// hold its kernels to PyTorch's 16-bit attention. For a library whose
  /// order of operations is not kiln's (cuDNN): element by element, its
  /// roundings need not land where the interpreter's do.
  std::vector<std::pair<size_t, size_t>> exactReferences = {};
  /// TargetOptions::attentionL2Bytes where the case is about the head
  /// groups the tensor-core kernels' blocks take; 0 for the default.
  int64_t attentionL2Bytes = 0;
};

class KernelTest : public ::testing::TestWithParam<KernelCase> {};

Tensor randomTensor(mlir::RankedTensorType type, int64_t range,
                    std::mt19937_64 &generator) {
  Tensor tensor(*dtypeOf(type.getElementType()), type.getShape());
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  for (int64_t i = 0; i < tensor.getNumElements(); ++i) {
    if (tensor.isFloat())
      tensor.setFromDouble(i, uniform(generator));
    else if (type.getElementType().isInteger(1))
      tensor.ints()[i] = generator() % 2;
    else
      tensor.ints()[i] = static_cast<int64_t>(generator() % range);
  }
  return tensor;
}

/// Expects `got`'s largest error against `exact` to be at most twice
/// `interpreted`'s, plus 2^-16 of the largest exact value (far below a
/// 16-bit result's own rounding, 2^-9 of it), so that an interpreter
/// result that happens to be exact does not demand an exact kernel.
void expectNoWorseThanInterpreter(const Tensor &got, const Tensor &interpreted,
                                  const Tensor &exact, size_t result) {
  ASSERT_EQ(got.getNumElements(), exact.getNumElements());
  double gotError = 0.0, interpretedError = 0.0, largest = 0.0;
  for (int64_t e = 0; e < exact.getNumElements(); ++e) {
    double x = exact.floats()[e], error = std::fabs(got.floats()[e] - x);
    if (std::isnan(error) || error > gotError) // a NaN stays
      gotError = error;
    interpretedError =
        std::max(interpretedError, std::fabs(interpreted.floats()[e] - x));
    largest = std::max(largest, std::fabs(x));
  }
  EXPECT_LE(gotError, 2 * interpretedError + 0x1p-16 * largest)
      << "result " << result << ": the interpreter's error is "
      << interpretedError;
}

/// Checks that `executor`'s results are `expected`, to `c`'s tolerance.
void expectResults(mlir::func::FuncOp function, llvm::ArrayRef<Tensor> expected,
                   kiln::testing::Executor &executor, const KernelCase &c) {
  bool f32Gemms = c.gemm && kiln::testing::gemmsAccumulateInF32();
  double tolerance = f32Gemms ? std::max(c.tolerance, 1e-4) : c.tolerance;
  for (auto [i, want] : llvm::enumerate(expected)) {
    double bound = tolerance;
    // A sum accumulated in f32 rather than f64 and stored in 16 bits may
    // round to the neighbouring 16-bit value: one unit in the last place.
    if (f32Gemms && want.getDType() == DType::BF16)
      bound = std::max(bound, 0x1p-7);
    if (f32Gemms && want.getDType() == DType::F16)
      bound = std::max(bound, 0x1p-10);
    for (auto [result, own] : c.resultTolerances)
      if (result == i)
        bound = own;
    Tensor got = executor.read(resultName(function, i));
    auto exact = llvm::find_if(c.exactReferences,
                               [&](auto pair) { return pair.first == i; });
    if (exact != c.exactReferences.end()) {
      expectNoWorseThanInterpreter(got, want, expected[exact->second], i);
      continue;
    }
    ASSERT_EQ(got.getNumElements(), want.getNumElements());
    for (int64_t e = 0; e < want.getNumElements(); ++e) {
      if (!want.isFloat()) {
        ASSERT_EQ(got.ints()[e], want.ints()[e])
            << "result " << i << " at " << e;
        continue;
      }
      double x = got.floats()[e], y = want.floats()[e];
      if (std::isnan(y)) {
        ASSERT_TRUE(std::isnan(x)) << "result " << i << " at " << e;
        continue;
      }
      if (x == y) // infinities: a row that keeps no key has -inf
        continue;
      ASSERT_LE(std::fabs(x - y), bound * std::max(1.0, std::fabs(y)))
          << "result " << i << " at " << e << ": " << x << " vs " << y;
    }
  }
}

/// An executor that has run `artifact`, compiled from `function`, on
/// `arguments`; null, with the failure reported, where there is none.
std::unique_ptr<kiln::testing::Executor>
run(const artifact::ArtifactT &artifact, mlir::func::FuncOp function,
    llvm::ArrayRef<Tensor> arguments,
    const kiln::testing::ExecutorOptions &options) {
  std::string error;
  auto executor = kiln::testing::makeExecutor(artifact, error, options);
  if (!executor) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  for (auto [i, argument] : llvm::enumerate(arguments))
    executor->write(argumentName(function, i), argument);
  executor->run();
  return executor;
}

/// Compiles `function` as `c` says, with attention's query gradient as
/// `queryGradient` says, runs it on `arguments` and checks its results
/// against the interpreter's, `expected`.
void compileAndCompare(mlir::func::FuncOp function,
                       llvm::ArrayRef<Tensor> arguments,
                       llvm::ArrayRef<Tensor> expected, const KernelCase &c,
                       cuda::QueryGradient queryGradient) {
  cuda::TargetOptions options;
  options.archs = kiln::testing::executorArchitectures();
  options.exactAttention = c.exactAttention;
  options.wideIndices = c.wideIndices;
  options.queryGradient = queryGradient;
  if (c.attentionL2Bytes)
    options.attentionL2Bytes = c.attentionL2Bytes;
  if (c.cudnnAttention)
    options.attention = cuda::AttentionBackend::Cudnn;
  cuda::TargetReport report;
  auto compiled = cuda::compileFunction(function, options, &report);
  ASSERT_TRUE(mlir::succeeded(compiled));
  // Every 16-bit attention pass on cuDNN; the f32 ones, exact references
  // for the gradients, on kiln's kernels.
  for (const std::string &kept : report.keptAttention)
    EXPECT_NE(kept.find("operands that are not bf16 or fp16"),
              std::string::npos)
        << kept;
  if (!c.epilogues.empty()) {
    std::vector<artifact::Epilogue> epilogues;
    std::vector<bool> addsC;
    for (const auto &operation : (*compiled)->operations)
      if (operation->gemm) {
        epilogues.push_back(operation->gemm->epilogue);
        addsC.push_back(operation->gemm->c >= 0);
      }
    EXPECT_EQ(epilogues, c.epilogues);
    EXPECT_EQ(addsC, c.addsC);
  }
  // A bias gradient a GEMM sums, and the kernels that sum it where
  // cuBLASLt cannot.
  bool fallbacks = llvm::any_of((*compiled)->operations, [](auto &operation) {
    return operation->epilogue_fallback_of >= 0;
  });
  for (bool gemmBiasGradients : {true, false}) {
    if (!gemmBiasGradients && !fallbacks)
      break;
    SCOPED_TRACE(gemmBiasGradients ? "bias gradients in GEMMs"
                                   : "bias gradients in kernels");
    kiln::testing::ExecutorOptions executorOptions;
    executorOptions.gemmBiasGradients = gemmBiasGradients;
    auto executor = run(**compiled, function, arguments, executorOptions);
    ASSERT_TRUE(executor);
    expectResults(function, expected, *executor, c);
  }
}

TEST_P(KernelTest, MatchesInterpreter) {
  const KernelCase &c = GetParam();
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(c.source, &context);
  ASSERT_TRUE(module) << c.source;
  auto function = *module->getOps<mlir::func::FuncOp>().begin();

  std::mt19937_64 generator(7);
  llvm::SmallVector<Tensor> arguments;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    auto range = function.getArgAttrOfType<mlir::IntegerAttr>(i, "test.range");
    arguments.push_back(randomTensor(
        mlir::cast<mlir::RankedTensorType>(function.getArgumentTypes()[i]),
        range ? range.getInt() : 8, generator));
  }
  auto expected = interpret(function, arguments);
  ASSERT_TRUE(mlir::succeeded(expected));

  {
    SCOPED_TRACE("dQ summed by atomics");
    compileAndCompare(function, arguments, *expected, c,
                      cuda::QueryGradient::Atomic);
  }
  // Tensor-core gradients the other ways too: dQ by a query kernel of its
  // own, recomputing dS or reading the dS that the key/value kernel
  // stored.
  bool gradients = false;
  function.walk([&](AttentionGradOp) { gradients = true; });
  if (gradients && !c.exactAttention) {
    {
      SCOPED_TRACE("dQ by a kernel of its own");
      compileAndCompare(function, arguments, *expected, c,
                        cuda::QueryGradient::Recomputed);
    }
    SCOPED_TRACE("dQ from the stored dS");
    compileAndCompare(function, arguments, *expected, c,
                      cuda::QueryGradient::Stored);
  }
}

// An index out of range is an error at run time: the kernel reads inside
// the tensor and flags the launch, and the runtime names the op.
TEST(IndexCheckTest, OutOfRangeIndicesAreReported) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%t: tensor<6x4xf32>, %i: tensor<3xi64>, %x: tensor<3x5xf32>,
                    %y: tensor<3xi64>) -> (tensor<3x4xf32>, tensor<f32>) {
      %g = kiln.gather %t, %i {axis = 0 : i64}
          : (tensor<6x4xf32>, tensor<3xi64>) -> tensor<3x4xf32> loc("embedding")
      %l = kiln.cross_entropy %x, %y reduction = mean {ignore_index = -100 : i64}
          : (tensor<3x5xf32>, tensor<3xi64>) -> tensor<f32> loc("loss")
      return %g, %l : tensor<3x4xf32>, tensor<f32>
    })",
                                                        &context);
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  cuda::TargetOptions options;
  options.archs = kiln::testing::executorArchitectures();
  auto compiled = cuda::compileFunction(function, options);
  ASSERT_TRUE(mlir::succeeded(compiled));
  auto run = [&](std::vector<int64_t> ids, std::vector<int64_t> labels) {
    std::string error;
    auto executor = kiln::testing::makeExecutor(**compiled, error);
    if (!executor) {
      ADD_FAILURE() << error;
      return std::string("no executor");
    }
    Tensor t(DType::F32, {6, 4}), i(DType::I64, {3}), x(DType::F32, {3, 5}),
        y(DType::I64, {3});
    for (int64_t e = 0; e < 3; ++e) {
      i.ints()[e] = ids[e];
      y.ints()[e] = labels[e];
    }
    executor->write("arg0", t);
    executor->write("arg1", i);
    executor->write("arg2", x);
    executor->write("arg3", y);
    executor->run();
    return executor->indexError();
  };
  // Negative ids count from the end; ignored labels are no error.
  EXPECT_EQ(run({0, 5, -6}, {0, -100, 4}), "");
  EXPECT_NE(run({0, 6, 1}, {0, 1, 2}).find("embedding"), std::string::npos);
  EXPECT_NE(run({0, 1, 2}, {0, 5, 2}).find("loss"), std::string::npos);
}

// A scalar over many terms (a gradient norm's sum of squares, a mean) is
// split into parts that the blocks of any grid take in turn, each part a
// fixed chunk of the terms: the artifact's grid, one wave of the device
// and 3 blocks store the same partials, so the sums are the same to the
// bit (f64 squares, whose sum's last bits follow the order of the
// additions), and match the interpreter's within 2e-6, as the other
// kernels.
TEST(SplitSumTest, PartialsAreTheSameInAnyGrid) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%x: tensor<128x128xf64>, %y: tensor<20011xf32>)
        -> (tensor<f64>, tensor<f32>) {
      %s:2 = kiln.fusion %x, %y : (tensor<128x128xf64>, tensor<20011xf32>)
          -> (tensor<f64>, tensor<f32>) {
      ^bb0(%a: tensor<128x128xf64>, %b: tensor<20011xf32>):
        %a2 = kiln.mul %a, %a : (tensor<128x128xf64>, tensor<128x128xf64>) -> tensor<128x128xf64>
        %sa = kiln.reduce_sum %a2 {axes = array<i64: 0, 1>} : (tensor<128x128xf64>) -> tensor<f64>
        %mb = kiln.reduce_mean %b {axes = array<i64: 0>} : (tensor<20011xf32>) -> tensor<f32>
        kiln.yield %sa, %mb : tensor<f64>, tensor<f32>
      }
      return %s#0, %s#1 : tensor<f64>, tensor<f32>
    })",
                                                        &context);
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  std::mt19937_64 generator(5);
  llvm::SmallVector<Tensor> arguments;
  for (mlir::Type type : function.getArgumentTypes())
    arguments.push_back(
        randomTensor(mlir::cast<mlir::RankedTensorType>(type), 8, generator));
  auto expected = interpret(function, arguments);
  ASSERT_TRUE(mlir::succeeded(expected));
  cuda::TargetOptions options;
  options.archs = kiln::testing::executorArchitectures();
  auto compiled = cuda::compileFunction(function, options);
  ASSERT_TRUE(mlir::succeeded(compiled));
  // Both sums' partials, in kernels whose grids the executor may shrink.
  int strided = 0;
  for (const auto &operation : (*compiled)->operations)
    strided += operation->kernel && operation->kernel->grid_strided &&
               operation->kernel->grid >= 1024;
  EXPECT_GE(strided, 1);
  std::vector<std::vector<double>> sums;
  for (auto [deviceGrids, limit] :
       {std::pair(false, 0u), std::pair(true, 0u), std::pair(true, 3u)}) {
    kiln::testing::ExecutorOptions executorOptions;
    executorOptions.deviceGrids = deviceGrids;
    executorOptions.gridLimit = limit;
    auto executor = run(**compiled, function, arguments, executorOptions);
    ASSERT_TRUE(executor);
    sums.emplace_back();
    for (auto [i, want] : llvm::enumerate(*expected)) {
      double got = executor->read(resultName(function, i)).floats()[0];
      double y = want.floats()[0];
      EXPECT_LE(std::fabs(got - y), 2e-6 * std::max(1.0, std::fabs(y)))
          << "result " << i << ": " << got << " vs " << y;
      sums.back().push_back(got);
    }
  }
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(sums[0], sums[2]);
}

// Runs `function` on `inputs` (arg0, arg1, ...) by the executor, whose
// source must hold `marker` (the path under test), and expects each result
// to equal the interpreter's bit for bit, a zero's sign too (a NaN, any
// NaN).
void expectBitForBit(mlir::func::FuncOp function,
                     llvm::ArrayRef<Tensor> inputs, llvm::StringRef marker) {
  auto expected = interpret(function, inputs);
  ASSERT_TRUE(mlir::succeeded(expected));
  cuda::TargetOptions options;
  options.archs = kiln::testing::executorArchitectures();
  auto compiled = cuda::compileFunction(function, options);
  ASSERT_TRUE(mlir::succeeded(compiled));
  EXPECT_NE((*compiled)->source.find(marker.str()), std::string::npos);
  std::string error;
  auto executor = kiln::testing::makeExecutor(**compiled, error);
  ASSERT_TRUE(executor) << error;
  for (auto [n, input] : llvm::enumerate(inputs))
    executor->write("arg" + std::to_string(n), input);
  executor->run();
  for (auto [n, want] : llvm::enumerate(*expected)) {
    Tensor got = executor->read(resultName(function, n));
    for (int64_t e = 0; e < want.getNumElements(); ++e) {
      double a = got.getAsDouble(e), b = want.getAsDouble(e);
      ASSERT_TRUE(std::isnan(b) ? std::isnan(a)
                                : a == b && std::signbit(a) == std::signbit(b))
          << "result " << n << " at " << e << ": " << a << " vs " << b;
    }
  }
}

// Kernels round after every op, as the interpreter does, in integer
// arithmetic on the double's bits: exactly the interpreter's rounding for
// ties, carries into the exponent, overflow, subnormals and non-finite
// values, and for doubles drawn over every exponent the types reach.
TEST(RoundingTest, CastsRoundAsTheInterpreterDoes) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%x: tensor<4096xf64>)
        -> (tensor<4096xbf16>, tensor<4096xf16>, tensor<4096xtf32>) {
      %b = kiln.cast %x : tensor<4096xf64> to tensor<4096xbf16>
      %h = kiln.cast %x : tensor<4096xf64> to tensor<4096xf16>
      %t = kiln.cast %x : tensor<4096xf64> to tensor<4096xtf32>
      return %b, %h, %t : tensor<4096xbf16>, tensor<4096xf16>, tensor<4096xtf32>
    })",
                                                        &context);
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  Tensor x(DType::F64, {4096});
  std::vector<double> edges = {0.0,
                               -0.0,
                               INFINITY,
                               -INFINITY,
                               NAN,
                               1.0,
                               1.0 + 0x1p-8, // bf16 tie
                               1.0 + 3 * 0x1p-8,
                               2.0 - 0x1p-9,
                               1.0 + 0x1p-11,
                               1.0 + 3 * 0x1p-11,
                               3.3895313892515355e38,
                               3.3961775292304611e38,
                               3.4e38,
                               65504.0,
                               65520.0,
                               65519.99,
                               0x1p-126,
                               0x1.8p-133,
                               0x1p-134,
                               0x1p-149,
                               0x1p-150,
                               0x1.0000001p-150,
                               0x1p-14,
                               0x1.8p-25,
                               0x1p-24,
                               0x1p-25,
                               0x1.001p-25,
                               1e-300,
                               1e300,
                               4.9e-324};
  std::mt19937_64 generator(11);
  for (int64_t e = 0; e < x.getNumElements(); ++e) {
    double value;
    if (e < 2 * static_cast<int64_t>(edges.size())) {
      value = edges[e / 2] * (e % 2 ? -1.0 : 1.0);
    } else {
      // Exponents from 2^-160 to 2^140, and low bits that are often ties.
      uint64_t bits = (uint64_t(863 + generator() % 300) << 52) |
                      (generator() & ((1ull << 52) - 1));
      if (e % 3 == 0)
        bits &= ~((1ull << 40) - 1);
      std::memcpy(&value, &bits, sizeof value);
      value *= e % 2 ? -1.0 : 1.0;
    }
    x.floats()[e] = value;
  }
  expectBitForBit(function, {x}, "round_bf16(");
}

// An f32 result of one +, -, *, / or sqrt of floats (f32, or a widened
// bf16 for a product) is computed in f32 (__fadd_rn, ...), which rounds the
// exact result once where the interpreter rounds it to double and then to f32:
// the same bits, a double's 53 bits being at least 2 * 24 + 2 (and no
// contraction into an FMA). So are narrowing casts of floats, in integer
// arithmetic on the f32's bits. Operands over every f32 exponent,
// subnormals and non-finite values among them, and pairs of nearby values
// (cancellation).
TEST(RoundingTest, F32ArithmeticRoundsAsTheInterpreterDoes) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%a: tensor<4096xf32>, %b: tensor<4096xf32>, %c: tensor<4096xbf16>)
        -> (tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>,
            tensor<4096xf32>, tensor<4096xf32>, tensor<4096xbf16>, tensor<4096xf16>) {
      %add = kiln.add %a, %b : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
      %sub = kiln.sub %a, %b : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
      %mul = kiln.mul %a, %b : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
      %div = kiln.div %a, %b : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
      %sqrt = kiln.sqrt %a : tensor<4096xf32>
      %wide = kiln.cast %c : tensor<4096xbf16> to tensor<4096xf32>
      %scaled = kiln.mul %a, %wide : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
      %narrow = kiln.cast %a : tensor<4096xf32> to tensor<4096xbf16>
      %half = kiln.cast %a : tensor<4096xf32> to tensor<4096xf16>
      return %add, %sub, %mul, %div, %sqrt, %scaled, %narrow, %half
          : tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>,
            tensor<4096xf32>, tensor<4096xf32>, tensor<4096xbf16>, tensor<4096xf16>
    })",
                                                        &context);
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  Tensor a(DType::F32, {4096}), b(DType::F32, {4096}), c(DType::BF16, {4096});
  std::mt19937_64 generator(13);
  auto randomFloat = [&] {
    uint32_t bits = static_cast<uint32_t>(generator());
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  };
  for (int64_t e = 0; e < 4096; ++e) {
    float x = randomFloat(), y = randomFloat();
    // Nearby exponents, so that sums round and differences cancel.
    if (e % 2 == 0 && std::isfinite(x) && x != 0.0f)
      y = std::ldexp(x, static_cast<int>(generator() % 5) - 2) *
          (1.0f + static_cast<float>(generator() % 1024) * 0x1p-20f) *
          (e % 4 == 0 ? -1.0f : 1.0f);
    a.setFromDouble(e, x);
    b.setFromDouble(e, y);
    c.setFromDouble(e, randomFloat());
  }
  expectBitForBit(function, {a, b, c}, "__fadd_rn(");
}

// The gradient of a cross-entropy (reduction none, labels of -100
// ignored) over 16-bit logits x, labels y and output gradients g, by the
// executor, must equal the interpreter's bit for bit.
void expectLossGradientAsInterpreted(
    const Tensor &x, const Tensor &y, const Tensor &g,
    llvm::StringRef marker = "rounded_exp_term<") {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  std::string t = "tensor<" + std::to_string(x.getShape()[0]) + "x" +
                  std::to_string(x.getShape()[1]) + "x" +
                  (x.getDType() == DType::BF16 ? "bf16" : "f16") + ">";
  std::string labels = "tensor<" + std::to_string(x.getShape()[0]) + "xi64>",
              grads = "tensor<" + std::to_string(x.getShape()[0]) + "xf32>";
  std::string source = "func.func @main(%x: " + t + ", %y: " + labels +
                       ", %g: " + grads + ") -> " + t +
                       " {\n  %d = kiln.cross_entropy_grad %x, %y, %g "
                       "reduction = none {ignore_index = -100 : i64} : (" +
                       t + ", " + labels + ", " + grads + ") -> " + t +
                       "\n  return %d : " + t + "\n}\n";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  expectBitForBit(*module->getOps<mlir::func::FuncOp>().begin(), {x, y, g},
                  marker);
}

/// Logits of N(0, spread) in `rows` rows of `classes`, random labels and
/// output gradients of N(0, spread) / `shrink`, against the interpreter.
void expectRandomLossGradients(DType type, int64_t rows, int64_t classes,
                               double spread, double shrink, uint64_t seed,
                               llvm::StringRef marker = "rounded_exp_term<") {
  Tensor x(type, {rows, classes}), y(DType::I64, {rows}), g(DType::F32, {rows});
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> normal(0.0, spread);
  for (int64_t e = 0; e < x.getNumElements(); ++e)
    x.setFromDouble(e, normal(generator));
  for (int64_t r = 0; r < rows; ++r) {
    y.ints()[r] = generator() % classes;
    g.setFromDouble(r, normal(generator) / shrink);
  }
  expectLossGradientAsInterpreted(x, y, g, marker);
}

// A 16-bit loss gradient is computed in f32 and kept only where its error
// bound cannot move the rounding (rounded_exp_term): the interpreter's
// rounding, bit for bit, for random rows and for rows whose largest
// gradient the f32 values cannot round alone: a scale 1 to 3 f32 units
// from one that puts it on a tie of two 16-bit values, closer than the f32
// exp's error and far beyond the double's. Rows with one logit far above
// the rest have exponents beyond f32's range; rows whose label is ignored
// have zeros, of their output gradient's sign.
TEST(RoundingTest, LossGradientsRoundAsTheInterpreterDoes) {
  for (DType type : {DType::BF16, DType::F16}) {
    int significant = type == DType::BF16 ? 8 : 11;
    Tensor x(type, {64, 256}), y(DType::I64, {64}), g(DType::F32, {64});
    std::mt19937_64 generator(5);
    std::normal_distribution<double> normal(0.0, 3.0);
    for (int64_t r = 0; r < 64; ++r) {
      for (int64_t c = 0; c < 256; ++c)
        x.setFromDouble(r * 256 + c, r >= 48 && r < 52
                                         ? (c == 7 ? 60.0 : -60.0)
                                         : normal(generator));
      y.ints()[r] = r >= 56 && r < 60 ? -100 : generator() % 256;
      g.setFromDouble(r, normal(generator));
      if (r >= 32)
        continue;
      // The row's probabilities as the interpreter computes them.
      double maximum = -INFINITY, sum = 0.0;
      int64_t largest = 0;
      for (int64_t c = 0; c < 256; ++c)
        if (x.getAsDouble(r * 256 + c) > maximum) {
          maximum = x.getAsDouble(r * 256 + c);
          largest = c;
        }
      for (int64_t c = 0; c < 256; ++c)
        sum += std::exp(x.getAsDouble(r * 256 + c) - maximum);
      double p = 1.0 / sum;
      y.ints()[r] = (largest + 1) % 256;
      // A tie of two 16-bit values near 1.5 p, the scale that puts the
      // largest gradient on it, and that scale moved by 1 to 3 f32 units.
      int exponent;
      std::frexp(1.5 * p, &exponent);
      double spacing = std::ldexp(1.0, exponent - significant);
      double tie = (std::floor(1.5 * p / spacing) + 0.5) * spacing;
      float scale = static_cast<float>(tie / p);
      int units = r % 6 < 3 ? -(1 + r % 6) : r % 6 - 2;
      std::frexp(scale, &exponent);
      g.setFromDouble(r, (scale + units * std::ldexp(1.0, exponent - 24)) *
                             (r / 6 % 2 ? -1.0 : 1.0));
    }
    expectLossGradientAsInterpreted(x, y, g);
  }
}

// Many random logits of a wide spread (a log-sum-exp near 50, most logits
// 30 to 70 below it), where the f32 difference x - lse, inexact, carries
// much of the error bound: without that term of the bound, some 20 of
// the bf16 case's 2^20 logits round differently. (The f16 case's
// gradients are mostly below f16's range, which the bound must get right
// too.)
TEST(RoundingTest, LossGradientsOfManyLogitsRoundAsTheInterpreterDoes) {
  for (DType type : {DType::BF16, DType::F16})
    expectRandomLossGradients(type, 256, 4096, 12.0, 16384.0, 7);
}

// Rows longer than L2 could hold for every block in flight (24 KB, as a
// 100 KB row of GPT-2's logits): the gradient takes a row's pieces last
// first, after its log-sum-exp read them first to last, and every logit,
// the last piece's and the first's alike, is the interpreter's.
TEST(RoundingTest, LossGradientsOfLongRowsRoundAsTheInterpreterDoes) {
  expectRandomLossGradients(DType::BF16, 24, 12000, 3.0, 64.0, 31,
                            "c -= blockDim.x");
}

/// `draws` values of N(0, spread), then the 33538 bf16 values of [-16, 16]:
/// the inputs of the erf GELU's rounded kernels.
Tensor geluInputs(int64_t draws, double spread, uint64_t seed) {
  Tensor x(DType::F32, {draws + 33538});
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> normal(0.0, spread);
  for (int64_t e = 0; e < draws; ++e)
    x.setFromDouble(e, normal(generator));
  int64_t e = draws;
  for (uint32_t bits = 0; bits < 0x10000u && e < x.getNumElements(); ++bits) {
    float value;
    uint32_t wide = bits << 16;
    std::memcpy(&value, &wide, sizeof value);
    if (std::fabs(value) <= 16.0f)
      x.floats()[e++] = value;
  }
  EXPECT_EQ(e, x.getNumElements());
  return x;
}

/// A function of `type` values by `op` of f32 operands `operands` (kiln.gelu
/// or kiln.gelu_grad, approximation none), its f32 result cast to `type`.
std::string erfGeluRoundedTo(const std::string &type, int64_t count,
                             const std::string &op, int operands) {
  std::string f32 = "tensor<" + std::to_string(count) + "xf32>",
              narrow = "tensor<" + std::to_string(count) + "x" + type + ">";
  std::string arguments = "%x: " + f32, names = "%x";
  if (operands == 2) {
    arguments += ", %g: " + f32;
    names += ", %g";
  }
  return "func.func @main(" + arguments + ") -> " + narrow +
         " {\n  %d = " + op + " " + names + " approximation = none : " + f32 +
         "\n  %c = kiln.cast %d : " + f32 + " to " + narrow +
         "\n  return %c : " + narrow + "\n}\n";
}

// An f32 erf GELU rounded on to 16 bits, as between two 16-bit GEMMs, is
// computed in f32 and kept only where its error bound cannot move the
// rounding (rounded_gelu_erf): the interpreter's rounding through f32, bit
// for bit, for 2^20 values of spread 3 and every bf16 value from -16 to
// 16. Where 1 + erf(x / sqrt 2) cancels, below -5 or so, the interpreter's
// value is the double formula's, not the exact one: without the bound's
// term for that, some 5000 of them round differently (checked).
TEST(RoundingTest, GeluBeforeA16BitGemmRoundsAsTheInterpreterDoes) {
  for (const char *type : {"bf16", "f16"}) {
    mlir::MLIRContext context;
    registerKilnDialects(context);
    Tensor x = geluInputs(1 << 20, 3.0, 9);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(
        erfGeluRoundedTo(type, x.getNumElements(), "kiln.gelu", 1), &context);
    ASSERT_TRUE(module);
    expectBitForBit(*module->getOps<mlir::func::FuncOp>().begin(), {x},
                    "rounded_gelu_erf<");
  }
}

// Backward, the erf GELU's derivative scaling a 16-bit gradient, rounded
// to 16 bits where it is computed (the gradient of a GELU between two
// 16-bit GEMMs, which the next products and the bias gradient read), is
// computed in f32 too (rounded_gelu_erf_grad): bit for bit, for 2^19
// values of spread 3 and every bf16 value from -16 to 16, against
// gradients of spread 1 (16-bit values, and f32 ones), across the
// derivative's root near -0.75, where its terms cancel, and below -5,
// where the interpreter's value is the double formula's.
TEST(RoundingTest, GeluGradientBetween16BitGemmsRoundsAsTheInterpreterDoes) {
  for (const char *type : {"bf16", "f16"}) {
    mlir::MLIRContext context;
    registerKilnDialects(context);
    Tensor x = geluInputs(1 << 19, 3.0, 23);
    Tensor g(DType::F32, x.getShape());
    std::mt19937_64 generator(29);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (int64_t e = 0; e < g.getNumElements(); ++e) {
      double value = normal(generator);
      g.setFromDouble(e,
                      e % 2 ? value : roundToElementType(DType::BF16, value));
    }
    auto module = mlir::parseSourceString<mlir::ModuleOp>(
        erfGeluRoundedTo(type, x.getNumElements(), "kiln.gelu_grad", 2),
        &context);
    ASSERT_TRUE(module);
    expectBitForBit(*module->getOps<mlir::func::FuncOp>().begin(), {x, g},
                    "rounded_gelu_erf_grad<");
  }
}

// The erf GELU's gradient, Phi(x) + x phi(x), times an output gradient,
// rounded to f32 as the interpreter rounds it: the density's exp by
// exp_nonpositive (within 1.1 ulps, as CUDA's is within 1), bit for bit
// for 2^18 inputs of spread 3, and from -40 to 40 (where x phi(x) is
// subnormal, -38.6 to -37.6, the library's exp: the sign of a zero result
// is the tiny product's).
TEST(RoundingTest, GeluGradientRoundsAsTheInterpreterDoes) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%x: tensor<270144xf32>, %g: tensor<270144xf32>) -> tensor<270144xf32> {
      %d = kiln.gelu_grad %x, %g approximation = none : tensor<270144xf32>
      return %d : tensor<270144xf32>
    })",
                                                        &context);
  ASSERT_TRUE(module);
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  Tensor x(DType::F32, {270144}), g(DType::F32, {270144});
  std::mt19937_64 generator(17);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::uniform_real_distribution<double> wide(-40.0, 40.0);
  for (int64_t e = 0; e < x.getNumElements(); ++e) {
    x.setFromDouble(e, e < (1 << 18) ? normal(generator) : wide(generator));
    g.setFromDouble(e, normal(generator));
  }
  expectBitForBit(function, {x, g}, "gelu_erf_grad(");
}

// The packed gradient of a q/k/v projection (80 tokens, 2 heads of 64),
// %d#1, and its bias gradient, %d#0, assembled from attention's gradients
// %dq, %dk, %dv as autodiff and fusion leave them; read in place from a
// packed projection %p (exact kernels), or on tensor cores from an exact
// forward pass.
const char *const kPackedQkvGradient =
    R"(  %d:2 = kiln.fusion %dk, %dq, %dv : (tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>) -> (tensor<384xf32>, tensor<80x384xbf16>) {
  ^bb0(%ak: tensor<1x2x80x64xbf16>, %aq: tensor<1x2x80x64xbf16>, %av: tensor<1x2x80x64xbf16>):
    %zero = kiln.constant dense<0.0> : tensor<1x80x384xf32>
    %tk = kiln.transpose %ak {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x2x80x64xbf16>) -> tensor<1x80x2x64xbf16>
    %tq = kiln.transpose %aq {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x2x80x64xbf16>) -> tensor<1x80x2x64xbf16>
    %tv = kiln.transpose %av {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x2x80x64xbf16>) -> tensor<1x80x2x64xbf16>
    %rk = kiln.reshape %tk : tensor<1x80x2x64xbf16> to tensor<1x80x128xbf16>
    %rq = kiln.reshape %tq : tensor<1x80x2x64xbf16> to tensor<1x80x128xbf16>
    %rv = kiln.reshape %tv : tensor<1x80x2x64xbf16> to tensor<1x80x128xbf16>
    %wk = kiln.cast %rk : tensor<1x80x128xbf16> to tensor<1x80x128xf32>
    %wq = kiln.cast %rq : tensor<1x80x128xbf16> to tensor<1x80x128xf32>
    %wv = kiln.cast %rv : tensor<1x80x128xbf16> to tensor<1x80x128xf32>
    %ik = kiln.insert_slice %zero, %wk {start = array<i64: 0, 0, 128>, stride = array<i64: 1, 1, 1>} : (tensor<1x80x384xf32>, tensor<1x80x128xf32>) -> tensor<1x80x384xf32>
    %iq = kiln.insert_slice %zero, %wq {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : (tensor<1x80x384xf32>, tensor<1x80x128xf32>) -> tensor<1x80x384xf32>
    %iv = kiln.insert_slice %zero, %wv {start = array<i64: 0, 0, 256>, stride = array<i64: 1, 1, 1>} : (tensor<1x80x384xf32>, tensor<1x80x128xf32>) -> tensor<1x80x384xf32>
    %a1 = kiln.add %iv, %ik : (tensor<1x80x384xf32>, tensor<1x80x384xf32>) -> tensor<1x80x384xf32>
    %a2 = kiln.add %a1, %iq : (tensor<1x80x384xf32>, tensor<1x80x384xf32>) -> tensor<1x80x384xf32>
    %flat = kiln.reshape %a2 : tensor<1x80x384xf32> to tensor<80x384xf32>
    %bias = kiln.reduce_sum %flat {axes = array<i64: 0>} : (tensor<80x384xf32>) -> tensor<384xf32>
    %packed = kiln.cast %flat : tensor<80x384xf32> to tensor<80x384xbf16>
    kiln.yield %bias, %packed : tensor<384xf32>, tensor<80x384xbf16>
  }
)";
// The heads of q, k and v (80 tokens, 2 heads of 64) read in place from a
// packed q/k/v projection %p, as fusion leaves them.
const char *const kPackedQkvHeads =
    R"(  %q, %k, %v = kiln.fusion %p : (tensor<80x384xbf16>) -> (tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>) {
  ^bb0(%a: tensor<80x384xbf16>):
    %r = kiln.reshape %a : tensor<80x384xbf16> to tensor<1x80x384xbf16>
    %s0 = kiln.slice %r {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<1x80x384xbf16> to tensor<1x80x128xbf16>
    %s1 = kiln.slice %r {start = array<i64: 0, 0, 128>, stride = array<i64: 1, 1, 1>} : tensor<1x80x384xbf16> to tensor<1x80x128xbf16>
    %s2 = kiln.slice %r {start = array<i64: 0, 0, 256>, stride = array<i64: 1, 1, 1>} : tensor<1x80x384xbf16> to tensor<1x80x128xbf16>
    %h0 = kiln.reshape %s0 : tensor<1x80x128xbf16> to tensor<1x80x2x64xbf16>
    %h1 = kiln.reshape %s1 : tensor<1x80x128xbf16> to tensor<1x80x2x64xbf16>
    %h2 = kiln.reshape %s2 : tensor<1x80x128xbf16> to tensor<1x80x2x64xbf16>
    %t0 = kiln.transpose %h0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x80x2x64xbf16>) -> tensor<1x2x80x64xbf16>
    %t1 = kiln.transpose %h1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x80x2x64xbf16>) -> tensor<1x2x80x64xbf16>
    %t2 = kiln.transpose %h2 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x80x2x64xbf16>) -> tensor<1x2x80x64xbf16>
    kiln.yield %t0, %t1, %t2 : tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>
  }
)";
/// The gradients %dq, %dk, %dv of causal bf16 heads %q, %k, %v (1x2x80x64)
/// for the output gradient %g, from an exact forward pass (f32, its output
/// rounded to bf16 as a step stores it).
const char *const kGradientFromExactForward =
    R"(  %q32 = kiln.cast %q : tensor<1x2x80x64xbf16> to tensor<1x2x80x64xf32>
  %k32 = kiln.cast %k : tensor<1x2x80x64xbf16> to tensor<1x2x80x64xf32>
  %v32 = kiln.cast %v : tensor<1x2x80x64xbf16> to tensor<1x2x80x64xf32>
  %exact, %exactLse = kiln.attention %q32, %k32, %v32 {causal, scale = 0.125 : f64}
      : (tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>) -> (tensor<1x2x80x64xf32>, tensor<1x2x80xf32>)
  %exact16 = kiln.cast %exact : tensor<1x2x80x64xf32> to tensor<1x2x80x64xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %exact16, %exactLse, %g {causal, scale = 0.125 : f64}
      : (tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80xf32>, tensor<1x2x80x64xbf16>)
      -> (tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>)
)";
const std::string kAttentionGradientsInPlace =
    R"(
func.func @main(%p: tensor<80x384xbf16>, %g: tensor<1x2x80x64xbf16>)
    -> (tensor<1x2x80x64xbf16>, tensor<384xf32>, tensor<80x384xbf16>) {
)" + std::string(kPackedQkvHeads) +
    R"(
  %out, %lse = kiln.attention %q, %k, %v {causal, scale = 0.125 : f64}
      : (tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>) -> (tensor<1x2x80x64xbf16>, tensor<1x2x80xf32>)
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %out, %lse, %g {causal, scale = 0.125 : f64}
      : (tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80xf32>, tensor<1x2x80x64xbf16>)
      -> (tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>)
)" + std::string(kPackedQkvGradient) +
    R"(
  return %out, %d#0, %d#1 : tensor<1x2x80x64xbf16>, tensor<384xf32>, tensor<80x384xbf16>
}
)";

// cuDNN's attention, forward and backward, on those heads, the gradient
// from an exact forward pass (f32, which cuDNN does not take) as the
// tensor-core gradients are checked: a forward output 2^-8 off moves
// delta = dO . O, and through it every score gradient, by more than the
// gradient's own rounding. And fp16 with more keys than rows. Each result
// of a 16-bit pass is returned with its exact value: attention in f32 on
// the same operands (the last seven results).
const std::string kCudnnAttention =
    R"(
func.func @main(%p: tensor<80x384xbf16>, %g: tensor<1x2x80x64xbf16>,
                %q2: tensor<2x2x24x32xf16>, %k2: tensor<2x2x40x32xf16>, %v2: tensor<2x2x40x32xf16>)
    -> (tensor<1x2x80x64xbf16>, tensor<1x2x80xf32>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>,
        tensor<1x2x80x64xbf16>, tensor<2x2x24x32xf16>, tensor<2x2x24xf32>,
        tensor<1x2x80x64xf32>, tensor<1x2x80xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>,
        tensor<1x2x80x64xf32>, tensor<2x2x24x32xf32>, tensor<2x2x24xf32>) {
)" + std::string(kPackedQkvHeads) +
    R"(
  %out, %lse = kiln.attention %q, %k, %v {causal, scale = 0.125 : f64}
      : (tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>) -> (tensor<1x2x80x64xbf16>, tensor<1x2x80xf32>)
)" + std::string(kGradientFromExactForward) +
    R"(
  %g32 = kiln.cast %g : tensor<1x2x80x64xbf16> to tensor<1x2x80x64xf32>
  %edq, %edk, %edv = kiln.attention_grad %q32, %k32, %v32 output %exact, %exactLse, %g32 {causal, scale = 0.125 : f64}
      : (tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80xf32>, tensor<1x2x80x64xf32>)
      -> (tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>)
  %out2, %lse2 = kiln.attention %q2, %k2, %v2 {scale = 0.2 : f64}
      : (tensor<2x2x24x32xf16>, tensor<2x2x40x32xf16>, tensor<2x2x40x32xf16>) -> (tensor<2x2x24x32xf16>, tensor<2x2x24xf32>)
  %q2e = kiln.cast %q2 : tensor<2x2x24x32xf16> to tensor<2x2x24x32xf32>
  %k2e = kiln.cast %k2 : tensor<2x2x40x32xf16> to tensor<2x2x40x32xf32>
  %v2e = kiln.cast %v2 : tensor<2x2x40x32xf16> to tensor<2x2x40x32xf32>
  %eout2, %else2 = kiln.attention %q2e, %k2e, %v2e {scale = 0.2 : f64}
      : (tensor<2x2x24x32xf32>, tensor<2x2x40x32xf32>, tensor<2x2x40x32xf32>) -> (tensor<2x2x24x32xf32>, tensor<2x2x24xf32>)
  return %out, %lse, %dq, %dk, %dv, %out2, %lse2,
      %exact, %exactLse, %edq, %edk, %edv, %eout2, %else2
      : tensor<1x2x80x64xbf16>, tensor<1x2x80xf32>, tensor<1x2x80x64xbf16>,
      tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<2x2x24x32xf16>, tensor<2x2x24xf32>,
      tensor<1x2x80x64xf32>, tensor<1x2x80xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>,
      tensor<1x2x80x64xf32>, tensor<2x2x24x32xf32>, tensor<2x2x24xf32>
}
)";
const std::string kTensorCoreAttentionGradientsInPlace =
    R"(
func.func @main(%q: tensor<1x2x80x64xbf16>, %k: tensor<1x2x80x64xbf16>, %v: tensor<1x2x80x64xbf16>,
                %g: tensor<1x2x80x64xbf16>) -> tensor<80x384xbf16> {
)" + std::string(kGradientFromExactForward) +
    std::string(kPackedQkvGradient) +
    R"(
  return %d#1 : tensor<80x384xbf16>
}
)";

/// A fusion that sums `count` tensors read from memory and yields the sum
/// and its column sums: one kernel with `count` inputs whose column sums
/// store the sum on the way, each read a lambda outside the sums and an
/// alias of it inside them.
std::string sumAndColumnSumsOfReads(int count) {
  std::string arguments, operands, types, blockArguments, body;
  for (int n = 0; n < count; ++n) {
    std::string separator = n ? ", " : "";
    arguments += separator + "%a" + std::to_string(n) + ": tensor<2x8xf32>";
    operands += separator + "%a" + std::to_string(n);
    types += separator + "tensor<2x8xf32>";
    blockArguments +=
        separator + "%x" + std::to_string(n) + ": tensor<2x8xf32>";
    if (n)
      body += "    %s" + std::to_string(n) + " = kiln.add %" +
              (n == 1 ? std::string("x0") : "s" + std::to_string(n - 1)) +
              ", %x" + std::to_string(n) +
              " : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>\n";
  }
  std::string last = "%s" + std::to_string(count - 1);
  return "func.func @main(" + arguments +
         ") -> (tensor<2x8xf32>, tensor<8xf32>) {\n"
         "  %r:2 = kiln.fusion " +
         operands + " : (" + types +
         ") -> (tensor<2x8xf32>, tensor<8xf32>) {\n  ^bb0(" + blockArguments +
         "):\n" + body + "    %c = kiln.reduce_sum " + last +
         " {axes = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<8xf32>\n"
         "    kiln.yield " +
         last +
         ", %c : tensor<2x8xf32>, tensor<8xf32>\n"
         "  }\n  return %r#0, %r#1 : tensor<2x8xf32>, tensor<8xf32>\n}\n";
}
const std::string kManyReads = sumAndColumnSumsOfReads(100);

const KernelCase kCases[] = {
    {"Unary", R"(
      func.func @main(%x: tensor<5x7xf32>) -> (tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>,
                                              tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xbf16>) {
        %a = kiln.exp %x : tensor<5x7xf32>
        %b = kiln.tanh %a : tensor<5x7xf32>
        %c = kiln.gelu %x approximation = none : tensor<5x7xf32>
        %d = kiln.silu %x : tensor<5x7xf32>
        %e = kiln.abs %x : tensor<5x7xf32>
        %f = kiln.sqrt %e : tensor<5x7xf32>
        %g = kiln.rsqrt %f : tensor<5x7xf32>
        %h = kiln.erf %g : tensor<5x7xf32>
        %r = kiln.round %h : tensor<5x7xf32>
        %s = kiln.sigmoid %x : tensor<5x7xf32>
        %t = kiln.cast %s : tensor<5x7xf32> to tensor<5x7xbf16>
        return %b, %c, %d, %r, %e, %t : tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>,
                                         tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xbf16>
      })"},
    {"Trigonometric", R"(
      func.func @main(%x: tensor<5x7xf32>) -> (tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>,
                                              tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>) {
        %one = kiln.constant dense<1.0> : tensor<5x7xf32>
        %half = kiln.constant dense<0.5> : tensor<5x7xf32>
        %t = kiln.tanh %x : tensor<5x7xf32>
        %u = kiln.mul %t, %half : (tensor<5x7xf32>, tensor<5x7xf32>) -> tensor<5x7xf32>
        %a = kiln.tan %u : tensor<5x7xf32>
        %b = kiln.atan %a : tensor<5x7xf32>
        %c = kiln.sinh %x : tensor<5x7xf32>
        %d = kiln.asinh %c : tensor<5x7xf32>
        %e = kiln.cosh %x : tensor<5x7xf32>
        %e1 = kiln.add %e, %one : (tensor<5x7xf32>, tensor<5x7xf32>) -> tensor<5x7xf32>
        %f = kiln.acosh %e1 : tensor<5x7xf32>
        %g = kiln.atanh %u : tensor<5x7xf32>
        %s = kiln.sin %u : tensor<5x7xf32>
        %h = kiln.asin %s : tensor<5x7xf32>
        %i = kiln.acos %u : tensor<5x7xf32>
        %k = kiln.cos %i : tensor<5x7xf32>
        return %b, %d, %f, %g, %h, %k : tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>,
                                        tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>
      })"},
    {"ColumnSumsOfManyReads", kManyReads.c_str()},
    // Bits of unsigned and signed integers: bitwise ops, and shifts by
    // amounts past the width (0, or the sign for negative values).
    {"BitwiseAndShifts", R"(
      func.func @main(%a: tensor<4x6xui8> {test.range = 256 : i64},
                      %n: tensor<6xui8> {test.range = 10 : i64},
                      %c: tensor<4x6xi16> {test.range = 30000 : i64},
                      %m: tensor<6xi16> {test.range = 20 : i64},
                      %w: tensor<4x6xui64> {test.range = 4611686018427387904 : i64},
                      %k: tensor<6xui64> {test.range = 70 : i64})
          -> (tensor<4x6xui8>, tensor<4x6xui8>, tensor<4x6xui8>, tensor<4x6xi16>,
              tensor<4x6xi16>, tensor<4x6xui64>, tensor<4x6xui64>) {
        %x = kiln.xor %a, %n : (tensor<4x6xui8>, tensor<6xui8>) -> tensor<4x6xui8>
        %o = kiln.or %x, %a : (tensor<4x6xui8>, tensor<4x6xui8>) -> tensor<4x6xui8>
        %an = kiln.and %o, %n : (tensor<4x6xui8>, tensor<6xui8>) -> tensor<4x6xui8>
        %nt = kiln.not %an : tensor<4x6xui8>
        %l = kiln.shift_left %nt, %n : (tensor<4x6xui8>, tensor<6xui8>) -> tensor<4x6xui8>
        %r = kiln.shift_right %a, %n : (tensor<4x6xui8>, tensor<6xui8>) -> tensor<4x6xui8>
        %neg = kiln.neg %c : tensor<4x6xi16>
        %sr = kiln.shift_right %neg, %m : (tensor<4x6xi16>, tensor<6xi16>) -> tensor<4x6xi16>
        %nn = kiln.not %neg : tensor<4x6xi16>
        %wl = kiln.shift_left %w, %k : (tensor<4x6xui64>, tensor<6xui64>) -> tensor<4x6xui64>
        %wr = kiln.shift_right %wl, %k : (tensor<4x6xui64>, tensor<6xui64>) -> tensor<4x6xui64>
        return %an, %l, %r, %sr, %nn, %wl, %wr : tensor<4x6xui8>, tensor<4x6xui8>, tensor<4x6xui8>,
            tensor<4x6xi16>, tensor<4x6xi16>, tensor<4x6xui64>, tensor<4x6xui64>
      })"},
    {"BroadcastingBinary", R"(
      func.func @main(%x: tensor<3x1x5xf32>, %y: tensor<4x1xf32>, %i: tensor<4x5xi64>,
                      %j: tensor<5xi64> {test.range = 3 : i64})
          -> (tensor<3x4x5xf32>, tensor<3x4x5xf32>, tensor<4x5xi64>, tensor<4x5xi64>) {
        %a = kiln.add %x, %y : (tensor<3x1x5xf32>, tensor<4x1xf32>) -> tensor<3x4x5xf32>
        %b = kiln.div %a, %x : (tensor<3x4x5xf32>, tensor<3x1x5xf32>) -> tensor<3x4x5xf32>
        %c = kiln.max %b, %y : (tensor<3x4x5xf32>, tensor<4x1xf32>) -> tensor<3x4x5xf32>
        %d = kiln.pow %c, %y : (tensor<3x4x5xf32>, tensor<4x1xf32>) -> tensor<3x4x5xf32>
        %e = kiln.remainder %i, %j {floored} : (tensor<4x5xi64>, tensor<5xi64>) -> tensor<4x5xi64>
        %f = kiln.mul %e, %i : (tensor<4x5xi64>, tensor<4x5xi64>) -> tensor<4x5xi64>
        return %c, %d, %e, %f : tensor<3x4x5xf32>, tensor<3x4x5xf32>, tensor<4x5xi64>, tensor<4x5xi64>
      })"},
    {"CompareWhereCast", R"(
      func.func @main(%x: tensor<4x6xf32>, %y: tensor<6xf32>, %m: tensor<4x1xi1>)
          -> (tensor<4x6xf32>, tensor<4x6xi64>, tensor<4x6xi1>) {
        %c = kiln.compare lt, %x, %y : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xi1>
        %a = kiln.and %c, %m : (tensor<4x6xi1>, tensor<4x1xi1>) -> tensor<4x6xi1>
        %w = kiln.where %a, %x, %y : (tensor<4x6xi1>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
        %s = kiln.mul %w, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
        %k = kiln.cast %s : tensor<4x6xf32> to tensor<4x6xi64>
        return %w, %k, %a : tensor<4x6xf32>, tensor<4x6xi64>, tensor<4x6xi1>
      })"},
    {"DataMovement", R"(
      func.func @main(%x: tensor<2x3x4xf32>, %y: tensor<2x2x4xf32>)
          -> (tensor<4x2x3xf32>, tensor<2x3x2xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>,
              tensor<3x2x3x4xf32>) {
        %t = kiln.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
        %s = kiln.slice %x {start = array<i64: 0, 0, 3>, stride = array<i64: 1, 1, -2>}
            : tensor<2x3x4xf32> to tensor<2x3x2xf32>
        %c = kiln.concat %x, %y {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<2x5x4xf32>
        %l = kiln.trilu %x {upper = false, diagonal = 1 : i64} : tensor<2x3x4xf32>
        %b = kiln.broadcast %x : tensor<2x3x4xf32> to tensor<3x2x3x4xf32>
        return %t, %s, %c, %l, %b : tensor<4x2x3xf32>, tensor<2x3x2xf32>, tensor<2x5x4xf32>,
                                    tensor<2x3x4xf32>, tensor<3x2x3x4xf32>
      })"},
    // A concatenation and a broadcast in a fusion (the rotary embedding's
    // rotate_half and the product with the sines; a row's value spread over
    // the row), over bf16 rows of 20 elements: the kernel's 16-byte pieces
    // of 8 straddle both the halves and the rows, so that the concatenation
    // reads its second operand's elements from other pieces than the one
    // the loop loaded.
    {"FusedConcatenationAndBroadcast", R"(
      func.func @main(%x: tensor<2x3x20xbf16>, %cos: tensor<3x20xf32>, %sin: tensor<3x20xf32>,
                      %w: tensor<2x3x1xf32>) -> tensor<2x3x20xbf16> {
        %y = kiln.fusion %x, %cos, %sin, %w
            : (tensor<2x3x20xbf16>, tensor<3x20xf32>, tensor<3x20xf32>, tensor<2x3x1xf32>)
            -> tensor<2x3x20xbf16> {
        ^bb0(%a: tensor<2x3x20xbf16>, %c: tensor<3x20xf32>, %s: tensor<3x20xf32>,
             %v: tensor<2x3x1xf32>):
          %a32 = kiln.cast %a : tensor<2x3x20xbf16> to tensor<2x3x20xf32>
          %x1 = kiln.slice %a32 {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>}
              : tensor<2x3x20xf32> to tensor<2x3x10xf32>
          %x2 = kiln.slice %a32 {start = array<i64: 0, 0, 10>, stride = array<i64: 1, 1, 1>}
              : tensor<2x3x20xf32> to tensor<2x3x10xf32>
          %n = kiln.neg %x2 : tensor<2x3x10xf32>
          %r = kiln.concat %n, %x1 {axis = 2 : i64}
              : (tensor<2x3x10xf32>, tensor<2x3x10xf32>) -> tensor<2x3x20xf32>
          %p = kiln.mul %a32, %c : (tensor<2x3x20xf32>, tensor<3x20xf32>) -> tensor<2x3x20xf32>
          %q = kiln.mul %r, %s : (tensor<2x3x20xf32>, tensor<3x20xf32>) -> tensor<2x3x20xf32>
          %e = kiln.add %p, %q : (tensor<2x3x20xf32>, tensor<2x3x20xf32>) -> tensor<2x3x20xf32>
          %vb = kiln.broadcast %v : tensor<2x3x1xf32> to tensor<2x3x20xf32>
          %ev = kiln.mul %e, %vb : (tensor<2x3x20xf32>, tensor<2x3x20xf32>) -> tensor<2x3x20xf32>
          %ec = kiln.cast %ev : tensor<2x3x20xf32> to tensor<2x3x20xbf16>
          kiln.yield %ec : tensor<2x3x20xbf16>
        }
        return %y : tensor<2x3x20xbf16>
      })"},
    {"Pad", R"(
      func.func @main(%x: tensor<3x4xf32>)
          -> (tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>) {
        %a = kiln.pad %x constant {low = array<i64: 2, -1>, high = array<i64: 1, 2>, value = 1.5 : f64}
            : (tensor<3x4xf32>) -> tensor<6x5xf32>
        %b = kiln.pad %x reflect {low = array<i64: 2, -1>, high = array<i64: 1, 2>, value = 0.0 : f64}
            : (tensor<3x4xf32>) -> tensor<6x5xf32>
        %c = kiln.pad %x edge {low = array<i64: 2, -1>, high = array<i64: 1, 2>, value = 0.0 : f64}
            : (tensor<3x4xf32>) -> tensor<6x5xf32>
        %d = kiln.pad %x wrap {low = array<i64: 2, -1>, high = array<i64: 1, 2>, value = 0.0 : f64}
            : (tensor<3x4xf32>) -> tensor<6x5xf32>
        return %a, %b, %c, %d : tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>
      })"},
    {"GatherAndInsert", R"(
      func.func @main(%t: tensor<6x4xf32>, %i: tensor<2x3xi64> {test.range = 6 : i64},
                      %e: tensor<6x2xi64> {test.range = 4 : i64}, %g: tensor<2x3x4xf32>, %d: tensor<6x4xf32>)
          -> (tensor<3x6x4xf32>, tensor<6x2xf32>, tensor<6x4xf32>, tensor<6x4xf32>) {
        %a = kiln.gather %t, %i {axis = 0 : i64} : (tensor<6x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
        %r = kiln.reshape %a : tensor<2x3x4xf32> to tensor<6x4xf32>
        %b = kiln.gather %t, %i {axis = 1 : i64} : (tensor<6x4xf32>, tensor<2x3xi64>) -> tensor<6x2x3xf32>
        %b2 = kiln.reshape %b : tensor<6x2x3xf32> to tensor<6x3x2xf32>
        %b3 = kiln.transpose %b2 {permutation = array<i64: 0, 2, 1>} : (tensor<6x3x2xf32>) -> tensor<6x2x3xf32>
        %b4 = kiln.slice %b3 {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<6x2x3xf32> to tensor<6x2x1xf32>
        %b5 = kiln.reshape %b4 : tensor<6x2x1xf32> to tensor<6x2xf32>
        %c = kiln.gather_elements %t, %e {axis = 1 : i64} : (tensor<6x4xf32>, tensor<6x2xi64>) -> tensor<6x2xf32>
        %s = kiln.insert_slice %d, %c {start = array<i64: 0, 1>, stride = array<i64: 1, 2>}
            : (tensor<6x4xf32>, tensor<6x2xf32>) -> tensor<6x4xf32>
        %w = kiln.gather_grad %g, %i {axis = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<6x4xf32>
        %x = kiln.broadcast %w : tensor<6x4xf32> to tensor<3x6x4xf32>
        return %x, %b5, %s, %r : tensor<3x6x4xf32>, tensor<6x2xf32>, tensor<6x4xf32>, tensor<6x4xf32>
      })"},
    // Every scatter reduction, with repeated indices: a sum of floats is
    // atomic, the others run in order (the last write stays).
    {"ScatterElements", R"(
      func.func @main(%d: tensor<6x4xf32>, %i: tensor<6x3xi64> {test.range = 4 : i64},
                      %u: tensor<6x3xf32>, %j: tensor<3x4xi64> {test.range = 6 : i64},
                      %v: tensor<3x4xf32>, %n: tensor<6x4xi32>, %w: tensor<6x3xi32>)
          -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>,
              tensor<6x4xf32>, tensor<6x4xi32>) {
        %a = kiln.scatter_elements %d, %i, %u reduction = none {axis = 1 : i64}
            : (tensor<6x4xf32>, tensor<6x3xi64>, tensor<6x3xf32>) -> tensor<6x4xf32>
        %b = kiln.scatter_elements %d, %i, %u reduction = add {axis = 1 : i64}
            : (tensor<6x4xf32>, tensor<6x3xi64>, tensor<6x3xf32>) -> tensor<6x4xf32>
        %c = kiln.scatter_elements %d, %i, %u reduction = mul {axis = 1 : i64}
            : (tensor<6x4xf32>, tensor<6x3xi64>, tensor<6x3xf32>) -> tensor<6x4xf32>
        %e = kiln.scatter_elements %d, %i, %u reduction = max {axis = 1 : i64}
            : (tensor<6x4xf32>, tensor<6x3xi64>, tensor<6x3xf32>) -> tensor<6x4xf32>
        %f = kiln.scatter_elements %d, %i, %u reduction = min {axis = 1 : i64}
            : (tensor<6x4xf32>, tensor<6x3xi64>, tensor<6x3xf32>) -> tensor<6x4xf32>
        %g = kiln.scatter_elements %d, %j, %v reduction = add {axis = 0 : i64}
            : (tensor<6x4xf32>, tensor<3x4xi64>, tensor<3x4xf32>) -> tensor<6x4xf32>
        %h = kiln.scatter_elements %n, %i, %w reduction = add {axis = 1 : i64}
            : (tensor<6x4xi32>, tensor<6x3xi64>, tensor<6x3xi32>) -> tensor<6x4xi32>
        return %a, %b, %c, %e, %f, %g, %h : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>,
            tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xi32>
      })"},
    // A 16-bit embedding gradient: summed in f64, rounded once.
    {"GatherGradient16Bit", R"(
      func.func @main(%g: tensor<5x3x4xbf16>, %i: tensor<5x3xi64> {test.range = 4 : i64},
                      %h: tensor<2x5x3xf16>, %j: tensor<5xi64> {test.range = 3 : i64})
          -> (tensor<4x4xbf16>, tensor<2x3x3xf16>) {
        %a = kiln.gather_grad %g, %i {axis = 0 : i64} : (tensor<5x3x4xbf16>, tensor<5x3xi64>) -> tensor<4x4xbf16>
        %b = kiln.gather_grad %h, %j {axis = 1 : i64} : (tensor<2x5x3xf16>, tensor<5xi64>) -> tensor<2x3x3xf16>
        return %a, %b : tensor<4x4xbf16>, tensor<2x3x3xf16>
      })"},
    {"Reductions", R"(
      func.func @main(%x: tensor<3x4x5xf32>, %i: tensor<3x4xi64>)
          -> (tensor<4xf32>, tensor<3x1x5xf32>, tensor<f32>, tensor<3x5xf32>, tensor<3x4xf32>,
              tensor<3x5xi64>, tensor<4x1xi64>, tensor<3x4x5xf32>) {
        %a = kiln.reduce_sum %x {axes = array<i64: 0, 2>} : (tensor<3x4x5xf32>) -> tensor<4xf32>
        %b = kiln.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<3x4x5xf32>) -> tensor<3x1x5xf32>
        %c = kiln.reduce_max %x {axes = array<i64: 0, 1, 2>} : (tensor<3x4x5xf32>) -> tensor<f32>
        %d = kiln.reduce_min %x {axes = array<i64: 1>} : (tensor<3x4x5xf32>) -> tensor<3x5xf32>
        %e = kiln.reduce_prod %x {axes = array<i64: 2>} : (tensor<3x4x5xf32>) -> tensor<3x4xf32>
        %f = kiln.argmax %x {axis = 1 : i64} : (tensor<3x4x5xf32>) -> tensor<3x5xi64>
        %g = kiln.argmin %i {axis = 0 : i64, keep_dims, select_last_index} : (tensor<3x4xi64>) -> tensor<1x4xi64>
        %g2 = kiln.reshape %g : tensor<1x4xi64> to tensor<4x1xi64>
        %h = kiln.cumsum %x {axis = 1 : i64, exclusive, reverse} : tensor<3x4x5xf32>
        return %a, %b, %c, %d, %e, %f, %g2, %h : tensor<4xf32>, tensor<3x1x5xf32>, tensor<f32>,
            tensor<3x5xf32>, tensor<3x4xf32>, tensor<3x5xi64>, tensor<4x1xi64>, tensor<3x4x5xf32>
      })"},
    // Top k along a middle and the last axis, largest and smallest, with
    // ties (integers in [0, 3)) and NaN (the log of negative values),
    // which counts as the largest; the values gathered at the indices.
    {"TopK", R"(
      func.func @main(%x: tensor<3x6x4xf32>, %i: tensor<5x7xi64> {test.range = 3 : i64})
          -> (tensor<3x2x4xi64>, tensor<5x3xi64>, tensor<3x6x4xi64>, tensor<3x6x1xi64>,
              tensor<3x2x4xf32>) {
        %a = kiln.top_k %x {axis = 1 : i64, k = 2 : i64, largest} : (tensor<3x6x4xf32>) -> tensor<3x2x4xi64>
        %b = kiln.top_k %i {axis = 1 : i64, k = 3 : i64} : (tensor<5x7xi64>) -> tensor<5x3xi64>
        %l = kiln.log %x : tensor<3x6x4xf32>
        %c = kiln.top_k %l {axis = 1 : i64, k = 6 : i64, largest} : (tensor<3x6x4xf32>) -> tensor<3x6x4xi64>
        %d = kiln.top_k %l {axis = 2 : i64, k = 1 : i64} : (tensor<3x6x4xf32>) -> tensor<3x6x1xi64>
        %v = kiln.gather_elements %x, %a {axis = 1 : i64} : (tensor<3x6x4xf32>, tensor<3x2x4xi64>) -> tensor<3x2x4xf32>
        return %a, %b, %c, %d, %v : tensor<3x2x4xi64>, tensor<5x3xi64>, tensor<3x6x4xi64>,
            tensor<3x6x1xi64>, tensor<3x2x4xf32>
      })"},
    {"Softmax", R"(
      func.func @main(%x: tensor<2x7x3xf32>, %g: tensor<2x7x3xf32>)
          -> (tensor<2x7x3xf32>, tensor<2x7x3xf32>, tensor<2x7x3xf32>, tensor<2x7x3xf32>) {
        %p = kiln.softmax %x {axis = 1 : i64} : tensor<2x7x3xf32>
        %l = kiln.log_softmax %x {axis = 1 : i64} : tensor<2x7x3xf32>
        %dp = kiln.softmax_grad %p, %g {axis = 1 : i64} : tensor<2x7x3xf32>
        %dl = kiln.log_softmax_grad %l, %g {axis = 1 : i64} : tensor<2x7x3xf32>
        return %p, %l, %dp, %dl : tensor<2x7x3xf32>, tensor<2x7x3xf32>, tensor<2x7x3xf32>, tensor<2x7x3xf32>
      })"},
    {"Normalizations", R"(
      func.func @main(%x: tensor<3x4x6xf32>, %s: tensor<4x6xf32>, %b: tensor<6xf32>, %dy: tensor<3x4x6xf32>)
          -> (tensor<3x4x6xf32>, tensor<3x1x1xf32>, tensor<3x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>,
              tensor<3x4x6xf32>, tensor<3x4x1xf32>, tensor<3x4x6xf32>, tensor<6xf32>) {
        %y, %m, %r = kiln.layer_norm %x scale %s bias %b {axis = 1 : i64, epsilon = 1.0e-5 : f64}
            : (tensor<3x4x6xf32>, tensor<4x6xf32>, tensor<6xf32>)
            -> (tensor<3x4x6xf32>, tensor<3x1x1xf32>, tensor<3x1x1xf32>)
        %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 1 : i64}
            : (tensor<3x4x6xf32>, tensor<3x1x1xf32>, tensor<3x1x1xf32>, tensor<3x4x6xf32>, tensor<4x6xf32>)
            -> (tensor<3x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>)
        %z, %q = kiln.rms_norm %x scale %b {axis = 2 : i64, epsilon = 1.0e-6 : f64}
            : (tensor<3x4x6xf32>, tensor<6xf32>) -> (tensor<3x4x6xf32>, tensor<3x4x1xf32>)
        %dz, %dq = kiln.rms_norm_grad %x, %q, %dy scale %b {axis = 2 : i64}
            : (tensor<3x4x6xf32>, tensor<3x4x1xf32>, tensor<3x4x6xf32>, tensor<6xf32>)
            -> (tensor<3x4x6xf32>, tensor<6xf32>)
        return %y, %m, %dx, %ds, %db, %z, %q, %dz, %dq : tensor<3x4x6xf32>, tensor<3x1x1xf32>,
            tensor<3x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<3x4x6xf32>, tensor<3x4x1xf32>,
            tensor<3x4x6xf32>, tensor<6xf32>
      })"},
    // GPT-2's norm rows: 768 elements, 96 pieces of 16 bytes, so that a
    // block of three warps (no power of two) shares each row's statistics;
    // the residual add before the norm and the bf16 copies after it in the
    // same kernels.
    {"NormRowsOfThreeWarps", R"(
      func.func @main(%x: tensor<5x768xbf16>, %r: tensor<5x768xf32>, %s: tensor<768xf32>,
                      %b: tensor<768xf32>, %dy: tensor<5x768xbf16>)
          -> (tensor<5x768xf32>, tensor<5x768xbf16>, tensor<5x1xf32>, tensor<5x1xf32>,
              tensor<5x768xf32>, tensor<5x768xbf16>) {
        %n:4 = kiln.fusion %x, %r, %s, %b
            : (tensor<5x768xbf16>, tensor<5x768xf32>, tensor<768xf32>, tensor<768xf32>)
            -> (tensor<5x768xf32>, tensor<5x768xbf16>, tensor<5x1xf32>, tensor<5x1xf32>) {
        ^bb0(%a: tensor<5x768xbf16>, %c: tensor<5x768xf32>, %w: tensor<768xf32>, %v: tensor<768xf32>):
          %a32 = kiln.cast %a : tensor<5x768xbf16> to tensor<5x768xf32>
          %sum = kiln.add %a32, %c : (tensor<5x768xf32>, tensor<5x768xf32>) -> tensor<5x768xf32>
          %y, %mean, %rstd = kiln.layer_norm %sum scale %w bias %v {axis = 1 : i64, epsilon = 1.0e-5 : f64}
              : (tensor<5x768xf32>, tensor<768xf32>, tensor<768xf32>)
              -> (tensor<5x768xf32>, tensor<5x1xf32>, tensor<5x1xf32>)
          %yc = kiln.cast %y : tensor<5x768xf32> to tensor<5x768xbf16>
          kiln.yield %sum, %yc, %mean, %rstd : tensor<5x768xf32>, tensor<5x768xbf16>, tensor<5x1xf32>, tensor<5x1xf32>
        }
        %g:2 = kiln.fusion %n#0, %n#2, %n#3, %dy, %s
            : (tensor<5x768xf32>, tensor<5x1xf32>, tensor<5x1xf32>, tensor<5x768xbf16>, tensor<768xf32>)
            -> (tensor<5x768xf32>, tensor<5x768xbf16>) {
        ^bb0(%h: tensor<5x768xf32>, %m: tensor<5x1xf32>, %q: tensor<5x1xf32>, %d: tensor<5x768xbf16>,
             %w: tensor<768xf32>):
          %d32 = kiln.cast %d : tensor<5x768xbf16> to tensor<5x768xf32>
          %dx, %ds, %db = kiln.layer_norm_grad %h, %m, %q, %d32 scale %w {axis = 1 : i64}
              : (tensor<5x768xf32>, tensor<5x1xf32>, tensor<5x1xf32>, tensor<5x768xf32>, tensor<768xf32>)
              -> (tensor<5x768xf32>, tensor<768xf32>, tensor<768xf32>)
          %dxc = kiln.cast %dx : tensor<5x768xf32> to tensor<5x768xbf16>
          kiln.yield %dx, %dxc : tensor<5x768xf32>, tensor<5x768xbf16>
        }
        return %n#0, %n#1, %n#2, %n#3, %g#0, %g#1 : tensor<5x768xf32>, tensor<5x768xbf16>,
            tensor<5x1xf32>, tensor<5x1xf32>, tensor<5x768xf32>, tensor<5x768xbf16>
      })"},
    // Narrow norms: a bf16 input and output, f32 statistics, and gradients
    // f32 from the bf16 input (layer and RMS norm, forward and backward);
    // the RMS norm's gradient from a bf16 output gradient too.
    {"NarrowNorms", R"(
      func.func @main(%x: tensor<3x4x8xbf16>, %s: tensor<8xf32>, %b: tensor<8xf32>, %dy: tensor<3x4x8xf32>)
          -> (tensor<3x4x8xbf16>, tensor<3x4x1xf32>, tensor<3x4x8xf32>, tensor<8xf32>, tensor<8xf32>,
              tensor<3x4x8xbf16>, tensor<3x4x8xf32>, tensor<8xf32>) {
        %y, %m, %r = kiln.layer_norm %x scale %s bias %b {axis = 2 : i64, epsilon = 1.0e-5 : f64}
            : (tensor<3x4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
            -> (tensor<3x4x8xbf16>, tensor<3x4x1xf32>, tensor<3x4x1xf32>)
        %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 2 : i64}
            : (tensor<3x4x8xbf16>, tensor<3x4x1xf32>, tensor<3x4x1xf32>, tensor<3x4x8xf32>, tensor<8xf32>)
            -> (tensor<3x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
        %z, %q = kiln.rms_norm %x scale %b {axis = 2 : i64, epsilon = 1.0e-6 : f64}
            : (tensor<3x4x8xbf16>, tensor<8xf32>) -> (tensor<3x4x8xbf16>, tensor<3x4x1xf32>)
        %dy16 = kiln.cast %dy : tensor<3x4x8xf32> to tensor<3x4x8xbf16>
        %dz, %dq = kiln.rms_norm_grad %x, %q, %dy16 scale %b {axis = 2 : i64}
            : (tensor<3x4x8xbf16>, tensor<3x4x1xf32>, tensor<3x4x8xbf16>, tensor<8xf32>)
            -> (tensor<3x4x8xf32>, tensor<8xf32>)
        return %y, %m, %dx, %ds, %db, %z, %dz, %dq : tensor<3x4x8xbf16>, tensor<3x4x1xf32>,
            tensor<3x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<3x4x8xbf16>, tensor<3x4x8xf32>,
            tensor<8xf32>
      })"},
    // Results of two granularities in one kernel: a residual add and layer
    // norm whose kernel also stores each row's statistics; a gradient whose
    // column-sum kernel stores it and its bf16 copy as it reads it, the
    // 600 rows split over 4 blocks per tile of 32 of the 40 columns (the
    // last tile part full), whose partials a second kernel combines; and a
    // plain column sum, split too.
    {"SideResults", R"(
      func.func @main(%x: tensor<600x40xf32>, %r: tensor<600x40xf32>, %g: tensor<40xf32>,
                      %c: tensor<1024x24xf32>)
          -> (tensor<600x40xf32>, tensor<600x40xbf16>, tensor<600x1xf32>, tensor<600x1xf32>,
              tensor<600x40xf32>, tensor<40xf32>, tensor<600x40xbf16>, tensor<24xf32>) {
        %n:4 = kiln.fusion %x, %r, %g : (tensor<600x40xf32>, tensor<600x40xf32>, tensor<40xf32>)
            -> (tensor<600x40xf32>, tensor<600x40xbf16>, tensor<600x1xf32>, tensor<600x1xf32>) {
        ^bb0(%a: tensor<600x40xf32>, %b: tensor<600x40xf32>, %s: tensor<40xf32>):
          %sum = kiln.add %a, %b : (tensor<600x40xf32>, tensor<600x40xf32>) -> tensor<600x40xf32>
          %y, %mean, %rstd = kiln.layer_norm %sum scale %s {axis = 1 : i64, epsilon = 1.0e-5 : f64}
              : (tensor<600x40xf32>, tensor<40xf32>) -> (tensor<600x40xf32>, tensor<600x1xf32>, tensor<600x1xf32>)
          %yc = kiln.cast %y : tensor<600x40xf32> to tensor<600x40xbf16>
          kiln.yield %sum, %yc, %mean, %rstd : tensor<600x40xf32>, tensor<600x40xbf16>, tensor<600x1xf32>, tensor<600x1xf32>
        }
        %b:3 = kiln.fusion %x, %r : (tensor<600x40xf32>, tensor<600x40xf32>)
            -> (tensor<600x40xf32>, tensor<40xf32>, tensor<600x40xbf16>) {
        ^bb0(%a: tensor<600x40xf32>, %b: tensor<600x40xf32>):
          %grad = kiln.mul %a, %b : (tensor<600x40xf32>, tensor<600x40xf32>) -> tensor<600x40xf32>
          %bias = kiln.reduce_sum %grad {axes = array<i64: 0>} : (tensor<600x40xf32>) -> tensor<40xf32>
          %gc = kiln.cast %grad : tensor<600x40xf32> to tensor<600x40xbf16>
          kiln.yield %grad, %bias, %gc : tensor<600x40xf32>, tensor<40xf32>, tensor<600x40xbf16>
        }
        %cs = kiln.reduce_sum %c {axes = array<i64: 0>} : (tensor<1024x24xf32>) -> tensor<24xf32>
        return %n#0, %n#1, %n#2, %n#3, %b#0, %b#1, %b#2, %cs : tensor<600x40xf32>, tensor<600x40xbf16>,
            tensor<600x1xf32>, tensor<600x1xf32>, tensor<600x40xf32>, tensor<40xf32>,
            tensor<600x40xbf16>, tensor<24xf32>
      })"},
    // A column sum and a copy of the tensor it sums, reading only that
    // (the bias gradient and bf16 copy of a gradient that a norm's gradient
    // kernel produced): one kernel reads it once. Rows as many as columns
    // too, where the copy's elements per row equal the sum's count.
    {"SiblingColumnSums", R"(
      func.func @main(%g: tensor<4x150x40xf32>, %h: tensor<32x32xf32>)
          -> (tensor<40xf32>, tensor<4x150x40xbf16>, tensor<32xf32>, tensor<32x32xbf16>) {
        %a:2 = kiln.fusion %g : (tensor<4x150x40xf32>) -> (tensor<40xf32>, tensor<4x150x40xbf16>) {
        ^bb0(%x: tensor<4x150x40xf32>):
          %s = kiln.reduce_sum %x {axes = array<i64: 0, 1>} : (tensor<4x150x40xf32>) -> tensor<40xf32>
          %c = kiln.cast %x : tensor<4x150x40xf32> to tensor<4x150x40xbf16>
          kiln.yield %s, %c : tensor<40xf32>, tensor<4x150x40xbf16>
        }
        %b:2 = kiln.fusion %h : (tensor<32x32xf32>) -> (tensor<32xf32>, tensor<32x32xbf16>) {
        ^bb0(%x: tensor<32x32xf32>):
          %s = kiln.reduce_sum %x {axes = array<i64: 0>} : (tensor<32x32xf32>) -> tensor<32xf32>
          %c = kiln.cast %x : tensor<32x32xf32> to tensor<32x32xbf16>
          kiln.yield %s, %c : tensor<32xf32>, tensor<32x32xbf16>
        }
        return %a#0, %a#1, %b#0, %b#1 : tensor<40xf32>, tensor<4x150x40xbf16>, tensor<32xf32>, tensor<32x32xbf16>
      })"},
    // A norm's gradient and its scale and bias gradients in one pass over
    // the rows: each of 256 blocks adds up its rows' column sums (1030
    // rows: some blocks take five), a second kernel combines them; rows
    // in 16-byte pieces (40 columns) and element by element (37). And a
    // softmax's rows beside the maxima of their columns, and beside the
    // variances of their columns, which read the columns' means (sums the
    // row loop cannot add up: they keep kernels of their own).
    {"NormGradientColumnSums", R"(
      func.func @main(%x: tensor<1030x40xf32>, %s: tensor<40xf32>, %dy: tensor<1030x40xbf16>,
                      %w: tensor<1030x37xf32>, %t: tensor<37xf32>, %dw: tensor<1030x37xf32>)
          -> (tensor<1030x40xf32>, tensor<40xf32>, tensor<40xf32>, tensor<1030x37xf32>, tensor<37xf32>,
              tensor<1030x37xf32>, tensor<37xf32>, tensor<1030x37xf32>, tensor<37xf32>, tensor<37xf32>) {
        %v:3 = kiln.fusion %w : (tensor<1030x37xf32>) -> (tensor<1030x37xf32>, tensor<37xf32>, tensor<37xf32>) {
        ^bb0(%a: tensor<1030x37xf32>):
          %e = kiln.softmax %a {axis = 1 : i64} : tensor<1030x37xf32>
          %mean = kiln.reduce_mean %a {axes = array<i64: 0>} : (tensor<1030x37xf32>) -> tensor<37xf32>
          %d = kiln.sub %a, %mean : (tensor<1030x37xf32>, tensor<37xf32>) -> tensor<1030x37xf32>
          %d2 = kiln.mul %d, %d : (tensor<1030x37xf32>, tensor<1030x37xf32>) -> tensor<1030x37xf32>
          %var = kiln.reduce_mean %d2 {axes = array<i64: 0>} : (tensor<1030x37xf32>) -> tensor<37xf32>
          kiln.yield %e, %mean, %var : tensor<1030x37xf32>, tensor<37xf32>, tensor<37xf32>
        }
        %p:2 = kiln.fusion %dw : (tensor<1030x37xf32>) -> (tensor<1030x37xf32>, tensor<37xf32>) {
        ^bb0(%a: tensor<1030x37xf32>):
          %e = kiln.softmax %a {axis = 1 : i64} : tensor<1030x37xf32>
          %c = kiln.reduce_max %a {axes = array<i64: 0>} : (tensor<1030x37xf32>) -> tensor<37xf32>
          kiln.yield %e, %c : tensor<1030x37xf32>, tensor<37xf32>
        }
        %y, %m, %r = kiln.layer_norm %x scale %s {axis = 1 : i64, epsilon = 1.0e-5 : f64}
            : (tensor<1030x40xf32>, tensor<40xf32>) -> (tensor<1030x40xf32>, tensor<1030x1xf32>, tensor<1030x1xf32>)
        %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 1 : i64}
            : (tensor<1030x40xf32>, tensor<1030x1xf32>, tensor<1030x1xf32>, tensor<1030x40xbf16>, tensor<40xf32>)
            -> (tensor<1030x40xf32>, tensor<40xf32>, tensor<40xf32>)
        %z, %q = kiln.rms_norm %w scale %t {axis = 1 : i64, epsilon = 1.0e-6 : f64}
            : (tensor<1030x37xf32>, tensor<37xf32>) -> (tensor<1030x37xf32>, tensor<1030x1xf32>)
        %dz, %dt = kiln.rms_norm_grad %w, %q, %dw scale %t {axis = 1 : i64}
            : (tensor<1030x37xf32>, tensor<1030x1xf32>, tensor<1030x37xf32>, tensor<37xf32>)
            -> (tensor<1030x37xf32>, tensor<37xf32>)
        return %dx, %ds, %db, %dz, %dt, %p#0, %p#1, %v#0, %v#1, %v#2 : tensor<1030x40xf32>,
            tensor<40xf32>, tensor<40xf32>, tensor<1030x37xf32>, tensor<37xf32>, tensor<1030x37xf32>,
            tensor<37xf32>, tensor<1030x37xf32>, tensor<37xf32>, tensor<37xf32>
      })"},
    // Rows longer than a block, with statistics its threads share: norms,
    // softmax and a cross-entropy gradient over a padded vocabulary whose
    // padded classes return before reading the row's log-sum-exp; sums of
    // more columns than a block's 32, the last block part full.
    {"LongRows", R"(
      func.func @main(%x: tensor<5x300xf32>, %s: tensor<300xf32>, %b: tensor<300xf32>,
                      %dy: tensor<5x300xf32>, %y: tensor<5xi64> {test.range = 200 : i64},
                      %g: tensor<f32>)
          -> (tensor<5x300xf32>, tensor<5x300xf32>, tensor<5x300xf32>, tensor<5x300xf32>,
              tensor<5x300xf32>, tensor<5x300xf32>, tensor<300xf32>, tensor<300xf32>,
              tensor<300xf32>, tensor<300xf32>, tensor<5x300xf32>, tensor<5x300xf32>) {
        %yn, %m, %r = kiln.layer_norm %x scale %s bias %b {axis = 1 : i64, epsilon = 1.0e-5 : f64}
            : (tensor<5x300xf32>, tensor<300xf32>, tensor<300xf32>)
            -> (tensor<5x300xf32>, tensor<5x1xf32>, tensor<5x1xf32>)
        %t = kiln.tanh %yn : tensor<5x300xf32>
        %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 1 : i64}
            : (tensor<5x300xf32>, tensor<5x1xf32>, tensor<5x1xf32>, tensor<5x300xf32>, tensor<300xf32>)
            -> (tensor<5x300xf32>, tensor<300xf32>, tensor<300xf32>)
        %z, %q = kiln.rms_norm %x scale %s {axis = 1 : i64, epsilon = 1.0e-6 : f64}
            : (tensor<5x300xf32>, tensor<300xf32>) -> (tensor<5x300xf32>, tensor<5x1xf32>)
        %p = kiln.softmax %x {axis = 1 : i64} : tensor<5x300xf32>
        %l = kiln.log_softmax %x {axis = 1 : i64} : tensor<5x300xf32>
        %dp = kiln.softmax_grad %p, %dy {axis = 1 : i64} : tensor<5x300xf32>
        %dl = kiln.log_softmax_grad %l, %dy {axis = 1 : i64} : tensor<5x300xf32>
        %c = kiln.cross_entropy_grad %x, %y, %g reduction = mean {ignore_index = 3 : i64, num_classes = 200 : i64}
            : (tensor<5x300xf32>, tensor<5xi64>, tensor<f32>) -> tensor<5x300xf32>
        %cs = kiln.reduce_sum %dy {axes = array<i64: 0>} : (tensor<5x300xf32>) -> tensor<300xf32>
        %cm = kiln.reduce_max %x {axes = array<i64: 0>} : (tensor<5x300xf32>) -> tensor<300xf32>
        return %t, %dx, %z, %p, %l, %c, %ds, %db, %cs, %cm, %dp, %dl : tensor<5x300xf32>, tensor<5x300xf32>,
            tensor<5x300xf32>, tensor<5x300xf32>, tensor<5x300xf32>, tensor<5x300xf32>, tensor<300xf32>,
            tensor<300xf32>, tensor<300xf32>, tensor<300xf32>, tensor<5x300xf32>, tensor<5x300xf32>
      })"},
    {"Losses", R"(
      func.func @main(%x: tensor<4x6x3xf32>, %y: tensor<4x3xi64> {test.range = 5 : i64},
                      %w: tensor<6xf32>, %g: tensor<4x3xf32>, %s: tensor<f32>)
          -> (tensor<f32>, tensor<4x3xf32>, tensor<4x6x3xf32>, tensor<f32>, tensor<4x6x3xf32>,
              tensor<4x6x3xf32>) {
        %a = kiln.cross_entropy %x, %y weight %w reduction = mean {ignore_index = 2 : i64, num_classes = 5 : i64}
            : (tensor<4x6x3xf32>, tensor<4x3xi64>, tensor<6xf32>) -> tensor<f32>
        %b = kiln.cross_entropy %x, %y reduction = none : (tensor<4x6x3xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
        %c = kiln.cross_entropy_grad %x, %y, %s weight %w reduction = mean {ignore_index = 2 : i64, num_classes = 5 : i64}
            : (tensor<4x6x3xf32>, tensor<4x3xi64>, tensor<f32>, tensor<6xf32>) -> tensor<4x6x3xf32>
        %d = kiln.nll_loss %x, %y reduction = sum : (tensor<4x6x3xf32>, tensor<4x3xi64>) -> tensor<f32>
        %e = kiln.nll_loss_grad %x, %y, %g reduction = none : (tensor<4x6x3xf32>, tensor<4x3xi64>, tensor<4x3xf32>) -> tensor<4x6x3xf32>
        %f = kiln.cross_entropy_grad %x, %y, %g reduction = none : (tensor<4x6x3xf32>, tensor<4x3xi64>, tensor<4x3xf32>) -> tensor<4x6x3xf32>
        return %a, %b, %c, %d, %e, %f : tensor<f32>, tensor<4x3xf32>, tensor<4x6x3xf32>, tensor<f32>,
            tensor<4x6x3xf32>, tensor<4x6x3xf32>
      })"},
    // A loss and its gradient over rows of 9000 bf16 logits (18 KB, longer
    // than a row the kernel prefetches), which a product computes (of one
    // term, exact on a GPU's f32 accumulation too): the gradient is written
    // over the logits, row by row, and takes each row's pieces last first
    // after its log-sum-exp read them first to last.
    {"LongRowLossWithGradientInPlace", R"(
      func.func @main(%h: tensor<3x1xbf16>, %w: tensor<1x9000xbf16>,
                      %y: tensor<3xi64> {test.range = 9000 : i64}, %s: tensor<f32>)
          -> (tensor<f32>, tensor<3x9000xbf16>) {
        %l = kiln.matmul %h, %w : (tensor<3x1xbf16>, tensor<1x9000xbf16>) -> tensor<3x9000xbf16>
        %a:2 = kiln.fusion %l, %y, %s : (tensor<3x9000xbf16>, tensor<3xi64>, tensor<f32>)
            -> (tensor<f32>, tensor<3x9000xbf16>) {
        ^bb0(%lx: tensor<3x9000xbf16>, %ly: tensor<3xi64>, %ls: tensor<f32>):
          %wide = kiln.cast %lx : tensor<3x9000xbf16> to tensor<3x9000xf32>
          %loss = kiln.cross_entropy %wide, %ly reduction = mean {ignore_index = -100 : i64}
              : (tensor<3x9000xf32>, tensor<3xi64>) -> tensor<f32>
          %grad = kiln.cross_entropy_grad %lx, %ly, %ls reduction = mean {ignore_index = -100 : i64}
              : (tensor<3x9000xbf16>, tensor<3xi64>, tensor<f32>) -> tensor<3x9000xbf16>
          kiln.yield %loss, %grad : tensor<f32>, tensor<3x9000xbf16>
        }
        return %a#0, %a#1 : tensor<f32>, tensor<3x9000xbf16>
      })"},
    // Logits at the ends of the range, which the one-pass log-sum-exp must
    // treat as max + log(sum exp(x - max)) does: -inf logits (a masked
    // class) add nothing, a row of them all or one with +inf is NaN. A loss
    // per row and its gradient (a thread per row), and the mean loss with
    // its gradient (a block per row).
    {"LossOverInfiniteLogits", R"(
      func.func @main(%x: tensor<4x6xf32>, %y: tensor<4xi64> {test.range = 6 : i64},
                      %g: tensor<4xf32>, %s: tensor<f32>)
          -> (tensor<4xf32>, tensor<4x6xf32>, tensor<f32>, tensor<4x6xf32>) {
        %m = kiln.constant dense<[[0.0, 0xFF800000, 0.0, 0xFF800000, 0.0, 0.0],
                                  [0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000],
                                  [0.0, 0.0, 0x7F800000, 0.0, 0.0, 0.0],
                                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<4x6xf32>
        %l = kiln.add %x, %m : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
        %a = kiln.cross_entropy %l, %y reduction = none : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<4xf32>
        %b = kiln.cross_entropy_grad %l, %y, %g reduction = none : (tensor<4x6xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x6xf32>
        %c = kiln.cross_entropy %l, %y reduction = mean : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
        %d = kiln.cross_entropy_grad %l, %y, %s reduction = mean : (tensor<4x6xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x6xf32>
        return %a, %b, %c, %d : tensor<4xf32>, tensor<4x6xf32>, tensor<f32>, tensor<4x6xf32>
      })"},
    // A mean loss over more rows than one block should reduce: blocks take
    // chunks of rows and compute each row's log-sum-exp together; a loss
    // per row takes a block per row.
    {"LossOverManyRows", R"(
      func.func @main(%x: tensor<8200x3xf32>, %y: tensor<8200xi64> {test.range = 3 : i64},
                      %w: tensor<3xf32>) -> (tensor<f32>, tensor<8200xf32>) {
        %a = kiln.cross_entropy %x, %y weight %w reduction = mean {ignore_index = 1 : i64}
            : (tensor<8200x3xf32>, tensor<8200xi64>, tensor<3xf32>) -> tensor<f32>
        %b = kiln.cross_entropy %x, %y reduction = none : (tensor<8200x3xf32>, tensor<8200xi64>) -> tensor<8200xf32>
        return %a, %b : tensor<f32>, tensor<8200xf32>
      })"},
    // A loss and its gradient in one region (as fusion joins them): one
    // block-per-row kernel computes each row's log-sum-exp once for both,
    // the loss reading the logits widened to f32 (a cast that changes no
    // value); its row loop adds the rows' losses and weights into each
    // block's partials (300 rows over 256 blocks: some take two), which a
    // second kernel combines. bf16 logits with padding classes in 16-byte
    // pieces; f32 logits with class weights, a sum, element by element.
    // Classes along a middle axis (rows not contiguous) keep two kernels.
    {"LossWithItsGradient", R"(
      func.func @main(%x: tensor<300x48xbf16>, %y: tensor<300xi64> {test.range = 45 : i64},
                      %s: tensor<f32>, %z: tensor<300x37xf32>, %t: tensor<300xi64> {test.range = 37 : i64},
                      %w: tensor<37xf32>, %u: tensor<20x7x30xf32>, %v: tensor<20x30xi64> {test.range = 7 : i64})
          -> (tensor<f32>, tensor<300x48xbf16>, tensor<f32>, tensor<300x37xf32>, tensor<f32>,
              tensor<f32>, tensor<20x7x30xf32>) {
        %a:2 = kiln.fusion %x, %y, %s : (tensor<300x48xbf16>, tensor<300xi64>, tensor<f32>)
            -> (tensor<f32>, tensor<300x48xbf16>) {
        ^bb0(%lx: tensor<300x48xbf16>, %ly: tensor<300xi64>, %ls: tensor<f32>):
          %wide = kiln.cast %lx : tensor<300x48xbf16> to tensor<300x48xf32>
          %loss = kiln.cross_entropy %wide, %ly reduction = mean {ignore_index = 3 : i64, num_classes = 45 : i64}
              : (tensor<300x48xf32>, tensor<300xi64>) -> tensor<f32>
          %grad = kiln.cross_entropy_grad %lx, %ly, %ls reduction = mean {ignore_index = 3 : i64, num_classes = 45 : i64}
              : (tensor<300x48xbf16>, tensor<300xi64>, tensor<f32>) -> tensor<300x48xbf16>
          kiln.yield %loss, %grad : tensor<f32>, tensor<300x48xbf16>
        }
        %b:3 = kiln.fusion %z, %t, %s, %w : (tensor<300x37xf32>, tensor<300xi64>, tensor<f32>, tensor<37xf32>)
            -> (tensor<f32>, tensor<300x37xf32>, tensor<f32>) {
        ^bb0(%lz: tensor<300x37xf32>, %lt: tensor<300xi64>, %ls: tensor<f32>, %lw: tensor<37xf32>):
          %mean = kiln.cross_entropy %lz, %lt weight %lw reduction = mean {ignore_index = 5 : i64}
              : (tensor<300x37xf32>, tensor<300xi64>, tensor<37xf32>) -> tensor<f32>
          %grad = kiln.cross_entropy_grad %lz, %lt, %ls weight %lw reduction = sum {ignore_index = 5 : i64}
              : (tensor<300x37xf32>, tensor<300xi64>, tensor<f32>, tensor<37xf32>) -> tensor<300x37xf32>
          %sum = kiln.cross_entropy %lz, %lt weight %lw reduction = sum {ignore_index = 5 : i64}
              : (tensor<300x37xf32>, tensor<300xi64>, tensor<37xf32>) -> tensor<f32>
          kiln.yield %mean, %grad, %sum : tensor<f32>, tensor<300x37xf32>, tensor<f32>
        }
        %c:2 = kiln.fusion %u, %v, %s : (tensor<20x7x30xf32>, tensor<20x30xi64>, tensor<f32>)
            -> (tensor<f32>, tensor<20x7x30xf32>) {
        ^bb0(%lu: tensor<20x7x30xf32>, %lv: tensor<20x30xi64>, %ls: tensor<f32>):
          %loss = kiln.cross_entropy %lu, %lv reduction = mean : (tensor<20x7x30xf32>, tensor<20x30xi64>) -> tensor<f32>
          %grad = kiln.cross_entropy_grad %lu, %lv, %ls reduction = mean
              : (tensor<20x7x30xf32>, tensor<20x30xi64>, tensor<f32>) -> tensor<20x7x30xf32>
          kiln.yield %loss, %grad : tensor<f32>, tensor<20x7x30xf32>
        }
        return %a#0, %a#1, %b#0, %b#1, %b#2, %c#0, %c#1 : tensor<f32>, tensor<300x48xbf16>, tensor<f32>,
            tensor<300x37xf32>, tensor<f32>, tensor<f32>, tensor<20x7x30xf32>
      })"},
    // Two long sums in one region that share nothing: each is split over
    // blocks into partials, which a second kernel combines; equal kernels
    // are placed together, but a sum's partials are combined before the
    // other's overwrite them.
    {"IndependentSplitSums", R"(
      func.func @main(%a: tensor<9000xf32>, %b: tensor<9000xf32>) -> (tensor<f32>, tensor<f32>) {
        %s:2 = kiln.fusion %a, %b : (tensor<9000xf32>, tensor<9000xf32>) -> (tensor<f32>, tensor<f32>) {
        ^bb0(%x: tensor<9000xf32>, %y: tensor<9000xf32>):
          %x2 = kiln.mul %x, %x : (tensor<9000xf32>, tensor<9000xf32>) -> tensor<9000xf32>
          %sx = kiln.reduce_sum %x2 {axes = array<i64: 0>} : (tensor<9000xf32>) -> tensor<f32>
          %y2 = kiln.mul %y, %y : (tensor<9000xf32>, tensor<9000xf32>) -> tensor<9000xf32>
          %sy = kiln.reduce_sum %y2 {axes = array<i64: 0>} : (tensor<9000xf32>) -> tensor<f32>
          kiln.yield %sx, %sy : tensor<f32>, tensor<f32>
        }
        return %s#0, %s#1 : tensor<f32>, tensor<f32>
      })"},
    {"Optimizers", R"(
      func.func @main(%p: tensor<5x3xf32>, %g: tensor<5x3xf32>, %m: tensor<5x3xf32>, %v: tensor<5x3xf32>,
                      %lr: tensor<f32>, %t: tensor<i64> {test.range = 3 : i64})
          -> (tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>,
              tensor<5x3xf32>, tensor<5x3xf32>) {
        %one = kiln.constant dense<1> : tensor<i64>
        %step = kiln.add %t, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
        %vv = kiln.abs %v : tensor<5x3xf32>
        %a:3 = kiln.adamw %p, %g, %m, %vv, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64,
            epsilon = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<5x3xf32>, tensor<f32>, tensor<i64>
        %s:2 = kiln.sgd %p, %g, %m, %lr, %step {momentum = 0.9 : f64, dampening = 0.1 : f64,
            weight_decay = 0.01 : f64, nesterov} : tensor<5x3xf32>, tensor<f32>, tensor<i64>
        %q:2 = kiln.adagrad %p, %g, %vv, %lr, %step {lr_decay = 0.01 : f64, weight_decay = 0.0 : f64,
            epsilon = 1.0e-10 : f64} : tensor<5x3xf32>, tensor<f32>, tensor<i64>
        return %a#0, %a#1, %a#2, %s#0, %s#1, %q#0, %q#1 : tensor<5x3xf32>, tensor<5x3xf32>,
            tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>
      })"},
    {"RandomDrawsAndRange", R"(
      func.func @main(%x: tensor<6x5xf32>, %o: tensor<i64>)
          -> (tensor<6x5xf32>, tensor<6x5xi1>, tensor<7xf32>, tensor<6x5xf32>, tensor<6x5xbf16>) {
        %y, %m = kiln.dropout %x offset %o : tensor<i64> {ratio = 0.3 : f64, seed = 11 : i64} : tensor<6x5xf32>
        %r = kiln.range {start = -1.5 : f64, step = 0.25 : f64} : tensor<7xf32>
        %u = kiln.random_uniform offset %o : tensor<i64> {low = -1.0 : f64, high = 2.0 : f64, seed = 4 : i64} : tensor<6x5xf32>
        %xu = kiln.mul %x, %u : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
        %n = kiln.random_normal {mean = 0.5 : f64, scale = 3.0 : f64, seed = 4 : i64} : tensor<6x5xbf16>
        return %y, %m, %r, %xu, %n : tensor<6x5xf32>, tensor<6x5xi1>, tensor<7xf32>, tensor<6x5xf32>, tensor<6x5xbf16>
      })"},
    {"Matmuls", R"(
      func.func @main(%a: tensor<2x3x5x4xf32>, %b: tensor<4x6xf32>, %c: tensor<3x6x4xf32>,
                      %d: tensor<2x3x6x5xbf16>, %e: tensor<2x3x6x4xbf16>)
          -> (tensor<2x3x5x6xf32>, tensor<2x3x5x6xf32>, tensor<2x3x5x4xf32>) {
        %x = kiln.matmul %a, %b : (tensor<2x3x5x4xf32>, tensor<4x6xf32>) -> tensor<2x3x5x6xf32>
        %y = kiln.matmul %a, %c {transpose_rhs} : (tensor<2x3x5x4xf32>, tensor<3x6x4xf32>) -> tensor<2x3x5x6xf32>
        %z = kiln.matmul %d, %e {transpose_lhs, accumulate = f32}
            : (tensor<2x3x6x5xbf16>, tensor<2x3x6x4xbf16>) -> tensor<2x3x5x4xf32>
        return %x, %y, %z : tensor<2x3x5x6xf32>, tensor<2x3x5x6xf32>, tensor<2x3x5x4xf32>
      })",
     true},
    {"GemmEpilogues",
     R"(
      func.func @main(%x: tensor<6x4xbf16>, %w: tensor<4x8xbf16>, %b: tensor<8xf32>,
                      %g: tensor<6x4xf32>, %u: tensor<8x4xf32>, %a: tensor<2x3x8xf32>,
                      %acc: tensor<6x8xf32>)
          -> (tensor<2x3x8xf32>, tensor<6x8xbf16>, tensor<2x3x8xf32>, tensor<6x8xf32>,
              tensor<6x8xf32>) {
        // Bias in the GEMM; its result yielded as a view; GELU and the cast
        // in one kernel after it.
        %f:2 = kiln.fusion %x, %w, %b : (tensor<6x4xbf16>, tensor<4x8xbf16>, tensor<8xf32>)
            -> (tensor<2x3x8xf32>, tensor<6x8xbf16>) {
        ^bb0(%x0: tensor<6x4xbf16>, %w0: tensor<4x8xbf16>, %b0: tensor<8xf32>):
          %p = kiln.matmul %x0, %w0 {accumulate = f32} : (tensor<6x4xbf16>, tensor<4x8xbf16>) -> tensor<6x8xf32>
          %s = kiln.add %p, %b0 : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
          %r = kiln.reshape %s : tensor<6x8xf32> to tensor<2x3x8xf32>
          %y = kiln.gelu %s approximation = tanh : tensor<6x8xf32>
          %c = kiln.cast %y : tensor<6x8xf32> to tensor<6x8xbf16>
          kiln.yield %r, %c : tensor<2x3x8xf32>, tensor<6x8xbf16>
        }
        // The GELU gradient at a saved input, in the GEMM (DGELU).
        %d = kiln.fusion %g, %u, %a : (tensor<6x4xf32>, tensor<8x4xf32>, tensor<2x3x8xf32>)
            -> tensor<2x3x8xf32> {
        ^bb0(%g0: tensor<6x4xf32>, %u0: tensor<8x4xf32>, %a0: tensor<2x3x8xf32>):
          %p = kiln.matmul %g0, %u0 {transpose_rhs} : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
          %r = kiln.reshape %p : tensor<6x8xf32> to tensor<2x3x8xf32>
          %q = kiln.gelu_grad %a0, %r approximation = tanh : tensor<2x3x8xf32>
          kiln.yield %q : tensor<2x3x8xf32>
        }
        // A matrix added to the product: cuBLASLt's C.
        %m = kiln.fusion %g, %u, %acc : (tensor<6x4xf32>, tensor<8x4xf32>, tensor<6x8xf32>) -> tensor<6x8xf32> {
        ^bb0(%g2: tensor<6x4xf32>, %u2: tensor<8x4xf32>, %w2: tensor<6x8xf32>):
          %p = kiln.matmul %g2, %u2 {transpose_rhs} : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
          %s = kiln.add %w2, %p : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
          kiln.yield %s : tensor<6x8xf32>
        }
        // A product no result holds: the GEMM writes scratch, a kernel the rest.
        %e = kiln.fusion %g, %u : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32> {
        ^bb0(%g1: tensor<6x4xf32>, %u1: tensor<8x4xf32>):
          %p = kiln.matmul %g1, %u1 {transpose_rhs} : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
          %t = kiln.tanh %p : tensor<6x8xf32>
          kiln.yield %t : tensor<6x8xf32>
        }
        return %f#0, %f#1, %d, %m, %e : tensor<2x3x8xf32>, tensor<6x8xbf16>, tensor<2x3x8xf32>,
            tensor<6x8xf32>, tensor<6x8xf32>
      })",
     true,
     true,
     2e-6,
     {artifact::Epilogue::Bias, artifact::Epilogue::DGelu,
      artifact::Epilogue::None, artifact::Epilogue::None},
     {false, false, true, false}},
    {"BiasGradients",
     R"(
      func.func @main(%x: tensor<40x4xbf16>, %dy: tensor<40x8xbf16>,
                      %g: tensor<40x6xf32>, %h: tensor<40x4xf32>)
          -> (tensor<4x8xf32>, tensor<8xf32>, tensor<6x4xf32>, tensor<6xf32>) {
        // BGRADB: GPT-2's Conv1D, x^T dy and dy's 16-bit values summed over
        // the tokens in f32.
        %c:2 = kiln.fusion %x, %dy : (tensor<40x4xbf16>, tensor<40x8xbf16>)
            -> (tensor<4x8xf32>, tensor<8xf32>) {
        ^bb0(%x0: tensor<40x4xbf16>, %dy0: tensor<40x8xbf16>):
          %p = kiln.matmul %x0, %dy0 {accumulate = f32, transpose_lhs}
              : (tensor<40x4xbf16>, tensor<40x8xbf16>) -> tensor<4x8xf32>
          %w = kiln.cast %dy0 : tensor<40x8xbf16> to tensor<40x8xf32>
          %s = kiln.reduce_sum %w {axes = array<i64: 0>} : (tensor<40x8xf32>) -> tensor<8xf32>
          kiln.yield %p, %s : tensor<4x8xf32>, tensor<8xf32>
        }
        // BGRADA: a Linear layer, g^T h and g summed over the tokens.
        %l:2 = kiln.fusion %g, %h : (tensor<40x6xf32>, tensor<40x4xf32>)
            -> (tensor<6x4xf32>, tensor<6xf32>) {
        ^bb0(%g0: tensor<40x6xf32>, %h0: tensor<40x4xf32>):
          %p = kiln.matmul %g0, %h0 {transpose_lhs} : (tensor<40x6xf32>, tensor<40x4xf32>) -> tensor<6x4xf32>
          %s = kiln.reduce_sum %g0 {axes = array<i64: 0>} : (tensor<40x6xf32>) -> tensor<6xf32>
          kiln.yield %p, %s : tensor<6x4xf32>, tensor<6xf32>
        }
        return %c#0, %c#1, %l#0, %l#1 : tensor<4x8xf32>, tensor<8xf32>, tensor<6x4xf32>, tensor<6xf32>
      })",
     true,
     true,
     2e-6,
     {artifact::Epilogue::BiasGradB, artifact::Epilogue::BiasGradA},
     {false, false}},
    {"GeluEpilogues",
     R"(
      func.func @main(%x: tensor<6x4xbf16>, %w: tensor<4x8xbf16>, %b: tensor<8xbf16>,
                      %y: tensor<6x4xf32>, %v: tensor<4x8xf32>, %c: tensor<8xf32>)
          -> (tensor<6x8xbf16>, tensor<2x3x8xbf16>, tensor<6x8xf32>, tensor<2x3x8xf32>,
              tensor<6x8xf32>) {
        // GELU_AUX_BIAS in bf16: the GELU of the f32 sum (behind reshapes)
        // and the sum, each rounded once.
        %f:2 = kiln.fusion %x, %w, %b : (tensor<6x4xbf16>, tensor<4x8xbf16>, tensor<8xbf16>)
            -> (tensor<6x8xbf16>, tensor<6x8xbf16>) {
        ^bb0(%x0: tensor<6x4xbf16>, %w0: tensor<4x8xbf16>, %b0: tensor<8xbf16>):
          %p = kiln.matmul %x0, %w0 {accumulate = f32} : (tensor<6x4xbf16>, tensor<4x8xbf16>) -> tensor<6x8xf32>
          %bw = kiln.cast %b0 : tensor<8xbf16> to tensor<8xf32>
          %s = kiln.add %p, %bw : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
          %a = kiln.cast %s : tensor<6x8xf32> to tensor<6x8xbf16>
          %r = kiln.reshape %s : tensor<6x8xf32> to tensor<2x3x8xf32>
          %g = kiln.gelu %r approximation = tanh : tensor<2x3x8xf32>
          %o = kiln.reshape %g : tensor<2x3x8xf32> to tensor<6x8xf32>
          %ob = kiln.cast %o : tensor<6x8xf32> to tensor<6x8xbf16>
          kiln.yield %ob, %a : tensor<6x8xbf16>, tensor<6x8xbf16>
        }
        %av = kiln.reshape %f#1 : tensor<6x8xbf16> to tensor<2x3x8xbf16>
        // In f32, the sum stored as a view of it; and GELU_BIAS, when
        // nothing reads the sum.
        %e:2 = kiln.fusion %y, %v, %c : (tensor<6x4xf32>, tensor<4x8xf32>, tensor<8xf32>)
            -> (tensor<6x8xf32>, tensor<2x3x8xf32>) {
        ^bb0(%y0: tensor<6x4xf32>, %v0: tensor<4x8xf32>, %c0: tensor<8xf32>):
          %p = kiln.matmul %y0, %v0 : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
          %s = kiln.add %p, %c0 : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
          %r = kiln.reshape %s : tensor<6x8xf32> to tensor<2x3x8xf32>
          %g = kiln.gelu %s approximation = tanh : tensor<6x8xf32>
          kiln.yield %g, %r : tensor<6x8xf32>, tensor<2x3x8xf32>
        }
        %n = kiln.fusion %y, %v, %c : (tensor<6x4xf32>, tensor<4x8xf32>, tensor<8xf32>)
            -> tensor<6x8xf32> {
        ^bb0(%y1: tensor<6x4xf32>, %v1: tensor<4x8xf32>, %c1: tensor<8xf32>):
          %p = kiln.matmul %y1, %v1 : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
          %s = kiln.add %c1, %p : (tensor<8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
          %g = kiln.gelu %s approximation = tanh : tensor<6x8xf32>
          kiln.yield %g : tensor<6x8xf32>
        }
        return %f#0, %av, %e#0, %e#1, %n : tensor<6x8xbf16>, tensor<2x3x8xbf16>, tensor<6x8xf32>,
            tensor<2x3x8xf32>, tensor<6x8xf32>
      })",
     true,
     true,
     2e-6,
     {artifact::Epilogue::GeluAuxBias, artifact::Epilogue::GeluAuxBias,
      artifact::Epilogue::GeluBias},
     {false, false, false}},
    {"AttentionCausalGroupedDropout", R"(
      func.func @main(%q: tensor<2x4x5x8xf32>, %k: tensor<2x2x7x8xf32>, %v: tensor<2x2x7x6xf32>,
                      %o: tensor<i64>, %g: tensor<2x4x5x6xf32>)
          -> (tensor<2x4x5x6xf32>, tensor<2x4x5xf32>, tensor<2x4x5x8xf32>, tensor<2x2x7x8xf32>,
              tensor<2x2x7x6xf32>) {
        %out, %lse = kiln.attention %q, %k, %v offset %o {causal, scale = 0.35 : f64,
            dropout_ratio = 0.2 : f64, seed = 5 : i64}
            : (tensor<2x4x5x8xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x6xf32>, tensor<i64>)
            -> (tensor<2x4x5x6xf32>, tensor<2x4x5xf32>)
        %dq, %dk, %dv = kiln.attention_grad %q, %k, %v offset %o output %out, %lse, %g
            {causal, scale = 0.35 : f64, dropout_ratio = 0.2 : f64, seed = 5 : i64}
            : (tensor<2x4x5x8xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x6xf32>, tensor<i64>,
               tensor<2x4x5x6xf32>, tensor<2x4x5xf32>, tensor<2x4x5x6xf32>)
            -> (tensor<2x4x5x8xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x6xf32>)
        return %out, %lse, %dq, %dk, %dv : tensor<2x4x5x6xf32>, tensor<2x4x5xf32>, tensor<2x4x5x8xf32>,
            tensor<2x2x7x8xf32>, tensor<2x2x7x6xf32>
      })"},
    {"AttentionTiles", R"(
func.func @main(%q: tensor<2x4x32x16xf32>, %k: tensor<2x4x32x16xf32>, %v: tensor<2x4x32x16xf32>, %g: tensor<2x4x32x16xf32>)
    -> (tensor<2x4x32x16xf32>, tensor<2x4x32xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) {
  %out, %lse = kiln.attention %q, %k, %v {causal, scale = 0.25 : f64}
      : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> (tensor<2x4x32x16xf32>, tensor<2x4x32xf32>)
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %out, %lse, %g {causal, scale = 0.25 : f64}
      : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32xf32>, tensor<2x4x32x16xf32>)
      -> (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>)
  return %out, %lse, %dq, %dk, %dv : tensor<2x4x32x16xf32>, tensor<2x4x32xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>
}
)"},
    // The bf16 step's shapes: 16-bit operands, output and gradients (the
    // gradient reads the 16-bit output), f32 statistics, more rows than one
    // tile.
    {"AttentionTilesBf16", R"(
func.func @main(%q: tensor<2x4x32x16xbf16>, %k: tensor<2x4x32x16xbf16>, %v: tensor<2x4x32x16xbf16>, %g: tensor<2x4x32x16xbf16>)
    -> (tensor<2x4x32x16xbf16>, tensor<2x4x32xf32>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>) {
  %out, %lse = kiln.attention %q, %k, %v {causal, scale = 0.25 : f64}
      : (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>) -> (tensor<2x4x32x16xbf16>, tensor<2x4x32xf32>)
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %out, %lse, %g {causal, scale = 0.25 : f64}
      : (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32xf32>, tensor<2x4x32x16xbf16>)
      -> (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>)
  return %out, %lse, %dq, %dk, %dv : tensor<2x4x32x16xbf16>, tensor<2x4x32xf32>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>
}
)"},
    // Tensor cores: a tile of 64 query rows and the 16 past it, key tiles
    // of 64, grouped heads, causal; f16 without a mask, with an additive
    // padding mask (BERT's), causal with a boolean mask (rows that keep no
    // key give 0 and -inf), and with a negative scale (whose scores' row
    // maximum is not that of the products, which the forward pass takes
    // where the scale is positive). The interpreter
    // rounds normalized probabilities to the operands' type before P V,
    // the kernel unnormalized ones (FlashAttention's order): both are within
    // 2^-9 of the exact value (bf16), so outputs, convex combinations of
    // rows of V (|V| <= 2), differ by at most 2 * 2^-9 * 2 = 2^-7; the f32
    // scores add errors of order 1e-6.
    {"TensorCoreAttention", R"(
func.func @main(%q: tensor<1x4x80x64xbf16>, %k: tensor<1x2x80x64xbf16>, %v: tensor<1x2x80x64xbf16>,
                %q2: tensor<2x2x24x32xf16>, %k2: tensor<2x2x40x32xf16>, %v2: tensor<2x2x40x32xf16>,
                %m: tensor<2x1x1x40xf32>, %b: tensor<80x80xi1>)
    -> (tensor<1x4x80x64xf32>, tensor<1x4x80xf32>, tensor<2x2x24x32xf16>, tensor<2x2x24xf32>,
        tensor<2x2x24x32xf16>, tensor<2x2x24xf32>, tensor<1x4x80x64xf32>, tensor<1x4x80xf32>,
        tensor<2x2x24x32xf16>, tensor<2x2x24xf32>) {
  %out, %lse = kiln.attention %q, %k, %v {causal, scale = 0.125 : f64}
      : (tensor<1x4x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>) -> (tensor<1x4x80x64xf32>, tensor<1x4x80xf32>)
  %out2, %lse2 = kiln.attention %q2, %k2, %v2 {scale = 0.2 : f64}
      : (tensor<2x2x24x32xf16>, tensor<2x2x40x32xf16>, tensor<2x2x40x32xf16>) -> (tensor<2x2x24x32xf16>, tensor<2x2x24xf32>)
  %out3, %lse3 = kiln.attention %q2, %k2, %v2 mask %m {scale = 0.2 : f64}
      : (tensor<2x2x24x32xf16>, tensor<2x2x40x32xf16>, tensor<2x2x40x32xf16>, tensor<2x1x1x40xf32>)
      -> (tensor<2x2x24x32xf16>, tensor<2x2x24xf32>)
  %out4, %lse4 = kiln.attention %q, %k, %v mask %b {causal, scale = 0.125 : f64}
      : (tensor<1x4x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<80x80xi1>)
      -> (tensor<1x4x80x64xf32>, tensor<1x4x80xf32>)
  %out5, %lse5 = kiln.attention %q2, %k2, %v2 {scale = -0.2 : f64}
      : (tensor<2x2x24x32xf16>, tensor<2x2x40x32xf16>, tensor<2x2x40x32xf16>) -> (tensor<2x2x24x32xf16>, tensor<2x2x24xf32>)
  return %out, %lse, %out2, %lse2, %out3, %lse3, %out4, %lse4, %out5, %lse5 : tensor<1x4x80x64xf32>, tensor<1x4x80xf32>,
      tensor<2x2x24x32xf16>, tensor<2x2x24xf32>, tensor<2x2x24x32xf16>, tensor<2x2x24xf32>,
      tensor<1x4x80x64xf32>, tensor<1x4x80xf32>, tensor<2x2x24x32xf16>, tensor<2x2x24xf32>
}
)",
     false, false, 0x1p-7},
    // The gradient on tensor cores, from an exact forward pass: P and dS
    // are rounded to the operands' type as the interpreter rounds them, but
    // from f32 scores where the interpreter's are correctly rounded, so a
    // term may land one 16-bit ulp away (2^-8 of it) where the two sit on
    // either side of a rounding boundary; 2^-7 of the largest result allows
    // several such terms. Grouped heads and causal in bf16, reading a bf16
    // output as the bf16 step does; head dimension 128 in f16, with an
    // additive mask and f16 gradients.
    {"TensorCoreAttentionGradient", R"(
func.func @main(%q: tensor<1x4x80x64xbf16>, %k: tensor<1x2x80x64xbf16>, %v: tensor<1x2x80x64xbf16>,
                %g: tensor<1x4x80x64xbf16>, %q2: tensor<1x2x24x128xf16>, %k2: tensor<1x2x40x128xf16>,
                %v2: tensor<1x2x40x128xf16>, %g2: tensor<1x2x24x128xf16>, %m: tensor<1x1x1x40xf32>)
    -> (tensor<1x4x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>,
        tensor<1x2x24x128xf16>, tensor<1x2x40x128xf16>, tensor<1x2x40x128xf16>) {
  %q32 = kiln.cast %q : tensor<1x4x80x64xbf16> to tensor<1x4x80x64xf32>
  %k32 = kiln.cast %k : tensor<1x2x80x64xbf16> to tensor<1x2x80x64xf32>
  %v32 = kiln.cast %v : tensor<1x2x80x64xbf16> to tensor<1x2x80x64xf32>
  %out, %lse = kiln.attention %q32, %k32, %v32 {causal, scale = 0.125 : f64}
      : (tensor<1x4x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>) -> (tensor<1x4x80x64xf32>, tensor<1x4x80xf32>)
  %out16 = kiln.cast %out : tensor<1x4x80x64xf32> to tensor<1x4x80x64xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %out16, %lse, %g {causal, scale = 0.125 : f64}
      : (tensor<1x4x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x2x80x64xbf16>, tensor<1x4x80x64xbf16>, tensor<1x4x80xf32>, tensor<1x4x80x64xbf16>)
      -> (tensor<1x4x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>)
  %q232 = kiln.cast %q2 : tensor<1x2x24x128xf16> to tensor<1x2x24x128xf32>
  %k232 = kiln.cast %k2 : tensor<1x2x40x128xf16> to tensor<1x2x40x128xf32>
  %v232 = kiln.cast %v2 : tensor<1x2x40x128xf16> to tensor<1x2x40x128xf32>
  %out2, %lse2 = kiln.attention %q232, %k232, %v232 mask %m {scale = 0.08 : f64}
      : (tensor<1x2x24x128xf32>, tensor<1x2x40x128xf32>, tensor<1x2x40x128xf32>, tensor<1x1x1x40xf32>)
      -> (tensor<1x2x24x128xf32>, tensor<1x2x24xf32>)
  %dq2, %dk2, %dv2 = kiln.attention_grad %q2, %k2, %v2 mask %m output %out2, %lse2, %g2 {scale = 0.08 : f64}
      : (tensor<1x2x24x128xf16>, tensor<1x2x40x128xf16>, tensor<1x2x40x128xf16>, tensor<1x1x1x40xf32>,
         tensor<1x2x24x128xf32>, tensor<1x2x24xf32>, tensor<1x2x24x128xf16>)
      -> (tensor<1x2x24x128xf16>, tensor<1x2x40x128xf16>, tensor<1x2x40x128xf16>)
  return %dq, %dk, %dv, %dq2, %dk2, %dv2 : tensor<1x4x80x64xf32>, tensor<1x2x80x64xf32>, tensor<1x2x80x64xf32>,
      tensor<1x2x24x128xf16>, tensor<1x2x40x128xf16>, tensor<1x2x40x128xf16>
}
)",
     false, false, 0x1p-7},
    // The gradient of a trained mask (mask_grad), each element summing
    // the positions it broadcasts to: a per-head bias shared by the batch
    // (T5's), causal and grouped, at a scale that is no power of two; a bias
    // per key with dropout; a bias per sample and query row. Exact kernels,
    // then on tensor cores (dq, dk, dv at their bound above; the mask's
    // gradient is f32, from f32 scores whose rounding moves each
    // probability by about 1e-6 of it: 1e-4 is a wide margin that still
    // catches a 0.1% error). A bias per key, which the tensor-core mask
    // kernel does not take, falls back to the exact one (2e-6).
    {"AttentionMaskGradient", R"(
func.func @main(%q: tensor<2x4x5x8xf32>, %k: tensor<2x2x6x8xf32>, %v: tensor<2x2x6x8xf32>, %g: tensor<2x4x5x8xf32>,
                %b1: tensor<1x4x5x6xf32>, %b2: tensor<6xf32>, %b3: tensor<2x1x5x1xf32>)
    -> (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<1x4x5x6xf32>,
        tensor<6xf32>, tensor<2x1x5x1xf32>) {
  %o1, %l1 = kiln.attention %q, %k, %v mask %b1 {causal, scale = 0.3 : f64}
      : (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<1x4x5x6xf32>) -> (tensor<2x4x5x8xf32>, tensor<2x4x5xf32>)
  %dq, %dk, %dv, %db1 = kiln.attention_grad %q, %k, %v mask %b1 output %o1, %l1, %g {causal, scale = 0.3 : f64}
      : (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<1x4x5x6xf32>, tensor<2x4x5x8xf32>, tensor<2x4x5xf32>, tensor<2x4x5x8xf32>)
      -> (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<1x4x5x6xf32>)
  %o2, %l2 = kiln.attention %q, %k, %v mask %b2 {scale = 0.5 : f64, dropout_ratio = 0.2 : f64, seed = 3 : i64}
      : (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<6xf32>) -> (tensor<2x4x5x8xf32>, tensor<2x4x5xf32>)
  %dq2, %dk2, %dv2, %db2 = kiln.attention_grad %q, %k, %v mask %b2 output %o2, %l2, %g {scale = 0.5 : f64, dropout_ratio = 0.2 : f64, seed = 3 : i64}
      : (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<6xf32>, tensor<2x4x5x8xf32>, tensor<2x4x5xf32>, tensor<2x4x5x8xf32>)
      -> (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<6xf32>)
  %o3, %l3 = kiln.attention %q, %k, %v mask %b3 {scale = 0.5 : f64}
      : (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x1x5x1xf32>) -> (tensor<2x4x5x8xf32>, tensor<2x4x5xf32>)
  %dq3, %dk3, %dv3, %db3 = kiln.attention_grad %q, %k, %v mask %b3 output %o3, %l3, %g {scale = 0.5 : f64}
      : (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x1x5x1xf32>, tensor<2x4x5x8xf32>, tensor<2x4x5xf32>, tensor<2x4x5x8xf32>)
      -> (tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x1x5x1xf32>)
  return %dq, %dk, %dv, %db1, %db2, %db3 : tensor<2x4x5x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>,
      tensor<1x4x5x6xf32>, tensor<6xf32>, tensor<2x1x5x1xf32>
}
)"},
    {"TensorCoreAttentionMaskGradient",
     R"(
func.func @main(%q: tensor<2x4x24x32xbf16>, %k: tensor<2x2x40x32xbf16>, %v: tensor<2x2x40x32xbf16>,
                %g: tensor<2x4x24x32xbf16>, %b: tensor<1x4x24x40xf32>, %b2: tensor<40xf32>)
    -> (tensor<2x4x24x32xbf16>, tensor<2x2x40x32xbf16>, tensor<2x2x40x32xbf16>, tensor<1x4x24x40xf32>,
        tensor<40xf32>) {
  %q32 = kiln.cast %q : tensor<2x4x24x32xbf16> to tensor<2x4x24x32xf32>
  %k32 = kiln.cast %k : tensor<2x2x40x32xbf16> to tensor<2x2x40x32xf32>
  %v32 = kiln.cast %v : tensor<2x2x40x32xbf16> to tensor<2x2x40x32xf32>
  %o, %l = kiln.attention %q32, %k32, %v32 mask %b {scale = 0.17 : f64}
      : (tensor<2x4x24x32xf32>, tensor<2x2x40x32xf32>, tensor<2x2x40x32xf32>, tensor<1x4x24x40xf32>)
      -> (tensor<2x4x24x32xf32>, tensor<2x4x24xf32>)
  %o16 = kiln.cast %o : tensor<2x4x24x32xf32> to tensor<2x4x24x32xbf16>
  %dq, %dk, %dv, %db = kiln.attention_grad %q, %k, %v mask %b output %o16, %l, %g {scale = 0.17 : f64}
      : (tensor<2x4x24x32xbf16>, tensor<2x2x40x32xbf16>, tensor<2x2x40x32xbf16>, tensor<1x4x24x40xf32>,
         tensor<2x4x24x32xbf16>, tensor<2x4x24xf32>, tensor<2x4x24x32xbf16>)
      -> (tensor<2x4x24x32xbf16>, tensor<2x2x40x32xbf16>, tensor<2x2x40x32xbf16>, tensor<1x4x24x40xf32>)
  %o2, %l2 = kiln.attention %q32, %k32, %v32 mask %b2 {scale = 0.17 : f64}
      : (tensor<2x4x24x32xf32>, tensor<2x2x40x32xf32>, tensor<2x2x40x32xf32>, tensor<40xf32>)
      -> (tensor<2x4x24x32xf32>, tensor<2x4x24xf32>)
  %o216 = kiln.cast %o2 : tensor<2x4x24x32xf32> to tensor<2x4x24x32xbf16>
  %dq2, %dk2, %dv2, %db2 = kiln.attention_grad %q, %k, %v mask %b2 output %o216, %l2, %g {scale = 0.17 : f64}
      : (tensor<2x4x24x32xbf16>, tensor<2x2x40x32xbf16>, tensor<2x2x40x32xbf16>, tensor<40xf32>,
         tensor<2x4x24x32xbf16>, tensor<2x4x24xf32>, tensor<2x4x24x32xbf16>)
      -> (tensor<2x4x24x32xbf16>, tensor<2x2x40x32xbf16>, tensor<2x2x40x32xbf16>, tensor<40xf32>)
  return %dq, %dk, %dv, %db, %db2 : tensor<2x4x24x32xbf16>, tensor<2x2x40x32xbf16>, tensor<2x2x40x32xbf16>,
      tensor<1x4x24x40xf32>, tensor<40xf32>
}
)",
     false,
     false,
     0x1p-7,
     {},
     {},
     false,
     /*resultTolerances=*/{{3, 1e-4}, {4, 2e-6}}},
    // Sliding windows and bands (window = [left, right]): causal within 5
    // keys back, and 3 back to 2 ahead; the gradient of the second too.
    {"AttentionWindows", R"(
func.func @main(%q: tensor<1x2x40x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x16xf32>, %g: tensor<1x2x40x16xf32>)
    -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) {
  %o1, %l1 = kiln.attention %q, %k, %v {causal, window = array<i64: 5, -1>, scale = 0.3 : f64}
      : (tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>)
  %o2, %l2 = kiln.attention %q, %k, %v {window = array<i64: 3, 2>, scale = 0.3 : f64}
      : (tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>)
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o2, %l2, %g {window = array<i64: 3, 2>, scale = 0.3 : f64}
      : (tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40xf32>, tensor<1x2x40x16xf32>)
      -> (tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>)
  return %o1, %l1, %o2, %dq, %dk, %dv : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>, tensor<1x2x40x16xf32>,
      tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
}
)"},
    // On tensor cores, over 200 rows (four query tiles of 64, forward two
    // of 128; key tiles of 64):
    // the tiles a window leaves out are skipped, forward and backward
    // (causal with 70 keys back; a band 50 back and 30 ahead, with a
    // trained bias whose gradient is 0 outside it), at the bounds above.
    {"TensorCoreAttentionWindows",
     R"(
func.func @main(%q: tensor<1x2x200x32xbf16>, %k: tensor<1x2x200x32xbf16>, %v: tensor<1x2x200x32xbf16>,
                %g: tensor<1x2x200x32xbf16>, %b: tensor<1x2x200x200xf32>)
    -> (tensor<1x2x200x32xbf16>, tensor<1x2x200xf32>, tensor<1x2x200x32xbf16>, tensor<1x2x200x32xbf16>,
        tensor<1x2x200x32xbf16>, tensor<1x2x200x200xf32>) {
  %o1, %l1 = kiln.attention %q, %k, %v {causal, window = array<i64: 70, -1>, scale = 0.17 : f64}
      : (tensor<1x2x200x32xbf16>, tensor<1x2x200x32xbf16>, tensor<1x2x200x32xbf16>) -> (tensor<1x2x200x32xbf16>, tensor<1x2x200xf32>)
  %q32 = kiln.cast %q : tensor<1x2x200x32xbf16> to tensor<1x2x200x32xf32>
  %k32 = kiln.cast %k : tensor<1x2x200x32xbf16> to tensor<1x2x200x32xf32>
  %v32 = kiln.cast %v : tensor<1x2x200x32xbf16> to tensor<1x2x200x32xf32>
  %o2, %l2 = kiln.attention %q32, %k32, %v32 mask %b {window = array<i64: 50, 30>, scale = 0.17 : f64}
      : (tensor<1x2x200x32xf32>, tensor<1x2x200x32xf32>, tensor<1x2x200x32xf32>, tensor<1x2x200x200xf32>)
      -> (tensor<1x2x200x32xf32>, tensor<1x2x200xf32>)
  %o216 = kiln.cast %o2 : tensor<1x2x200x32xf32> to tensor<1x2x200x32xbf16>
  %dq, %dk, %dv, %db = kiln.attention_grad %q, %k, %v mask %b output %o216, %l2, %g {window = array<i64: 50, 30>, scale = 0.17 : f64}
      : (tensor<1x2x200x32xbf16>, tensor<1x2x200x32xbf16>, tensor<1x2x200x32xbf16>, tensor<1x2x200x200xf32>,
         tensor<1x2x200x32xbf16>, tensor<1x2x200xf32>, tensor<1x2x200x32xbf16>)
      -> (tensor<1x2x200x32xbf16>, tensor<1x2x200x32xbf16>, tensor<1x2x200x32xbf16>, tensor<1x2x200x200xf32>)
  return %o1, %l1, %dq, %dk, %dv, %db : tensor<1x2x200x32xbf16>, tensor<1x2x200xf32>, tensor<1x2x200x32xbf16>,
      tensor<1x2x200x32xbf16>, tensor<1x2x200x32xbf16>, tensor<1x2x200x200xf32>
}
)",
     false,
     false,
     0x1p-7,
     {},
     {},
     false,
     /*resultTolerances=*/{{5, 1e-4}}},
    // Far more query rows than keys in a band 20 back and 150 ahead: query
    // tiles from the fourth on have no key tile (rows past 90 attend to
    // none: dq 0), and the band reaches more than a tile past the last key
    // tile from the first query tile on, the limits of the stored score
    // gradients' closed-form block index. At the tensor-core bound.
    {"TensorCoreAttentionShortKeys",
     R"(
func.func @main(%q: tensor<1x2x300x16xbf16>, %k: tensor<1x2x70x16xbf16>, %v: tensor<1x2x70x16xbf16>,
                %g: tensor<1x2x300x16xbf16>)
    -> (tensor<1x2x300x16xbf16>, tensor<1x2x70x16xbf16>, tensor<1x2x70x16xbf16>) {
  %q32 = kiln.cast %q : tensor<1x2x300x16xbf16> to tensor<1x2x300x16xf32>
  %k32 = kiln.cast %k : tensor<1x2x70x16xbf16> to tensor<1x2x70x16xf32>
  %v32 = kiln.cast %v : tensor<1x2x70x16xbf16> to tensor<1x2x70x16xf32>
  %o, %l = kiln.attention %q32, %k32, %v32 {window = array<i64: 20, 150>, scale = 0.25 : f64}
      : (tensor<1x2x300x16xf32>, tensor<1x2x70x16xf32>, tensor<1x2x70x16xf32>) -> (tensor<1x2x300x16xf32>, tensor<1x2x300xf32>)
  %o16 = kiln.cast %o : tensor<1x2x300x16xf32> to tensor<1x2x300x16xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o16, %l, %g {window = array<i64: 20, 150>, scale = 0.25 : f64}
      : (tensor<1x2x300x16xbf16>, tensor<1x2x70x16xbf16>, tensor<1x2x70x16xbf16>, tensor<1x2x300x16xbf16>,
         tensor<1x2x300xf32>, tensor<1x2x300x16xbf16>)
      -> (tensor<1x2x300x16xbf16>, tensor<1x2x70x16xbf16>, tensor<1x2x70x16xbf16>)
  return %dq, %dk, %dv : tensor<1x2x300x16xbf16>, tensor<1x2x70x16xbf16>, tensor<1x2x70x16xbf16>
}
)",
     false, false, 0x1p-7},
    // Blocks take heads in groups whose streamed operands fit a budget
    // (here 30000 bytes: two of the five heads' 12736 bytes of keys and
    // values, two of their 14328 of queries, output gradients, log-sum-exps
    // and deltas), each group's longest tiles first: groups of 2, 2 and 1
    // in every kernel, causal, so that tiles differ in length. Each tile
    // must be computed once, at the bounds above. An odd number of rows
    // (995), after whose deltas the summed dQ's pairs must still be 8-byte
    // aligned.
    {"TensorCoreAttentionHeadGroups",
     R"(
func.func @main(%q: tensor<1x5x199x16xbf16>, %k: tensor<1x5x199x16xbf16>, %v: tensor<1x5x199x16xbf16>,
                %g: tensor<1x5x199x16xbf16>)
    -> (tensor<1x5x199x16xbf16>, tensor<1x5x199xf32>, tensor<1x5x199x16xbf16>, tensor<1x5x199x16xbf16>,
        tensor<1x5x199x16xbf16>) {
  %o, %l = kiln.attention %q, %k, %v {causal, scale = 0.25 : f64}
      : (tensor<1x5x199x16xbf16>, tensor<1x5x199x16xbf16>, tensor<1x5x199x16xbf16>) -> (tensor<1x5x199x16xbf16>, tensor<1x5x199xf32>)
  %q32 = kiln.cast %q : tensor<1x5x199x16xbf16> to tensor<1x5x199x16xf32>
  %k32 = kiln.cast %k : tensor<1x5x199x16xbf16> to tensor<1x5x199x16xf32>
  %v32 = kiln.cast %v : tensor<1x5x199x16xbf16> to tensor<1x5x199x16xf32>
  %o2, %l2 = kiln.attention %q32, %k32, %v32 {causal, scale = 0.25 : f64}
      : (tensor<1x5x199x16xf32>, tensor<1x5x199x16xf32>, tensor<1x5x199x16xf32>) -> (tensor<1x5x199x16xf32>, tensor<1x5x199xf32>)
  %o216 = kiln.cast %o2 : tensor<1x5x199x16xf32> to tensor<1x5x199x16xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o216, %l2, %g {causal, scale = 0.25 : f64}
      : (tensor<1x5x199x16xbf16>, tensor<1x5x199x16xbf16>, tensor<1x5x199x16xbf16>,
         tensor<1x5x199x16xbf16>, tensor<1x5x199xf32>, tensor<1x5x199x16xbf16>)
      -> (tensor<1x5x199x16xbf16>, tensor<1x5x199x16xbf16>, tensor<1x5x199x16xbf16>)
  return %o, %l, %dq, %dk, %dv : tensor<1x5x199x16xbf16>, tensor<1x5x199xf32>, tensor<1x5x199x16xbf16>,
      tensor<1x5x199x16xbf16>, tensor<1x5x199x16xbf16>
}
)",
     false,
     false,
     0x1p-7,
     {},
     {},
     false,
     {},
     false,
     {},
     /*attentionL2Bytes=*/30000},
    // Gemma 2's soft cap of the scaled scores (cap * tanh(s / cap)), causal
    // with grouped heads and a trained bias added after the cap: exact
    // kernels, then on tensor cores (the gradient from an exact forward
    // pass), at the bounds above.
    {"AttentionSoftcap", R"(
func.func @main(%q: tensor<1x4x20x16xf32>, %k: tensor<1x2x20x16xf32>, %v: tensor<1x2x20x16xf32>, %g: tensor<1x4x20x16xf32>,
                %b: tensor<4x20x20xf32>)
    -> (tensor<1x4x20x16xf32>, tensor<1x4x20xf32>, tensor<1x4x20x16xf32>, tensor<1x2x20x16xf32>, tensor<1x2x20x16xf32>, tensor<4x20x20xf32>) {
  %o, %l = kiln.attention %q, %k, %v mask %b {causal, softcap = 1.5 : f64, scale = 0.6 : f64}
      : (tensor<1x4x20x16xf32>, tensor<1x2x20x16xf32>, tensor<1x2x20x16xf32>, tensor<4x20x20xf32>) -> (tensor<1x4x20x16xf32>, tensor<1x4x20xf32>)
  %dq, %dk, %dv, %db = kiln.attention_grad %q, %k, %v mask %b output %o, %l, %g {causal, softcap = 1.5 : f64, scale = 0.6 : f64}
      : (tensor<1x4x20x16xf32>, tensor<1x2x20x16xf32>, tensor<1x2x20x16xf32>, tensor<4x20x20xf32>, tensor<1x4x20x16xf32>, tensor<1x4x20xf32>, tensor<1x4x20x16xf32>)
      -> (tensor<1x4x20x16xf32>, tensor<1x2x20x16xf32>, tensor<1x2x20x16xf32>, tensor<4x20x20xf32>)
  return %o, %l, %dq, %dk, %dv, %db : tensor<1x4x20x16xf32>, tensor<1x4x20xf32>, tensor<1x4x20x16xf32>,
      tensor<1x2x20x16xf32>, tensor<1x2x20x16xf32>, tensor<4x20x20xf32>
}
)"},
    {"TensorCoreAttentionSoftcap", R"(
func.func @main(%q: tensor<1x4x80x32xbf16>, %k: tensor<1x2x80x32xbf16>, %v: tensor<1x2x80x32xbf16>, %g: tensor<1x4x80x32xbf16>)
    -> (tensor<1x4x80x32xbf16>, tensor<1x4x80xf32>, tensor<1x4x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>) {
  %o, %l = kiln.attention %q, %k, %v {causal, softcap = 1.5 : f64, scale = 0.3 : f64}
      : (tensor<1x4x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>) -> (tensor<1x4x80x32xbf16>, tensor<1x4x80xf32>)
  %q32 = kiln.cast %q : tensor<1x4x80x32xbf16> to tensor<1x4x80x32xf32>
  %k32 = kiln.cast %k : tensor<1x2x80x32xbf16> to tensor<1x2x80x32xf32>
  %v32 = kiln.cast %v : tensor<1x2x80x32xbf16> to tensor<1x2x80x32xf32>
  %o2, %l2 = kiln.attention %q32, %k32, %v32 {causal, softcap = 1.5 : f64, scale = 0.3 : f64}
      : (tensor<1x4x80x32xf32>, tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32>) -> (tensor<1x4x80x32xf32>, tensor<1x4x80xf32>)
  %o16 = kiln.cast %o2 : tensor<1x4x80x32xf32> to tensor<1x4x80x32xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o16, %l2, %g {causal, softcap = 1.5 : f64, scale = 0.3 : f64}
      : (tensor<1x4x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x4x80x32xbf16>, tensor<1x4x80xf32>, tensor<1x4x80x32xbf16>)
      -> (tensor<1x4x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>)
  return %o, %l, %dq, %dk, %dv : tensor<1x4x80x32xbf16>, tensor<1x4x80xf32>, tensor<1x4x80x32xbf16>,
      tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>
}
)",
     false, false, 0x1p-7},
    // Head dimension 256 (Gemma's) on tensor cores: streamed tiles of 16
    // rows, three of them per tile of the other side (the key/value
    // gradient's six, over both heads of the group), so that the pipeline
    // copies into each of its buffers again; grouped heads, causal, forward
    // and the gradient from an exact forward pass, at the bounds above.
    {"TensorCoreAttentionHeadDim256", R"(
func.func @main(%q: tensor<1x2x40x256xbf16>, %k: tensor<1x1x40x256xbf16>, %v: tensor<1x1x40x256xbf16>, %g: tensor<1x2x40x256xbf16>)
    -> (tensor<1x2x40x256xbf16>, tensor<1x2x40xf32>, tensor<1x2x40x256xbf16>, tensor<1x1x40x256xbf16>, tensor<1x1x40x256xbf16>) {
  %o, %l = kiln.attention %q, %k, %v {causal, scale = 0.0625 : f64}
      : (tensor<1x2x40x256xbf16>, tensor<1x1x40x256xbf16>, tensor<1x1x40x256xbf16>) -> (tensor<1x2x40x256xbf16>, tensor<1x2x40xf32>)
  %q32 = kiln.cast %q : tensor<1x2x40x256xbf16> to tensor<1x2x40x256xf32>
  %k32 = kiln.cast %k : tensor<1x1x40x256xbf16> to tensor<1x1x40x256xf32>
  %v32 = kiln.cast %v : tensor<1x1x40x256xbf16> to tensor<1x1x40x256xf32>
  %o2, %l2 = kiln.attention %q32, %k32, %v32 {causal, scale = 0.0625 : f64}
      : (tensor<1x2x40x256xf32>, tensor<1x1x40x256xf32>, tensor<1x1x40x256xf32>) -> (tensor<1x2x40x256xf32>, tensor<1x2x40xf32>)
  %o16 = kiln.cast %o2 : tensor<1x2x40x256xf32> to tensor<1x2x40x256xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o16, %l2, %g {causal, scale = 0.0625 : f64}
      : (tensor<1x2x40x256xbf16>, tensor<1x1x40x256xbf16>, tensor<1x1x40x256xbf16>, tensor<1x2x40x256xbf16>, tensor<1x2x40xf32>, tensor<1x2x40x256xbf16>)
      -> (tensor<1x2x40x256xbf16>, tensor<1x1x40x256xbf16>, tensor<1x1x40x256xbf16>)
  return %o, %l, %dq, %dk, %dv : tensor<1x2x40x256xbf16>, tensor<1x2x40xf32>, tensor<1x2x40x256xbf16>,
      tensor<1x1x40x256xbf16>, tensor<1x1x40x256xbf16>
}
)",
     false, false, 0x1p-7},
    // Rows that attend to no key (a boolean mask false for all of rows 8
    // to 15 and 70 to 79, random elsewhere): their log-sum-exp is -inf,
    // their output 0, and their probabilities in the gradient kernels 0
    // (exp2 of a masked score, -inf, less +inf, where -inf less -inf would
    // be NaN). The gradient from an exact forward pass, at the bounds
    // above.
    {"TensorCoreAttentionEmptyRows", R"(
func.func @main(%q: tensor<1x2x80x32xbf16>, %k: tensor<1x2x80x32xbf16>, %v: tensor<1x2x80x32xbf16>,
                %g: tensor<1x2x80x32xbf16>, %b: tensor<80x80xi1>)
    -> (tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>) {
  %rows = kiln.constant dense<[[true],[true],[true],[true],[true],[true],[true],[true],[false],[false],[false],[false],[false],[false],[false],[false],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[true],[false],[false],[false],[false],[false],[false],[false],[false],[false],[false]]> : tensor<80x1xi1>
  %m = kiln.and %b, %rows : (tensor<80x80xi1>, tensor<80x1xi1>) -> tensor<80x80xi1>
  %q32 = kiln.cast %q : tensor<1x2x80x32xbf16> to tensor<1x2x80x32xf32>
  %k32 = kiln.cast %k : tensor<1x2x80x32xbf16> to tensor<1x2x80x32xf32>
  %v32 = kiln.cast %v : tensor<1x2x80x32xbf16> to tensor<1x2x80x32xf32>
  %o, %l = kiln.attention %q32, %k32, %v32 mask %m {scale = 0.3 : f64}
      : (tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32>, tensor<80x80xi1>)
      -> (tensor<1x2x80x32xf32>, tensor<1x2x80xf32>)
  %o16 = kiln.cast %o : tensor<1x2x80x32xf32> to tensor<1x2x80x32xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v mask %m output %o16, %l, %g {scale = 0.3 : f64}
      : (tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<80x80xi1>,
         tensor<1x2x80x32xbf16>, tensor<1x2x80xf32>, tensor<1x2x80x32xbf16>)
      -> (tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>)
  return %dq, %dk, %dv : tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>
}
)",
     false, false, 0x1p-7},
    // Wide heads over several tiles, where the key/value gradient streams
    // query tiles of 32 rows (head dimension 128) and 16 (256) but stores
    // dS^T in blocks of 64 by 64: in a band 50 back and 30 ahead, the
    // first rows attending to the second and third key tiles are 34 and
    // 98, so that rows 0-31 and 64-95 of their blocks, where no row
    // attends, must still be written (zeros), or the stored query kernel
    // reads the poisoned scratch; 150 rows, the last block part past the
    // rows. Grouped heads at 256 (quarter blocks) in a band 30 back and
    // 20 ahead: rows 0-31 of the blocks against the second key tile
    // attend to none of it (the first that does is 44). The gradient from
    // an exact forward pass, at the bounds above.
    {"TensorCoreAttentionWideHeadTiles", R"(
func.func @main(%q: tensor<1x2x150x128xbf16>, %k: tensor<1x2x150x128xbf16>, %v: tensor<1x2x150x128xbf16>,
                %g: tensor<1x2x150x128xbf16>, %q2: tensor<1x2x100x256xbf16>, %k2: tensor<1x1x100x256xbf16>,
                %v2: tensor<1x1x100x256xbf16>, %g2: tensor<1x2x100x256xbf16>)
    -> (tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>,
        tensor<1x2x100x256xbf16>, tensor<1x1x100x256xbf16>, tensor<1x1x100x256xbf16>) {
  %q32 = kiln.cast %q : tensor<1x2x150x128xbf16> to tensor<1x2x150x128xf32>
  %k32 = kiln.cast %k : tensor<1x2x150x128xbf16> to tensor<1x2x150x128xf32>
  %v32 = kiln.cast %v : tensor<1x2x150x128xbf16> to tensor<1x2x150x128xf32>
  %o, %l = kiln.attention %q32, %k32, %v32 {window = array<i64: 50, 30>, scale = 0.09 : f64}
      : (tensor<1x2x150x128xf32>, tensor<1x2x150x128xf32>, tensor<1x2x150x128xf32>) -> (tensor<1x2x150x128xf32>, tensor<1x2x150xf32>)
  %o16 = kiln.cast %o : tensor<1x2x150x128xf32> to tensor<1x2x150x128xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o16, %l, %g {window = array<i64: 50, 30>, scale = 0.09 : f64}
      : (tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>,
         tensor<1x2x150xf32>, tensor<1x2x150x128xbf16>)
      -> (tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>)
  %q232 = kiln.cast %q2 : tensor<1x2x100x256xbf16> to tensor<1x2x100x256xf32>
  %k232 = kiln.cast %k2 : tensor<1x1x100x256xbf16> to tensor<1x1x100x256xf32>
  %v232 = kiln.cast %v2 : tensor<1x1x100x256xbf16> to tensor<1x1x100x256xf32>
  %o2, %l2 = kiln.attention %q232, %k232, %v232 {window = array<i64: 30, 20>, scale = 0.0625 : f64}
      : (tensor<1x2x100x256xf32>, tensor<1x1x100x256xf32>, tensor<1x1x100x256xf32>) -> (tensor<1x2x100x256xf32>, tensor<1x2x100xf32>)
  %o216 = kiln.cast %o2 : tensor<1x2x100x256xf32> to tensor<1x2x100x256xbf16>
  %dq2, %dk2, %dv2 = kiln.attention_grad %q2, %k2, %v2 output %o216, %l2, %g2 {window = array<i64: 30, 20>, scale = 0.0625 : f64}
      : (tensor<1x2x100x256xbf16>, tensor<1x1x100x256xbf16>, tensor<1x1x100x256xbf16>, tensor<1x2x100x256xbf16>,
         tensor<1x2x100xf32>, tensor<1x2x100x256xbf16>)
      -> (tensor<1x2x100x256xbf16>, tensor<1x1x100x256xbf16>, tensor<1x1x100x256xbf16>)
  return %dq, %dk, %dv, %dq2, %dk2, %dv2 : tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>, tensor<1x2x150x128xbf16>,
      tensor<1x2x100x256xbf16>, tensor<1x1x100x256xbf16>, tensor<1x1x100x256xbf16>
}
)",
     false, false, 0x1p-7},
    // Attention dropout on tensor cores (BERT's and GPT-2's attn_pdrop),
    // drawn from the step's offset as kiln.dropout draws it: forward, and
    // the gradient from an exact forward pass, at the bounds above (a
    // different draw moves results by whole probabilities).
    {"TensorCoreAttentionDropout", R"(
func.func @main(%q: tensor<1x4x80x32xbf16>, %k: tensor<1x2x80x32xbf16>, %v: tensor<1x2x80x32xbf16>, %g: tensor<1x4x80x32xbf16>,
                %off: tensor<i64>)
    -> (tensor<1x4x80x32xbf16>, tensor<1x4x80xf32>, tensor<1x4x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>) {
  %o, %l = kiln.attention %q, %k, %v offset %off {causal, scale = 0.3 : f64, dropout_ratio = 0.2 : f64, seed = 9 : i64}
      : (tensor<1x4x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<i64>) -> (tensor<1x4x80x32xbf16>, tensor<1x4x80xf32>)
  %q32 = kiln.cast %q : tensor<1x4x80x32xbf16> to tensor<1x4x80x32xf32>
  %k32 = kiln.cast %k : tensor<1x2x80x32xbf16> to tensor<1x2x80x32xf32>
  %v32 = kiln.cast %v : tensor<1x2x80x32xbf16> to tensor<1x2x80x32xf32>
  %o2, %l2 = kiln.attention %q32, %k32, %v32 offset %off {causal, scale = 0.3 : f64, dropout_ratio = 0.2 : f64, seed = 9 : i64}
      : (tensor<1x4x80x32xf32>, tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32>, tensor<i64>) -> (tensor<1x4x80x32xf32>, tensor<1x4x80xf32>)
  %o16 = kiln.cast %o2 : tensor<1x4x80x32xf32> to tensor<1x4x80x32xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v offset %off output %o16, %l2, %g {causal, scale = 0.3 : f64, dropout_ratio = 0.2 : f64, seed = 9 : i64}
      : (tensor<1x4x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<i64>, tensor<1x4x80x32xbf16>, tensor<1x4x80xf32>, tensor<1x4x80x32xbf16>)
      -> (tensor<1x4x80x32xbf16>, tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>)
  return %o, %l, %dq, %dk, %dv : tensor<1x4x80x32xbf16>, tensor<1x4x80xf32>, tensor<1x4x80x32xbf16>,
      tensor<1x2x80x32xbf16>, tensor<1x2x80x32xbf16>
}
)",
     false, false, 0x1p-7},
    // Attention's gradients written where the fusion that assembles them
    // puts them (the packed gradient of the q/k/v projection, whose heads
    // attention read in place): the fusion computes nothing of it, and its
    // column sum reads it, widened. Exact kernels; on tensor cores, from an
    // exact forward pass, at the gradient's bound above.
    {"AttentionGradientsInPlace", kAttentionGradientsInPlace.c_str()},
    {"TensorCoreAttentionGradientsInPlace",
     kTensorCoreAttentionGradientsInPlace.c_str(), false, false, 0x1p-7},
    // The same kernels with their indices in 64 bits, as over tensors of
    // 2^30 elements or more.
    {"TensorCoreAttentionGradientsInPlaceWideIndices",
     kTensorCoreAttentionGradientsInPlace.c_str(),
     false,
     false,
     0x1p-7,
     {},
     {},
     false,
     {},
     /*wideIndices=*/true},
    // cuDNN's fused attention, forward and backward, on causal bf16 heads
    // read in place from a packed projection; fp16 with more keys than
    // rows. cuDNN rounds unnormalized probabilities to 16 bits before P V,
    // as kiln's tensor-core kernels do, but its order of operations is its
    // own: on an H100, one element of its results was 7% past the bound
    // that holds kiln's kernels to the interpreter element by element. So
    // each of its results is held, as FlashAttention's tests hold their
    // kernels, to twice the interpreter's own largest error against the
    // exact (f32) attention. The exact passes run on kiln's kernels, to
    // the case's bound.
    {"CudnnAttention",
     kCudnnAttention.c_str(),
     false,
     true,
     0x1p-7,
     {},
     {},
     /*cudnnAttention=*/true,
     {},
     false,
     {{0, 7}, {1, 8}, {2, 9}, {3, 10}, {4, 11}, {5, 12}, {6, 13}}},
    {"AttentionMasks", R"(
      func.func @main(%q: tensor<2x3x4x8xbf16>, %k: tensor<2x3x6x8xbf16>, %v: tensor<2x3x6x8xbf16>,
                      %f: tensor<2x1x1x6xf32>, %b: tensor<4x6xi1>, %g: tensor<2x3x4x8xf32>)
          -> (tensor<2x3x4x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4xf32>,
              tensor<2x3x4x8xbf16>, tensor<2x3x6x8xbf16>, tensor<2x3x6x8xbf16>) {
        %o1, %l1 = kiln.attention %q, %k, %v mask %f {scale = 0.5 : f64}
            : (tensor<2x3x4x8xbf16>, tensor<2x3x6x8xbf16>, tensor<2x3x6x8xbf16>, tensor<2x1x1x6xf32>)
            -> (tensor<2x3x4x8xf32>, tensor<2x3x4xf32>)
        %o2, %l2 = kiln.attention %q, %k, %v mask %b {scale = 0.5 : f64}
            : (tensor<2x3x4x8xbf16>, tensor<2x3x6x8xbf16>, tensor<2x3x6x8xbf16>, tensor<4x6xi1>)
            -> (tensor<2x3x4x8xf32>, tensor<2x3x4xf32>)
        %dq, %dk, %dv = kiln.attention_grad %q, %k, %v mask %b output %o2, %l2, %g {scale = 0.5 : f64}
            : (tensor<2x3x4x8xbf16>, tensor<2x3x6x8xbf16>, tensor<2x3x6x8xbf16>, tensor<4x6xi1>,
               tensor<2x3x4x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4x8xf32>)
            -> (tensor<2x3x4x8xbf16>, tensor<2x3x6x8xbf16>, tensor<2x3x6x8xbf16>)
        return %o1, %l1, %o2, %l2, %dq, %dk, %dv : tensor<2x3x4x8xf32>, tensor<2x3x4xf32>,
            tensor<2x3x4x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4x8xbf16>, tensor<2x3x6x8xbf16>,
            tensor<2x3x6x8xbf16>
      })"},
};

INSTANTIATE_TEST_SUITE_P(Ops, KernelTest, ::testing::ValuesIn(kCases),
                         [](const auto &info) {
                           return std::string(info.param.name);
                         });

} // namespace
