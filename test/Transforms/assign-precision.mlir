// RUN: kiln-opt %s -split-input-file --kiln-assign-precision | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-assign-precision="precision=fp32" | FileCheck %s --check-prefix=FP32
// RUN: not kiln-opt %s --kiln-assign-precision="precision=fp8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Tests that products read bf16 operands and accumulate in f32, that a value
// read by two products is cast once, and that the other ops stay f32.
// CHECK-LABEL: func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[W:.*]] = kiln.parameter "w"
// CHECK-DAG: %[[XB:.*]] = kiln.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-DAG: %[[WB:.*]] = kiln.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK: %[[H:.*]] = kiln.matmul %[[XB]], %[[WB]] {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
// CHECK: %[[T:.*]] = kiln.tanh %[[H]] : tensor<4x8xf32>
// CHECK: kiln.matmul %{{.*}}, %[[WB]] {accumulate = f32}
// CHECK: kiln.softmax %{{.*}} : tensor<4x8xf32>
// FP32-LABEL: func @mlp
// FP32-NOT: bf16
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = kiln.parameter "w" : tensor<8x8xf32>
  %h = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = kiln.tanh %h : tensor<4x8xf32>
  %o = kiln.matmul %t, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = kiln.softmax %o {axis = 1 : i64} : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Tests that widening and narrowing back folds away, while narrowing and
// widening back (which rounds) stays.
// FP32-LABEL: func @casts
// CHECK-LABEL: func @casts
// CHECK-SAME: (%[[B:.*]]: tensor<4xbf16>, %[[F:.*]]: tensor<4xf32>)
// CHECK: %[[N:.*]] = kiln.cast %[[F]] : tensor<4xf32> to tensor<4xbf16>
// CHECK: %[[W:.*]] = kiln.cast %[[N]] : tensor<4xbf16> to tensor<4xf32>
// CHECK: return %[[B]], %[[W]]
func.func @casts(%b: tensor<4xbf16>, %f: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>) {
  %0 = kiln.cast %b : tensor<4xbf16> to tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> to tensor<4xbf16>
  %2 = kiln.cast %f : tensor<4xf32> to tensor<4xbf16>
  %3 = kiln.cast %2 : tensor<4xbf16> to tensor<4xf32>
  return %1, %3 : tensor<4xbf16>, tensor<4xf32>
}
// UNKNOWN: error: kiln-assign-precision: unknown precision 'fp8' (fp32, tf32, bf16 or fp16)

// -----

// Tests that a product read only narrowed (here through a transpose, as
// attention reads its output's gradient) is stored narrow, rounded once
// from its f32 accumulation: the views follow and the cast goes. A product
// also read in f32 (the residual add) keeps its f32 result.
// CHECK-LABEL: func @read_narrow
// CHECK: %[[P:.*]] = kiln.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %[[P]] {{.*}} -> tensor<8x4xbf16>
// CHECK: %[[Q:.*]] = kiln.matmul %{{.*}}, %{{.*}} {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
// CHECK: kiln.cast %[[Q]]
// CHECK: kiln.add %[[Q]]
// CHECK: return %[[T]]
func.func @read_narrow(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<8x4xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>) {
  %p = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = kiln.transpose %p {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %c = kiln.cast %t : tensor<8x4xf32> to tensor<8x4xbf16>
  %q = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %d = kiln.cast %q : tensor<4x8xf32> to tensor<4x8xbf16>
  %s = kiln.add %q, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %c, %d, %s : tensor<8x4xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>
}

// -----

// Tests that a product reading a reshape of a value that already has a
// 16-bit copy (the backward weight gradient reading a forward activation
// flattened) reads the same reshape of that copy: the f32 value is rounded
// once and need not stay alive for a second copy.
// CHECK-LABEL: func @reshaped_copy
// CHECK: %[[X:.*]] = kiln.cast %arg0 : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK: kiln.matmul %[[X]]
// CHECK-NOT: kiln.reshape %arg0
// CHECK: %[[R:.*]] = kiln.reshape %[[X]] : tensor<2x4x8xbf16> to tensor<8x8xbf16>
// CHECK-NOT: kiln.reshape %arg0
// CHECK: kiln.matmul %[[R]], %{{.*}} {accumulate = f32, transpose_lhs}
func.func @reshaped_copy(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %dy: tensor<8x8xf32>) -> (tensor<2x4x8xf32>, tensor<8x8xf32>) {
  %y = kiln.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %flat = kiln.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  %dw = kiln.matmul %flat, %dy {transpose_lhs} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y, %dw : tensor<2x4x8xf32>, tensor<8x8xf32>
}
