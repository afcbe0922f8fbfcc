// RUN: kiln-opt %s --kiln-autodiff -verify-diagnostics | FileCheck %s
// RUN: not kiln-opt %s --kiln-autodiff="train=.*" 2>&1 | FileCheck %s --check-prefix=ALL

// A fake-quantized weight trains through the straight-through estimator:
// its gradient is the output's where the level rint(w * (1 / scale)) + zero
// was not clamped to [-128, 127], zero elsewhere. The scale, used only by
// the quantization, is not a weight (PyTorch's observers set it).
// expected-remark @below {{not training 'fc.weight_fake_quant.scale': scales and zero points of fake quantizations, which PyTorch's observers set and kiln keeps as exported}}
func.func @main(%x: tensor<2x4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.parameter "fc.weight" = dense<[[0.5, -1.0, 0.25, 2.0], [1.0, 0.75, -0.5, -3.0]]> : tensor<2x4xf32> : tensor<2x4xf32>
  %s = kiln.parameter "fc.weight_fake_quant.scale" = dense<[0.01, 0.02]> : tensor<2xf32> : tensor<2xf32>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %column = kiln.reshape %s : tensor<2xf32> to tensor<2x1xf32>
  %q = kiln.fake_quantize %w, %column, %zero {quant_min = -128.0, quant_max = 127.0} : (tensor<2x4xf32>, tensor<2x1xf32>, tensor<f32>) -> tensor<2x4xf32>
  %y = kiln.mul %x, %q : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = kiln.reduce_sum %y {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: kiln.gradient_of = "fc.weight"
// CHECK-NOT: kiln.gradient_of
// CHECK: kiln.round
// CHECK: kiln.compare ge
// CHECK: kiln.compare le
// CHECK: kiln.and
// CHECK: kiln.where

// Trained on request, the scale has no gradient to train with.
// ALL: error: 'kiln.fake_quantize' op gives operand 1 no gradient, but it depends on a trained parameter
