// The CUDA target's generated source for single ops (kiln-compile --forward
// compiles a function as it is): views and broadcasts are index arithmetic,
// gathers clamp their indices, a reduction whose result is the kernel's
// result is shared by the threads of a block, statistics of a row by the
// threads of the row's block, and sums of columns by the warps of a block
// per 32 columns. Indices read from tensors are checked.

// RUN: kiln-compile %s --forward --target=cuda --print-cuda | FileCheck %s

func.func @main(%table: tensor<16x8xf32>, %ids: tensor<2x3xi64>,
                %x: tensor<4x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>)
    -> (tensor<2x3x8xf32>, tensor<f32>, tensor<4x32xbf16>, tensor<32xf32>, tensor<4x32xbf16>) {
  %e = kiln.gather %table, %ids {axis = 0 : i64}
      : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  %t = kiln.transpose %x {permutation = array<i64: 1, 0>}
      : (tensor<4x32xf32>) -> tensor<32x4xf32>
  %s = kiln.reduce_sum %t {axes = array<i64: 0, 1>} : (tensor<32x4xf32>) -> tensor<f32>
  %y, %mean, %rstd = kiln.layer_norm %x scale %g bias %b {axis = 1 : i64, epsilon = 1.0e-5 : f64}
      : (tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>)
      -> (tensor<4x32xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %c = kiln.cast %y : tensor<4x32xf32> to tensor<4x32xbf16>
  %cs = kiln.reduce_sum %x {axes = array<i64: 0>} : (tensor<4x32xf32>) -> tensor<32xf32>
  %f = kiln.fusion %x : (tensor<4x32xf32>) -> tensor<4x32xbf16> {
  ^bb0(%a: tensor<4x32xf32>):
    %n = kiln.neg %a : tensor<4x32xf32>
    %nc = kiln.cast %n : tensor<4x32xf32> to tensor<4x32xbf16>
    kiln.yield %nc : tensor<4x32xbf16>
  }
  return %e, %s, %c, %cs, %f : tensor<2x3x8xf32>, tensor<f32>, tensor<4x32xbf16>, tensor<32xf32>,
      tensor<4x32xbf16>
}

// The gather: negative ids count from the end; an id out of range sets the
// launch's status word (its last argument) and reads the nearest row.
// CHECK-LABEL: void __launch_bounds__(256) kiln_kernel_0(void *const *args)
// CHECK:       const i64 *in0 = (const i64 *)args[0];
// CHECK:       unsigned *status = (unsigned *)args[3];
// CHECK:       if (q < 0) q += 16ll; if (q < 0 || q >= 16ll) { *status = 1u; q = q < 0 ? 0 : 16ll - 1; } return q;
// CHECK:       for (idx c = global_thread<idx>(); c < 12; c += thread_count<idx>())

// The transpose reads its input through permuted strides.
// CHECK-LABEL: kiln_kernel_1(void *const *args)
// CHECK:       v0((0 + (i / 4) * 1 + (i % 4) * 32))

// The full sum: one block, its threads striding over the input.
// CHECK-LABEL: kiln_kernel_2(void *const *args)
// CHECK:       acc = strided_reduce<idx>(acc, threadIdx.x, 128, blockDim.x, Sum(), [&](idx k) { return (double)(v0((0) + k)); });
// CHECK:       acc = block_reduce(acc, Sum());
// CHECK:       for (idx i = blockIdx.x; i < 1; i += gridDim.x)
// CHECK:       if (threadIdx.x == 0)

// Layer norm: a block per row, whose threads compute the row's mean, then
// its inverse deviation (the mean first, by every thread), each thread
// over the row's 16-byte pieces (4 f32 elements) it then stores the
// output's, then one thread stores the row's statistics (no kernel reads
// the rows again). The row loop computes the statistics; everything else
// reads their values. Each thread then prefetches its pieces of the
// block's next row into L2, for that row's statistics to wait on L2
// rather than memory.
// CHECK-LABEL: kiln_kernel_3(void *const *args)
// CHECK:       const bool aligned = ((0 | (u64)in0 | (u64)out0) & 15) == 0;
// CHECK-NEXT:  auto load_pieces = [&](idx at) {
// CHECK-NEXT:    first = at;
// CHECK-NEXT:    chunked = aligned;
// CHECK-NEXT:    if (aligned) {
// CHECK-NEXT:      copy16(chunk_in0, in0 + first, 1);
// CHECK-NEXT:    }
// CHECK-NEXT:  };
// CHECK-NEXT:  auto prefetch_pieces = [&](idx at) {
// CHECK-NEXT:    prefetch_l2(in0 + at);
// CHECK-NEXT:  };
// CHECK:       auto v1_compute = [&](idx o) {
// CHECK-NEXT:    if (o != v1_at) {
// CHECK:           acc = piece_reduce<idx, 4>(acc, threadIdx.x, 8, blockDim.x, Sum(), [&](idx p) { load_pieces(o * 32 + p * 4); }, [&](idx k) { return (double)(v0(o * 32 + k)); });
// CHECK-NEXT:      chunked = false;
// CHECK:         acc / 32.0
// CHECK:       auto v1 = [&](idx o) -> double {
// CHECK-NEXT:    kiln_expect(o == v1_at);
// CHECK-NEXT:    return v1_value;
// CHECK:       auto v2_compute = [&](idx o) {
// CHECK-NEXT:    if (o != v2_at) {
// CHECK-NEXT:      v1_compute(o);
// CHECK:       for (idx row = blockIdx.x; row < 4; row += gridDim.x) {
// CHECK-NEXT:    i0 = row * 32;
// CHECK-NEXT:    v1_compute((i0 / 32));
// CHECK-NEXT:    v2_compute((i0 / 32));
// CHECK-NEXT:    if (row + gridDim.x < 4) {
// CHECK-NEXT:      const idx next = (row + gridDim.x) * 32;
// CHECK-NEXT:      for (idx c = next / 4 + threadIdx.x; c < (next + 32) / 4; c += blockDim.x)
// CHECK-NEXT:        prefetch_pieces(c * 4);
// CHECK-NEXT:    }
// CHECK-NEXT:    for (idx c = i0 / 4 + threadIdx.x; c < (i0 + 32) / 4; c += blockDim.x) {
// CHECK-NEXT:    load_pieces(c * 4);
// CHECK:           copy16(out0 + c * 4, s0, 1);
// CHECK:         const double q0 = v{{[0-9]+}}(row);
// CHECK-NEXT:    if (threadIdx.x == 0)
// CHECK-NEXT:      side_out0[row] = (float)(q0);
// CHECK-NEXT:    const double q1 = v{{[0-9]+}}(row);
// CHECK-NEXT:    if (threadIdx.x == 0)
// CHECK-NEXT:      side_out1[row] = (float)(q1);
// CHECK-NEXT:  }
// CHECK-NEXT: }

// The cast rounds to bf16 once, from double (its lambda); the store
// converts the rounded value, exactly, to its bits. Each
// thread reads two 16-byte pieces of its input and writes 16 bytes (8 bf16
// elements) when the pointers are aligned, element by element otherwise.
// The piece's reads index its loaded elements by constants (`first` is the
// piece's start whether or not it was loaded), which keeps them in
// registers; other reads go to memory (`chunked` is false between pieces).
// CHECK-LABEL: kiln_kernel_4(void *const *args)
// CHECK:       auto read_in0 = [&](idx i) { return chunked && (u64)(i - first) < 8ull ? chunk_in0[i - first] : in0[i]; };
// CHECK:       const bool aligned = ((0 | (u64)in0 | (u64)out0) & 15) == 0;
// CHECK-NEXT:  auto load_pieces = [&](idx at) {
// CHECK-NEXT:    first = at;
// CHECK-NEXT:    chunked = aligned;
// CHECK-NEXT:    if (aligned) {
// CHECK-NEXT:      copy16(chunk_in0, in0 + first, 2);
// CHECK:         load_pieces(c * 8);
// CHECK:         s0[v] = f32_to_bf16((float)(r0));
// CHECK:         chunked = false;
// CHECK:       copy16(out0 + c * 8, s0, 1);
// CHECK:       for (int v = 0; v < 8; ++v) out0[c * 8 + v] = s0[v];

// The column sum: each warp reads a row's 32 neighbouring elements, the
// warps take different rows, and one warp stores.
// CHECK-LABEL: kiln_kernel_5(void *const *args)
// CHECK:       acc = strided_reduce<idx>(acc, threadIdx.x / 32, 4, blockDim.x / 32, Sum(), [&](idx k) { return (double)(v0(o + (0 + k * 32))); });
// CHECK-NEXT:  acc = column_reduce(acc, Sum());
// CHECK:       const idx lane = c0 + threadIdx.x % 32;
// CHECK:       v1_compute(i);
// CHECK:       if (threadIdx.x < 32 && lane < 32) {

// A fusion reads its operand through its block argument: 16 bytes a piece
// as well.
// CHECK-LABEL: kiln_kernel_6(void *const *args)
// CHECK:       auto read_in0 = [&](idx i) { return chunked && (u64)(i - first) < 8ull ? chunk_in0[i - first] : in0[i]; };
// CHECK:       copy16(chunk_in0, in0 + first, 2);
