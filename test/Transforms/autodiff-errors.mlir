// RUN: kiln-opt %s -split-input-file --kiln-autodiff -verify-diagnostics -o /dev/null

// Tests that a gradient rule that gives an operand no gradient (attention's
// mask is data) is an error when a trained parameter reaches that operand
// (a learned position bias), instead of a silently missing gradient.
func.func @main(%q: tensor<1x2x4x8xf32>) -> tensor<f32> {
  %bias = kiln.parameter "bias" : tensor<4x4xf32>
  // expected-error @+1 {{'kiln.attention' op gives operand 3 no gradient, but it depends on a trained parameter}}
  %o, %lse = kiln.attention %q, %q, %q mask %bias {scale = 0.5 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x4xf32>)
      -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %l = kiln.reduce_sum %o {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
