//===- GradientTest.cpp - every gradient rule against finite differences --===//
//
// For each op, a float64 function computes loss = sum(op(x...) * w) from
// parameters with random values; the gradient function that autodiff builds
// must agree with central finite differences of the loss for every element
// of every parameter. In fp64 with step h = 1e-6, truncation (h^2) and
// roundoff (1e-16 / h) errors stay below 1e-9, so the tolerance 1e-6 *
// (1 + |gradient|) leaves a wide margin while catching any wrong rule.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Tools/ModelLoading.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;

namespace {

struct GradientCase {
  std::string name;
  /// Parameters: "name: type" pairs, e.g. {"x", "3x4"}; all f64.
  std::vector<std::pair<std::string, std::string>> parameters;
  /// Ops computing %y from the parameters.
  std::string body;
  /// The shape of %y, e.g. "3x4" ("" for a scalar).
  std::string result;
  /// Draw parameters from [0.5, 1.5] instead of [-1, 1] (log, sqrt, pow...).
  bool positive = false;
};

std::string tensorType(const std::string &shape) {
  return "tensor<" + (shape.empty() ? "" : shape + "x") + "f64>";
}

std::string functionText(const GradientCase &c) {
  std::string text = "func.func @main() -> tensor<f64> {\n";
  for (const auto &[name, shape] : c.parameters)
    text += "  %" + name + " = kiln.parameter \"" + name + "\" : " +
            tensorType(shape) + "\n";
  text += c.body + "\n";
  std::string y = tensorType(c.result);
  // A weighting parameter makes every output element matter differently.
  text += "  %w = kiln.parameter \"w\" : " + y + "\n";
  text += "  %yw = kiln.mul %y, %w : (" + y + ", " + y + ") -> " + y + "\n";
  int rank = c.result.empty() ? 0 : 1 + std::count(c.result.begin(), c.result.end(), 'x');
  std::string axes;
  for (int i = 0; i < rank; ++i)
    axes += (i ? ", " : "") + std::to_string(i);
  text += "  %loss = kiln.reduce_sum %yw {axes = array<i64" +
          (axes.empty() ? std::string() : ": " + axes) + ">} : (" + y +
          ") -> tensor<f64>\n";
  text += "  return %loss : tensor<f64>\n}\n";
  return text;
}

class GradientRuleTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(GradientRuleTest, MatchesFiniteDifferences) {
  const GradientCase &c = GetParam();
  mlir::MLIRContext context;
  registerKilnDialects(context);
  std::string errors;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    errors += d.str() + "\n";
    return mlir::success();
  });
  std::string text = functionText(c);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  ASSERT_TRUE(module) << errors << text;
  auto forward = *module->getOps<mlir::func::FuncOp>().begin();
  // Train every parameter, scalars included.
  AutodiffOptions autodiff;
  autodiff.train = ".*";
  mlir::FailureOr<mlir::func::FuncOp> gradient =
      buildGradientFunction(forward, autodiff);
  ASSERT_TRUE(mlir::succeeded(gradient)) << errors;

  std::mt19937_64 generator(42);
  std::uniform_real_distribution<double> uniform(c.positive ? 0.5 : -1.0,
                                                 c.positive ? 1.5 : 1.0);
  llvm::StringMap<Tensor> values;
  forward.walk([&](ParameterOp op) {
    Tensor tensor(DType::F64, op.getType().getShape());
    for (int64_t i = 0; i < tensor.getNumElements(); ++i)
      tensor.floats()[i] = uniform(generator);
    values[op.getName()] = std::move(tensor);
  });
  InterpreterOptions options;
  options.parameters = &values;
  auto results = interpret(*gradient, {}, options);
  ASSERT_TRUE(mlir::succeeded(results)) << errors;

  auto lossAt = [&]() {
    auto loss = interpret(forward, {}, options);
    EXPECT_TRUE(mlir::succeeded(loss)) << errors;
    return (*loss)[0].floats()[0];
  };
  const double h = 1e-6;
  int checked = 0;
  for (unsigned r = 0; r < gradient->getNumResults(); ++r) {
    auto name = gradient->getResultAttrOfType<mlir::StringAttr>(r, kGradientOfAttr);
    if (!name)
      continue;
    Tensor &param = values[name.getValue()];
    const Tensor &grad = (*results)[r];
    for (int64_t i = 0; i < param.getNumElements(); ++i) {
      double saved = param.floats()[i];
      param.floats()[i] = saved + h;
      double up = lossAt();
      param.floats()[i] = saved - h;
      double down = lossAt();
      param.floats()[i] = saved;
      double numeric = (up - down) / (2 * h);
      double analytic = grad.floats()[i];
      EXPECT_NEAR(analytic, numeric, 1e-6 * (1 + std::fabs(numeric)))
          << c.name << ": d loss / d " << name.str() << "[" << i << "]";
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(c.parameters.size()) + 1)
      << "every parameter of " << c.name << " gets a gradient";
}

