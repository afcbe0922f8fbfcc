// RUN: kiln-opt %s -split-input-file --kiln-autodiff -verify-diagnostics -o /dev/null

// Tests that the loss may not read attention's log-sum-exp, which has no
// gradient (attention_grad recomputes the probabilities from it).
func.func @main(%q: tensor<1x2x4x8xf32>) -> tensor<f32> {
  %w = kiln.parameter "w" : tensor<1x2x4x8xf32>
  %qw = kiln.mul %q, %w : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  // expected-error @+1 {{'kiln.attention' op logsumexp is not differentiable}}
  %o, %lse = kiln.attention %qw, %qw, %qw {scale = 0.5 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
      -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %l = kiln.reduce_sum %lse {axes = array<i64: 0, 1, 2>} : (tensor<1x2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
