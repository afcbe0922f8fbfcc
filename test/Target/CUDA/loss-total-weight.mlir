// A loss's total weight (the labels not ignored) is a sum over the rows
// that every block of the row kernel computes: the threads share the
// labels, and load none of the logits' 16-byte pieces for it, though the
// rows (16) are fewer than a row's elements (48), as GPT-2's 16384 are
// fewer than its 50304 classes.

// RUN: kiln-compile %s --forward --target=cuda --print-cuda | FileCheck %s

func.func @main(%x: tensor<16x48xbf16>, %y: tensor<16xi64>, %s: tensor<f32>)
    -> tensor<16x48xbf16> {
  %g = kiln.cross_entropy_grad %x, %y, %s reduction = mean {ignore_index = 3 : i64, num_classes = 45 : i64}
      : (tensor<16x48xbf16>, tensor<16xi64>, tensor<f32>) -> tensor<16x48xbf16>
  return %g : tensor<16x48xbf16>
}

// CHECK-LABEL: kiln_kernel_0(void *const *args)
// CHECK:       acc = piece_reduce<idx, 8>(acc, threadIdx.x, 5, blockDim.x, LogSumExp(),
// CHECK-NOT:   piece_reduce
// CHECK:       acc = strided_reduce<idx>(acc, threadIdx.x, 16, blockDim.x, Sum(), [&](idx k) { return (double)(h{{[0-9]+}}(k)); });
// CHECK-NEXT:  acc = block_reduce(acc, Sum());
