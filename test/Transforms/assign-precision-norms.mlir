// RUN: kiln-opt %s --kiln-assign-precision="narrow-norms=true" | FileCheck %s
// RUN: kiln-opt %s --kiln-assign-precision="precision=fp16 narrow-norms=true" | FileCheck %s --check-prefix=FP16
// RUN: kiln-opt %s --kiln-assign-precision | FileCheck %s --check-prefix=WIDE
// RUN: kiln-opt %s --kiln-assign-precision="precision=tf32 narrow-norms=true" | FileCheck %s --check-prefix=WIDE

// Tests that narrow norms read their input cast once, the same copy their
// gradients read, write their output narrow (the product reads it without a
// cast, the tanh through a cast back), and keep statistics and gradients
// f32; without the option (or with tf32) norms stay f32.
// CHECK-LABEL: func @norms
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[DY:.*]]: tensor<4x8xf32>, %[[DZ:.*]]: tensor<4x8xf32>)
// CHECK: %[[XB:.*]] = kiln.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NOT: kiln.cast %[[X]]
// CHECK: %[[Y:.*]], %[[M:.*]], %[[R:.*]] = kiln.layer_norm %[[XB]] scale %{{.*}} bias %{{.*}} {{.*}} -> (tensor<4x8xbf16>, tensor<4x1xf32>, tensor<4x1xf32>)
// CHECK: kiln.matmul %[[Y]], %{{.*}} {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
// CHECK: %[[Z:.*]], %[[RMS:.*]] = kiln.rms_norm %[[XB]] {{.*}} -> (tensor<4x8xbf16>, tensor<4x1xf32>)
// CHECK: %[[ZW:.*]] = kiln.cast %[[Z]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: kiln.tanh %[[ZW]] : tensor<4x8xf32>
// CHECK: kiln.layer_norm_grad %[[XB]], %[[M]], %[[R]], %[[DY]] scale %{{.*}} {axis = 1 : i64} : (tensor<4x8xbf16>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: kiln.rms_norm_grad %[[XB]], %[[RMS]], %[[DZ]] {axis = 1 : i64} : (tensor<4x8xbf16>, tensor<4x1xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
// FP16-LABEL: func @norms
// FP16: kiln.layer_norm %{{.*}} -> (tensor<4x8xf16>, tensor<4x1xf32>, tensor<4x1xf32>)
// FP16: kiln.rms_norm %{{.*}} -> (tensor<4x8xf16>, tensor<4x1xf32>)
// WIDE-LABEL: func @norms
// WIDE: kiln.layer_norm %{{.*}} -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
// WIDE: kiln.rms_norm %{{.*}} -> (tensor<4x8xf32>, tensor<4x1xf32>)
// WIDE: kiln.layer_norm_grad %{{.*}} : (tensor<4x8xf32>,
func.func @norms(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %dz: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %g = kiln.parameter "g" : tensor<8xf32>
  %b = kiln.parameter "b" : tensor<8xf32>
  %w = kiln.parameter "w" : tensor<8x8xf32>
  %y, %mean, %rstd = kiln.layer_norm %x scale %g bias %b {axis = 1 : i64, epsilon = 1.0e-5 : f64}
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %h = kiln.matmul %y, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z, %rms = kiln.rms_norm %x {axis = 1 : i64, epsilon = 1.0e-6 : f64}
      : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>)
  %t = kiln.tanh %z : tensor<4x8xf32>
  %dx, %dg, %db = kiln.layer_norm_grad %x, %mean, %rstd, %dy scale %g {axis = 1 : i64}
      : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<8xf32>)
      -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dxr, %dgr = kiln.rms_norm_grad %x, %rms, %dz {axis = 1 : i64}
      : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return %h, %t, %dx, %dxr : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
