// A cross-entropy and its gradient over the same logits, which fusion puts
// in one region: one block-per-row kernel computes each row's log-sum-exp
// once (the loss reads the logits widened to f32, the same values), stores
// the row's gradient, and adds the row's weight and loss into its block's
// sums, stored as partials; a second kernel combines them, its threads
// sharing them (the mean divides by the total weight). The logits are read once. The row's
// terms (the loss reads the label's logit) come before any thread writes
// the row, behind a barrier: a training step's gradient is written over
// its logits (Overwrites.cpp).

// RUN: kiln-compile %s --forward --target=cuda --print-cuda | FileCheck %s

func.func @main(%x: tensor<300x48xbf16>, %y: tensor<300xi64>, %s: tensor<f32>)
    -> (tensor<f32>, tensor<300x48xbf16>) {
  %a:2 = kiln.fusion %x, %y, %s : (tensor<300x48xbf16>, tensor<300xi64>, tensor<f32>)
      -> (tensor<f32>, tensor<300x48xbf16>) {
  ^bb0(%lx: tensor<300x48xbf16>, %ly: tensor<300xi64>, %ls: tensor<f32>):
    %wide = kiln.cast %lx : tensor<300x48xbf16> to tensor<300x48xf32>
    %loss = kiln.cross_entropy %wide, %ly reduction = mean {ignore_index = 3 : i64, num_classes = 45 : i64}
        : (tensor<300x48xf32>, tensor<300xi64>) -> tensor<f32>
    %grad = kiln.cross_entropy_grad %lx, %ly, %ls reduction = mean {ignore_index = 3 : i64, num_classes = 45 : i64}
        : (tensor<300x48xbf16>, tensor<300xi64>, tensor<f32>) -> tensor<300x48xbf16>
    kiln.yield %loss, %grad : tensor<f32>, tensor<300x48xbf16>
  }
  return %a#0, %a#1 : tensor<f32>, tensor<300x48xbf16>
}

// The row kernel: the row's log-sum-exp in one pass over it (its 16-byte
// pieces, which the loop over the row's gradient loads too, then the 5
// classes past the last whole piece element by element), and the total
// weight the gradient divides by, by the block; nothing else reduces.
// CHECK-LABEL: kiln_kernel_0(void *const *args)
// CHECK:       double *partials = (double *)args[4];
// CHECK:       MaxSum acc = MaxSum{(-1.0 / 0.0), 0.0};
// CHECK-NEXT:  acc = piece_reduce<idx, 8>(acc, threadIdx.x, 5, blockDim.x, LogSumExp(), [&](idx p) { load_pieces(o * 48 + p * 8); }, [&](idx k) {
// CHECK-NEXT:  chunked = false;
// CHECK-NEXT:  acc = strided_reduce<idx>(acc, 40 + threadIdx.x, 45, blockDim.x, LogSumExp(), [&](idx k) {
// CHECK-NEXT:  acc = block_reduce(acc, LogSumExp());
// CHECK-NEXT:  v{{[0-9]+}}_value = (acc.m == 1.0 / 0.0 || acc.m == -1.0 / 0.0 ? 0.0 / 0.0 : acc.m + log(acc.s));
// CHECK:       block_reduce(acc, Sum())
// CHECK-NOT:   block_reduce
// CHECK-NOT:   strided_reduce<idx>(acc, 0,
// The gradient's row is the block's (`i0`, its first element, which the row
// loop sets): no division per element, and its label and weight are the
// same for the whole row loop.
// CHECK:       const idx r = ((i0) / 48 * 1 + (i0) % 1), c = i - r * 48;
// CHECK:       auto sum_term0 = [&](idx k, idx o) -> double { return (double)([[WEIGHT:h[0-9]+]](k)); };
// CHECK:       auto sum_term1 = [&](idx k, idx o) -> double { return (double)([[LOSS:h[0-9]+]](k)); };
// CHECK:       double row_sum0 = 0.0;
// CHECK-NEXT:  double row_sum1 = 0.0;
// CHECK-NEXT:  for (idx row = blockIdx.x; row < 300; row += gridDim.x) {
// CHECK:         row_sum0 = Sum()(row_sum0, sum_term0(row, 0));
// CHECK-NEXT:    row_sum1 = Sum()(row_sum1, sum_term1(row, 0));
// CHECK-NEXT:    __syncthreads();
// CHECK:         copy16(out0 + c * 8, s0, 1);
// CHECK-NOT:     sum_term
// A block's partials go to its slot; a grid smaller than 300 blocks (the
// runtime's, on a GPU that holds fewer at once) leaves the other slots the
// sums' initial value.
// CHECK:       for (idx slot = blockIdx.x; slot < 300; slot += gridDim.x) {
// CHECK-NEXT:    const bool mine = slot == blockIdx.x;
// CHECK-NEXT:    if (threadIdx.x == 0)
// CHECK-NEXT:      partials[(0 * 300 + slot) * 1] = mine ? row_sum0 : 0.0;
// CHECK-NEXT:    if (threadIdx.x == 0)
// CHECK-NEXT:      partials[(1 * 300 + slot) * 1] = mine ? row_sum1 : 0.0;

// The combining kernel: the loss's sum over the total weight, its threads
// sharing the partials.
// CHECK-LABEL: kiln_kernel_1(void *const *args)
// CHECK:       acc = strided_reduce<idx>(acc, threadIdx.x, 300, blockDim.x, Sum(), [&](idx k) { return (double)(partials[0 * 300 + k]); });
// CHECK-NEXT:  acc = block_reduce(acc, Sum());
// CHECK:       acc = strided_reduce<idx>(acc, threadIdx.x, 300, blockDim.x, Sum(), [&](idx k) { return (double)(partials[1 * 300 + k]); });
// CHECK-NEXT:  acc = block_reduce(acc, Sum());
// CHECK-NEXT:  v{{[0-9]+}}_value = (double)(float)(acc / v{{[0-9]+}}(o));
// CHECK-NOT:   kiln_kernel_2
