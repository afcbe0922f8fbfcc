// RUN: kiln-opt %s -split-input-file --kiln-recompute | FileCheck %s

// GELU's output is read right away and again 20 ops later, when its input
// %x is still live (read at the end): the late read gets its own GELU,
// and the first one's result dies after its early read.
// CHECK-LABEL: func @recomputed
// CHECK: %[[G:.*]] = kiln.gelu %arg0
// CHECK: kiln.mul %[[G]], %[[G]]
// CHECK: %[[AGAIN:.*]] = kiln.gelu %arg0
// CHECK-NEXT: kiln.add %[[AGAIN]], %arg0
func.func @recomputed(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %g = kiln.gelu %x approximation = none : tensor<4xf32>
  %early = kiln.mul %g, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %f0 = kiln.neg %early : tensor<4xf32>
  %f1 = kiln.neg %f0 : tensor<4xf32>
  %f2 = kiln.neg %f1 : tensor<4xf32>
  %f3 = kiln.neg %f2 : tensor<4xf32>
  %f4 = kiln.neg %f3 : tensor<4xf32>
  %f5 = kiln.neg %f4 : tensor<4xf32>
  %f6 = kiln.neg %f5 : tensor<4xf32>
  %f7 = kiln.neg %f6 : tensor<4xf32>
  %f8 = kiln.neg %f7 : tensor<4xf32>
  %f9 = kiln.neg %f8 : tensor<4xf32>
  %f10 = kiln.neg %f9 : tensor<4xf32>
  %f11 = kiln.neg %f10 : tensor<4xf32>
  %f12 = kiln.neg %f11 : tensor<4xf32>
  %f13 = kiln.neg %f12 : tensor<4xf32>
  %f14 = kiln.neg %f13 : tensor<4xf32>
  %f15 = kiln.neg %f14 : tensor<4xf32>
  %f16 = kiln.neg %f15 : tensor<4xf32>
  %f17 = kiln.neg %f16 : tensor<4xf32>
  %f18 = kiln.neg %f17 : tensor<4xf32>
  %f19 = kiln.neg %f18 : tensor<4xf32>
  %late = kiln.add %g, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %f19, %late : tensor<4xf32>, tensor<4xf32>
}

// -----

