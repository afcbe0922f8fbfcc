// RUN: kiln-opt %s --kiln-training-pipeline | FileCheck %s --check-prefix=REWRITE
// RUN: kiln-opt %s --kiln-training-pipeline="rewrite-attention=false" | FileCheck %s --check-prefix=KEEP

// The pipeline's rewrite-attention option: by default the spelled-out
// attention becomes kiln.attention, whose gradient recomputes the
// probabilities; with rewrite-attention=false the exported ops stay, and
// the step keeps the probabilities for their gradient.
// REWRITE-LABEL: func.func @main_step(
// REWRITE-NOT: kiln.softmax
// REWRITE: kiln.attention
// REWRITE-NOT: kiln.softmax
// REWRITE: kiln.attention_grad
// KEEP-LABEL: func.func @main_step(
// KEEP-NOT: kiln.attention
// KEEP: kiln.softmax
// KEEP-NOT: kiln.attention
func.func @main(%x: tensor<1x4x8xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %wq = kiln.parameter "wq" : tensor<8x16xf32>
  %wk = kiln.parameter "wk" : tensor<8x16xf32>
  %wv = kiln.parameter "wv" : tensor<8x16xf32>
  %q0 = kiln.matmul %x, %wq : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  %k0 = kiln.matmul %x, %wk : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  %v0 = kiln.matmul %x, %wv : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
  %q1 = kiln.reshape %q0 : tensor<1x4x16xf32> to tensor<1x4x2x8xf32>
  %k1 = kiln.reshape %k0 : tensor<1x4x16xf32> to tensor<1x4x2x8xf32>
  %v1 = kiln.reshape %v0 : tensor<1x4x16xf32> to tensor<1x4x2x8xf32>
  %q = kiln.transpose %q1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %k = kiln.transpose %k1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %v = kiln.transpose %v1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %scale = kiln.constant dense<0.25> : tensor<f32>
  %mask = kiln.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = kiln.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = kiln.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.add %ss, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %l = kiln.reduce_mean %o {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
