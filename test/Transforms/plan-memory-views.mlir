// RUN: kiln-opt %s --split-input-file --kiln-plan-memory | FileCheck %s

// Attention reads its heads where the packed projection stored them: q, k
// and v are strided views of the projection's buffer, 64 bf16 elements
// (128 bytes) apart, and the fusion that split them copies nothing. Its
// output lives where the token-major fusion that reads it puts it, and the
// output gradient is read in place from the token-major gradient.
// CHECK-LABEL: func @heads_in_place
// CHECK: kiln.exp %arg0 {kiln.offsets = array<i64: [[#P:]]>}
// CHECK: kiln.fusion {{.*}}{kiln.offsets = array<i64: [[#P]], [[#P+128]], [[#P+256]]>}
// CHECK: kiln.attention {{.*}}kiln.offsets = array<i64: [[#O:]], {{[0-9]+}}>
// CHECK: kiln.fusion %output {kiln.offsets = array<i64: [[#O]]>}
// CHECK: kiln.neg %arg1 {kiln.offsets = array<i64: [[#G:]]>}
// CHECK: kiln.fusion {{.*}}{kiln.offsets = array<i64: [[#G]]>}
func.func @heads_in_place(%x: tensor<16x192xbf16>, %g: tensor<16x64xbf16>)
    -> (tensor<16x64xbf16>, tensor<2x4x8x16xbf16>) {
  %p = kiln.exp %x : tensor<16x192xbf16>
  %q, %k, %v = kiln.fusion %p : (tensor<16x192xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) {
  ^bb0(%a: tensor<16x192xbf16>):
    %r = kiln.reshape %a : tensor<16x192xbf16> to tensor<2x8x192xbf16>
    %s0 = kiln.slice %r {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x8x192xbf16> to tensor<2x8x64xbf16>
    %s1 = kiln.slice %r {start = array<i64: 0, 0, 64>, stride = array<i64: 1, 1, 1>} : tensor<2x8x192xbf16> to tensor<2x8x64xbf16>
    %s2 = kiln.slice %r {start = array<i64: 0, 0, 128>, stride = array<i64: 1, 1, 1>} : tensor<2x8x192xbf16> to tensor<2x8x64xbf16>
    %h0 = kiln.reshape %s0 : tensor<2x8x64xbf16> to tensor<2x8x4x16xbf16>
    %h1 = kiln.reshape %s1 : tensor<2x8x64xbf16> to tensor<2x8x4x16xbf16>
    %h2 = kiln.reshape %s2 : tensor<2x8x64xbf16> to tensor<2x8x4x16xbf16>
    %t0 = kiln.transpose %h0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xbf16>) -> tensor<2x4x8x16xbf16>
    %t1 = kiln.transpose %h1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xbf16>) -> tensor<2x4x8x16xbf16>
    %t2 = kiln.transpose %h2 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xbf16>) -> tensor<2x4x8x16xbf16>
    kiln.yield %t0, %t1, %t2 : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>
  }
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>)
  %y = kiln.fusion %o : (tensor<2x4x8x16xbf16>) -> tensor<16x64xbf16> {
  ^bb0(%a: tensor<2x4x8x16xbf16>):
    %t = kiln.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r = kiln.reshape %t : tensor<2x8x4x16xbf16> to tensor<16x64xbf16>
    kiln.yield %r : tensor<16x64xbf16>
  }
  %dy = kiln.neg %g : tensor<16x64xbf16>
  %do = kiln.fusion %dy : (tensor<16x64xbf16>) -> tensor<2x4x8x16xbf16> {
  ^bb0(%a: tensor<16x64xbf16>):
    %r = kiln.reshape %a : tensor<16x64xbf16> to tensor<2x8x4x16xbf16>
    %t = kiln.transpose %r {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xbf16>) -> tensor<2x4x8x16xbf16>
    kiln.yield %t : tensor<2x4x8x16xbf16>
  }
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o, %lse, %do {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  return %y, %dq : tensor<16x64xbf16>, tensor<2x4x8x16xbf16>
}

// -----

