// Attention's gradient on tensor cores, its query gradient two ways. With
// --attention-query-gradient=atomic the key/value kernel adds dQ = dS K to
// f32 sums with atomics (FlashAttention-2's five products): a kernel before
// it stores the rows' deltas and clears the sums, one after it stores them
// as dq. At head dimension 64 the key/value kernel is held to three blocks
// per SM (either way), at 128 it is not (it would spill 1.5 KB).
// RUN: kiln-compile %s --forward --target=cuda --print-cuda \
// RUN:   --attention-query-gradient=atomic | FileCheck %s

// CHECK:     __launch_bounds__(128) kiln_kernel_0(
// CHECK:       deltaScratch[row] = d;
// CHECK:       const idx end = (first + rowsPerBlock < 2 * 128 ? first + rowsPerBlock : 2 * 128) * 64;
// CHECK:       dqSums[e] = 0.0f;
// CHECK:     __launch_bounds__(128, 3) kiln_kernel_1(
// CHECK:       atomic_add_pair(&dqSums[(bh * 128 + i) * 64 + column]
// CHECK:     __launch_bounds__(128) kiln_kernel_2(
// CHECK:       dq[dqAt(row / 128, 0) + row % 128 * dqStep + e % 64] =
// CHECK:     __launch_bounds__(128) kiln_kernel_3(
// CHECK:       const idx end = (first + rowsPerBlock < 2 * 48 ? first + rowsPerBlock : 2 * 48) * 128;
// CHECK:     __launch_bounds__(128) kiln_kernel_4(
// CHECK:       atomic_add_pair(&dqSums[(bh * 48 + i) * 128 + column]
// CHECK:     __launch_bounds__(128) kiln_kernel_5(
// CHECK-NOT: kiln_kernel_6

// With --attention-query-gradient=recompute a query kernel recomputes the
// scores for dQ and stores the deltas, the key/value kernel reads them and
// keeps no dS^T in shared memory; no sums cleared or stored. So does the
// default (auto) here: nothing else is live while these gradients run,
// so storing dS would grow the arena by more than 1% (49 KiB of 417).
// RUN: kiln-compile %s --forward --target=cuda --print-cuda \
// RUN:   | FileCheck %s --check-prefix=RECOMPUTE
// RUN: kiln-compile %s --forward --target=cuda --print-cuda \
// RUN:   --attention-query-gradient=recompute | FileCheck %s --check-prefix=RECOMPUTE
// RECOMPUTE:     __launch_bounds__(128) kiln_kernel_0(
// RECOMPUTE:       deltaScratch[bh * 128 + row[m][r]] = deltas[m][r];
// RECOMPUTE:       storeRows(dq + dqAt(bh, 0)
// RECOMPUTE:     __launch_bounds__(128, 3) kiln_kernel_1(
// RECOMPUTE:       __shared__ u16 dSs[2][false ?
// RECOMPUTE:     __launch_bounds__(128) kiln_kernel_2(
// RECOMPUTE:       storeRows(dq + dqAt(bh, 0)
// RECOMPUTE:     __launch_bounds__(128) kiln_kernel_3(
// RECOMPUTE-NOT: kiln_kernel_4
// RECOMPUTE-NOT: (dqSums[e])

// With --attention-query-gradient=stored a kernel stores the deltas
// (clearing no sums), the key/value kernel stores dS^T in blocks of 64
// keys by 64 queries after them, one for each pair of tiles the causal
// mask leaves (3 of 4 per head at 128 rows), and a query kernel multiplies
// them by K. At head dimension 128 the key/value kernel's query tiles are
// 32 rows, half a block's columns, and the query kernel streams half a
// block's key rows at a time, as its key tiles of 32.
// RUN: kiln-compile %s --forward --target=cuda --print-cuda \
// RUN:   --attention-query-gradient=stored | FileCheck %s --check-prefix=STORED
// STORED:     __launch_bounds__(128) kiln_kernel_0(
// STORED:       deltaScratch[row] = d;
// STORED:       for (idx e = first * 64 + threadIdx.x; false && e < end; e += blockDim.x)
// STORED:     __launch_bounds__(128, 3) kiln_kernel_1(
// STORED:       return (u16 *)(deltaScratch + 256) + (bh * 3 + tile) * (64 * 64);
// STORED:       const idx span = true ? 64 : 64;
// STORED:       u16 *block = true ? scoreBlock(bh, q0 / 64 * 64, k0) + q0 % 64 : nullptr;
// STORED:       _Pragma("unroll") for (int f = 0; true && f < 4; ++f)
// STORED:     __launch_bounds__(128) kiln_kernel_2(
// STORED:       const u16 *block = scoreBlock(bh, q0, k0 / 64 * 64) + k0 % 64 * 64;
// STORED:       for (int e = threadIdx.x; e < 64 * 64 / 8; e += blockDim.x)
// STORED:       transposedA(Ss[buffer], 64 + 8, warp, kk, a);
// STORED:       storeRows(dq + dqAt(bh, 0), dqStep, row, 128, acc,
// STORED:     __launch_bounds__(128) kiln_kernel_3(
// STORED:       deltaScratch[row] = d;
// STORED:     __launch_bounds__(128) kiln_kernel_4(
// STORED:       const idx span = true ? 64 : 32;
// STORED:       u16 *block = true ? scoreBlock(bh, q0 / 64 * 64, k0) + q0 % 64 : nullptr;
// STORED:     __launch_bounds__(128) kiln_kernel_5(
// STORED:       for (int e = threadIdx.x; e < 32 * 64 / 8; e += blockDim.x)
// STORED:       storeRows(dq + dqAt(bh, 0), dqStep, row, 48, acc,
// STORED-NOT: kiln_kernel_6

