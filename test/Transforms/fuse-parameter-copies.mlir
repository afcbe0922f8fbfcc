// RUN: kiln-opt %s -split-input-file --kiln-fuse-parameter-copies | FileCheck %s
// RUN: kiln-opt %s --kiln-fuse-parameter-copies --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// Profiles name the fusion for what it does.
// LOC: loc("parameter copies")

// Tests that the first 16-bit copies of parameters become one fusion before
// the first reader of any, copies of one type next to each other (the CUDA
// target then launches each type once), while a later copy of a parameter
// (recomputed for the backward pass) and a parameter declared after the
// first reader stay where they are.
// CHECK-LABEL: func @copies
// CHECK: %[[W1:.*]] = kiln.parameter "w1"
// CHECK: %[[B1:.*]] = kiln.parameter "b1"
// CHECK: %[[W2:.*]] = kiln.parameter "w2"
// CHECK: %[[B2:.*]] = kiln.parameter "b2"
// CHECK: %[[C:.*]]:4 = kiln.fusion %[[W1]], %[[W2]], %[[B1]], %[[B2]] : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<8x8xf32>, %[[A1:.*]]: tensor<8x8xf32>, %[[A2:.*]]: tensor<8xf32>, %[[A3:.*]]: tensor<8xf32>):
// CHECK-NEXT: kiln.cast %[[A0]]
// CHECK-NEXT: kiln.cast %[[A1]]
// CHECK-NEXT: kiln.cast %[[A2]]
// CHECK-NEXT: kiln.cast %[[A3]]
// CHECK: kiln.matmul %arg0, %[[C]]#0
// CHECK: kiln.matmul %{{.*}}, %[[C]]#1
// CHECK: %[[LATE:.*]] = kiln.cast %[[W1]]
// CHECK-NEXT: kiln.matmul %arg0, %[[LATE]]
// CHECK: %[[S:.*]] = kiln.parameter "s"
// CHECK-NEXT: kiln.cast %[[S]]
func.func @copies(%x: tensor<8x8xbf16>) -> (tensor<8x8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) {
  %w1 = kiln.parameter "w1" : tensor<8x8xf32>
  %b1 = kiln.parameter "b1" : tensor<8xf32>
  %w2 = kiln.parameter "w2" : tensor<8x8xf32>
  %b2 = kiln.parameter "b2" : tensor<8xf32>
  %c1 = kiln.cast %w1 : tensor<8x8xf32> to tensor<8x8xbf16>
  %cb1 = kiln.cast %b1 : tensor<8xf32> to tensor<8xbf16>
  %p1 = kiln.matmul %x, %c1 : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %c2 = kiln.cast %w2 : tensor<8x8xf32> to tensor<8x8xbf16>
  %cb2 = kiln.cast %b2 : tensor<8xf32> to tensor<8xbf16>
  %p2 = kiln.matmul %p1, %c2 : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %again = kiln.cast %w1 : tensor<8x8xf32> to tensor<8x8xbf16>
  %p3 = kiln.matmul %x, %again : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %s = kiln.parameter "s" : tensor<8xf32>
  %cs = kiln.cast %s : tensor<8xf32> to tensor<8xbf16>
  return %p2, %cb1, %cb2, %p3, %cs : tensor<8x8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>
}

// -----

// Tests that copies nothing reads are left alone.
// CHECK-LABEL: func @unread
// CHECK-NOT: kiln.fusion
func.func @unread() {
  %w = kiln.parameter "w" : tensor<8xf32>
  %b = kiln.parameter "b" : tensor<8xf32>
  %cw = kiln.cast %w : tensor<8xf32> to tensor<8xbf16>
  %cb = kiln.cast %b : tensor<8xf32> to tensor<8xbf16>
  return
}

// -----

// Merged projections' weights, concatenated, are copied by the same
// fusion: the concatenation moves in with its copy.
// CHECK-LABEL: func @stacked_weights
// CHECK: %[[WQ:.*]] = kiln.parameter "q"
// CHECK: %[[WK:.*]] = kiln.parameter "k"
// CHECK: %[[W:.*]] = kiln.parameter "w"
// CHECK: %[[C:.*]]:2 = kiln.fusion %[[WQ]], %[[WK]], %[[W]] : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xbf16>, tensor<8x8xbf16>)
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<4x8xf32>, %[[A1:.*]]: tensor<4x8xf32>, %[[A2:.*]]: tensor<8x8xf32>):
// CHECK-NEXT: %[[S:.*]] = kiln.concat %[[A0]], %[[A1]] {axis = 0 : i64}
// CHECK-NEXT: kiln.cast %[[S]]
// CHECK-NEXT: kiln.cast %[[A2]]
// CHECK: kiln.matmul %arg0, %[[C]]#0 {transpose_rhs}
// CHECK: kiln.matmul %{{.*}}, %[[C]]#1
func.func @stacked_weights(%x: tensor<8x8xbf16>) -> tensor<8x8xbf16> {
  %wq = kiln.parameter "q" : tensor<4x8xf32>
  %wk = kiln.parameter "k" : tensor<4x8xf32>
  %w = kiln.parameter "w" : tensor<8x8xf32>
  %s = kiln.concat %wq, %wk {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %cs = kiln.cast %s : tensor<8x8xf32> to tensor<8x8xbf16>
  %p = kiln.matmul %x, %cs {transpose_rhs} : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %cw = kiln.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %y = kiln.matmul %p, %cw : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  return %y : tensor<8x8xbf16>
}