// Copies stay where strides cannot express the value or attention is not
// its only reader: %q is also read by an exp, %k merges dimensions that are
// not adjacent in memory, %v's rows are not contiguous (its last dimension
// is a transposed one), and the output is also a result of the function.
// Each copy has a buffer of its own (views would share 2048 and 10240).
// CHECK-LABEL: func @copies_kept
// CHECK: kiln.exp %arg0 {kiln.offsets = array<i64: 2048>}
// CHECK: kiln.fusion {{.*}}{kiln.offsets = array<i64: 4096, 6144, 8192>}
// CHECK: kiln.attention {{.*}}kiln.offsets = array<i64: 10240, 12288>
// CHECK: kiln.fusion %output {kiln.offsets = array<i64: 4096>}
func.func @copies_kept(%x: tensor<2x4x8x16xbf16>)
    -> (tensor<2x8x64xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) {
  %p = kiln.exp %x : tensor<2x4x8x16xbf16>
  %q, %k, %v = kiln.fusion %p : (tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) {
  ^bb0(%a: tensor<2x4x8x16xbf16>):
    %t = kiln.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %m = kiln.reshape %t : tensor<2x8x4x16xbf16> to tensor<2x32x16xbf16>
    %k0 = kiln.reshape %m : tensor<2x32x16xbf16> to tensor<2x4x8x16xbf16>
    %v0 = kiln.transpose %a {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xbf16>) -> tensor<2x4x16x8xbf16>
    %v1 = kiln.reshape %v0 : tensor<2x4x16x8xbf16> to tensor<2x4x8x16xbf16>
    kiln.yield %a, %k0, %v1 : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>
  }
  %e = kiln.exp %q : tensor<2x4x8x16xbf16>
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.25 : f64} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>)
  %y = kiln.fusion %o : (tensor<2x4x8x16xbf16>) -> tensor<2x8x64xbf16> {
  ^bb0(%a: tensor<2x4x8x16xbf16>):
    %t = kiln.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r = kiln.reshape %t : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    kiln.yield %r : tensor<2x8x64xbf16>
  }
  return %y, %o, %e : tensor<2x8x64xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>
}

// -----

// Attention's output rearranged twice the same way (the second recomputed
// for the backward pass): the first holds it, the second is that value.
// CHECK-LABEL: func @rearranged_twice
// CHECK: kiln.attention {{.*}}kiln.offsets = array<i64: [[#O:]], {{[0-9]+}}>
// CHECK: kiln.fusion %output {kiln.offsets = array<i64: [[#O]]>}
// CHECK: kiln.fusion %output {kiln.offsets = array<i64: [[#O]]>}
func.func @rearranged_twice(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x4x8x16xbf16>, %v: tensor<2x4x8x16xbf16>, %do: tensor<2x4x8x16xbf16>, %w: tensor<64x64xbf16>)
    -> (tensor<16x64xbf16>, tensor<64x64xbf16>, tensor<2x4x8x16xbf16>) {
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.25 : f64} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>)
  %y = kiln.fusion %o : (tensor<2x4x8x16xbf16>) -> tensor<16x64xbf16> {
  ^bb0(%a: tensor<2x4x8x16xbf16>):
    %t = kiln.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r = kiln.reshape %t : tensor<2x8x4x16xbf16> to tensor<16x64xbf16>
    kiln.yield %r : tensor<16x64xbf16>
  }
  %p = kiln.matmul %y, %w : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
  %y2 = kiln.fusion %o : (tensor<2x4x8x16xbf16>) -> tensor<16x64xbf16> {
  ^bb0(%a: tensor<2x4x8x16xbf16>):
    %t = kiln.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r = kiln.reshape %t : tensor<2x8x4x16xbf16> to tensor<16x64xbf16>
    kiln.yield %r : tensor<16x64xbf16>
  }
  %dw = kiln.matmul %y2, %p {transpose_lhs} : (tensor<16x64xbf16>, tensor<16x64xbf16>) -> tensor<64x64xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o, %lse, %do {scale = 0.25 : f64} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  return %p, %dw, %dq : tensor<16x64xbf16>, tensor<64x64xbf16>, tensor<2x4x8x16xbf16>
}

// -----

