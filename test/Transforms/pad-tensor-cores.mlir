// RUN: kiln-opt %s -split-input-file --kiln-pad-tensor-cores | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-pad-tensor-cores="max-overhead=0" | FileCheck %s --check-prefix=OFF

// GPT-2's tied embedding: the vocabulary 50257 becomes 50304 in the stored
// parameter, the lookup reads the padded table, the logits GEMM and the
// reshape carry the padding, and the loss ignores the padding classes. The
// returned logits are the logical slice.
// CHECK-LABEL: func @tied_embedding
// CHECK: %[[W:.*]] = kiln.parameter "wte" {logical_shape = array<i64: 50257, 16>} : tensor<50304x16xf32>
// CHECK: kiln.gather %[[W]], %arg0 {axis = 0 : i64} : (tensor<50304x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
// CHECK: %[[T:.*]] = kiln.transpose %[[W]] {{.*}} -> tensor<16x50304xf32>
// CHECK: %[[L:.*]] = kiln.matmul %{{.*}}, %[[T]] : (tensor<2x4x16xf32>, tensor<16x50304xf32>) -> tensor<2x4x50304xf32>
// CHECK: %[[F:.*]] = kiln.reshape %[[L]] : tensor<2x4x50304xf32> to tensor<8x50304xf32>
// CHECK: kiln.cross_entropy %[[F]], %{{.*}} reduction = mean {num_classes = 50257 : i64}
// CHECK: %[[S:.*]] = kiln.slice %[[L]] {{.*}} : tensor<2x4x50304xf32> to tensor<2x4x50257xf32>
// CHECK: return %{{.*}}, %[[S]]
// OFF-LABEL: func @tied_embedding
// OFF-NOT: 50304
func.func @tied_embedding(%tokens: tensor<2x4xi64>, %labels: tensor<8xi64>) -> (tensor<f32>, tensor<2x4x50257xf32>) {
  %w = kiln.parameter "wte" : tensor<50257x16xf32>
  %e = kiln.gather %w, %tokens {axis = 0 : i64} : (tensor<50257x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
  %t = kiln.transpose %w {permutation = array<i64: 1, 0>} : (tensor<50257x16xf32>) -> tensor<16x50257xf32>
  %logits = kiln.matmul %e, %t : (tensor<2x4x16xf32>, tensor<16x50257xf32>) -> tensor<2x4x50257xf32>
  %flat = kiln.reshape %logits : tensor<2x4x50257xf32> to tensor<8x50257xf32>
  %loss = kiln.cross_entropy %flat, %labels reduction = mean : (tensor<8x50257xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<2x4x50257xf32>
}

// -----

// An output projection read with transpose_rhs; its bias add is not a GEMM
// and reads the logical slice of the padded product.
// CHECK-LABEL: func @projection_with_bias
// CHECK: %[[W:.*]] = kiln.parameter "head" {logical_shape = array<i64: 1001, 64>} : tensor<1008x64xf32>
// CHECK: %[[P:.*]] = kiln.matmul %arg0, %[[W]] {transpose_rhs} : (tensor<4x64xf32>, tensor<1008x64xf32>) -> tensor<4x1008xf32>
// CHECK: %[[S:.*]] = kiln.slice %[[P]] {{.*}} : tensor<4x1008xf32> to tensor<4x1001xf32>
// CHECK: kiln.add %[[S]], %{{.*}} : (tensor<4x1001xf32>, tensor<1001xf32>)
func.func @projection_with_bias(%x: tensor<4x64xf32>) -> tensor<4x1001xf32> {
  %w = kiln.parameter "head" : tensor<1001x64xf32>
  %b = kiln.parameter "bias" : tensor<1001xf32>
  %p = kiln.matmul %x, %w {transpose_rhs} : (tensor<4x64xf32>, tensor<1001x64xf32>) -> tensor<4x1001xf32>
  %y = kiln.add %p, %b : (tensor<4x1001xf32>, tensor<1001xf32>) -> tensor<4x1001xf32>
  return %y : tensor<4x1001xf32>
}

// -----

// A weight whose odd dimension is also contracted elsewhere: that use reads
// the logical slice, so its sum has no extra terms.
// CHECK-LABEL: func @contracted_elsewhere
// CHECK: %[[W:.*]] = kiln.parameter "w" {logical_shape = array<i64: 1001, 64>} : tensor<1008x64xf32>
// CHECK: %[[S:.*]] = kiln.slice %[[W]] {{.*}} : tensor<1008x64xf32> to tensor<1001x64xf32>
// CHECK: kiln.matmul %arg1, %[[S]] : (tensor<4x1001xf32>, tensor<1001x64xf32>) -> tensor<4x64xf32>
func.func @contracted_elsewhere(%x: tensor<4x64xf32>, %z: tensor<4x1001xf32>) -> (tensor<4x1001xf32>, tensor<4x64xf32>) {
  %w = kiln.parameter "w" : tensor<1001x64xf32>
  %p = kiln.matmul %x, %w {transpose_rhs} : (tensor<4x64xf32>, tensor<1001x64xf32>) -> tensor<4x1001xf32>
  %q = kiln.matmul %z, %w : (tensor<4x1001xf32>, tensor<1001x64xf32>) -> tensor<4x64xf32>
  return %p, %q : tensor<4x1001xf32>, tensor<4x64xf32>
}

// -----

// Not padded: dimensions that are multiples of 8 already, a classifier of 2
// classes (4x the work of a tiny GEMM does not pay), an odd dimension that
// only a GEMM's contraction reads, and a weight that feeds no GEMM.
// CHECK-LABEL: func @left_alone
// CHECK-NOT: logical_shape
func.func @left_alone(%x: tensor<4x64xf32>, %y: tensor<4x1001xf32>) -> (tensor<4x768xf32>, tensor<4x2xf32>, tensor<4x64xf32>, tensor<1001x3xf32>) {
  %a = kiln.parameter "aligned" : tensor<64x768xf32>
  %c = kiln.parameter "classifier" : tensor<64x2xf32>
  %k = kiln.parameter "contracted" : tensor<1001x64xf32>
  %n = kiln.parameter "not_a_gemm" : tensor<1001x3xf32>
  %p = kiln.matmul %x, %a : (tensor<4x64xf32>, tensor<64x768xf32>) -> tensor<4x768xf32>
  %q = kiln.matmul %x, %c : (tensor<4x64xf32>, tensor<64x2xf32>) -> tensor<4x2xf32>
  %r = kiln.matmul %y, %k : (tensor<4x1001xf32>, tensor<1001x64xf32>) -> tensor<4x64xf32>
  %s = kiln.tanh %n : tensor<1001x3xf32>
  return %p, %q, %r, %s : tensor<4x768xf32>, tensor<4x2xf32>, tensor<4x64xf32>, tensor<1001x3xf32>
}

// -----

// One parameter imported as two ops (a model-local function reading it
// again): both are padded alike, since they hold one value.
// CHECK-LABEL: func @one_name_two_ops
// CHECK: kiln.parameter "wte" {logical_shape = array<i64: 1001, 64>} : tensor<1008x64xf32>
// CHECK: kiln.parameter "wte" {logical_shape = array<i64: 1001, 64>} : tensor<1008x64xf32>
func.func @one_name_two_ops(%x: tensor<4x64xf32>, %ids: tensor<4xi64>) -> (tensor<4x1001xf32>, tensor<4x64xf32>) {
  %w = kiln.parameter "wte" : tensor<1001x64xf32>
  %p = kiln.matmul %x, %w {transpose_rhs} : (tensor<4x64xf32>, tensor<1001x64xf32>) -> tensor<4x1001xf32>
  %again = kiln.parameter "wte" : tensor<1001x64xf32>
  %e = kiln.gather %again, %ids {axis = 0 : i64} : (tensor<1001x64xf32>, tensor<4xi64>) -> tensor<4x64xf32>
  return %p, %e : tensor<4x1001xf32>, tensor<4x64xf32>
}
