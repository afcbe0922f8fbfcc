// A block-per-row kernel that adds up many column sums in its row loop
// holds them in shared memory, each thread its own column of them, rather
// than in registers that would cost the kernel blocks per SM: a layer
// norm's scale and bias gradients, four columns each per thread (a 16-byte
// piece of f32), eight doubles. No thread reads another's column, so no
// barrier orders them.

// RUN: kiln-compile %s --forward --target=cuda --print-cuda | FileCheck %s

func.func @main(%x: tensor<64x32xf32>, %m: tensor<64x1xf32>, %r: tensor<64x1xf32>,
                %dy: tensor<64x32xf32>, %s: tensor<32xf32>)
    -> (tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>) {
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 1 : i64}
      : (tensor<64x32xf32>, tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x32xf32>, tensor<32xf32>)
      -> (tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>)
  return %dx, %ds, %db : tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>
}

// CHECK-LABEL: __launch_bounds__(32) kiln_kernel_0(void *const *args)
// CHECK:       __shared__ double column_sums0[4][32];
// CHECK-NEXT:  for (int h = 0; h < 4; ++h) column_sums0[h][threadIdx.x] = 0.0;
// CHECK-NEXT:  __shared__ double column_sums1[4][32];
// CHECK-NEXT:  for (int h = 0; h < 4; ++h) column_sums1[h][threadIdx.x] = 0.0;
// CHECK:       for (idx row = blockIdx.x; row < 64; row += gridDim.x) {
// CHECK-NOT:   __syncthreads
// CHECK:         column_sums0[[[AT:.*]]][threadIdx.x] = Sum()(column_sums0[[[AT]]][threadIdx.x], sum_term0(row, i - i0));
// CHECK-NEXT:    column_sums1[[[AT]]][threadIdx.x] = Sum()(column_sums1[[[AT]]][threadIdx.x], sum_term1(row, i - i0));
// CHECK:       for (idx slot = blockIdx.x; slot < 64; slot += gridDim.x) {
// CHECK:         partials[(0 * 64 + slot) * 32 + o] = mine ? column_sums0[h][threadIdx.x] : 0.0;
// CHECK-NEXT:    partials[(1 * 64 + slot) * 32 + o] = mine ? column_sums1[h][threadIdx.x] : 0.0;

