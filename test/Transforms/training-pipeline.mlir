// RUN: kiln-opt %s --kiln-training-pipeline="precision=bf16" | FileCheck %s
// RUN: kiln-opt %s --kiln-training-pipeline="optimizer=sgd" | FileCheck %s --check-prefix=SGD
// RUN: kiln-opt %s --kiln-training-pipeline="precision=bf16 fuse=false" | FileCheck %s --check-prefix=UNFUSED
// RUN: not kiln-opt %s --kiln-training-pipeline="optimizer=lion" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not kiln-opt %s --kiln-build-training-step -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOGRAD

// Tests that the pipeline runs its passes in order: the step function exists
// and updates w with AdamW, its products (forward and backward) read bf16
// and accumulate in f32 (the activation stored rounded to bf16, the weight
// gradient in f32), elementwise chains are fused, and every function
// carries a memory plan.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: kiln.arena_bytes
// CHECK-LABEL: func.func @main_grad(
// CHECK-SAME: kiln.arena_bytes
// CHECK-LABEL: func.func @main_step(
// CHECK-SAME: {kiln.slot = "exp_avg", kiln.state_of = "w"}
// CHECK-SAME: {kiln.name = "grad_norm"}, tensor<4x4xf32> {kiln.update_of = "w"}
// CHECK-SAME: kiln.arena_bytes
// CHECK: kiln.matmul {{.*}} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
// The loss (the mean of tanh) and the backward chain tanh' * dloss with its
// bf16 cast form one fusion, so tanh is never stored: its results have
// buffers, its inner values none.
// CHECK: kiln.fusion {{.*}}{kiln.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}>} : {{.*}} {
// CHECK-NOT: kiln.offsets
// CHECK: kiln.yield %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x4xbf16>
// CHECK: kiln.matmul {{.*}}{accumulate = f32{{.*}}transpose_lhs} : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<4x4xf32>
// CHECK: kiln.adamw
// With fuse=false every op stays on its own, each result with a buffer.
// UNFUSED-LABEL: func.func @main_step(
// UNFUSED-NOT: kiln.fusion
// UNFUSED: kiln.tanh {{.*}}kiln.offsets
// UNFUSED-NOT: kiln.fusion
// UNFUSED: kiln.adamw
// SGD-NOT: bf16
// SGD-LABEL: func.func @main_step(
// SGD: kiln.sgd
// SGD-NOT: bf16
// UNKNOWN: error: kiln-build-training-step: unknown optimizer 'lion' (adamw, sgd or adagrad)
// NOGRAD: error: kiln-build-training-step: no function @main_grad (run kiln-autodiff first)
func.func @main(%x: tensor<2x4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.parameter "w" : tensor<4x4xf32>
  %h = kiln.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = kiln.tanh %h : tensor<2x4xf32>
  %l = kiln.reduce_mean %t {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
