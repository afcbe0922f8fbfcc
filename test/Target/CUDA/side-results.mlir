// Results of two granularities in one kernel where one schedule computes
// the other's on the way. A block-per-row kernel stores one element per row
// (a layer norm's statistics beside its output), one thread per row, after
// the row's elements; a block per 32 columns stores the elements its column
// sums read (the bf16 copy of a gradient beside its bias gradient). What
// both read is then read by one kernel. Sums of columns over the rows of a
// block-per-row kernel (beside a softmax's rows) are added up by the row
// loop into each block's partials, which a second kernel combines.

// RUN: kiln-compile %s --forward --target=cuda --print-cuda | FileCheck %s

func.func @main(%x: tensor<32x32xf32>, %r: tensor<32x32xf32>, %g: tensor<32xf32>,
                %long: tensor<4096x40xf32>)
    -> (tensor<32x32xf32>, tensor<32x32xbf16>, tensor<32x1xf32>, tensor<32x1xf32>,
        tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32xf32>,
        tensor<32x32xbf16>, tensor<40xf32>, tensor<32xf32>, tensor<32x32xbf16>) {
  %n:4 = kiln.fusion %x, %r, %g : (tensor<32x32xf32>, tensor<32x32xf32>, tensor<32xf32>)
      -> (tensor<32x32xf32>, tensor<32x32xbf16>, tensor<32x1xf32>, tensor<32x1xf32>) {
  ^bb0(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>, %s: tensor<32xf32>):
    %sum = kiln.add %a, %b : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %y, %mean, %rstd = kiln.layer_norm %sum scale %s {axis = 1 : i64, epsilon = 1.0e-5 : f64}
        : (tensor<32x32xf32>, tensor<32xf32>) -> (tensor<32x32xf32>, tensor<32x1xf32>, tensor<32x1xf32>)
    %c = kiln.cast %y : tensor<32x32xf32> to tensor<32x32xbf16>
    kiln.yield %sum, %c, %mean, %rstd : tensor<32x32xf32>, tensor<32x32xbf16>, tensor<32x1xf32>, tensor<32x1xf32>
  }
  %m:2 = kiln.fusion %x, %r : (tensor<32x32xf32>, tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32xf32>) {
  ^bb0(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>):
    %d = kiln.mul %a, %b : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %p = kiln.softmax %d {axis = 1 : i64} : tensor<32x32xf32>
    %cs = kiln.reduce_sum %d {axes = array<i64: 0>} : (tensor<32x32xf32>) -> tensor<32xf32>
    kiln.yield %p, %cs : tensor<32x32xf32>, tensor<32xf32>
  }
  %b:3 = kiln.fusion %x, %r : (tensor<32x32xf32>, tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xbf16>) {
  ^bb0(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>):
    %grad = kiln.add %a, %b : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %bias = kiln.reduce_sum %grad {axes = array<i64: 0>} : (tensor<32x32xf32>) -> tensor<32xf32>
    %c = kiln.cast %grad : tensor<32x32xf32> to tensor<32x32xbf16>
    kiln.yield %grad, %bias, %c : tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xbf16>
  }
  %cs = kiln.reduce_sum %long {axes = array<i64: 0>} : (tensor<4096x40xf32>) -> tensor<40xf32>
  %s:2 = kiln.fusion %r : (tensor<32x32xf32>) -> (tensor<32xf32>, tensor<32x32xbf16>) {
  ^bb0(%a: tensor<32x32xf32>):
    %bias = kiln.reduce_sum %a {axes = array<i64: 0>} : (tensor<32x32xf32>) -> tensor<32xf32>
    %c = kiln.cast %a : tensor<32x32xf32> to tensor<32x32xbf16>
    kiln.yield %bias, %c : tensor<32xf32>, tensor<32x32xbf16>
  }
  return %n#0, %n#1, %n#2, %n#3, %m#0, %m#1, %b#0, %b#1, %b#2, %cs, %s#0, %s#1 : tensor<32x32xf32>, tensor<32x32xbf16>, tensor<32x1xf32>, tensor<32x1xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32x32xbf16>, tensor<40xf32>, tensor<32xf32>, tensor<32x32xbf16>
}

// One kernel for the residual add and the norm: the sum and the bf16
// output per element, then each row's mean and inverse deviation, which
// the block computed once for the row.
// CHECK-LABEL: kiln_kernel_0(void *const *args)
// CHECK:       float *out0 = (float *)args[3];
// CHECK-NEXT:  assume_global(out0);
// CHECK-NEXT:  u16 *out1 = (u16 *)args[4];
// CHECK-NEXT:  assume_global(out1);
// CHECK-NEXT:  float *side_out0 = (float *)args[5];
// CHECK-NEXT:  assume_global(side_out0);
// CHECK-NEXT:  float *side_out1 = (float *)args[6];
// CHECK-COUNT-2: block_reduce
// CHECK-NOT:   block_reduce
// CHECK:       for (idx row = blockIdx.x; row < 32; row += gridDim.x) {
// CHECK:         const double q0 = v{{[0-9]+}}(row);
// CHECK-NEXT:    if (threadIdx.x == 0)
// CHECK-NEXT:      side_out0[row] = (float)(q0);
// CHECK-NEXT:    const double q1 = v{{[0-9]+}}(row);
// CHECK-NEXT:    if (threadIdx.x == 0)
// CHECK-NEXT:      side_out1[row] = (float)(q1);

