// RUN: kiln-opt %s -split-input-file --kiln-recompute | FileCheck %s --check-prefix=CHEAP
// RUN: kiln-opt %s -split-input-file --kiln-recompute=products=true | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-recompute="products=true max-products=0" | FileCheck %s --check-prefix=CHEAP

// A product read right away and again 20 ops later, whose operands stay
// live (the bf16 weight %wc is read late too, by the transposed product of
// the backward pass): only with products=true is the product recomputed
// before its late read, so that it dies after its early one. The weight's
// cast, itself recomputed for its late read, still serves the product's
// recomputation (readers are recomputed before what they read).
// CHEAP-LABEL: func @product
// CHEAP-COUNT-2: kiln.matmul
// CHEAP-NOT: kiln.matmul
// CHECK-LABEL: func @product
// CHECK: %[[W:.*]] = kiln.cast %arg1
// CHECK: %[[P:.*]] = kiln.matmul %arg0, %[[W]]
// CHECK: kiln.neg %[[P]]
// CHECK: %[[W2:.*]] = kiln.cast %arg1
// CHECK-NEXT: %[[AGAIN:.*]] = kiln.matmul %arg0, %[[W2]]
// CHECK-NEXT: kiln.add %[[AGAIN]], %[[AGAIN]]
// CHECK-NEXT: kiln.matmul %{{.*}}, %[[W2]] {accumulate = f32, transpose_rhs}
func.func @product(%x: tensor<4x4xbf16>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %wc = kiln.cast %w : tensor<4x4xf32> to tensor<4x4xbf16>
  %p = kiln.matmul %x, %wc : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %early = kiln.neg %p : tensor<4x4xbf16>
  %e = kiln.cast %early : tensor<4x4xbf16> to tensor<4x4xf32>
  %f0 = kiln.exp %e : tensor<4x4xf32>
  %f1 = kiln.exp %f0 : tensor<4x4xf32>
  %f2 = kiln.exp %f1 : tensor<4x4xf32>
  %f3 = kiln.exp %f2 : tensor<4x4xf32>
  %f4 = kiln.exp %f3 : tensor<4x4xf32>
  %f5 = kiln.exp %f4 : tensor<4x4xf32>
  %f6 = kiln.exp %f5 : tensor<4x4xf32>
  %f7 = kiln.exp %f6 : tensor<4x4xf32>
  %f8 = kiln.exp %f7 : tensor<4x4xf32>
  %f9 = kiln.exp %f8 : tensor<4x4xf32>
  %f10 = kiln.exp %f9 : tensor<4x4xf32>
  %f11 = kiln.exp %f10 : tensor<4x4xf32>
  %f12 = kiln.exp %f11 : tensor<4x4xf32>
  %f13 = kiln.exp %f12 : tensor<4x4xf32>
  %f14 = kiln.exp %f13 : tensor<4x4xf32>
  %f15 = kiln.exp %f14 : tensor<4x4xf32>
  %f16 = kiln.exp %f15 : tensor<4x4xf32>
  %f17 = kiln.exp %f16 : tensor<4x4xf32>
  %f18 = kiln.exp %f17 : tensor<4x4xf32>
  %late = kiln.add %p, %p : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %back = kiln.matmul %late, %wc {accumulate = f32, transpose_rhs} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xf32>
  return %f18, %back, %w : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A product fusion (the bias epilogue in bf16) read through a view, early
// and late, whose 16-bit bias copy only it reads: the copy is recomputed
// with it (its operand, the parameter, is live throughout), and the view
// with it for the late read; the early view stays.
// CHEAP-LABEL: func @through_view
// CHEAP-COUNT-1: kiln.matmul
// CHEAP-NOT: kiln.matmul
// CHECK-LABEL: func @through_view
// CHECK: %[[B:.*]] = kiln.cast %arg2
// CHECK: %[[P:.*]] = kiln.fusion %arg0, %arg1, %[[B]]
// CHECK: %[[V:.*]] = kiln.reshape %[[P]]
// CHECK: kiln.neg %[[V]]
// CHECK: %[[B2:.*]] = kiln.cast %arg2
// CHECK-NEXT: %[[P2:.*]] = kiln.fusion %arg0, %arg1, %[[B2]]
// CHECK: %[[V2:.*]] = kiln.reshape %[[P2]]
// CHECK-NEXT: kiln.add %[[V2]], %[[V2]]
func.func @through_view(%x: tensor<4x4xbf16>, %w: tensor<4x4xbf16>, %b: tensor<4xf32>) -> (tensor<2x8xf32>, tensor<2x8xbf16>) {
  %bc = kiln.cast %b : tensor<4xf32> to tensor<4xbf16>
  %p = kiln.fusion %x, %w, %bc : (tensor<4x4xbf16>, tensor<4x4xbf16>, tensor<4xbf16>) -> tensor<4x4xbf16> {
  ^bb0(%a0: tensor<4x4xbf16>, %a1: tensor<4x4xbf16>, %a2: tensor<4xbf16>):
    %m = kiln.matmul %a0, %a1 {accumulate = f32} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xf32>
    %bw = kiln.cast %a2 : tensor<4xbf16> to tensor<4xf32>
    %s = kiln.add %m, %bw : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    %r = kiln.cast %s : tensor<4x4xf32> to tensor<4x4xbf16>
    kiln.yield %r : tensor<4x4xbf16>
  }
  %v = kiln.reshape %p : tensor<4x4xbf16> to tensor<2x8xbf16>
  %early = kiln.neg %v : tensor<2x8xbf16>
  %e = kiln.cast %early : tensor<2x8xbf16> to tensor<2x8xf32>
  %f0 = kiln.exp %e : tensor<2x8xf32>
  %f1 = kiln.exp %f0 : tensor<2x8xf32>
  %f2 = kiln.exp %f1 : tensor<2x8xf32>
  %f3 = kiln.exp %f2 : tensor<2x8xf32>
  %f4 = kiln.exp %f3 : tensor<2x8xf32>
  %f5 = kiln.exp %f4 : tensor<2x8xf32>
  %f6 = kiln.exp %f5 : tensor<2x8xf32>
  %f7 = kiln.exp %f6 : tensor<2x8xf32>
  %f8 = kiln.exp %f7 : tensor<2x8xf32>
  %f9 = kiln.exp %f8 : tensor<2x8xf32>
  %f10 = kiln.exp %f9 : tensor<2x8xf32>
  %f11 = kiln.exp %f10 : tensor<2x8xf32>
  %f12 = kiln.exp %f11 : tensor<2x8xf32>
  %f13 = kiln.exp %f12 : tensor<2x8xf32>
  %f14 = kiln.exp %f13 : tensor<2x8xf32>
  %f15 = kiln.exp %f14 : tensor<2x8xf32>
  %f16 = kiln.exp %f15 : tensor<2x8xf32>
  %f17 = kiln.exp %f16 : tensor<2x8xf32>
  %f18 = kiln.exp %f17 : tensor<2x8xf32>
  %late = kiln.add %v, %v : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  return %f18, %late : tensor<2x8xf32>, tensor<2x8xbf16>
}
