// A generated kernel computes its indices in 32 bits (`idx` is int) when
// no tensor it touches has more than 2^30 elements, which leaves room for
// its loops' last steps past the end; in 64 bits otherwise, or everywhere
// with --wide-indices. Index constants carry no `ll`, which would widen
// the arithmetic they take part in, and neighbouring dimensions whose
// strides continue each other are indexed as one (a sum over the leading
// two dimensions of 4x6x8 reads element o + k * 8, not o + k / 6 * 48 +
// k % 6 * 8).

// RUN: kiln-compile %s --forward --target=cuda --print-cuda | FileCheck %s
// RUN: kiln-compile %s --forward --target=cuda --print-cuda --wide-indices \
// RUN:   | FileCheck %s --check-prefix=WIDE

func.func @main(%small: tensor<1024x1048576xbf16>,
                %large: tensor<1024x1048577xbf16>, %x: tensor<4x6x8xf32>)
    -> (tensor<1024x1048576xf32>, tensor<1024x1048577xf32>, tensor<8xf32>) {
  %a = kiln.cast %small : tensor<1024x1048576xbf16> to tensor<1024x1048576xf32>
  %b = kiln.cast %large : tensor<1024x1048577xbf16> to tensor<1024x1048577xf32>
  %s = kiln.reduce_sum %x {axes = array<i64: 0, 1>} : (tensor<4x6x8xf32>) -> tensor<8xf32>
  return %a, %b, %s : tensor<1024x1048576xf32>, tensor<1024x1048577xf32>, tensor<8xf32>
}

// CHECK-LABEL: kiln_kernel_0(void *const *args)
// CHECK-NEXT:    typedef int idx;
// CHECK:         auto v0 = [&](idx i) -> double {
// CHECK:         for (idx c = global_thread<idx>(); c < 268435456; c += thread_count<idx>())
// CHECK-LABEL: kiln_kernel_1(void *const *args)
// CHECK-NEXT:    typedef i64 idx;
// CHECK:         for (idx c = global_thread<idx>(); c < 268435712; c += thread_count<idx>())
// CHECK-LABEL: kiln_kernel_2(void *const *args)
// CHECK:         [&](idx k) { return (double)(v0(o + (0 + k * 8))); });

// WIDE-LABEL: kiln_kernel_0(void *const *args)
// WIDE-NEXT:    typedef i64 idx;
// WIDE-LABEL: kiln_kernel_1(void *const *args)
// WIDE-NEXT:    typedef i64 idx;
