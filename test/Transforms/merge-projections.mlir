// RUN: kiln-opt %s -split-input-file --kiln-merge-projections | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-merge-projections="freeze=key" | FileCheck %s --check-prefix=FROZEN
//
// Every function here also runs before and after the rewrite on random
// inputs in unittests/Transforms/PatternRewriteTest.cpp, which requires the
// same results bit for bit.

// BERT's query, key and value: Linear layers (weights [out, in], read with
// transpose_rhs), each with a bias added first. One product by the three
// weights stacked, the biases concatenated, and a column slice for each.
// CHECK-LABEL: func @query_key_value
// CHECK-DAG: %[[WQ:.*]] = kiln.parameter "query.weight"
// CHECK-DAG: %[[BQ:.*]] = kiln.parameter "query.bias"
// CHECK-DAG: %[[WK:.*]] = kiln.parameter "key.weight"
// CHECK-DAG: %[[BK:.*]] = kiln.parameter "key.bias"
// CHECK-DAG: %[[WV:.*]] = kiln.parameter "value.weight"
// CHECK-DAG: %[[BV:.*]] = kiln.parameter "value.bias"
// CHECK: %[[W:.*]] = kiln.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<7x4xf32>
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %arg0, %[[W]] {transpose_rhs} : (tensor<2x3x4xf32>, tensor<7x4xf32>) -> tensor<2x3x7xf32>
// CHECK-NEXT: %[[B:.*]] = kiln.concat %[[BQ]], %[[BK]], %[[BV]] {axis = 0 : i64} : (tensor<2xf32>, tensor<3xf32>, tensor<2xf32>) -> tensor<7xf32>
// CHECK-NEXT: %[[Y:.*]] = kiln.add %[[P]], %[[B]] : (tensor<2x3x7xf32>, tensor<7xf32>) -> tensor<2x3x7xf32>
// CHECK-NEXT: %[[Q:.*]] = kiln.slice %[[Y]] {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x3x7xf32> to tensor<2x3x2xf32>
// CHECK-NEXT: %[[K:.*]] = kiln.slice %[[Y]] {start = array<i64: 0, 0, 2>, stride = array<i64: 1, 1, 1>} : tensor<2x3x7xf32> to tensor<2x3x3xf32>
// CHECK-NEXT: %[[V:.*]] = kiln.slice %[[Y]] {start = array<i64: 0, 0, 5>, stride = array<i64: 1, 1, 1>} : tensor<2x3x7xf32> to tensor<2x3x2xf32>
// CHECK-NOT: kiln.matmul
// CHECK: return %[[Q]], %[[K]], %[[V]]
// A frozen key weight stays apart from the trained query and value.
// FROZEN-LABEL: func @query_key_value
// FROZEN: kiln.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// FROZEN: kiln.matmul %arg0, %{{.*}} {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
// FROZEN: kiln.matmul %arg0, %{{.*}} {transpose_rhs} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x3xf32>
func.func @query_key_value(%x: tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x3xf32>, tensor<2x3x2xf32>) {
  %wq = kiln.parameter "query.weight" = dense<[[0.1, 0.2, 0.3, 0.4], [0.5, -0.6, 0.7, -0.8]]> : tensor<2x4xf32> : tensor<2x4xf32>
  %bq = kiln.parameter "query.bias" = dense<[0.1, -0.2]> : tensor<2xf32> : tensor<2xf32>
  %wk = kiln.parameter "key.weight" = dense<[[1.0, -1.1, 1.2, 0.3], [0.9, 0.8, -0.7, 0.6], [-0.5, 0.4, 0.3, -0.2]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %bk = kiln.parameter "key.bias" = dense<[0.3, 0.4, -0.5]> : tensor<3xf32> : tensor<3xf32>
  %wv = kiln.parameter "value.weight" = dense<[[0.25, 0.5, -0.75, 1.0], [-1.25, 1.5, 0.125, -0.375]]> : tensor<2x4xf32> : tensor<2x4xf32>
  %bv = kiln.parameter "value.bias" = dense<[0.6, -0.7]> : tensor<2xf32> : tensor<2xf32>
  %pq = kiln.matmul %x, %wq {transpose_rhs} : (tensor<2x3x4xf32>, tensor<2x4xf32>) -> tensor<2x3x2xf32>
  %q = kiln.add %bq, %pq : (tensor<2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
  %pk = kiln.matmul %x, %wk {transpose_rhs} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x3xf32>
  %k = kiln.add %bk, %pk : (tensor<3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %pv = kiln.matmul %x, %wv {transpose_rhs} : (tensor<2x3x4xf32>, tensor<2x4xf32>) -> tensor<2x3x2xf32>
  %v = kiln.add %pv, %bv : (tensor<2x3x2xf32>, tensor<2xf32>) -> tensor<2x3x2xf32>
  return %q, %k, %v : tensor<2x3x2xf32>, tensor<2x3x3xf32>, tensor<2x3x2xf32>
}

// -----

// A gated MLP's gate and up projections (Linear weights, no bias), whose
// slices SwiGLU multiplies; the down projection reads another input and
// stays as it is.
// CHECK-LABEL: func @gate_and_up
// CHECK: %[[W:.*]] = kiln.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %arg0, %[[W]] {transpose_rhs} : (tensor<5x4xf32>, tensor<6x4xf32>) -> tensor<5x6xf32>
// CHECK-NEXT: %[[G:.*]] = kiln.slice %[[P]] {start = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<5x6xf32> to tensor<5x3xf32>
// CHECK-NEXT: %[[U:.*]] = kiln.slice %[[P]] {start = array<i64: 0, 3>, stride = array<i64: 1, 1>} : tensor<5x6xf32> to tensor<5x3xf32>
// CHECK: kiln.silu %[[G]]
// CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
func.func @gate_and_up(%x: tensor<5x4xf32>) -> tensor<5x4xf32> {
  %wg = kiln.parameter "gate.weight" = dense<[[0.1, -0.2, 0.3, 0.4], [0.5, -0.6, -0.7, 0.8], [0.9, 1.0, -1.1, 0.2]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %wu = kiln.parameter "up.weight" = dense<[[0.3, 0.1, -0.4, 0.1], [-0.5, 0.9, 0.2, 0.6], [-0.5, -0.3, 0.5, 0.8]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %wd = kiln.parameter "down.weight" = dense<[[0.5, -0.25, 0.75], [0.1, -0.5, 0.2], [0.4, -0.9, 0.3], [0.3, -0.1, 0.6]]> : tensor<4x3xf32> : tensor<4x3xf32>
  %g = kiln.matmul %x, %wg {transpose_rhs} : (tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
  %u = kiln.matmul %x, %wu {transpose_rhs} : (tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
  %s = kiln.silu %g : tensor<5x3xf32>
  %h = kiln.mul %s, %u : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  %y = kiln.matmul %h, %wd {transpose_rhs} : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
  return %y : tensor<5x4xf32>
}

// -----

// Left apart: products of one input of which one adds a bias and one does
// not; a product by a computed value; a product of another input; a bias
// add that is not its product's only reader (the product has no bias then,
// and no sibling); weights stored [in, out] (their gradients would be
// column blocks of the merged one).
// CHECK-LABEL: func @apart
// CHECK-NOT: kiln.concat
// CHECK-COUNT-7: kiln.matmul
// CHECK-NOT: kiln.concat
func.func @apart(%x: tensor<5x4xf32>, %y: tensor<5x4xf32>, %z: tensor<5x4xf32>) -> (tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>) {
  %wa = kiln.parameter "a.weight" = dense<[[0.1, -0.2, 0.3, 0.4], [0.5, -0.6, -0.7, 0.8], [0.9, 1.0, -1.1, 0.2]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %ba = kiln.parameter "a.bias" = dense<[0.5, -0.5, 0.25]> : tensor<3xf32> : tensor<3xf32>
  %wb = kiln.parameter "b.weight" = dense<[[0.3, 0.1, -0.4, 0.1], [-0.5, 0.9, 0.2, 0.6], [-0.5, -0.3, 0.5, 0.8]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %pa = kiln.matmul %x, %wa {transpose_rhs} : (tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
  %a = kiln.add %pa, %ba : (tensor<5x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
  %b = kiln.matmul %x, %wb {transpose_rhs} : (tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
  %two = kiln.constant dense<2.0> : tensor<f32>
  %wc = kiln.mul %wb, %two : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %c = kiln.matmul %x, %wc {transpose_rhs} : (tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
  %d = kiln.matmul %z, %wa {transpose_rhs} : (tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
  %pe = kiln.matmul %y, %wb {transpose_rhs} : (tensor<5x4xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
  %e = kiln.add %pe, %ba : (tensor<5x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
  %wf = kiln.parameter "f.weight" = dense<[[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [-0.7, 0.8, 0.9], [1.0, -1.1, 0.2]]> : tensor<4x3xf32> : tensor<4x3xf32>
  %wg = kiln.parameter "g.weight" = dense<[[0.3, 0.1, -0.4], [0.1, -0.5, 0.9], [0.2, 0.6, -0.5], [-0.3, 0.5, 0.8]]> : tensor<4x3xf32> : tensor<4x3xf32>
  %f = kiln.matmul %z, %wf : (tensor<5x4xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  %g = kiln.matmul %z, %wg : (tensor<5x4xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  return %a, %b, %c, %d, %e, %pe, %f, %g : tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>
}