// Attention's output put in token order by a bare transpose (BERT's head
// merge, whose result two products read through reshapes): the transpose
// holds it, and the CUDA target launches nothing for it.
// CHECK-LABEL: func @merged_by_transpose
// CHECK: kiln.attention {{.*}}kiln.offsets = array<i64: [[#O:]], {{[0-9]+}}>
// CHECK: kiln.transpose %output {kiln.offsets = array<i64: [[#O]]>
func.func @merged_by_transpose(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x4x8x16xbf16>, %v: tensor<2x4x8x16xbf16>, %do: tensor<2x4x8x16xbf16>, %w: tensor<64x64xbf16>)
    -> (tensor<16x64xbf16>, tensor<64x64xbf16>, tensor<2x4x8x16xbf16>) {
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.25 : f64} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>)
  %t = kiln.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
  %y = kiln.reshape %t : tensor<2x8x4x16xbf16> to tensor<16x64xbf16>
  %p = kiln.matmul %y, %w : (tensor<16x64xbf16>, tensor<64x64xbf16>) -> tensor<16x64xbf16>
  %dw = kiln.matmul %y, %p {transpose_lhs} : (tensor<16x64xbf16>, tensor<16x64xbf16>) -> tensor<64x64xbf16>
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o, %lse, %do {scale = 0.25 : f64} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  return %p, %dw, %dq : tensor<16x64xbf16>, tensor<64x64xbf16>, tensor<2x4x8x16xbf16>
}

// -----