GradientCase unary(const std::string &op, bool positive = false) {
  return {op, {{"x", "3x4"}},
          "  %y = kiln." + op + " %x : tensor<3x4xf64>", "3x4", positive};
}

/// `op` of x mapped by `scale` and `shift` into its domain (asin's
/// (-1, 1) away from the ends, where finite differences would not hold).
GradientCase unaryOn(const std::string &op, double scale, double shift) {
  const std::string t = "tensor<3x4xf64>",
                    binary = " : (" + t + ", " + t + ") -> " + t + "\n";
  return {op,
          {{"x", "3x4"}},
          "  %s = kiln.constant dense<" + std::to_string(scale) + "> : " + t +
              "\n  %o = kiln.constant dense<" + std::to_string(shift) +
              "> : " + t + "\n  %sx = kiln.mul %x, %s" + binary +
              "  %h = kiln.add %sx, %o" + binary + "  %y = kiln." + op +
              " %h : " + t,
          "3x4"};
}

GradientCase binary(const std::string &op, bool positive = false) {
  // The right operand broadcasts along the rows.
  return {op, {{"a", "3x4"}, {"b", "4"}},
          "  %y = kiln." + op + " %a, %b : (tensor<3x4xf64>, tensor<4xf64>) "
          "-> tensor<3x4xf64>",
          "3x4", positive};
}

