// RUN: kiln-opt %s --kiln-plan-memory | FileCheck %s

// Tests that values live at once get disjoint ranges, that a dead value's
// bytes are reused, that a reshape is a view of its input, and that the
// arena and the largest live set are recorded.
// CHECK-LABEL: func @chain
// The argument takes [0, 64); exp's result [256, 320) while tanh, which reads
// it, writes [512, 576); the reshape views tanh's bytes; neg reuses exp's.
// CHECK-SAME: attributes {kiln.arena_bytes = 576 : i64, kiln.peak_live_bytes = 192 : i64}
// CHECK: kiln.exp %arg0 {kiln.offsets = array<i64: 256>}
// CHECK: kiln.tanh %{{.*}} {kiln.offsets = array<i64: 512>}
// CHECK: kiln.reshape %{{.*}} {kiln.offsets = array<i64: 512>}
// CHECK: kiln.neg %{{.*}} {kiln.offsets = array<i64: 256>}
func.func @chain(%x: tensor<16xf32>) -> tensor<4x4xf32> {
  %a = kiln.exp %x : tensor<16xf32>
  %b = kiln.tanh %a : tensor<16xf32>
  %c = kiln.reshape %b : tensor<16xf32> to tensor<4x4xf32>
  %d = kiln.neg %c : tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}
