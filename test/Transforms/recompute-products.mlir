// RUN: kiln-opt %s --kiln-recompute | FileCheck %s --check-prefix=CHEAP
// RUN: kiln-opt %s --kiln-recompute=products=true | FileCheck %s

// A product read right away and again 20 ops later, whose operands stay
// live (the bf16 weight %wc is read late too, by the transposed product of
// the backward pass): only with products=true is the product recomputed
// before its late read, so that it dies after its early one. The weight's
// cast, itself recomputed for its late read, still serves the product's
// recomputation (readers are recomputed before what they read).
// CHEAP-COUNT-2: kiln.matmul
// CHEAP-NOT: kiln.matmul
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
