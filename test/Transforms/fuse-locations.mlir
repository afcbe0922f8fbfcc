// Tests that a fusion takes the location of its reduction, the op whose
// kernel it is (profiles and errors name the norm, not the cast after it),
// and otherwise that of its last op.
// RUN: kiln-opt %s --kiln-fuse --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s

// CHECK-LABEL: func @norm_then_cast
// CHECK: kiln.yield {{.*}} loc("norm")
// CHECK-NEXT: } loc("norm")
func.func @norm_then_cast(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x1xf32>) {
  %s = kiln.add %x, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("add")
  %y, %mean, %rstd = kiln.layer_norm %s {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>) loc("norm")
  %c = kiln.cast %y : tensor<4x8xf32> to tensor<4x8xbf16> loc("cast")
  return %s, %c, %rstd : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x1xf32>
}

// CHECK-LABEL: func @chain
// CHECK: } loc("last")
func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = kiln.exp %x : tensor<4x8xf32> loc("first")
  %n = kiln.neg %e : tensor<4x8xf32> loc("last")
  return %n : tensor<4x8xf32>
}
