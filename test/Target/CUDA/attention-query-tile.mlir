// Attention's forward pass and its query gradient on tensor cores: at head
// dimensions up to 64 a block owns 128 query rows, each warp two tiles of
// 16 that share every K and V fragment (FlashAttention-2's shape); at 128
// the accumulators would not fit twice in registers, and with dropout its
// draws would spill, so one tile of 16. The key/value gradient's blocks
// own 64 keys either way. Under a causal mask a query tile's last key tile
// is past the rows of its first row tile, which then sits it out.
// RUN: kiln-compile %s --forward --target=cuda --print-cuda | FileCheck %s
// CHECK:     kiln_kernel_0(
// CHECK:       auto attendsNoneFrom = [&](idx i, idx rows, idx k0) -> bool { return k0 >= i + rows + 0; };
// CHECK:       if (2 > 1 && attendsNoneFrom(q0, 64, k0))
// CHECK-NEXT:    tile(Constant<2 - 1>());
// CHECK-NEXT:  else
// CHECK-NEXT:    tile(Constant<0>());
// CHECK:       u32 qa[2][64 / 16][4];
// CHECK:       againstRows(s[first], 64 / 8, qa[first], keys, 2 - first);
// CHECK:       accumulate(o[first], pa[first], values, kk, 2 - first);
// CHECK:       withRowTiles(q0, k0, [&](auto skipped) { keyTile(skipped, k0, keys, values); });
// CHECK:     kiln_kernel_1(
// CHECK:       auto attendsNoneFrom = [&](idx i, idx rows, idx k0) -> bool { return false; };
// CHECK:       u32 qa[1][128 / 16][4];
// CHECK:     kiln_kernel_2(
// CHECK:       u32 qa[1][64 / 16][4];
// CHECK:     kiln_kernel_3(
// CHECK:       u32 qa[2][64 / 16][4], da[2][64 / 16][4];
// CHECK:       scoreGradients(skipped, ds, bh, q0, row, qa[0], da[0], logsumexp, deltas, k0 + c0,
// CHECK:       accumulate(acc[first], sa[first], keyChunk, kk, 2 - first);
// CHECK:       withRowTiles(q0, k0, [&](auto skipped) { keyTile(skipped, k0, keys, values); });
// CHECK:     kiln_kernel_4(
// CHECK:       u32 ka[64 / 16][4], va[64 / 16][4];

// --attention-query-tile=64: one tile of 16 per warp at head dimension 64.
// RUN: kiln-compile %s --forward --target=cuda --print-cuda \
// RUN:   --attention-query-tile=64 | FileCheck %s --check-prefix=SIXTYFOUR
// SIXTYFOUR:     kiln_kernel_0(
// SIXTYFOUR:       u32 qa[1][64 / 16][4];
// SIXTYFOUR:     kiln_kernel_1(
// SIXTYFOUR:       u32 qa[1][128 / 16][4];
// SIXTYFOUR:     kiln_kernel_3(
// SIXTYFOUR:       u32 qa[1][64 / 16][4], da[1][64 / 16][4];
// SIXTYFOUR:       accumulate(acc[first], sa[first], keyChunk, kk, 1 - first);

// Both compile for both architectures, and the artifact records the
// option.
// RUN: kiln-compile %s --forward --target=cuda --arch=sm_80,sm_90 -o %t.kiln
// RUN: kiln-compile %s --forward --target=cuda --arch=sm_80,sm_90 -o %t.64.kiln \
// RUN:   --attention-query-tile=64
// RUN: grep -c "attention-query-tile=64" %t.64.kiln
// RUN: not grep -c "attention-query-tile=" %t.kiln

// Any other size is refused.
// RUN: not kiln-compile %s --forward --target=cuda --print-cuda \
// RUN:   --attention-query-tile=96 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: kiln-compile: error: --attention-query-tile must be 64 or 128, got 96
func.func @main(%q: tensor<1x2x200x64xbf16>, %k: tensor<1x2x200x64xbf16>, %v: tensor<1x2x200x64xbf16>,
                %q2: tensor<1x2x48x128xf16>, %k2: tensor<1x2x48x128xf16>, %v2: tensor<1x2x48x128xf16>)
    -> (tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>, tensor<1x2x48x128xf16>, tensor<1x2x48xf32>,
        tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>,
        tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>) {
  %o, %l = kiln.attention %q, %k, %v {causal, scale = 0.125 : f64}
      : (tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>)
      -> (tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>)
  %o2, %l2 = kiln.attention %q2, %k2, %v2 {scale = 0.09 : f64}
      : (tensor<1x2x48x128xf16>, tensor<1x2x48x128xf16>, tensor<1x2x48x128xf16>)
      -> (tensor<1x2x48x128xf16>, tensor<1x2x48xf32>)
  %o3, %l3 = kiln.attention %q, %k, %v {causal, scale = 0.125 : f64, dropout_ratio = 0.1 : f64}
      : (tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>)
      -> (tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>)
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o, %l, %o {causal, scale = 0.125 : f64}
      : (tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>,
         tensor<1x2x200xf32>, tensor<1x2x200x64xbf16>)
      -> (tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>)
  return %o, %l, %o2, %l2, %o3, %l3, %dq, %dk, %dv : tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>, tensor<1x2x48x128xf16>, tensor<1x2x48xf32>,
      tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>
}