// The stored dS (2 heads x 3 blocks of 8 KiB) and the deltas (1 KiB) are a
// buffer of the memory plan, live while the gradient runs.
// RUN: kiln-compile %s --forward --target=cuda --report-memory -o %t.memory.kiln \
// RUN:   --attention-query-gradient=stored | FileCheck %s --check-prefix=MEMORY
// MEMORY: largest buffers:
// MEMORY:   49.0 KiB  kiln.attention_grad      scratch

// The forms compile for both architectures, and the artifact records the
// option (none for the default, auto).
// RUN: kiln-compile %s --forward --target=cuda --arch=sm_80,sm_90 -o %t.kiln \
// RUN:   --attention-query-gradient=atomic | FileCheck %s --check-prefix=WROTE
// RUN: kiln-compile %s --forward --target=cuda --arch=sm_80,sm_90 -o %t.recompute.kiln \
// RUN:   | FileCheck %s --check-prefix=WROTE-RECOMPUTE
// WROTE: 6 kernel launches (and 0 where cuBLASLt cannot sum a bias gradient) of 6 distinct kernels
// RUN: kiln-compile %s --forward --target=cuda --arch=sm_80,sm_90 -o %t.stored.kiln \
// RUN:   --attention-query-gradient=stored | FileCheck %s --check-prefix=WROTE-STORED
// WROTE-RECOMPUTE: 4 kernel launches (and 0 where cuBLASLt cannot sum a bias gradient) of 4 distinct kernels
// WROTE-STORED: 6 kernel launches (and 0 where cuBLASLt cannot sum a bias gradient) of 6 distinct kernels
// RUN: grep -c "atomic-query-gradient" %t.kiln
// RUN: not grep -c "atomic-query-gradient" %t.recompute.kiln
// RUN: grep -c "stored-query-gradient" %t.stored.kiln
// RUN: kiln-compile %s --forward --target=cuda -o %t.explicit.kiln \
// RUN:   --attention-query-gradient=recompute
// RUN: grep -c "recomputed-query-gradient" %t.explicit.kiln
// RUN: not grep -c "recomputed-query-gradient" %t.recompute.kiln
func.func @main(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>, %v: tensor<1x2x128x64xbf16>,
                %o: tensor<1x2x128x64xbf16>, %l: tensor<1x2x128xf32>, %g: tensor<1x2x128x64xbf16>,
                %q2: tensor<1x2x48x128xf16>, %k2: tensor<1x1x64x128xf16>, %v2: tensor<1x1x64x128xf16>,
                %o2: tensor<1x2x48x128xf16>, %l2: tensor<1x2x48xf32>, %g2: tensor<1x2x48x128xf16>)
    -> (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>,
        tensor<1x2x48x128xf16>, tensor<1x1x64x128xf16>, tensor<1x1x64x128xf16>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o, %l, %g {causal, scale = 0.125 : f64}
      : (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>,
         tensor<1x2x128xf32>, tensor<1x2x128x64xbf16>)
      -> (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>)
  %dq2, %dk2, %dv2 = kiln.attention_grad %q2, %k2, %v2 output %o2, %l2, %g2 {scale = 0.09 : f64}
      : (tensor<1x2x48x128xf16>, tensor<1x1x64x128xf16>, tensor<1x1x64x128xf16>, tensor<1x2x48x128xf16>,
         tensor<1x2x48xf32>, tensor<1x2x48x128xf16>)
      -> (tensor<1x2x48x128xf16>, tensor<1x1x64x128xf16>, tensor<1x1x64x128xf16>)
  return %dq, %dk, %dv, %dq2, %dk2, %dv2 : tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>,
      tensor<1x2x48x128xf16>, tensor<1x1x64x128xf16>, tensor<1x1x64x128xf16>
}