// Not recomputed: the input %h dies early, and so does %a it is computed
// from (recomputing would keep one of them alive instead), and %n has no
// early read to keep.
// CHECK-LABEL: func @kept
// CHECK-COUNT-1: kiln.gelu
// CHECK-COUNT-1: kiln.tanh
// CHECK-NOT: kiln.gelu
func.func @kept(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = kiln.sqrt %x : tensor<4xf32>
  %h = kiln.exp %a : tensor<4xf32>
  %g = kiln.gelu %h approximation = none : tensor<4xf32>
  %n = kiln.tanh %x : tensor<4xf32>
  %early = kiln.mul %g, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %f0 = kiln.neg %early : tensor<4xf32>
  %f1 = kiln.neg %f0 : tensor<4xf32>
  %f2 = kiln.neg %f1 : tensor<4xf32>
  %f3 = kiln.neg %f2 : tensor<4xf32>
  %f4 = kiln.neg %f3 : tensor<4xf32>
  %f5 = kiln.neg %f4 : tensor<4xf32>
  %f6 = kiln.neg %f5 : tensor<4xf32>
  %f7 = kiln.neg %f6 : tensor<4xf32>
  %f8 = kiln.neg %f7 : tensor<4xf32>
  %f9 = kiln.neg %f8 : tensor<4xf32>
  %f10 = kiln.neg %f9 : tensor<4xf32>
  %f11 = kiln.neg %f10 : tensor<4xf32>
  %f12 = kiln.neg %f11 : tensor<4xf32>
  %f13 = kiln.neg %f12 : tensor<4xf32>
  %f14 = kiln.neg %f13 : tensor<4xf32>
  %f15 = kiln.neg %f14 : tensor<4xf32>
  %f16 = kiln.neg %f15 : tensor<4xf32>
  %f17 = kiln.neg %f16 : tensor<4xf32>
  %f18 = kiln.neg %f17 : tensor<4xf32>
  %f19 = kiln.neg %f18 : tensor<4xf32>
  %late = kiln.add %g, %n : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %f19, %late, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Data movement is as cheap to recompute: a transpose read right away and
// again 20 ops later, whose input is still live there.
// CHECK-LABEL: func @transposed
// CHECK: %[[T:.*]] = kiln.transpose %arg0
// CHECK: kiln.neg %[[T]]
// CHECK: %[[AGAIN:.*]] = kiln.transpose %arg0
// CHECK-NEXT: kiln.add %[[AGAIN]], %[[AGAIN]]
func.func @transposed(%x: tensor<2x4xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<2x4xf32>) {
  %t = kiln.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %f0 = kiln.neg %t : tensor<4x2xf32>
  %f1 = kiln.neg %f0 : tensor<4x2xf32>
  %f2 = kiln.neg %f1 : tensor<4x2xf32>
  %f3 = kiln.neg %f2 : tensor<4x2xf32>
  %f4 = kiln.neg %f3 : tensor<4x2xf32>
  %f5 = kiln.neg %f4 : tensor<4x2xf32>
  %f6 = kiln.neg %f5 : tensor<4x2xf32>
  %f7 = kiln.neg %f6 : tensor<4x2xf32>
  %f8 = kiln.neg %f7 : tensor<4x2xf32>
  %f9 = kiln.neg %f8 : tensor<4x2xf32>
  %f10 = kiln.neg %f9 : tensor<4x2xf32>
  %f11 = kiln.neg %f10 : tensor<4x2xf32>
  %f12 = kiln.neg %f11 : tensor<4x2xf32>
  %f13 = kiln.neg %f12 : tensor<4x2xf32>
  %f14 = kiln.neg %f13 : tensor<4x2xf32>
  %f15 = kiln.neg %f14 : tensor<4x2xf32>
  %f16 = kiln.neg %f15 : tensor<4x2xf32>
  %f17 = kiln.neg %f16 : tensor<4x2xf32>
  %f18 = kiln.neg %f17 : tensor<4x2xf32>
  %f19 = kiln.neg %f18 : tensor<4x2xf32>
  %late = kiln.add %t, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %keep = kiln.neg %x : tensor<2x4xf32>
  return %f19, %late, %keep : tensor<4x2xf32>, tensor<4x2xf32>, tensor<2x4xf32>
}

// -----

// GELU's output is read again 4 ops after its first read, but across the
// function's peak (where the large temporaries %big and %huge live
// together): kept, it would weigh on the peak, so the late read gets its
// own GELU after it. %y, read again as soon but before the peak, is kept.
// CHECK-LABEL: func @across_the_peak
// CHECK: %[[G:.*]] = kiln.gelu %arg0
// CHECK-NEXT: %[[Y:.*]] = kiln.exp %arg0
// CHECK-NEXT: kiln.mul %[[G]], %[[Y]]
// CHECK-NEXT: kiln.add %[[Y]], %arg0
// CHECK: kiln.reduce_sum
// CHECK-NEXT: %[[AGAIN:.*]] = kiln.gelu %arg0
// CHECK-NEXT: kiln.add %[[AGAIN]], %arg0
// CHECK-NOT: kiln.exp
func.func @across_the_peak(%x: tensor<4xf32>, %w: tensor<4x4096xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) {
  %g = kiln.gelu %x approximation = none : tensor<4xf32>
  %y = kiln.exp %x : tensor<4xf32>
  %early = kiln.mul %g, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %again = kiln.add %y, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %big = kiln.neg %w : tensor<4x4096xf32>
  %huge = kiln.mul %big, %w : (tensor<4x4096xf32>, tensor<4x4096xf32>) -> tensor<4x4096xf32>
  %s = kiln.reduce_sum %huge {axes = array<i64: 0, 1>} : (tensor<4x4096xf32>) -> tensor<f32>
  %late = kiln.add %g, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %early, %again, %s, %late : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>
}
