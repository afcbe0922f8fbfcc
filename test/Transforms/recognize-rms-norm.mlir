// RUN: kiln-opt %s -split-input-file --kiln-recognize-rms-norm | FileCheck %s
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
