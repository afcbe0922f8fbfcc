//===- Autodiff.h - reverse-mode differentiation of kiln functions -*- C++ -*-===//
//
// Builds, from a forward function that computes a loss, a gradient function
// that also returns d(loss)/d(parameter) for every trainable parameter.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_AUTODIFF_AUTODIFF_H
#define KILN_AUTODIFF_AUTODIFF_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace kiln {

struct AutodiffOptions {
  /// The result that is the loss, by its `kiln.name`; empty: the first
  /// scalar floating-point result.
  std::string loss;
  /// Parameters whose name matches `train` (empty: all but those that are
  /// not weights, see `notAWeight`) and not `freeze` (empty: none) are
  /// trained, if they reach the loss differentiably.
  std::string train, freeze;
};

/// The parameters of `function` that `options` trains, if they reach the
/// loss: floating-point ones matching `train` and not `freeze`.
mlir::FailureOr<llvm::SmallVector<ParameterOp>>
selectParameters(mlir::func::FuncOp function, const AutodiffOptions &options);

/// Why an initializer is most likely not a weight PyTorch trains
/// (Buffers.cpp): a scalar with an exporter's name (`val_3`, `onnx::Mul_5`:
/// a literal such as 0.5 lifted into an initializer); a PyTorch buffer's name
/// (`inv_freq`, `running_mean`, `running_var`, `final_logits_bias`, `*_cached`,
/// `*mask`, `masked_*`); a mask: stored f32/f64 values holding an infinity or a
/// magnitude of 1e30 or more, or a selection the dynamo exporter folded
/// (`where`, `where_2`: HF's attention masks, all zero where no padding is
/// given); the scales and zero points of kiln.fake_quantize ops, which
/// PyTorch's FakeQuantize observers set; a sinusoidal position table (sin
/// and cos of each position: the tutorials' `pe` buffer, Marian's frozen
/// embedding).
enum class NotAWeight {
  Literal,
  BufferName,
  Mask,
  Quantization,
  PositionTable
};
std::optional<NotAWeight> notAWeight(ParameterOp op);

/// A remark on `function` for each reason other than Literal that keeps
/// parameters from training by default, naming them.
void remarkOnBuffers(mlir::func::FuncOp function,
                     const AutodiffOptions &options);

/// Warns on each trained parameter (a matrix or larger, not constant) that
/// holds exactly the values, or the transpose, of another: most likely one
/// weight that PyTorch ties and the exporter wrote twice (UntiedCopies.cpp).
void warnAboutUntiedCopies(llvm::ArrayRef<ParameterOp> parameters);

/// Warns on each trained parameter that holds one value in all its elements
/// and that more ops read than any parameter of varied values: most likely
/// norm weights or zero biases that PyTorch trains apart and the exporter
/// merged into one initializer (MergedParameters.cpp).
void warnAboutMergedParameters(llvm::ArrayRef<ParameterOp> parameters);

/// Adds `@<forward>_grad` next to `forward`: the same arguments, the forward
/// results, then one gradient per trainable parameter, in order of first
/// use, each with a `kiln.gradient_of` attribute naming its parameter. Uses
/// of one parameter (tied weights) add up. Frozen parameters and values that
/// do not reach the loss get no gradient work. Errors (no loss, an op
/// without a gradient rule on the path to the loss) are emitted and fail.
mlir::FailureOr<mlir::func::FuncOp>
buildGradientFunction(mlir::func::FuncOp forward, const AutodiffOptions &options);

/// Builds, at `builder`'s insertion point, d(y)/d(x) for each of `xs`: y is
/// a scalar computed before the insertion point in its block, from the xs
/// (values of that block). A null entry means y does not depend on that x
/// differentiably.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
differentiate(mlir::OpBuilder &builder, mlir::Value y,
              llvm::ArrayRef<mlir::Value> xs);

/// The attribute naming the parameter a gradient result belongs to.
constexpr const char *kGradientOfAttr = "kiln.gradient_of";
/// The gradient function's attribute holding the index of the loss result.
constexpr const char *kLossIndexAttr = "kiln.loss_index";
/// Marks the constant d(loss)/d(loss) = 1 that the backward pass starts
/// from, which loss scaling replaces.
constexpr const char *kLossSeedAttr = "kiln.loss_seed";

} // namespace kiln

#endif // KILN_AUTODIFF_AUTODIFF_H
