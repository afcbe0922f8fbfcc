//===- PreludeTest.cpp - the kernels' own math against the host's ---------===//
//
// Functions of the generated kernels' prelude that stand in for CUDA's math
// library, compiled as the CPU emulation compiles kernels and called on the
// host, against the host's libm over their whole domain.
//
//===----------------------------------------------------------------------===//

#include "CudaEmulation.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Target/CUDATarget.h"
#include "kiln/Tools/ModelLoading.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <dlfcn.h>
#include <random>

using namespace kiln;

namespace {

/// The prelude every generated kernel source starts with (that of a
/// one-op function's artifact), followed by `functions`, compiled and
/// opened on the host; null where that fails. The library lives in
/// `directory`, which the caller removes.
void *preludeWith(const std::string &functions, std::string &directory) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = kiln.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      return %y : tensor<4xf32>
    })",
                                                        &context);
  cuda::TargetOptions options;
  options.archs = {};
  auto compiled = cuda::compileFunction(
      *module->getOps<mlir::func::FuncOp>().begin(), options);
  if (!module || mlir::failed(compiled))
    return nullptr;
  llvm::SmallString<128> path;
  if (llvm::sys::fs::createUniqueDirectory("kiln-prelude", path))
    return nullptr;
  directory = path.str().str();
  std::string error;
  void *library = kiln::testing::openHostLibrary(
      (*compiled)->source + functions, directory, error);
  EXPECT_TRUE(library) << error;
  return library;
}

// exp(d) for d <= 0 (exp_nonpositive: a table of 2^(j / 64) and a
// polynomial, a log-sum-exp's terms and a normal density in fewer double
// operations than CUDA's exp, which CUDA bounds by 1 ulp): within 1.1 ulps
// of the exact value (a long double's exp, 11 bits more; 1.004 was the
// worst of 2M draws), down to -707; below, where results are subnormal,
// the library's exp itself; exp(0) is exactly 1, exp(-inf) 0 and NaN
// stays NaN.
TEST(PreludeTest, ExpOfNonpositiveIsWithinAnUlp) {
  std::string directory;
  void *library = preludeWith(
      "extern \"C\" double probe(double d) { return exp_nonpositive(d); }\n",
      directory);
  ASSERT_TRUE(library);
  auto probe = reinterpret_cast<double (*)(double)>(dlsym(library, "probe"));
  ASSERT_TRUE(probe);
  std::vector<double> values = {-0.0,          -0x1p-1074,     -1e-300,
                                -0x1p-60,      -0x1p-30,       -1e-9,
                                -0.5,          -M_LN2 / 128,   -M_LN2 / 64,
                                -M_LN2,        -1.0,           -10.0,
                                -37.0,         -100.5,         -700.0,
                                -706.9999999,  -707.0};
  std::mt19937_64 generator(5);
  std::uniform_real_distribution<double> uniform(-707.0, 0.0);
  std::uniform_real_distribution<double> exponent(-60.0, 10.0);
  for (int i = 0; i < 200000; ++i)
    values.push_back(i % 2 ? uniform(generator)
                           : -std::exp2(exponent(generator)));
  for (double d : values) {
    if (d < -707.0)
      continue;
    long double exact = std::exp(static_cast<long double>(d));
    double got = probe(d), unit = std::nextafter(static_cast<double>(exact),
                                                 INFINITY) -
                                  static_cast<double>(exact);
    ASSERT_LE(std::fabs(got - exact) / unit, 1.1L)
        << "exp(" << d << "): " << got << " vs " << static_cast<double>(exact);
  }
  EXPECT_EQ(probe(0.0), 1.0);
  for (double d : {-707.0000001, -720.5, -745.1, -745.2})
    EXPECT_EQ(probe(d), std::exp(d)) << d;
  EXPECT_EQ(probe(-INFINITY), 0.0);
  EXPECT_TRUE(std::isnan(probe(NAN)));
  dlclose(library);
  llvm::sys::fs::remove_directories(directory);
}

} // namespace
