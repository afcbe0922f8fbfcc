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
/// one-op function's artifact) followed by `functions`, compiled and opened
/// on the host; closed, and its directory removed, with this object.
class PreludeLibrary {
public:
  explicit PreludeLibrary(const std::string &functions) {
    mlir::MLIRContext context;
    registerKilnDialects(context);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(R"(
      func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
        %y = kiln.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
        return %y : tensor<4xf32>
      })",
                                                          &context);
    if (!module)
      return;
    cuda::TargetOptions options;
    options.archs = {}; // the source alone
    auto compiled = cuda::compileFunction(
        *module->getOps<mlir::func::FuncOp>().begin(), options);
    llvm::SmallString<128> path;
    if (mlir::failed(compiled) ||
        llvm::sys::fs::createUniqueDirectory("kiln-prelude", path))
      return;
    directory = path.str().str();
    std::string error;
    handle = kiln::testing::openHostLibrary((*compiled)->source + functions,
                                            directory, error);
    EXPECT_TRUE(handle) << error;
  }
  ~PreludeLibrary() {
    if (handle)
      dlclose(handle);
    if (!directory.empty())
      llvm::sys::fs::remove_directories(directory);
  }
  /// The function `name`, null where there is none.
  void *symbol(const char *name) const {
    return handle ? dlsym(handle, name) : nullptr;
  }

private:
  void *handle = nullptr;
  std::string directory;
};

// exp(d) for d <= 0 (exp_nonpositive: a table of 2^(j / 64) and a
// polynomial, a log-sum-exp's terms and a normal density in fewer double
// operations than CUDA's exp, which CUDA bounds by 1 ulp): within 1.1 ulps
// of the exact value (a long double's exp, 11 bits more; 1.004 was the
// worst of 2M draws), down to -707; below, where results are subnormal,
// the library's exp itself; exp(0) is exactly 1, exp(-inf) 0 and NaN
// stays NaN.
TEST(PreludeTest, ExpOfNonpositiveIsWithinAnUlp) {
  PreludeLibrary library(
      "extern \"C\" double probe(double d) { return exp_nonpositive(d); }\n");
  auto probe = reinterpret_cast<double (*)(double)>(library.symbol("probe"));
  ASSERT_TRUE(probe);
  std::vector<double> values = {
      -0.0,  -0x1p-1074,   -1e-300,     -0x1p-60,     -0x1p-30, -1e-9,
      -0.5,  -M_LN2 / 128, -M_LN2 / 64, -M_LN2,       -1.0,     -10.0,
      -37.0, -100.5,       -700.0,      -706.9999999, -707.0};
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
    double got = probe(d),
           unit = std::nextafter(static_cast<double>(exact), INFINITY) -
                  static_cast<double>(exact);
    ASSERT_LE(std::fabs(got - exact) / unit, 1.1L)
        << "exp(" << d << "): " << got << " vs " << static_cast<double>(exact);
  }
  EXPECT_EQ(probe(0.0), 1.0);
  for (double d : {-707.0000001, -720.5, -745.1, -745.2})
    EXPECT_EQ(probe(d), std::exp(d)) << d;
  EXPECT_EQ(probe(-INFINITY), 0.0);
  EXPECT_TRUE(std::isnan(probe(NAN)));
}

} // namespace
