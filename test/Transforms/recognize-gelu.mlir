// RUN: kiln-opt %s -split-input-file --kiln-recognize-gelu | FileCheck %s
//
// Every function here also runs before and after the rewrite on random
// inputs in unittests/Transforms/PatternRewriteTest.cpp.

// GPT-2's tanh form, as the TorchScript exporter writes it.
// CHECK-LABEL: func @gpt2_tanh
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %arg0 approximation = tanh : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gpt2_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = kiln.constant dense<0.5> : tensor<f32>
  %three = kiln.constant dense<3.0> : tensor<f32>
  %c = kiln.constant dense<0.044715> : tensor<f32>
  %k = kiln.constant dense<0.797884583> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %h = kiln.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %p = kiln.pow %x, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %pc = kiln.mul %p, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = kiln.add %x, %pc : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sk = kiln.mul %s, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = kiln.tanh %sk : tensor<4x8xf32>
  %u = kiln.add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %y = kiln.mul %h, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// BLOOM's tanh form, the polynomial factored: sqrt(2/pi) * x * (1 + c x^2),
// written 0.79788456, with c x^2 as (x * c) * x; and the same with
// c * (x * x).
// CHECK-LABEL: func @bloom_tanh
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %arg0 approximation = tanh : tensor<4x8xf32>
// CHECK-NEXT: %[[H:.*]] = kiln.gelu %arg1 approximation = tanh : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]], %[[H]]
func.func @bloom_tanh(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %half = kiln.constant dense<0.5> : tensor<f32>
  %k = kiln.constant dense<0.79788456> : tensor<f32>
  %c = kiln.constant dense<0.044715> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %h = kiln.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %xk = kiln.mul %x, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %xc = kiln.mul %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %x2c = kiln.mul %xc, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %p = kiln.add %x2c, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %a = kiln.mul %xk, %p : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = kiln.tanh %a : tensor<4x8xf32>
  %u = kiln.add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %y = kiln.mul %h, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %zh = kiln.mul %half, %z : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %zk = kiln.mul %k, %z : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %zz = kiln.mul %z, %z : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %z2c = kiln.mul %c, %zz : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %q = kiln.add %one, %z2c : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = kiln.mul %q, %zk : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %tz = kiln.tanh %b : tensor<4x8xf32>
  %v = kiln.add %one, %tz : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w = kiln.mul %v, %zh : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y, %w : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// BERT's erf form with the factors in the other orders: x * x * x for the
// cube does not occur here, but division by sqrt(2) and (x * (1 + erf)) * 0.5.
// CHECK-LABEL: func @bert_erf
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %arg0 approximation = none : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @bert_erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sqrt2 = kiln.constant dense<1.41421354> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %half = kiln.constant dense<0.5> : tensor<f32>
  %d = kiln.div %x, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = kiln.erf %d : tensor<4x8xf32>
  %u = kiln.add %one, %e : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = kiln.mul %x, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = kiln.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The tanh form with the cube as x * x * x and the literals lifted into
// scalar initializers (dynamo), which autodiff does not train by default.
// CHECK-LABEL: func @lifted_literals_cube
// CHECK: kiln.gelu %arg0 approximation = tanh
// CHECK-NOT: kiln.tanh
func.func @lifted_literals_cube(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = kiln.parameter "val_83" = dense<0.5> : tensor<f32> : tensor<f32>
  %c = kiln.parameter "val_85" = dense<0.044715> : tensor<f32> : tensor<f32>
  %k = kiln.parameter "val_86" = dense<0.797884583> : tensor<f32> : tensor<f32>
  %one = kiln.parameter "val_7" = dense<1.0> : tensor<f32> : tensor<f32>
  %h = kiln.mul %half, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %x2 = kiln.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %x3 = kiln.mul %x2, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %pc = kiln.mul %c, %x3 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = kiln.add %pc, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sk = kiln.mul %k, %s : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = kiln.tanh %sk : tensor<4x8xf32>
  %u = kiln.add %one, %t : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = kiln.mul %u, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Not recognized: another constant (a "GELU" with 0.05 instead of 0.044715),
// an intermediate the function also returns, and a tanh of another value.
// CHECK-LABEL: func @not_gelu
// CHECK-NOT: kiln.gelu
func.func @not_gelu(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %half = kiln.constant dense<0.5> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %three = kiln.constant dense<3.0> : tensor<f32>
  %c = kiln.constant dense<0.05> : tensor<f32>
  %k = kiln.constant dense<0.797884583> : tensor<f32>
  %h = kiln.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %p = kiln.pow %x, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %pc = kiln.mul %p, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = kiln.add %x, %pc : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sk = kiln.mul %s, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = kiln.tanh %sk : tensor<4x8xf32>
  %u = kiln.add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %y = kiln.mul %h, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sqrt2 = kiln.constant dense<1.41421354> : tensor<f32>
  %d = kiln.div %x, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = kiln.erf %d : tensor<4x8xf32>
  %v = kiln.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %hx = kiln.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %w = kiln.mul %hx, %v : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %hz = kiln.mul %z, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %q = kiln.mul %hz, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %w, %e, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
