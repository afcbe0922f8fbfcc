// RUN: kiln-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Tests that a fusion prints and parses back.
// CHECK-LABEL: func @bias_gelu
// CHECK: kiln.fusion %arg0, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK: kiln.yield %{{.*}} : tensor<4x8xf32>
func.func @bias_gelu(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = kiln.fusion %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %s = kiln.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %g = kiln.gelu %s approximation = none : tensor<4x8xf32>
    kiln.yield %g : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @wrong_arguments(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body arguments must have the types of the inputs}}
  %r = kiln.fusion %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<8xf32>):
    kiln.yield %a : tensor<8xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @wrong_yield(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{yields 1 values whose types differ from the results}}
  %r = kiln.fusion %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = kiln.cast %a : tensor<4xf32> to tensor<4xbf16>
    kiln.yield %c : tensor<4xbf16>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @captures(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %r = kiln.fusion : () -> tensor<4xf32> {
    // expected-error @+1 {{using value defined outside the region}}
    %e = kiln.exp %x : tensor<4xf32>
    kiln.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