std::vector<GradientCase> cases() {
  std::vector<GradientCase> all;
  for (const char *op : {"neg", "exp", "tanh", "erf", "sigmoid", "silu", "sin",
                         "cos"})
    all.push_back(unary(op));
  for (const char *op : {"log", "sqrt", "rsqrt", "reciprocal", "abs", "relu"})
    all.push_back(unary(op, /*positive=*/true));
  for (const char *op : {"tan", "atan", "sinh", "cosh", "asinh"})
    all.push_back(unary(op));
  for (const char *op : {"asin", "acos", "atanh"})
    all.push_back(unaryOn(op, 0.8, 0.0));    // (-0.8, 0.8)
  all.push_back(unaryOn("acosh", 1.0, 2.0)); // (1, 3)
  all.push_back({"gelu_none", {{"x", "3x4"}},
                 "  %y = kiln.gelu %x approximation = none : tensor<3x4xf64>",
                 "3x4"});
  all.push_back({"gelu_tanh", {{"x", "3x4"}},
                 "  %y = kiln.gelu %x approximation = tanh : tensor<3x4xf64>",
                 "3x4"});
  for (const char *op : {"add", "sub", "mul", "max", "min"})
    all.push_back(binary(op));
  for (const char *op : {"div", "pow"})
    all.push_back(binary(op, /*positive=*/true));
  all.push_back({"remainder",
                 {{"a", "3x4"}, {"b", "4"}},
                 "  %c = kiln.constant dense<3.0> : tensor<4xf64>\n"
                 "  %b3 = kiln.add %b, %c : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>\n"
                 "  %a5 = kiln.mul %a, %c : (tensor<3x4xf64>, tensor<4xf64>) -> tensor<3x4xf64>\n"
                 "  %y = kiln.remainder %a5, %b3 {floored} : (tensor<3x4xf64>, tensor<4xf64>) -> tensor<3x4xf64>",
                 "3x4", /*positive=*/true});
  all.push_back({"where",
                 {{"a", "3x4"}, {"b", "3x1"}},
                 "  %m = kiln.constant dense<[[true, false, true, false], [false, false, true, true], [true, true, false, false]]> : tensor<3x4xi1>\n"
                 "  %y = kiln.where %m, %a, %b : (tensor<3x4xi1>, tensor<3x4xf64>, tensor<3x1xf64>) -> tensor<3x4xf64>",
                 "3x4"});
  all.push_back({"dropout", {{"x", "4x8"}},
                 "  %y, %mask = kiln.dropout %x {ratio = 0.3, seed = 5} : tensor<4x8xf64>",
                 "4x8"});
  all.push_back({"matmul_transposed_broadcast",
                 {{"a", "2x3x4"}, {"b", "5x4"}},
                 "  %y = kiln.matmul %a, %b {transpose_rhs} : (tensor<2x3x4xf64>, tensor<5x4xf64>) -> tensor<2x3x5xf64>",
                 "2x3x5"});
  all.push_back({"matmul_shared_weight",
                 {{"a", "2x3x4"}, {"b", "4x5"}},
                 "  %y = kiln.matmul %a, %b : (tensor<2x3x4xf64>, tensor<4x5xf64>) -> tensor<2x3x5xf64>",
                 "2x3x5"});
  all.push_back({"matmul_transposed_lhs",
                 {{"a", "4x3"}, {"b", "2x4x5"}},
                 "  %y = kiln.matmul %a, %b {transpose_lhs} : (tensor<4x3xf64>, tensor<2x4x5xf64>) -> tensor<2x3x5xf64>",
                 "2x3x5"});
  all.push_back({"matmul_both_transposed",
                 {{"a", "4x3"}, {"b", "5x4"}},
                 "  %y = kiln.matmul %a, %b {transpose_lhs, transpose_rhs} : (tensor<4x3xf64>, tensor<5x4xf64>) -> tensor<3x5xf64>",
                 "3x5"});
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"})
    all.push_back({op, {{"x", "3x4x2"}},
                   std::string("  %y = kiln.") + op +
                       " %x {axes = array<i64: 0, 2>} : (tensor<3x4x2xf64>) -> tensor<4xf64>",
                   "4"});
  all.push_back({"reduce_prod_keep_dims", {{"x", "3x4"}},
                 "  %y = kiln.reduce_prod %x {axes = array<i64: 1>, keep_dims} : (tensor<3x4xf64>) -> tensor<3x1xf64>",
                 "3x1", /*positive=*/true});
  all.push_back({"cumsum_reverse_exclusive", {{"x", "3x4"}},
                 "  %y = kiln.cumsum %x {axis = 1 : i64, exclusive, reverse} : tensor<3x4xf64>",
                 "3x4"});
  all.push_back({"softmax", {{"x", "3x4"}},
                 "  %y = kiln.softmax %x {axis = 1 : i64} : tensor<3x4xf64>", "3x4"});
  all.push_back({"log_softmax", {{"x", "3x4"}},
                 "  %y = kiln.log_softmax %x {axis = 0 : i64} : tensor<3x4xf64>", "3x4"});
  // Attention: causal with grouped-query heads, an additive mask, a boolean
  // mask, and dropout; q [1, 4, 3, 2], k/v with 2 heads of 4 keys. A mask
  // given as a shape ("4x3x4") is a trained parameter (a learned bias).
  auto attention = [&](const char *name, const std::string &mask,
                       const std::string &attributes, bool groupedKeys) {
    std::string kv = groupedKeys ? "1x2x4x2" : "1x4x4x2";
    std::string kvType = tensorType(kv);
    std::vector<std::pair<std::string, std::string>> params = {
        {"q", "1x4x3x2"}, {"k", kv}, {"v", kv}};
    std::string body, maskOperand, maskType;
    if (mask.find(':') != std::string::npos) {
      body = "  %m = kiln.constant " + mask + "\n";
      maskOperand = " mask %m";
      maskType = ", " + mask.substr(mask.find(": ") + 2);
    } else if (!mask.empty()) {
      params.push_back({"m", mask});
      maskOperand = " mask %m";
      maskType = ", " + tensorType(mask);
    }
    body += "  %y, %lse = kiln.attention %q, %k, %v" + maskOperand + " {" +
            attributes + "} : (tensor<1x4x3x2xf64>, " + kvType + ", " +
            kvType + maskType +
            ") -> (tensor<1x4x3x2xf64>, tensor<1x4x3xf64>)";
    all.push_back({name, params, body, "1x4x3x2"});
  };
  attention("attention_causal_grouped", "", "scale = 0.7 : f64, causal", true);
  attention("attention_additive_mask",
            "dense<[[0.0, -0.5, 1.0, -1.0e30], [0.0, 0.0, 0.25, 0.0], "
            "[-1.0e30, 0.5, 0.0, 0.0]]> : tensor<3x4xf64>",
            "scale = 1.3 : f64", false);
  attention("attention_boolean_mask",
            "dense<[[[[true, false, true, true]]]]> : tensor<1x1x1x4xi1>",
            "scale = 0.5 : f64", true);
  attention("attention_dropout", "",
            "scale = 0.9 : f64, causal, dropout_ratio = 0.3 : f64, seed = 5", true);
  attention("attention_trained_bias", "4x3x4", "scale = 0.6 : f64, causal",
            true);
  attention("attention_trained_key_bias_dropout", "1x1x1x4",
            "scale = 1.1 : f64, dropout_ratio = 0.3 : f64, seed = 7", false);
  attention("attention_trained_query_bias", "3x1", "scale = 0.8 : f64", true);
  attention("attention_sliding_window", "",
            "scale = 0.9 : f64, causal, window = array<i64: 1, -1>", true);
  attention("attention_band", "4x3x4",
            "scale = 0.7 : f64, window = array<i64: 1, 1>", false);
  attention("attention_softcap", "4x3x4",
            "scale = 1.3 : f64, causal, softcap = 0.8 : f64", true);
  all.push_back({"layer_norm",
                 {{"x", "2x3x4"}, {"g", "4"}, {"b", "4"}},
                 "  %y, %m, %r = kiln.layer_norm %x scale %g bias %b {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> (tensor<2x3x4xf64>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)",
                 "2x3x4"});
  all.push_back({"rms_norm",
                 {{"x", "2x3x4"}, {"g", "3x4"}},
                 "  %y, %r = kiln.rms_norm %x scale %g {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x3x4xf64>, tensor<3x4xf64>) -> (tensor<2x3x4xf64>, tensor<2x1x1xf32>)",
                 "2x3x4"});
  all.push_back({"reshape_transpose", {{"x", "2x6"}},
                 "  %r = kiln.reshape %x : tensor<2x6xf64> to tensor<2x3x2xf64>\n"
                 "  %y = kiln.transpose %r {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x2xf64>) -> tensor<2x2x3xf64>",
                 "2x2x3"});
  all.push_back({"broadcast", {{"x", "3x1"}},
                 "  %y = kiln.broadcast %x : tensor<3x1xf64> to tensor<2x3x4xf64>", "2x3x4"});
  all.push_back({"slice_negative_stride", {{"x", "4x6"}},
                 "  %y = kiln.slice %x {start = array<i64: 1, 5>, stride = array<i64: 2, -2>} : tensor<4x6xf64> to tensor<2x3xf64>",
                 "2x3"});
  all.push_back({"concat", {{"a", "2x3"}, {"b", "2x1"}},
                 "  %y = kiln.concat %a, %b, %a {axis = 1 : i64} : (tensor<2x3xf64>, tensor<2x1xf64>, tensor<2x3xf64>) -> tensor<2x7xf64>",
                 "2x7"});
  all.push_back({"pad_and_crop", {{"x", "3x4"}},
                 "  %y = kiln.pad %x constant {low = array<i64: 1, -1>, high = array<i64: 2, 1>, value = 0.5} : (tensor<3x4xf64>) -> tensor<6x4xf64>",
                 "6x4"});
  all.push_back({"trilu", {{"x", "4x4"}},
                 "  %y = kiln.trilu %x {diagonal = 1 : i64, upper = false} : tensor<4x4xf64>", "4x4"});
  all.push_back({"gather_repeated_indices", {{"table", "5x3"}},
                 "  %i = kiln.constant dense<[[0, 4, 0], [-1, 2, 0]]> : tensor<2x3xi64>\n"
                 "  %y = kiln.gather %table, %i {axis = 0 : i64} : (tensor<5x3xf64>, tensor<2x3xi64>) -> tensor<2x3x3xf64>",
                 "2x3x3"});
  all.push_back({"gather_elements", {{"x", "3x4"}},
                 "  %i = kiln.constant dense<[[3, 0], [1, 1], [0, 2]]> : tensor<3x2xi64>\n"
                 "  %y = kiln.gather_elements %x, %i {axis = 1 : i64} : (tensor<3x4xf64>, tensor<3x2xi64>) -> tensor<3x2xf64>",
                 "3x2"});
  all.push_back({"scatter_elements_add", {{"x", "3x4"}, {"u", "3x2"}},
                 "  %i = kiln.constant dense<[[3, 3], [1, 0], [0, 2]]> : tensor<3x2xi64>\n"
                 "  %y = kiln.scatter_elements %x, %i, %u reduction = add {axis = 1 : i64} : (tensor<3x4xf64>, tensor<3x2xi64>, tensor<3x2xf64>) -> tensor<3x4xf64>",
                 "3x4"});
  all.push_back({"scatter_elements_none", {{"x", "3x4"}, {"u", "3x2"}},
                 "  %i = kiln.constant dense<[[3, 1], [1, 0], [0, 2]]> : tensor<3x2xi64>\n"
                 "  %y = kiln.scatter_elements %x, %i, %u reduction = none {axis = 1 : i64} : (tensor<3x4xf64>, tensor<3x2xi64>, tensor<3x2xf64>) -> tensor<3x4xf64>",
                 "3x4"});
  all.push_back({"insert_slice", {{"x", "4x5"}, {"s", "2x2"}},
                 "  %y = kiln.insert_slice %x, %s {start = array<i64: 1, 4>, stride = array<i64: 2, -3>} : (tensor<4x5xf64>, tensor<2x2xf64>) -> tensor<4x5xf64>",
                 "4x5"});
  // Class weights are data, not trained: a constant.
  all.push_back({"cross_entropy_mean_weighted_ignored", {{"x", "3x5x2"}},
                 "  %cw = kiln.constant dense<[0.5, 1.0, 2.0, 1.5, 0.25]> : tensor<5xf64>\n"
                 "  %l = kiln.constant dense<[[1, 4], [-100, 0], [2, 2]]> : tensor<3x2xi64>\n"
                 "  %y = kiln.cross_entropy %x, %l weight %cw reduction = mean {ignore_index = -100 : i64} : (tensor<3x5x2xf64>, tensor<3x2xi64>, tensor<5xf64>) -> tensor<f64>",
                 "", /*positive=*/true});
  all.push_back({"cross_entropy_none", {{"x", "3x5"}},
                 "  %l = kiln.constant dense<[1, 4, 0]> : tensor<3xi64>\n"
                 "  %y = kiln.cross_entropy %x, %l reduction = none : (tensor<3x5xf64>, tensor<3xi64>) -> tensor<3xf64>",
                 "3"});
  all.push_back({"nll_loss_sum", {{"x", "3x5"}},
                 "  %l = kiln.constant dense<[1, 4, 0]> : tensor<3xi64>\n"
                 "  %y = kiln.nll_loss %x, %l reduction = sum : (tensor<3x5xf64>, tensor<3xi64>) -> tensor<f64>",
                 ""});
  return all;
}

INSTANTIATE_TEST_SUITE_P(AllOps, GradientRuleTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GradientCase> &info) {
                           return info.param.name;
                         });

} // namespace