// The softmax: a block per row (32 blocks, a row each), whose threads add
// the column sums' terms of the elements they take into their own sums
// (4 columns of a 16-byte piece), stored as the block's partials; one
// block per 32 columns combines the 32 parts.
// CHECK-LABEL: kiln_kernel_1(void *const *args)
// CHECK-NOT:   side_out
// CHECK:       double column_sums0[4];
// CHECK-NEXT:  for (int h = 0; h < 4; ++h) column_sums0[h] = 0.0;
// CHECK-NEXT:  for (idx row = blockIdx.x; row < 32; row += gridDim.x) {
// CHECK:         column_sums0[[[AT:.*]]] = Sum()(column_sums0[[[AT]]], sum_term0(row, i - i0));
// CHECK:       for (idx slot = blockIdx.x; slot < 32; slot += gridDim.x) {
// CHECK:         partials[(0 * 32 + slot) * 32 + o] = mine ? column_sums0[h] : 0.0;
// CHECK-LABEL: kiln_kernel_2(void *const *args)
// CHECK:       acc = strided_reduce<idx>(acc, threadIdx.x / 32, 32, blockDim.x / 32, Sum(), [&](idx k) { return (double)(partials[(0 * 32 + k) * 32 + o]); });
// CHECK-NEXT:  acc = column_reduce(acc, Sum());

// The gradient, its bias gradient and its bf16 copy: one block per 32
// columns, whose column sum stores each element it reads, in both types;
// the sum adds the f32 value it stores rather than computing it again.
// CHECK-LABEL: kiln_kernel_3(void *const *args)
// CHECK:       float *out0 = (float *)args[2];
// CHECK-NEXT:  assume_global(out0);
// CHECK-NEXT:  float *side_out0 = (float *)args[3];
// CHECK-NEXT:  assume_global(side_out0);
// CHECK-NEXT:  u16 *side_out1 = (u16 *)args[4];
// CHECK:       for (idx k = threadIdx.x / 32; k < 32; k += blockDim.x / 32) {
// CHECK-NEXT:    const idx e = o + (0 + k * 32);
// CHECK-NEXT:    const float side0 = (float)(v{{[0-9]+}}(e));
// CHECK-NEXT:    const u16 side1 = f32_to_bf16((float)(v{{[0-9]+}}(e)));
// CHECK-NEXT:    acc = Sum()(acc, (double)((double)side0));
// CHECK-NEXT:    side_out0[e] = side0;
// CHECK-NEXT:    side_out1[e] = side1;
// CHECK-NEXT:  }
// CHECK-NEXT:  acc = column_reduce(acc, Sum());

// Sums of many rows but few columns: 64 blocks (two tiles of 32 columns,
// 32 parts of 128 rows each) store partials, which one block per tile
// combines, its warps sharing the parts.
// CHECK-LABEL: kiln_kernel_4(void *const *args)
// CHECK:       const idx part = blockIdx.x / 2;
// CHECK:       acc = strided_reduce<idx>(acc, part * chunk + threadIdx.x / 32, end, blockDim.x / 32, Sum(), [&](idx k) {
// CHECK:       partials[(0 * 32 + part) * 40 + o] = acc;
// CHECK:       const idx c0 = blockIdx.x % 2 * 32;
// CHECK-LABEL: kiln_kernel_5(void *const *args)
// CHECK:       acc = strided_reduce<idx>(acc, threadIdx.x / 32, 32, blockDim.x / 32, Sum(), [&](idx k) { return (double)(partials[(0 * 32 + k) * 40 + o]); });
// CHECK-NEXT:  acc = column_reduce(acc, Sum());
// CHECK:       for (idx c0 = blockIdx.x * 32; c0 < 40; c0 += gridDim.x * 32) {
// A column sum and a copy of what it sums, computed from nothing else in
// the region (a gradient that a kernel of its own produced): one kernel,
// which reads the gradient once.
// CHECK-LABEL: kiln_kernel_6(void *const *args)
// CHECK:       float *out0 = (float *)args[1];
// CHECK-NEXT:  assume_global(out0);
// CHECK-NEXT:  u16 *side_out0 = (u16 *)args[2];
// CHECK:       const u16 side0 = f32_to_bf16
// CHECK:       side_out0[e] = side0;
// CHECK-NOT:   kiln_kernel_7
