// RUN: kiln-opt %s -split-input-file --kiln-autodiff | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-autodiff="freeze=^w2$" | FileCheck %s --check-prefix=FROZEN
// RUN: not kiln-opt %s -split-input-file --kiln-autodiff="loss=missing" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING

// Tests the gradient function of a two-layer network: one gradient per
// parameter, the tied weight (used twice) summed, the loss marked.
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4x4xf32> {kiln.gradient_of = "w1"}, tensor<4x4xf32> {kiln.gradient_of = "w2"})
// CHECK-SAME: attributes {kiln.loss_index = 0 : i64}
// CHECK: kiln.matmul
// The transposed use of w1 and its direct use add up.
// CHECK: %[[A:.*]] = kiln.matmul {{.*}}transpose_lhs
// CHECK: kiln.add
// CHECK: return
// FROZEN-LABEL: func.func @main_grad
// FROZEN-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4x4xf32> {kiln.gradient_of = "w1"})
func.func @main(%x: tensor<2x4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %w1 = kiln.parameter "w1" : tensor<4x4xf32>
  %w2 = kiln.parameter "w2" : tensor<4x4xf32>
  %h = kiln.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = kiln.tanh %h : tensor<2x4xf32>
  %o = kiln.matmul %t, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %p = kiln.matmul %o, %w1 {transpose_rhs} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = kiln.reduce_mean %p {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a buffer that only feeds a comparison (a mask table) is not
// trained and gets no gradient work.
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: -> (tensor<f32> {kiln.name = "loss"}, tensor<4xf32> {kiln.gradient_of = "scale"})
// CHECK-NOT: kiln.gradient_of = "mask_table"
func.func @main(%x: tensor<4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %m = kiln.parameter "mask_table" : tensor<4xf32>
  %s = kiln.parameter "scale" : tensor<4xf32>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %c = kiln.compare gt, %m, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %y = kiln.mul %x, %s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w = kiln.where %c, %y, %zero : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %l = kiln.reduce_sum %w {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a trained bias of attention (a learned position bias) gets its
// gradient from attention_grad's mask_grad, and that a mask no parameter
// reaches gets none.
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: tensor<2x4x4xf32> {kiln.gradient_of = "relative_bias"}
// CHECK: %[[BIAS:.*]] = kiln.parameter "relative_bias"
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %[[DBIAS:.*]] = kiln.attention_grad {{.*}} mask %[[BIAS]] output
// CHECK-SAME: -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2x4x4xf32>)
// CHECK: %{{.*}}, %{{.*}}, %{{[a-z_0-9]*}} = kiln.attention_grad {{.*}} mask %arg1 output
// CHECK-SAME: -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
// CHECK: return {{.*}}, %[[DBIAS]],
func.func @main(%x: tensor<1x2x4x8xf32>, %padding: tensor<1x1x1x4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %bias = kiln.parameter "relative_bias" : tensor<2x4x4xf32>
  %w = kiln.parameter "w" : tensor<1x2x4x8xf32>
  %q = kiln.mul %x, %w : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %o, %lse = kiln.attention %q, %q, %q mask %padding {scale = 0.5 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x1x4xf32>)
      -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %o2, %lse2 = kiln.attention %o, %o, %o mask %bias {scale = 0.5 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2x4x4xf32>)
      -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %l = kiln.reduce_sum %o2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
// MISSING: error: the function has no result named 'missing'
