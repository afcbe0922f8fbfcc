//===- Activations.h - ONNX's activation functions as kiln ops --*- C++ -*-===//
//
// Internal to the ONNX importer. The activation functions ONNX defines, built
// from kiln's elementwise ops on an OpChain: once for the activation ops'
// importers and for the functions the recurrent cells name in their
// `activations` attribute, so that both mean the same.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_ACTIVATIONS_H
#define KILN_LIB_IMPORT_ONNX_ACTIVATIONS_H

#include "OpChain.h"

namespace kiln::activations {

/// x < threshold (x <= threshold with `inclusive`) ? ifBelow : otherwise.
mlir::Value below(OpChain &ops, mlir::Value x, double threshold,
                  mlir::Value ifBelow, mlir::Value otherwise,
                  bool inclusive = false);
/// x < 0 ? alpha * x : x.
mlir::Value leakyRelu(OpChain &ops, mlir::Value x, double alpha);
/// alpha * (exp(x / scale) - 1).
mlir::Value expm1Scaled(OpChain &ops, mlir::Value x, double alpha,
                        double scale);
/// x < 0 ? alpha * (exp(x) - 1) : x.
mlir::Value elu(OpChain &ops, mlir::Value x, double alpha);
/// max(0, min(1, alpha * x + beta)).
mlir::Value hardSigmoid(OpChain &ops, mlir::Value x, double alpha,
                        double beta);
/// x / (1 + |x|).
mlir::Value softsign(OpChain &ops, mlir::Value x);
/// log(exp(x) + 1), as relu(x) + log(1 + exp(-|x|)): equal, but neither it
/// nor its gradient overflows where exp(x) would (x > 88 in f32).
mlir::Value softplus(OpChain &ops, mlir::Value x);
/// x > alpha ? x : 0, as the op defines it; x >= alpha with `keepAlpha`,
/// as the recurrent cells' activation list does.
mlir::Value thresholdedRelu(OpChain &ops, mlir::Value x, double alpha,
                            bool keepAlpha = false);

} // namespace kiln::activations

#endif // KILN_LIB_IMPORT_ONNX_ACTIVATIONS_H
