// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-ir-after-all 2>&1 | FileCheck %s
// RUN: kiln-opt --help | FileCheck %s --check-prefix=HELP
// Tests that kiln-opt follows mlir-opt's conventions.

// CHECK: IR Dump After Canonicalizer
// CHECK-LABEL: func @chain
// CHECK-NEXT: return %arg0
func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.reshape %x : tensor<4xf32> to tensor<2x2xf32>
  %1 = kiln.reshape %0 : tensor<2x2xf32> to tensor<4xf32>
  return %1 : tensor<4xf32>
}

// HELP: kiln optimizer driver
// HELP: --split-input-file
// HELP: --verify-diagnostics
