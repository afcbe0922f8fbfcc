// RUN: kiln-opt %s -split-input-file --kiln-merge-projections | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-merge-projections="freeze=key" | FileCheck %s --check-prefix=FROZEN
//
// Every function here also runs before and after the rewrite on random
// inputs in unittests/Transforms/PatternRewriteTest.cpp, which requires the
// same results bit for bit.

// BERT's query, key and value: Linear layers (weights [out, in], read with
// transpose_rhs), each with a bias added first, whose heads attention
// reads. One product by the three weights stacked, the biases
// concatenated, and a column slice for each.
// CHECK-LABEL: func @query_key_value
// CHECK-DAG: %[[WQ:.*]] = kiln.parameter "query.weight"
// CHECK-DAG: %[[BQ:.*]] = kiln.parameter "query.bias"
// CHECK-DAG: %[[WK:.*]] = kiln.parameter "key.weight"
// CHECK-DAG: %[[BK:.*]] = kiln.parameter "key.bias"
// CHECK-DAG: %[[WV:.*]] = kiln.parameter "value.weight"
// CHECK-DAG: %[[BV:.*]] = kiln.parameter "value.bias"
// CHECK: %[[W:.*]] = kiln.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<12x4xf32>
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %arg0, %[[W]] {transpose_rhs} : (tensor<2x3x4xf32>, tensor<12x4xf32>) -> tensor<2x3x12xf32>
// CHECK-NEXT: %[[B:.*]] = kiln.concat %[[BQ]], %[[BK]], %[[BV]] {axis = 0 : i64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<12xf32>
// CHECK-NEXT: %[[Y:.*]] = kiln.add %[[P]], %[[B]] : (tensor<2x3x12xf32>, tensor<12xf32>) -> tensor<2x3x12xf32>
// CHECK-NEXT: %[[Q:.*]] = kiln.slice %[[Y]] {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x3x12xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[K:.*]] = kiln.slice %[[Y]] {start = array<i64: 0, 0, 4>, stride = array<i64: 1, 1, 1>} : tensor<2x3x12xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[V:.*]] = kiln.slice %[[Y]] {start = array<i64: 0, 0, 8>, stride = array<i64: 1, 1, 1>} : tensor<2x3x12xf32> to tensor<2x3x4xf32>
// CHECK-NOT: kiln.matmul
// CHECK: kiln.reshape %[[Q]]
// A frozen key weight stays apart from the trained query and value.
// FROZEN-LABEL: func @query_key_value
// FROZEN: kiln.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
// FROZEN: kiln.matmul %arg0, %{{.*}} {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
// FROZEN: kiln.matmul %arg0, %{{.*}} {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
func.func @query_key_value(%x: tensor<2x3x4xf32>) -> tensor<2x2x3x2xf32> {
  %wq = kiln.parameter "query.weight" = dense<[[-0.9, -0.6, 0.2, -0.8], [0.9, -0.4, 0.9, 0.7], [-0.4, -0.9, 0.1, -0.3], [-0.5, -0.5, 0.7, 0.7]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %bq = kiln.parameter "query.bias" = dense<[0.8, 0.9, -0.9, 0.7]> : tensor<4xf32> : tensor<4xf32>
  %wk = kiln.parameter "key.weight" = dense<[[0.3, 0.2, -0.3, 0.4], [0.7, 0.7, 0.6, 0.4], [0.1, 0.3, 0.9, -0.4], [0.5, -0.2, 0.8, -0.6]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %bk = kiln.parameter "key.bias" = dense<[-0.5, 0.5, 0.9, 0.1]> : tensor<4xf32> : tensor<4xf32>
  %wv = kiln.parameter "value.weight" = dense<[[-0.7, -0.1, 0.7, 0.2], [-0.1, 0.6, 0.9, -0.1], [0.1, -0.2, -0.4, 0.5], [0.3, -0.6, 0.6, -0.7]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %bv = kiln.parameter "value.bias" = dense<[0.6, -0.7, -0.1, 0.8]> : tensor<4xf32> : tensor<4xf32>
  %pq = kiln.matmul %x, %wq {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %q = kiln.add %bq, %pq : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %qh = kiln.reshape %q : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %qt = kiln.transpose %qh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %pk = kiln.matmul %x, %wk {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %k = kiln.add %bk, %pk : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %kh = kiln.reshape %k : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %kt = kiln.transpose %kh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %pv = kiln.matmul %x, %wv {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %v = kiln.add %bv, %pv : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %vh = kiln.reshape %v : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %vt = kiln.transpose %vh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %o, %lse = kiln.attention %qt, %kt, %vt {scale = 0.7 : f64} : (tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>) -> (tensor<2x2x3x2xf32>, tensor<2x2x3xf32>)
  return %o : tensor<2x2x3x2xf32>
}

// -----

// A query with a bias and a key and value without: only the key and value
// merge (one bias concatenated with none would be no bias of the sum).
// CHECK-LABEL: func @mixed_biases
// CHECK: kiln.matmul %arg0, %{{.*}} {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
// CHECK: kiln.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: kiln.matmul %arg0, %{{.*}} {transpose_rhs} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
// CHECK-NOT: kiln.concat
func.func @mixed_biases(%x: tensor<2x3x4xf32>) -> tensor<2x2x3x2xf32> {
  %wq = kiln.parameter "query.weight" = dense<[[-0.9, -0.6, 0.2, -0.8], [0.9, -0.4, 0.9, 0.7], [-0.4, -0.9, 0.1, -0.3], [-0.5, -0.5, 0.7, 0.7]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %bq = kiln.parameter "query.bias" = dense<[0.8, 0.9, -0.9, 0.7]> : tensor<4xf32> : tensor<4xf32>
  %wk = kiln.parameter "key.weight" = dense<[[0.3, 0.2, -0.3, 0.4], [0.7, 0.7, 0.6, 0.4], [0.1, 0.3, 0.9, -0.4], [0.5, -0.2, 0.8, -0.6]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %wv = kiln.parameter "value.weight" = dense<[[-0.7, -0.1, 0.7, 0.2], [-0.1, 0.6, 0.9, -0.1], [0.1, -0.2, -0.4, 0.5], [0.3, -0.6, 0.6, -0.7]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %pq = kiln.matmul %x, %wq {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %q = kiln.add %bq, %pq : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %qh = kiln.reshape %q : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %qt = kiln.transpose %qh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %k = kiln.matmul %x, %wk {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %kh = kiln.reshape %k : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %kt = kiln.transpose %kh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %v = kiln.matmul %x, %wv {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %vh = kiln.reshape %v : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %vt = kiln.transpose %vh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %o, %lse = kiln.attention %qt, %kt, %vt {scale = 0.7 : f64} : (tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>) -> (tensor<2x2x3x2xf32>, tensor<2x2x3xf32>)
  return %o : tensor<2x2x3x2xf32>
}

// -----

// Weights stored [in, out] (TorchScript's MatMul initializers, dynamo's
// exports) stay apart: stacked along their columns, each one's gradient
// would be a block of columns of the merged one, to be copied out.
// CHECK-LABEL: func @stored_in_out
// CHECK-NOT: kiln.concat
// CHECK-COUNT-3: kiln.matmul %arg0
func.func @stored_in_out(%x: tensor<2x3x4xf32>) -> tensor<2x2x3x2xf32> {
  %wq = kiln.parameter "query.weight" = dense<[[0.6, 0.8, -0.1, -0.6], [0.8, 0.6, -0.6, -0.6], [0.5, 0.7, -0.1, -0.5], [-0.5, -0.6, -0.7, -0.2]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %wk = kiln.parameter "key.weight" = dense<[[0.6, -0.8, -0.2, 0.4], [0.5, -0.2, -0.9, -0.6], [-0.5, 0.2, 0.3, 0.5], [0.8, 0.7, 0.7, 0.1]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %wv = kiln.parameter "value.weight" = dense<[[0.3, -0.1, 0.9, 0.9], [-0.1, 0.9, 0.9, 0.4], [-0.5, -0.4, -0.1, -0.7], [-0.1, 0.2, -0.9, 0.4]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %q = kiln.matmul %x, %wq : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %qh = kiln.reshape %q : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %qt = kiln.transpose %qh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %k = kiln.matmul %x, %wk : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %kh = kiln.reshape %k : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %kt = kiln.transpose %kh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %v = kiln.matmul %x, %wv : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %vh = kiln.reshape %v : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %vt = kiln.transpose %vh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %o, %lse = kiln.attention %qt, %kt, %vt {scale = 0.7 : f64} : (tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>) -> (tensor<2x2x3x2xf32>, tensor<2x2x3xf32>)
  return %o : tensor<2x2x3x2xf32>
}

// -----

// Left apart: a query and key that something else reads before attention
// (a stand-in for Llama's rotary embedding), which would keep the value's
// siblings alive until the backward pass; a value projection then alone;
// and a gated MLP's gate and up, which attention does not read.
// CHECK-LABEL: func @apart
// CHECK-NOT: kiln.concat
// CHECK-COUNT-5: kiln.matmul %
// CHECK-NOT: kiln.concat
func.func @apart(%x: tensor<2x3x4xf32>) -> (tensor<2x2x3x2xf32>, tensor<2x3x4xf32>) {
  %wq = kiln.parameter "query.weight" = dense<[[-0.9, 0.1, -0.6, -0.5], [0.1, 0.4, -0.2, -0.3], [-0.5, -0.1, 0.7, -0.5], [-0.5, 0.1, 0.6, -0.1]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %wk = kiln.parameter "key.weight" = dense<[[-0.1, -0.1, -0.8, -0.2], [0.6, -0.6, -0.6, 0.7], [0.6, 0.4, 0.7, -0.3], [-0.7, -0.3, -0.6, 0.9]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %wv = kiln.parameter "value.weight" = dense<[[0.1, 0.1, 0.8, 0.7], [0.8, -0.4, -0.9, 0.2], [0.4, 0.3, -0.6, 0.9], [0.2, 0.2, 0.2, 0.9]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %wg = kiln.parameter "gate.weight" = dense<[[-0.1, 0.3, -0.7, -0.9], [-0.2, 0.3, -0.6, -0.1], [-0.8, 0.5, -0.1, -0.2], [-0.9, -0.9, 0.3, -0.4]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %wu = kiln.parameter "up.weight" = dense<[[-0.4, 0.7, 0.6, 0.6], [0.2, 0.9, -0.7, -0.7], [0.3, 0.3, -0.2, 0.8], [0.3, -0.5, -0.3, 0.4]]> : tensor<4x4xf32> : tensor<4x4xf32>
  %c = kiln.constant dense<0.5> : tensor<f32>
  %pq = kiln.matmul %x, %wq {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %q = kiln.mul %pq, %c : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %qh = kiln.reshape %q : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %qt = kiln.transpose %qh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %pk = kiln.matmul %x, %wk {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %k = kiln.mul %pk, %c : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %kh = kiln.reshape %k : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %kt = kiln.transpose %kh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %v = kiln.matmul %x, %wv {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %vh = kiln.reshape %v : tensor<2x3x4xf32> to tensor<2x3x2x2xf32>
  %vt = kiln.transpose %vh {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
  %g = kiln.matmul %x, %wg {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %u = kiln.matmul %x, %wu {transpose_rhs} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %s = kiln.silu %g : tensor<2x3x4xf32>
  %h = kiln.mul %s, %u : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %o, %lse = kiln.attention %qt, %kt, %vt {scale = 0.7 : f64} : (tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>) -> (tensor<2x2x3x2xf32>, tensor<2x2x3xf32>)
  return %o, %h : tensor<2x2x3x2xf32>, tensor<2x3x4xf32>
}
