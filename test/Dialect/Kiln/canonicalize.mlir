// RUN: kiln-opt %s -split-input-file -canonicalize | FileCheck %s
// Folds and canonicalization patterns of the kiln ops.

// Tests that reshape chains collapse and identity reshapes disappear.
// CHECK-LABEL: func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[X]] : tensor<4x8xf32> to tensor<32xf32>
// CHECK-NEXT: return %[[X]], %[[R]]
func.func @reshape_chain(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<32xf32>) {
  %0 = kiln.reshape %x : tensor<4x8xf32> to tensor<2x16xf32>
  %1 = kiln.reshape %0 : tensor<2x16xf32> to tensor<4x8xf32>
  %2 = kiln.reshape %0 : tensor<2x16xf32> to tensor<32xf32>
  return %1, %2 : tensor<4x8xf32>, tensor<32xf32>
}

// -----

// Tests that a reshaped constant folds to a constant.
// CHECK-LABEL: func @reshape_constant
// CHECK-NEXT: kiln.constant dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi64>
func.func @reshape_constant() -> tensor<2x2xi64> {
  %c = kiln.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = kiln.reshape %c : tensor<4xi64> to tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// Tests that two transposes compose into one and identities disappear.
// CHECK-LABEL: func @transposes
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %{{.*}} {permutation = array<i64: 2, 0, 1>}
// CHECK-NEXT: return %[[T]]
func.func @transposes(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = kiln.transpose %x {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %1 = kiln.transpose %0 {permutation = array<i64: 2, 1, 0>} : (tensor<3x2x4xf32>) -> tensor<4x2x3xf32>
  %2 = kiln.transpose %1 {permutation = array<i64: 0, 1, 2>} : (tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
  return %2 : tensor<4x2x3xf32>
}

// -----

// Tests that the transpose of a product's last two dimensions is the
// product of the swapped operands, with their transposes swapped (batched
// and mixed-precision too); a product read elsewhere, or a transpose of
// other dimensions, stays.
// CHECK-LABEL: func @transposed_products
// CHECK-NEXT: %[[A:.*]] = kiln.matmul %arg1, %arg0 {transpose_lhs} : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[B:.*]] = kiln.matmul %arg3, %arg2 {accumulate = f32, transpose_rhs} : (tensor<2x5x3xbf16>, tensor<2x4x3xbf16>) -> tensor<2x5x4xf32>
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %arg0, %arg1 {transpose_lhs}
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %[[P]]
// CHECK-NEXT: %[[Q:.*]] = kiln.matmul %arg2, %arg3
// CHECK-NEXT: kiln.transpose %[[Q]] {permutation = array<i64: 1, 0, 2>}
func.func @transposed_products(%a: tensor<8x4xf32>, %b: tensor<8x6xf32>, %c: tensor<2x4x3xbf16>, %d: tensor<2x5x3xbf16>)
    -> (tensor<6x4xf32>, tensor<2x5x4xf32>, tensor<6x4xf32>, tensor<4x6xf32>, tensor<4x2x5xf32>) {
  %p = kiln.matmul %a, %b {transpose_lhs} : (tensor<8x4xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %pt = kiln.transpose %p {permutation = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %q = kiln.matmul %c, %d {transpose_rhs, accumulate = f32} : (tensor<2x4x3xbf16>, tensor<2x5x3xbf16>) -> tensor<2x4x5xf32>
  %qt = kiln.transpose %q {permutation = array<i64: 0, 2, 1>} : (tensor<2x4x5xf32>) -> tensor<2x5x4xf32>
  %r = kiln.matmul %a, %b {transpose_lhs} : (tensor<8x4xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %rt = kiln.transpose %r {permutation = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %s = kiln.matmul %c, %d {transpose_rhs, accumulate = f32} : (tensor<2x4x3xbf16>, tensor<2x5x3xbf16>) -> tensor<2x4x5xf32>
  %st = kiln.transpose %s {permutation = array<i64: 1, 0, 2>} : (tensor<2x4x5xf32>) -> tensor<4x2x5xf32>
  return %pt, %qt, %rt, %r, %st : tensor<6x4xf32>, tensor<2x5x4xf32>, tensor<6x4xf32>, tensor<4x6xf32>, tensor<4x2x5xf32>
}

// -----

// Tests that a product reads an operand whose matrices a transpose swaps as
// it is stored, with its transpose flag toggled (a Linear layer's weight,
// exported as W^T; a batched key transposed for the scores, whose flag was
// set already); the transpose stays while something else reads it, and a
// transpose of other dimensions stays in the product.
// CHECK-LABEL: func @transposed_operands
// CHECK-NEXT: %[[W:.*]] = kiln.matmul %arg0, %arg1 {transpose_rhs} : (tensor<5x4xf32>, tensor<6x4xf32>) -> tensor<5x6xf32>
// CHECK-NEXT: %[[K:.*]] = kiln.matmul %arg2, %arg2 {accumulate = f32, transpose_lhs} : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>) -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %arg2 {permutation = array<i64: 1, 0, 2>}
// CHECK-NEXT: %[[O:.*]] = kiln.matmul %[[T]], %arg3
// CHECK-NEXT: %[[R:.*]] = kiln.transpose %arg1 {permutation = array<i64: 1, 0>}
// CHECK-NEXT: %[[S:.*]] = kiln.matmul %arg0, %arg1 {transpose_rhs}
// CHECK-NEXT: return %[[W]], %[[K]], %[[O]], %[[R]], %[[S]]
func.func @transposed_operands(%x: tensor<5x4xf32>, %w: tensor<6x4xf32>, %k: tensor<2x3x4xbf16>, %m: tensor<4x5xbf16>)
    -> (tensor<5x6xf32>, tensor<2x4x4xf32>, tensor<3x2x5xbf16>, tensor<4x6xf32>, tensor<5x6xf32>) {
  %wt = kiln.transpose %w {permutation = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %y = kiln.matmul %x, %wt : (tensor<5x4xf32>, tensor<4x6xf32>) -> tensor<5x6xf32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 2, 1>} : (tensor<2x3x4xbf16>) -> tensor<2x4x3xbf16>
  %s = kiln.matmul %kt, %kt {transpose_rhs, accumulate = f32} : (tensor<2x4x3xbf16>, tensor<2x4x3xbf16>) -> tensor<2x4x4xf32>
  %ko = kiln.transpose %k {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x4xbf16>) -> tensor<3x2x4xbf16>
  %o = kiln.matmul %ko, %m : (tensor<3x2x4xbf16>, tensor<4x5xbf16>) -> tensor<3x2x5xbf16>
  %wt2 = kiln.transpose %w {permutation = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %y2 = kiln.matmul %x, %wt2 : (tensor<5x4xf32>, tensor<4x6xf32>) -> tensor<5x6xf32>
  return %y, %s, %o, %wt2, %y2 : tensor<5x6xf32>, tensor<2x4x4xf32>, tensor<3x2x5xbf16>, tensor<4x6xf32>, tensor<5x6xf32>
}

// -----

// Tests that multiplying or dividing by one folds when the shape is kept,
// and that adding float zero does not (it would turn -0.0 into +0.0).
// CHECK-LABEL: func @identities
// CHECK-NOT: kiln.mul
// CHECK-NOT: kiln.div
// CHECK: %[[SUM:.*]] = kiln.add
// CHECK: return %{{.*}}, %{{.*}}, %[[SUM]], %{{.*}}
func.func @identities(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>) {
  %one = kiln.constant dense<1.0> : tensor<f32>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %izero = kiln.constant dense<0> : tensor<i32>
  %0 = kiln.mul %x, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = kiln.div %x, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = kiln.add %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = kiln.add %i, %izero : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>
}

// -----

// Tests that a multiplication by one that broadcasts is kept.
// CHECK-LABEL: func @broadcasting_identity
// CHECK: kiln.mul
func.func @broadcasting_identity(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  %one = kiln.constant dense<1.0> : tensor<2x4xf32>
  %0 = kiln.mul %x, %one : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that identity casts, broadcasts, slices, concats and reductions fold,
// and that a broadcast splat stays a splat constant.
// CHECK-LABEL: func @identity_data_movement
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[S:.*]] = kiln.constant dense<2.000000e+00> : tensor<3x4xf32>
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[S]]
func.func @identity_data_movement(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3x4xf32>) {
  %0 = kiln.cast %x : tensor<4x8xf32> to tensor<4x8xf32>
  %1 = kiln.broadcast %x : tensor<4x8xf32> to tensor<4x8xf32>
  %2 = kiln.slice %x {start = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x8xf32>
  %3 = kiln.concat %x {axis = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = kiln.reduce_sum %x {axes = array<i64>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = kiln.constant dense<2.0> : tensor<4xf32>
  %5 = kiln.broadcast %c : tensor<4xf32> to tensor<3x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3x4xf32>
}

// -----

// Tests that neg(neg(x)) and not(not(x)) fold (Involution).
// CHECK-LABEL: func @involutions
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[P:.*]]: tensor<4xi1>)
// CHECK-NEXT: return %[[X]], %[[P]]
func.func @involutions(%x: tensor<4xf32>, %p: tensor<4xi1>) -> (tensor<4xf32>, tensor<4xi1>) {
  %0 = kiln.neg %x : tensor<4xf32>
  %1 = kiln.neg %0 : tensor<4xf32>
  %2 = kiln.not %p : tensor<4xi1>
  %3 = kiln.not %2 : tensor<4xi1>
  return %1, %3 : tensor<4xf32>, tensor<4xi1>
}

// -----

// Tests that gathers at constant indices stepping evenly become slices: a
// scalar index counted from the end, a descending run, a 2-D index tensor
// (the reshape restores its dimensions); repeated indices, an index out
// of range and no indices stay gathers.
// CHECK-LABEL: func @gathers_at_constant_indices
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x4xf32>)
// CHECK-DAG: %[[ONES:.*]] = kiln.constant dense<1> : tensor<2xi64>
// CHECK-DAG: %[[FIVE:.*]] = kiln.constant dense<5> : tensor<i64>
// CHECK-DAG: %[[NONE:.*]] = kiln.constant dense<> : tensor<0xi64>
// CHECK: %[[LAST:.*]] = kiln.slice %[[X]] {start = array<i64: 0, 4, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x5x4xf32> to tensor<2x1x4xf32>
// CHECK-NEXT: %[[A:.*]] = kiln.reshape %[[LAST]] : tensor<2x1x4xf32> to tensor<2x4xf32>
// CHECK-NEXT: %[[B:.*]] = kiln.slice %[[X]] {start = array<i64: 0, 4, 0>, stride = array<i64: 1, -2, 1>} : tensor<2x5x4xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[PAIR:.*]] = kiln.slice %[[X]] {start = array<i64: 0, 1, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x5x4xf32> to tensor<2x2x4xf32>
// CHECK-NEXT: %[[C:.*]] = kiln.reshape %[[PAIR]] : tensor<2x2x4xf32> to tensor<2x1x2x4xf32>
// CHECK-NEXT: %[[D:.*]] = kiln.gather %[[X]], %[[FIVE]]
// CHECK-NEXT: %[[E:.*]] = kiln.gather %[[X]], %[[ONES]]
// CHECK-NEXT: %[[F:.*]] = kiln.gather %[[X]], %[[NONE]]
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]], %[[D]], %[[E]], %[[F]]
func.func @gathers_at_constant_indices(%x: tensor<2x5x4xf32>)
    -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x1x2x4xf32>, tensor<2x4xf32>, tensor<2x2x4xf32>,
        tensor<2x0x4xf32>) {
  %last = kiln.constant dense<-1> : tensor<i64>
  %a = kiln.gather %x, %last {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %down = kiln.constant dense<[4, 2, 0]> : tensor<3xi64>
  %b = kiln.gather %x, %down {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
  %pair = kiln.constant dense<[[1, 2]]> : tensor<1x2xi32>
  %c = kiln.gather %x, %pair {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<1x2xi32>) -> tensor<2x1x2x4xf32>
  %five = kiln.constant dense<5> : tensor<i64>
  %d = kiln.gather %x, %five {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %ones = kiln.constant dense<1> : tensor<2xi64>
  %e = kiln.gather %x, %ones {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<2xi64>) -> tensor<2x2x4xf32>
  %none = kiln.constant dense<> : tensor<0xi64>
  %f = kiln.gather %x, %none {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<0xi64>) -> tensor<2x0x4xf32>
  return %a, %b, %c, %d, %e, %f : tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x1x2x4xf32>, tensor<2x4xf32>,
      tensor<2x2x4xf32>, tensor<2x0x4xf32>
}