// Attention's gradients are written where the fusion that assembles them
// puts them: the packed gradient of the q/k/v projection (dq at its
// columns 0-63, dk at 64-127, dv at 128-191, 128 bytes apart in bf16),
// which the fusion computes nothing of; it still sums its columns. In
// @parts_read_elsewhere, the first dk is also returned, and the second
// assembly's slices overlap (dv at columns 96-159): each gradient keeps a
// buffer of its own (2048 bytes), none inside the assemblies' (at 0, 6144).
// So do they where the fusion reads the sum itself rather than the
// assembled view of it (which is all it may read from memory).
// CHECK-LABEL: func @gradients_in_place
// CHECK: kiln.attention_grad {{.*}}kiln.offsets = array<i64: [[#D:]],
// CHECK-SAME: [[#D+128]], [[#D+256]]>
// CHECK: kiln.fusion {{.*}} {kiln.offsets = array<i64: {{[0-9]+}}, [[#D]]>}
// CHECK-LABEL: func @parts_read_elsewhere
// CHECK: kiln.attention_grad {{.*}}kiln.offsets = array<i64: 6144, 18432, 8192>
// CHECK: kiln.fusion {{.*}} {kiln.offsets = array<i64: 0>}
// CHECK: kiln.attention_grad {{.*}}kiln.offsets = array<i64: 20480, 22528, 24576>
// CHECK: kiln.fusion {{.*}} {kiln.offsets = array<i64: 6144>}
// CHECK-LABEL: func @sum_read_before_its_view
// CHECK: kiln.attention_grad {{.*}}kiln.offsets = array<i64: [[#E:]],
// CHECK-NOT: [[#E+128]], [[#E+256]]>
func.func @gradients_in_place(%q: tensor<2x4x8x16xbf16>, %o: tensor<2x4x8x16xbf16>, %l: tensor<2x4x8xf32>, %g: tensor<2x4x8x16xbf16>)
    -> (tensor<192xf32>, tensor<16x192xbf16>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q output %o, %l, %g {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  %b, %p = kiln.fusion %dq, %dk, %dv : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> (tensor<192xf32>, tensor<16x192xbf16>) {
  ^bb0(%a0: tensor<2x4x8x16xbf16>, %a1: tensor<2x4x8x16xbf16>, %a2: tensor<2x4x8x16xbf16>):
    %zero = kiln.constant dense<0.0> : tensor<2x8x192xf32>
    %t0 = kiln.transpose %a0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %t1 = kiln.transpose %a1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %t2 = kiln.transpose %a2 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r0 = kiln.reshape %t0 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %r1 = kiln.reshape %t1 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %r2 = kiln.reshape %t2 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %w0 = kiln.cast %r0 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %w1 = kiln.cast %r1 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %w2 = kiln.cast %r2 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %i0 = kiln.insert_slice %zero, %w0 {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %i1 = kiln.insert_slice %zero, %w1 {start = array<i64: 0, 0, 64>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %i2 = kiln.insert_slice %zero, %w2 {start = array<i64: 0, 0, 128>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %s0 = kiln.add %i0, %i1 : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    %s1 = kiln.add %s0, %i2 : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    %flat = kiln.reshape %s1 : tensor<2x8x192xf32> to tensor<16x192xf32>
    %bias = kiln.reduce_sum %flat {axes = array<i64: 0>} : (tensor<16x192xf32>) -> tensor<192xf32>
    %packed = kiln.cast %flat : tensor<16x192xf32> to tensor<16x192xbf16>
    kiln.yield %bias, %packed : tensor<192xf32>, tensor<16x192xbf16>
  }
  return %b, %p : tensor<192xf32>, tensor<16x192xbf16>
}

func.func @parts_read_elsewhere(%q: tensor<2x4x8x16xbf16>, %o: tensor<2x4x8x16xbf16>, %l: tensor<2x4x8xf32>, %g: tensor<2x4x8x16xbf16>)
    -> (tensor<16x192xbf16>, tensor<2x4x8x16xbf16>, tensor<16x192xbf16>) {
  %dq0, %dk0, %dv0 = kiln.attention_grad %q, %q, %q output %o, %l, %g {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  %p = kiln.fusion %dq0, %dk0, %dv0 : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<16x192xbf16> {
  ^bb0(%a0: tensor<2x4x8x16xbf16>, %a1: tensor<2x4x8x16xbf16>, %a2: tensor<2x4x8x16xbf16>):
    %zero = kiln.constant dense<0.0> : tensor<2x8x192xf32>
    %t0 = kiln.transpose %a0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %t1 = kiln.transpose %a1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %t2 = kiln.transpose %a2 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r0 = kiln.reshape %t0 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %r1 = kiln.reshape %t1 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %r2 = kiln.reshape %t2 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %w0 = kiln.cast %r0 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %w1 = kiln.cast %r1 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %w2 = kiln.cast %r2 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %i0 = kiln.insert_slice %zero, %w0 {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %i1 = kiln.insert_slice %zero, %w1 {start = array<i64: 0, 0, 64>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %i2 = kiln.insert_slice %zero, %w2 {start = array<i64: 0, 0, 128>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %s0 = kiln.add %i0, %i1 : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    %s1 = kiln.add %s0, %i2 : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    %flat = kiln.reshape %s1 : tensor<2x8x192xf32> to tensor<16x192xf32>
    %packed = kiln.cast %flat : tensor<16x192xf32> to tensor<16x192xbf16>
    kiln.yield %packed : tensor<16x192xbf16>
  }
  %dq1, %dk1, %dv1 = kiln.attention_grad %q, %q, %q output %o, %l, %g {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  %p2 = kiln.fusion %dq1, %dk1, %dv1 : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<16x192xbf16> {
  ^bb0(%a0: tensor<2x4x8x16xbf16>, %a1: tensor<2x4x8x16xbf16>, %a2: tensor<2x4x8x16xbf16>):
    %zero = kiln.constant dense<0.0> : tensor<2x8x192xf32>
    %t0 = kiln.transpose %a0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %t1 = kiln.transpose %a1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %t2 = kiln.transpose %a2 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r0 = kiln.reshape %t0 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %r1 = kiln.reshape %t1 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %r2 = kiln.reshape %t2 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %w0 = kiln.cast %r0 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %w1 = kiln.cast %r1 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %w2 = kiln.cast %r2 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %i0 = kiln.insert_slice %zero, %w0 {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %i1 = kiln.insert_slice %zero, %w1 {start = array<i64: 0, 0, 64>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %i2 = kiln.insert_slice %zero, %w2 {start = array<i64: 0, 0, 96>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %s0 = kiln.add %i0, %i1 : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    %s1 = kiln.add %s0, %i2 : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    %flat = kiln.reshape %s1 : tensor<2x8x192xf32> to tensor<16x192xf32>
    %packed = kiln.cast %flat : tensor<16x192xf32> to tensor<16x192xbf16>
    kiln.yield %packed : tensor<16x192xbf16>
  }
  return %p, %dk0, %p2 : tensor<16x192xbf16>, tensor<2x4x8x16xbf16>, tensor<16x192xbf16>
}

func.func @sum_read_before_its_view(%q: tensor<2x4x8x16xbf16>, %o: tensor<2x4x8x16xbf16>, %l: tensor<2x4x8xf32>, %g: tensor<2x4x8x16xbf16>)
    -> (tensor<192xf32>, tensor<16x192xbf16>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q output %o, %l, %g {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  %b, %p = kiln.fusion %dq, %dk, %dv : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> (tensor<192xf32>, tensor<16x192xbf16>) {
  ^bb0(%a0: tensor<2x4x8x16xbf16>, %a1: tensor<2x4x8x16xbf16>, %a2: tensor<2x4x8x16xbf16>):
    %zero = kiln.constant dense<0.0> : tensor<2x8x192xf32>
    %t0 = kiln.transpose %a0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %t1 = kiln.transpose %a1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %t2 = kiln.transpose %a2 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r0 = kiln.reshape %t0 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %r1 = kiln.reshape %t1 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %r2 = kiln.reshape %t2 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %w0 = kiln.cast %r0 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %w1 = kiln.cast %r1 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %w2 = kiln.cast %r2 : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %i0 = kiln.insert_slice %zero, %w0 {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %i1 = kiln.insert_slice %zero, %w1 {start = array<i64: 0, 0, 64>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %i2 = kiln.insert_slice %zero, %w2 {start = array<i64: 0, 0, 128>, stride = array<i64: 1, 1, 1>} : (tensor<2x8x192xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
    %s0 = kiln.add %i0, %i1 : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    %s1 = kiln.add %s0, %i2 : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    %flat = kiln.reshape %s1 : tensor<2x8x192xf32> to tensor<16x192xf32>
    %bias = kiln.reduce_sum %s1 {axes = array<i64: 0, 1>} : (tensor<2x8x192xf32>) -> tensor<192xf32>
    %packed = kiln.cast %flat : tensor<16x192xf32> to tensor<16x192xbf16>
    kiln.yield %bias, %packed : tensor<192xf32>, tensor<16x192xbf16>
  }
  return %b, %p : tensor<192xf32>, tensor<16x192xbf16>
}

// -----

// A head gradient that one fusion only puts back in token order (BERT's
// separate q/k/v projections): attention writes it there, in place, and
// the fusion's bias gradient reads it there.
// CHECK-LABEL: func @gradient_in_token_order
// CHECK: kiln.attention_grad {{.*}}kiln.offsets = array<i64: [[#T:]],
// CHECK: kiln.fusion {{.*}} {kiln.offsets = array<i64: [[#T]], {{[0-9]+}}>}
func.func @gradient_in_token_order(%q: tensor<2x4x8x16xbf16>, %o: tensor<2x4x8x16xbf16>, %l: tensor<2x4x8xf32>, %g: tensor<2x4x8x16xbf16>)
    -> (tensor<16x64xbf16>, tensor<64xf32>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q output %o, %l, %g {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  %t, %b = kiln.fusion %dq : (tensor<2x4x8x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<64xf32>) {
  ^bb0(%a: tensor<2x4x8x16xbf16>):
    %tr = kiln.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
    %r = kiln.reshape %tr : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
    %w = kiln.cast %r : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
    %s = kiln.reduce_sum %w {axes = array<i64: 0, 1>} : (tensor<2x8x64xf32>) -> tensor<64xf32>
    kiln.yield %tr, %s : tensor<2x8x4x16xbf16>, tensor<64xf32>
  }
  %flat = kiln.reshape %t : tensor<2x8x4x16xbf16> to tensor<16x64xbf16>
  return %flat, %b, %dk, %dv : tensor<16x64xbf16>, tensor<64xf32>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>
}

// -----

// A head gradient that a transpose alone puts back in token order (a
// product without a bias reads it: Llama's value projection): attention
// writes it there, and the transpose copies nothing.
// CHECK-LABEL: func @gradient_transposed
// CHECK: kiln.attention_grad {{.*}}kiln.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, [[#V:]]>
// CHECK: kiln.transpose %value_grad {kiln.offsets = array<i64: [[#V]]>
func.func @gradient_transposed(%q: tensor<2x4x8x16xbf16>, %o: tensor<2x4x8x16xbf16>, %l: tensor<2x4x8xf32>, %g: tensor<2x4x8x16xbf16>)
    -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x8x4x16xbf16>) {
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q output %o, %l, %g {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
  %t = kiln.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
  return %dq, %dk, %t : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x8x4x16xbf16>
}

// -----

// A trained mask's gradient is written densely: a transpose alone reading
// it (a learned bias laid out [queries, heads, keys]) copies it, where a
// head gradient would be written in place.
// CHECK-LABEL: func @mask_gradient_transposed
// CHECK: kiln.attention_grad {{.*}}kiln.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, [[#M:]]>
// CHECK-NOT: kiln.offsets = array<i64: [[#M]]>
// CHECK: return
func.func @mask_gradient_transposed(%q: tensor<2x4x8x16xbf16>, %m: tensor<4x8x8xf32>, %o: tensor<2x4x8x16xbf16>, %l: tensor<2x4x8xf32>, %g: tensor<2x4x8x16xbf16>)
    -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<8x4x8xf32>) {
  %dq, %dk, %dv, %dm = kiln.attention_grad %q, %q, %q mask %m output %o, %l, %g {scale = 0.25 : f64} : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<4x8x8xf32>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<4x8x8xf32>)
  %t = kiln.transpose %dm {permutation = array<i64: 1, 0, 2>} : (tensor<4x8x8xf32>) -> tensor<8x4x8xf32>
  return %dq, %dk, %dv, %t : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<8x4x8xf32>
}

// -----

// A slice of a contiguous block (rows of a weight gradient merged
// projections computed together) is its input at an offset: 4 rows of 48
// f32 elements further, 768 bytes. A block of rows that starts 192 bytes
// in, less aligned than a buffer (which a GEMM could read), keeps a buffer
// of its own.
// CHECK-LABEL: func @contiguous_slices
// CHECK: kiln.matmul %arg0, %arg1 {kiln.offsets = array<i64: [[#W:]]>}
// CHECK: kiln.slice {{.*}}kiln.offsets = array<i64: [[#W]]>, start = array<i64: 0, 0>
// CHECK: kiln.slice {{.*}}kiln.offsets = array<i64: [[#W+768]]>, start = array<i64: 4, 0>
// CHECK-NOT: kiln.offsets = array<i64: [[#W+192]]>, start = array<i64: 1, 0>
func.func @contiguous_slices(%x: tensor<8x4xf32>, %y: tensor<4x48xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %w = kiln.matmul %x, %y : (tensor<8x4xf32>, tensor<4x48xf32>) -> tensor<8x48xf32>
  %a = kiln.slice %w {start = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<8x48xf32> to tensor<4x48xf32>
  %b = kiln.slice %w {start = array<i64: 4, 0>, stride = array<i64: 1, 1>} : tensor<8x48xf32> to tensor<4x48xf32>
  %d = kiln.slice %w {start = array<i64: 1, 0>, stride = array<i64: 1, 1>} : tensor<8x48xf32> to tensor<4x48xf32>
  %sa = kiln.reduce_sum %a {axes = array<i64: 0, 1>} : (tensor<4x48xf32>) -> tensor<f32>
  %sb = kiln.reduce_sum %b {axes = array<i64: 0, 1>} : (tensor<4x48xf32>) -> tensor<f32>
  %sd = kiln.reduce_sum %d {axes = array<i64: 0, 1>} : (tensor<4x48xf32>) -> tensor<f32>
  return %sa, %sb, %sd : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// A block of columns of a product is not contiguous: it keeps a buffer of
// its own, whoever reads it.
// CHECK-LABEL: func @column_blocks
// CHECK: kiln.matmul %arg0, %arg1 {kiln.offsets = array<i64: [[#W:]]>}
// CHECK-NOT: kiln.offsets = array<i64: [[#W+64]]>, start = array<i64: 0, 16>
// CHECK-NOT: kiln.offsets = array<i64: [[#W+128]]>, start = array<i64: 0, 32>
func.func @column_blocks(%x: tensor<8x4xf32>, %y: tensor<4x48xf32>, %z: tensor<16x4xf32>) -> (tensor<f32>, tensor<8x4xf32>) {
  %w = kiln.matmul %x, %y : (tensor<8x4xf32>, tensor<4x48xf32>) -> tensor<8x48xf32>
  %c = kiln.slice %w {start = array<i64: 0, 16>, stride = array<i64: 1, 1>} : tensor<8x48xf32> to tensor<8x16xf32>
  %d = kiln.slice %w {start = array<i64: 0, 32>, stride = array<i64: 1, 1>} : tensor<8x48xf32> to tensor<8x16xf32>
  %s = kiln.reduce_sum %c {axes = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
  %p = kiln.matmul %d, %z : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %s, %p : tensor<f32>, tensor<8x4xf32>
}
