// Sums of squares over tensors of 2^14 elements, as a gradient norm takes
// them (each parameter's a result of one fusion): each is split into 1024
// parts, which the blocks of a grid of any size take in turn (the chunks
// follow the parts, so the partials do not depend on the grid), and whose
// partials a second kernel combines. Equal sums (of tensors of one
// shape) write their partials to consecutive parts of the partials area,
// so that one launch computes all their partials and one combines them;
// without batched launches, each sum takes two.

// RUN: kiln-compile %s --forward --target=cuda -o %t.kiln | FileCheck %s
// RUN: kiln-compile %s --forward --target=cuda --batch-launches=false -o %t.kiln \
// RUN:   | FileCheck %s --check-prefix=APART
// CHECK: 2 kernel launches (and 0 where cuBLASLt cannot sum a bias gradient) of 2 distinct kernels
// APART: 6 kernel launches (and 0 where cuBLASLt cannot sum a bias gradient) of 2 distinct kernels

// Each of the three sums is a row of the batched launch's grid
// (blockIdx.y), which reads that sum's argument table: each writes its
// partials at its own offset, which its combining kernel reads.
// RUN: kiln-compile %s --forward --target=cuda --print-cuda | FileCheck %s --check-prefix=SOURCE
// SOURCE-LABEL: kiln_kernel_0(void *const *tables)
// SOURCE-NEXT:  void *const *args = tables + (i64)blockIdx.y * 3;
// SOURCE:         const idx chunk = (16384 + 1024 - 1) / 1024;
// SOURCE:         partials[0 * 1024 + part] = acc;
// SOURCE:       for (part = blockIdx.x; part < 1024; part += gridDim.x) {
// SOURCE-LABEL: kiln_kernel_1(void *const *tables)
// SOURCE-NEXT:  void *const *args = tables + (i64)blockIdx.y * 3;
// SOURCE:         partials[0 * 1024 + k]

func.func @main(%x: tensor<128x128xf32>, %y: tensor<128x128xf32>, %z: tensor<128x128xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %sums:3 = kiln.fusion %x, %y, %z
      : (tensor<128x128xf32>, tensor<128x128xf32>, tensor<128x128xf32>)
      -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  ^bb0(%a: tensor<128x128xf32>, %b: tensor<128x128xf32>, %c: tensor<128x128xf32>):
    %a2 = kiln.mul %a, %a : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
    %b2 = kiln.mul %b, %b : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
    %c2 = kiln.mul %c, %c : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
    %sa = kiln.reduce_sum %a2 {axes = array<i64: 0, 1>} : (tensor<128x128xf32>) -> tensor<f32>
    %sb = kiln.reduce_sum %b2 {axes = array<i64: 0, 1>} : (tensor<128x128xf32>) -> tensor<f32>
    %sc = kiln.reduce_sum %c2 {axes = array<i64: 0, 1>} : (tensor<128x128xf32>) -> tensor<f32>
    kiln.yield %sa, %sb, %sc : tensor<f32>, tensor<f32>, tensor<f32>
  }
  return %sums#0, %sums#1, %sums#2 : tensor<f32>, tensor<f32>, tensor<f32>
}
