// RUN: kiln-opt %s -split-input-file --kiln-recognize-norms | FileCheck %s
//
// Every function here also runs before and after the rewrite on random
// inputs in unittests/Transforms/PatternRewriteTest.cpp.

// Llama's RMS norm as the TorchScript exporter writes it: pow, mean kept,
// add, sqrt, 1 / root, times x, the weight in front.
// CHECK-LABEL: func @llama
// CHECK-NEXT: %[[Y:.*]], %{{.*}} = kiln.rms_norm %arg0 scale %arg1 {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @llama(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %two = kiln.constant dense<2.0> : tensor<f32>
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %p = kiln.pow %x, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %m = kiln.reduce_mean %p {axes = array<i64: 2>, keep_dims} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %a = kiln.add %m, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s = kiln.sqrt %a : tensor<2x3x1xf32>
  %r = kiln.div %one, %s : (tensor<f32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = kiln.mul %x, %r : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y = kiln.mul %w, %n : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// x * x and kiln.reciprocal, the operands the other way round, epsilon
// first; and x divided by the root directly, with no scale after it (the
// norm's value is then the result).
// CHECK-LABEL: func @other_spellings
// CHECK-NEXT: %[[A:.*]], %{{.*}} = kiln.rms_norm %arg0 scale %arg1 {axis = 1 : i64, epsilon = 0.0010000000474974513 : f64}
// CHECK-NEXT: %[[B:.*]], %{{.*}} = kiln.rms_norm %arg0 {axis = 1 : i64, epsilon = 0.0010000000474974513 : f64}
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @other_spellings(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %eps = kiln.constant dense<1.0e-3> : tensor<f32>
  %sq = kiln.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = kiln.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = kiln.add %eps, %m : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = kiln.sqrt %a : tensor<4x1xf32>
  %r = kiln.reciprocal %s : tensor<4x1xf32>
  %n = kiln.mul %r, %x : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = kiln.mul %n, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %sq2 = kiln.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m2 = kiln.reduce_mean %sq2 {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a2 = kiln.add %m2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s2 = kiln.sqrt %a2 : tensor<4x1xf32>
  %z = kiln.div %x, %s2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Gemma's scale, 1 + w, is a tensor of the normalized dimensions like any
// other; the mean over the two trailing axes normalizes both.
// CHECK-LABEL: func @gemma_two_axes
// CHECK: %[[S:.*]] = kiln.add
// CHECK-NEXT: %[[Y:.*]], %{{.*}} = kiln.rms_norm %arg0 scale %[[S]] {axis = 1 : i64, epsilon = 9.9999999747524271E-7 : f64} : (tensor<2x3x4xf32>, tensor<3x4xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @gemma_two_axes(%x: tensor<2x3x4xf32>, %w: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  %two = kiln.constant dense<2.0> : tensor<f32>
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %p = kiln.pow %x, %two : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %m = kiln.reduce_mean %p {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %a = kiln.add %m, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %s = kiln.sqrt %a : tensor<2x1x1xf32>
  %r = kiln.div %one, %s : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = kiln.mul %x, %r : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  %g = kiln.add %one, %w : (tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %y = kiln.mul %n, %g : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// Not RMS norms: a mean over a leading axis; a mean not kept; a mean of
// squares read elsewhere too (the rewrite would compute it twice); the
// square of another value than the one normalized; a cube; a scale along
// the rows, which the norm's scale cannot be (the norm stays, the product
// after it too).
// CHECK-LABEL: func @not_rms_norms
// CHECK-COUNT-1: kiln.rms_norm
// CHECK-NOT: kiln.rms_norm
func.func @not_rms_norms(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>, %rows: tensor<4x1xf32>)
    -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>,
        tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = kiln.constant dense<2.0> : tensor<f32>
  %four = kiln.constant dense<4.0> : tensor<f32>
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %p0 = kiln.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m0 = kiln.reduce_mean %p0 {axes = array<i64: 0>, keep_dims} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %a0 = kiln.add %m0, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s0 = kiln.sqrt %a0 : tensor<1x8xf32>
  %n0 = kiln.div %x, %s0 : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %p = kiln.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %flat = kiln.reduce_mean %p {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %p2 = kiln.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m2 = kiln.reduce_mean %p2 {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a2 = kiln.add %m2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s2 = kiln.sqrt %a2 : tensor<4x1xf32>
  %n2 = kiln.div %x, %s2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %pz = kiln.pow %z, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %mz = kiln.reduce_mean %pz {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %az = kiln.add %mz, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %sz = kiln.sqrt %az : tensor<4x1xf32>
  %nz = kiln.div %x, %sz : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %c = kiln.pow %x, %four : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %mc = kiln.reduce_mean %c {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ac = kiln.add %mc, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %sc = kiln.sqrt %ac : tensor<4x1xf32>
  %nc = kiln.div %x, %sc : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p3 = kiln.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m3 = kiln.reduce_mean %p3 {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a3 = kiln.add %m3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s3 = kiln.sqrt %a3 : tensor<4x1xf32>
  %n3 = kiln.div %x, %s3 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y3 = kiln.mul %n3, %rows : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n0, %flat, %n2, %m2, %nz, %nc, %y3
      : tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>,
        tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A layer norm as the TorchScript exporter writes it below opset 17: the
// mean, the difference, pow, the variance, add, sqrt, the division, times
// the weight, plus the bias.
// CHECK-LABEL: func @exported_layer_norm
// CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = kiln.layer_norm %arg0 scale %arg1 bias %arg2 {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @exported_layer_norm(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %two = kiln.constant dense<2.0> : tensor<f32>
  %eps = kiln.constant dense<1.0e-5> : tensor<f32>
  %m = kiln.reduce_mean %x {axes = array<i64: 2>, keep_dims} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %d = kiln.sub %x, %m : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %p = kiln.pow %d, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %v = kiln.reduce_mean %p {axes = array<i64: 2>, keep_dims} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %a = kiln.add %v, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s = kiln.sqrt %a : tensor<2x3x1xf32>
  %n = kiln.div %d, %s : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %g = kiln.mul %n, %w : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %y = kiln.add %g, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// The LayerNorm of older BERT code, `w * (x - u) / sqrt(s + eps) + b` with
// `s = (x - u).pow(2).mean()`: the difference computed twice, the weight
// and bias in front. Then one without scale or bias, its square a product
// and its division a product with the reciprocal; and one with a bias but
// no scale, over two axes.
// CHECK-LABEL: func @other_layer_norms
// CHECK-NEXT: %[[A:.*]], %{{.*}}, %{{.*}} = kiln.layer_norm %arg0 scale %arg1 bias %arg2 {axis = 1 : i64, epsilon = 9.999999960041972E-13 : f64}
// CHECK-NEXT: %[[B:.*]], %{{.*}}, %{{.*}} = kiln.layer_norm %arg0 {axis = 1 : i64, epsilon = 9.999999960041972E-13 : f64}
// CHECK-NEXT: %[[C:.*]], %{{.*}}, %{{.*}} = kiln.layer_norm %arg3 bias %arg4 {axis = 1 : i64, epsilon = 9.999999960041972E-13 : f64} : (tensor<2x3x4xf32>, tensor<3x4xf32>)
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]]
func.func @other_layer_norms(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>,
                             %z: tensor<2x3x4xf32>, %c: tensor<3x4xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3x4xf32>) {
  %two = kiln.constant dense<2.0> : tensor<f32>
  %eps = kiln.constant dense<1.0e-12> : tensor<f32>
  %u = kiln.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = kiln.sub %x, %u : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p = kiln.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v = kiln.reduce_mean %p {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = kiln.add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = kiln.sqrt %a : tensor<4x1xf32>
  %d2 = kiln.sub %x, %u : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %n = kiln.div %d2, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %g = kiln.mul %w, %n : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = kiln.add %b, %g : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %u1 = kiln.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %e1 = kiln.sub %x, %u1 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %q1 = kiln.mul %e1, %e1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %v1 = kiln.reduce_mean %q1 {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a1 = kiln.add %eps, %v1 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %s1 = kiln.sqrt %a1 : tensor<4x1xf32>
  %r1 = kiln.reciprocal %s1 : tensor<4x1xf32>
  %y1 = kiln.mul %r1, %e1 : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %u2 = kiln.reduce_mean %z {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %e2 = kiln.sub %z, %u2 : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  %q2 = kiln.pow %e2, %two : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %v2 = kiln.reduce_mean %q2 {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %a2 = kiln.add %v2, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %s2 = kiln.sqrt %a2 : tensor<2x1x1xf32>
  %n2 = kiln.div %e2, %s2 : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  %y2 = kiln.add %n2, %c : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return %y, %y1, %y2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3x4xf32>
}

// -----

// Not layer norms: the difference read elsewhere too (nothing is
// replaced); a difference from a mean over other axes than the variance's
// (an RMS norm of the difference); a bias along the rows (the norm stays
// without it, the sum after it).
// CHECK-LABEL: func @not_layer_norms
// CHECK: kiln.sub
// CHECK-NOT: kiln.layer_norm
// CHECK: kiln.rms_norm %{{.*}} {axis = 2 : i64
// CHECK: %[[N:.*]], %{{.*}}, %{{.*}} = kiln.layer_norm %arg0 scale %arg1 {axis = 1 : i64
// CHECK-NEXT: kiln.add %[[N]], %arg3
func.func @not_layer_norms(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %z: tensor<2x3x4xf32>, %rows: tensor<4x1xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3x4xf32>, tensor<4x8xf32>) {
  %two = kiln.constant dense<2.0> : tensor<f32>
  %eps = kiln.constant dense<1.0e-5> : tensor<f32>
  %u = kiln.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = kiln.sub %x, %u : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p = kiln.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v = kiln.reduce_mean %p {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = kiln.add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = kiln.sqrt %a : tensor<4x1xf32>
  %n = kiln.div %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %u1 = kiln.reduce_mean %z {axes = array<i64: 1, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %e1 = kiln.sub %z, %u1 : (tensor<2x3x4xf32>, tensor<2x1x1xf32>) -> tensor<2x3x4xf32>
  %q1 = kiln.pow %e1, %two : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %v1 = kiln.reduce_mean %q1 {axes = array<i64: 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %a1 = kiln.add %v1, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s1 = kiln.sqrt %a1 : tensor<2x3x1xf32>
  %n1 = kiln.div %e1, %s1 : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  %u2 = kiln.reduce_mean %x {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %e2 = kiln.sub %x, %u2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %q2 = kiln.pow %e2, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v2 = kiln.reduce_mean %q2 {axes = array<i64: 1>, keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a2 = kiln.add %v2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s2 = kiln.sqrt %a2 : tensor<4x1xf32>
  %n2 = kiln.div %e2, %s2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %g2 = kiln.mul %n2, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y2 = kiln.add %g2, %rows : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n, %d, %n1, %y2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3x4xf32>, tensor<4x8xf32>
}
