// RUN: kiln-opt %s -split-input-file --kiln-fuse | FileCheck %s

// Tests that a bias add, GELU and cast become one fusion whose inputs are
// the values from outside and whose one result is the cast.
// CHECK-LABEL: func @bias_gelu_cast
// CHECK: %[[F:.*]] = kiln.fusion %arg0, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xbf16> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[A]], %[[B]]
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[S]]
// CHECK-NEXT: %[[C:.*]] = kiln.cast %[[G]]
// CHECK-NEXT: kiln.yield %[[C]] : tensor<4x8xbf16>
// CHECK: return %[[F]]
func.func @bias_gelu_cast(%h: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %s = kiln.add %h, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %g = kiln.gelu %s approximation = tanh : tensor<4x8xf32>
  %c = kiln.cast %g : tensor<4x8xf32> to tensor<4x8xbf16>
  return %c : tensor<4x8xbf16>
}

// -----

// Tests that a product whose only reader adds a bias along its rows takes
// the add, the tanh GELU of the sum and the cast of the GELU into its fusion
// (cuBLASLt's bias + GELU epilogue with a bf16 output: the unbiased product
// is never stored). The sum stays a result where it is read later (the aux
// output the GELU gradient needs).
// CHECK-LABEL: func @bias_gelu_epilogue
// CHECK: %[[E:.*]]:2 = kiln.fusion %arg0, %arg1, %arg2 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %[[X]], %[[W]]
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[P]], %[[B]]
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[S]] approximation = tanh
// CHECK-NEXT: %[[C:.*]] = kiln.cast %[[G]]
// CHECK-NEXT: kiln.yield %[[S]], %[[C]]
// CHECK: kiln.neg %[[E]]#0
func.func @bias_gelu_epilogue(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
  %h = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = kiln.add %h, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %g = kiln.gelu %s approximation = tanh : tensor<4x8xf32>
  %c = kiln.cast %g : tensor<4x8xf32> to tensor<4x8xbf16>
  %n = kiln.neg %s : tensor<4x8xf32>
  return %c, %n : tensor<4x8xbf16>, tensor<4x8xf32>
}

// -----

// Tests the same epilogue in bf16 as precision assignment leaves it: the
// sum is stored rounded (GELU_AUX's aux output) and the GELU reads the f32
// sum behind a reshape; the model's reshape of the rounded sum, which only
// the backward pass reads, moves after the fusion.
// CHECK-LABEL: func @bias_gelu_aux_bf16
// CHECK: %[[E:.*]]:2 = kiln.fusion %arg0, %arg1, %arg2 : (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
// CHECK: kiln.matmul
// CHECK-NEXT: %[[BW:.*]] = kiln.cast
// CHECK-NEXT: %[[S:.*]] = kiln.add %{{.*}}, %[[BW]]
// CHECK-NEXT: %[[A:.*]] = kiln.cast %[[S]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[S]]
// CHECK-NEXT: %[[G:.*]] = kiln.gelu %[[R]] approximation = tanh
// CHECK-NEXT: %[[F:.*]] = kiln.reshape %[[G]]
// CHECK-NEXT: %[[C:.*]] = kiln.cast %[[F]]
// CHECK-NEXT: kiln.yield %[[A]], %[[C]]
// CHECK: kiln.fusion %[[E]]#0 : (tensor<4x8xbf16>) -> tensor<2x2x8xbf16>
// CHECK: kiln.reshape
// CHECK-NEXT: kiln.neg
func.func @bias_gelu_aux_bf16(%x: tensor<4x8xbf16>, %w: tensor<8x8xbf16>, %b: tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<2x2x8xbf16>) {
  %h = kiln.matmul %x, %w {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
  %bw = kiln.cast %b : tensor<8xbf16> to tensor<8xf32>
  %s = kiln.add %h, %bw : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a = kiln.cast %s : tensor<4x8xf32> to tensor<4x8xbf16>
  %v = kiln.reshape %a : tensor<4x8xbf16> to tensor<2x2x8xbf16>
  %r = kiln.reshape %s : tensor<4x8xf32> to tensor<2x2x8xf32>
  %g = kiln.gelu %r approximation = tanh : tensor<2x2x8xf32>
  %f = kiln.reshape %g : tensor<2x2x8xf32> to tensor<4x8xf32>
  %c = kiln.cast %f : tensor<4x8xf32> to tensor<4x8xbf16>
  %n = kiln.neg %v : tensor<2x2x8xbf16>
  return %c, %n : tensor<4x8xbf16>, tensor<2x2x8xbf16>
}

// -----

// Tests that the erf GELU, which cuBLASLt does not apply, stays out of the
// bias epilogue and fuses with what follows it.
// CHECK-LABEL: func @bias_epilogue_erf_gelu
// CHECK: %[[E:.*]] = kiln.fusion %arg0, %arg1, %arg2 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK: kiln.matmul
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.yield
// CHECK: kiln.fusion %[[E]] : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK: kiln.gelu {{.*}} approximation = none
func.func @bias_epilogue_erf_gelu(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %h = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = kiln.add %h, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %g = kiln.gelu %s approximation = none : tensor<4x8xf32>
  %c = kiln.cast %g : tensor<4x8xf32> to tensor<4x8xbf16>
  return %c : tensor<4x8xbf16>
}

// -----

// Tests what is not an epilogue: a product also read elsewhere, and an add
// of a full matrix whose sum only elementwise ops read (they add it in
// their own kernel). An f32 matrix added to a product whose sum is stored
// anyway (returned here; an optimizer's gradient) is cuBLASLt's C.
// CHECK-LABEL: func @no_epilogue
// CHECK: %[[P:.*]] = kiln.matmul %arg0, %arg1
// CHECK-NEXT: kiln.add %[[P]], %arg2
// CHECK-NEXT: kiln.fusion %arg0, %arg1, %arg3
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.matmul
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.yield
// CHECK: %[[Q:.*]] = kiln.matmul %arg0, %arg1
// CHECK-NEXT: kiln.fusion %[[Q]], %arg3
// CHECK: kiln.add
// CHECK-NEXT: kiln.exp
func.func @no_epilogue(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %r: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %h = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = kiln.add %h, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %k = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = kiln.add %k, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %u = kiln.add %l, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = kiln.exp %u : tensor<4x8xf32>
  return %s, %h, %t, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that of two products added together (a gradient reaching a value
// through two matmuls), the first takes the sum as its epilogue and the
// second stays a GEMM whose result the fusion reads: an op is one
// product's epilogue.
// CHECK-LABEL: func @two_products_added
// CHECK: %[[B:.*]] = kiln.matmul %arg2, %arg1
// CHECK-NEXT: %[[F:.*]] = kiln.fusion %arg0, %arg1, %[[B]]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.matmul
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.yield
// CHECK: return %[[F]]
func.func @two_products_added(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %b = kiln.matmul %y, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = kiln.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Tests that a value used after the chain (a residual kept for backward)
// becomes a second result, and that two chains meeting in one op merge.
// CHECK-LABEL: func @two_results
// CHECK: %[[F:.*]]:2 = kiln.fusion %arg0, %arg1 : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
// CHECK: kiln.exp
// CHECK: kiln.tanh
// CHECK: kiln.mul
// CHECK: kiln.yield
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @two_results(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = kiln.exp %x : tensor<8xf32>
  %t = kiln.tanh %y : tensor<8xf32>
  %m = kiln.mul %e, %t : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %e, %m : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that an op does not join a fusion whose value a non-fusible op reads
// in between: the fusion would be placed after that reader.
// CHECK-LABEL: func @use_in_between
// CHECK-NOT: kiln.fusion
// CHECK: kiln.exp
// CHECK: kiln.cumsum
// CHECK: kiln.neg
func.func @use_in_between(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = kiln.exp %x : tensor<8xf32>
  %s = kiln.cumsum %e {axis = 0 : i64} : tensor<8xf32>
  %n = kiln.neg %e : tensor<8xf32>
  return %s, %n : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that single elementwise ops and other ops stay as they are.
// CHECK-LABEL: func @nothing_to_fuse
// CHECK-NOT: kiln.fusion
func.func @nothing_to_fuse(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = kiln.exp %x : tensor<4x8xf32>
  %s = kiln.cumsum %e {axis = 1 : i64} : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Tests that a reduction ends the fusion of the chain that feeds it: the
// 16-bit logits are widened inside the loss's kernel, so no f32 copy of
// them is stored, and the residual add runs in the norm's kernel. Of what
// reads the norm, only elementwise readers of its output join (the cast for
// the next product, here a neg behind a view); a reader of a statistic
// does not.
// CHECK-LABEL: func @reduction_consumers
// CHECK: %[[LOSS:.*]] = kiln.fusion %arg0, %arg1 : (tensor<4x8xbf16>, tensor<4xi64>) -> tensor<f32> {
// CHECK: kiln.cast
// CHECK-NEXT: %[[L:.*]] = kiln.cross_entropy
// CHECK-NEXT: kiln.yield %[[L]] : tensor<f32>
// CHECK: %[[NORM:.*]]:3 = kiln.fusion %arg2, %arg3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<32xf32>) {
// CHECK: %[[R:.*]] = kiln.add
// CHECK-NEXT: %[[N:.*]], %{{.*}}, %[[S:.*]] = kiln.layer_norm %[[R]]
// CHECK-NEXT: %[[V:.*]] = kiln.reshape %[[N]]
// CHECK-NEXT: %[[A:.*]] = kiln.neg %[[V]]
// CHECK-NEXT: kiln.yield %[[R]], %[[S]], %[[A]]
// CHECK: kiln.exp %[[NORM]]#1
func.func @reduction_consumers(%logits: tensor<4x8xbf16>, %labels: tensor<4xi64>, %x: tensor<4x8xf32>, %h: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<32xf32>, tensor<4x1xf32>) {
  %wide = kiln.cast %logits : tensor<4x8xbf16> to tensor<4x8xf32>
  %loss = kiln.cross_entropy %wide, %labels reduction = mean : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %r = kiln.add %x, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n, %mean, %rstd = kiln.layer_norm %r {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %flat = kiln.reshape %n : tensor<4x8xf32> to tensor<32xf32>
  %after = kiln.neg %flat : tensor<32xf32>
  %e = kiln.exp %rstd : tensor<4x1xf32>
  return %loss, %r, %after, %e : tensor<f32>, tensor<4x8xf32>, tensor<32xf32>, tensor<4x1xf32>
}

// -----

// Tests that a cross-entropy's gradient joins the loss over the same logits
// (the loss reading them widened, which changes no value), with the cast
// of the gradient that reads it: one kernel computes each row's
// log-sum-exp for both. A loss with other classes, a loss per row and a
// loss read before the gradient stay apart.
// CHECK-LABEL: func @loss_with_its_gradient
// CHECK: %[[F:.*]]:2 = kiln.fusion %arg0, %arg1, %arg2 : (tensor<4x8xbf16>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xbf16>, %[[Y:.*]]: tensor<4xi64>, %[[S:.*]]: tensor<f32>):
// CHECK-NEXT: %[[W:.*]] = kiln.cast %[[X]]
// CHECK-NEXT: %[[L:.*]] = kiln.cross_entropy %[[W]], %[[Y]] reduction = mean
// CHECK-NEXT: %[[G:.*]] = kiln.cross_entropy_grad %[[X]], %[[Y]], %[[S]] reduction = mean
// CHECK-NEXT: %[[C:.*]] = kiln.cast %[[G]]
// CHECK-NEXT: kiln.yield %[[L]], %[[C]]
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @loss_with_its_gradient(%logits: tensor<4x8xbf16>, %labels: tensor<4xi64>, %seed: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %wide = kiln.cast %logits : tensor<4x8xbf16> to tensor<4x8xf32>
  %loss = kiln.cross_entropy %wide, %labels reduction = mean : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %grad = kiln.cross_entropy_grad %logits, %labels, %seed reduction = mean : (tensor<4x8xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xbf16>
  %g = kiln.cast %grad : tensor<4x8xbf16> to tensor<4x8xf32>
  return %loss, %g : tensor<f32>, tensor<4x8xf32>
}

// CHECK-LABEL: func @losses_apart
// CHECK-NOT: kiln.fusion
// CHECK: return
func.func @losses_apart(%logits: tensor<4x8xf32>, %labels: tensor<4xi64>, %seed: tensor<f32>, %rows: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<4x8xf32>, tensor<f32>, tensor<4x8xf32>) {
  %other = kiln.cross_entropy %logits, %labels reduction = sum {num_classes = 6 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %each = kiln.cross_entropy %logits, %labels reduction = none : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4xf32>
  %grad = kiln.cross_entropy_grad %logits, %labels, %rows reduction = none : (tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
  %loss = kiln.cross_entropy %logits, %labels reduction = mean : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %scaled = kiln.mul %loss, %seed : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %late = kiln.cross_entropy_grad %logits, %labels, %scaled reduction = mean : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  return %other, %each, %grad, %scaled, %late : tensor<f32>, tensor<4xf32>, tensor<4x8xf32>, tensor<f32>, tensor<4x8xf32>
}

// -----

// Tests that a norm alone takes the elementwise readers of its output, but
// that the group then takes no reduction (its sum would recompute the norm
// per term) and no reindexing (a transpose reads other rows), and that a
// softmax along another axis than the last takes nothing.
// CHECK-LABEL: func @normalized_rows
// CHECK: %[[N:.*]]:2 = kiln.fusion %arg0 : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.rms_norm
// CHECK-NEXT: kiln.mul
// CHECK-NEXT: kiln.cast
// CHECK-NEXT: kiln.yield
// CHECK: kiln.reduce_sum %[[N]]#0
// CHECK: kiln.transpose %[[N]]#0
// CHECK: %[[P:.*]] = kiln.softmax %arg0 {axis = 0 : i64}
// CHECK-NEXT: kiln.neg %[[P]]
func.func @normalized_rows(%x: tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<4xf32>, tensor<8x4xf32>, tensor<4x8xf32>) {
  %n, %rstd = kiln.rms_norm %x {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>)
  %m = kiln.mul %n, %n : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = kiln.cast %m : tensor<4x8xf32> to tensor<4x8xbf16>
  %s = kiln.reduce_sum %m {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %t = kiln.transpose %m {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %p = kiln.softmax %x {axis = 0 : i64} : tensor<4x8xf32>
  %q = kiln.neg %p : tensor<4x8xf32>
  return %c, %s, %t, %q : tensor<4x8xbf16>, tensor<4xf32>, tensor<8x4xf32>, tensor<4x8xf32>
}

// -----

// Tests that a splat constant is copied into the fusion as an immediate (the
// copy outside goes once unused) while a non-splat one is an input.
// CHECK-LABEL: func @immediates
// CHECK-NOT: dense<5.000000e-01>
// CHECK: %[[T:.*]] = kiln.constant dense<[1.000000e+00, 2.000000e+00]>
// CHECK: kiln.fusion %arg0, %[[T]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2xf32>, %[[W:.*]]: tensor<2xf32>):
// CHECK-NEXT: %[[H:.*]] = kiln.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: kiln.mul %[[X]], %[[H]]
func.func @immediates(%x: tensor<2xf32>) -> tensor<2xf32> {
  %half = kiln.constant dense<0.5> : tensor<f32>
  %table = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %h = kiln.mul %x, %half : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %y = kiln.add %h, %table : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// Tests that a step's optimizer updates become one fusion: the multi-tensor
// update, one kernel for every parameter.
// CHECK-LABEL: func @multi_tensor_update
// CHECK: %[[U:.*]]:2 = kiln.fusion %arg0, %arg2, %arg4, %arg5, %arg1, %arg3
// CHECK: kiln.adamw
// CHECK: kiln.adamw
// CHECK: kiln.yield
// CHECK: return %[[U]]#0, %[[U]]#1
func.func @multi_tensor_update(%w: tensor<4x8xf32>, %b: tensor<8xf32>, %gw: tensor<4x8xf32>, %gb: tensor<8xf32>, %lr: tensor<f32>, %t: tensor<i64>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %w1:3 = kiln.adamw %w, %gw, %gw, %gw, %lr, %t {beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, weight_decay = 0.01} : tensor<4x8xf32>, tensor<f32>, tensor<i64>
  %b1:3 = kiln.adamw %b, %gb, %gb, %gb, %lr, %t {beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, weight_decay = 0.0} : tensor<8xf32>, tensor<f32>, tensor<i64>
  return %w1#0, %b1#0 : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Tests the backward epilogue: a product (behind a reshape) that a tanh
// GELU's derivative scales, cuBLASLt's DGELU.
// CHECK-LABEL: func @dgelu_epilogue
// CHECK: kiln.fusion %arg0, %arg1, %arg2 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
// CHECK: kiln.matmul
// CHECK-NEXT: kiln.reshape
// CHECK-NEXT: kiln.gelu_grad
func.func @dgelu_epilogue(%dy: tensor<4x8xf32>, %w: tensor<8x8xf32>, %pre: tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
  %g = kiln.matmul %dy, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = kiln.reshape %g : tensor<4x8xf32> to tensor<2x2x8xf32>
  %dx = kiln.gelu_grad %pre, %r approximation = tanh : tensor<2x2x8xf32>
  return %dx : tensor<2x2x8xf32>
}

// -----

// Tests the epilogues in 16 bits, as precision assignment leaves them: the
// bias read through its widening, the sum rounded as it is stored (the GELU
// reads it from memory, widened in its own fusion); backward, the GELU
// input read through its widening and the scaled product rounded. Each
// fusion reads and stores only 16-bit values besides the product's f32
// accumulation.
// CHECK-LABEL: func @narrow_epilogues
// CHECK: %[[PRE:.*]] = kiln.fusion %arg0, %arg1, %arg2 : (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x8xbf16>, %[[B:.*]]: tensor<8xbf16>):
// CHECK-NEXT: %[[P:.*]] = kiln.matmul %[[X]], %[[W]]
// CHECK-NEXT: %[[BW:.*]] = kiln.cast %[[B]]
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[P]], %[[BW]]
// CHECK-NEXT: %[[R:.*]] = kiln.cast %[[S]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: kiln.yield %[[R]]
// CHECK: kiln.fusion %[[PRE]] : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK: kiln.gelu
// CHECK: kiln.fusion %arg3, %arg1, %[[PRE]] : (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16> {
// CHECK: kiln.matmul
// CHECK-NEXT: kiln.cast
// CHECK-NEXT: kiln.gelu_grad
// CHECK-NEXT: kiln.cast {{.*}} to tensor<4x8xbf16>
// CHECK-NEXT: kiln.yield
func.func @narrow_epilogues(%x: tensor<4x8xbf16>, %w: tensor<8x8xbf16>, %b: tensor<8xbf16>, %dy: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %h = kiln.matmul %x, %w {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
  %bw = kiln.cast %b : tensor<8xbf16> to tensor<8xf32>
  %s = kiln.add %h, %bw : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %pre = kiln.cast %s : tensor<4x8xf32> to tensor<4x8xbf16>
  %prew = kiln.cast %pre : tensor<4x8xbf16> to tensor<4x8xf32>
  %g = kiln.gelu %prew approximation = tanh : tensor<4x8xf32>
  %y = kiln.cast %g : tensor<4x8xf32> to tensor<4x8xbf16>
  %d = kiln.matmul %dy, %w {accumulate = f32, transpose_rhs} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
  %prew2 = kiln.cast %pre : tensor<4x8xbf16> to tensor<4x8xf32>
  %dx = kiln.gelu_grad %prew2, %d approximation = tanh : tensor<4x8xf32>
  %dxb = kiln.cast %dx : tensor<4x8xf32> to tensor<4x8xbf16>
  return %y, %dxb : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// Tests that an elementwise reader of what a reduction sums joins the
// reduction's fusion when neither reads anything the other computes (the
// bias gradient and bf16 copy of a gradient that a norm's gradient
// produced): one kernel reads the gradient once.
// CHECK-LABEL: func @sibling_of_reduction
// CHECK: %[[F:.*]]:2 = kiln.fusion %arg0 : (tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xbf16>) {
// CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: kiln.reduce_sum %[[G]]
// CHECK-NEXT: kiln.cast %[[G]]
// CHECK-NOT: kiln.fusion
func.func @sibling_of_reduction(%g: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xbf16>) {
  %b = kiln.reduce_sum %g {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %c = kiln.cast %g : tensor<4x8xf32> to tensor<4x8xbf16>
  return %b, %c : tensor<8xf32>, tensor<4x8xbf16>
}

// -----

// Tests that a norm's gradient takes the elementwise readers of its input
// gradient (the residual gradient added to it), computed where each row's
// statistics are at hand, and the sum of the result over its rows (the
// bias gradient of the next product back, which the block-per-row kernel
// adds up as it goes) with the bf16 copy beside it: the rows are read
// once.
// CHECK-LABEL: func @norm_gradient_residual
// CHECK: kiln.fusion %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 : {{.*}} -> (tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8x8xbf16>) {
// CHECK: kiln.layer_norm_grad
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.reshape
// CHECK-NEXT: kiln.reduce_sum {{.*}} {axes = array<i64: 0>}
// CHECK-NEXT: kiln.cast
// CHECK-NEXT: kiln.yield
func.func @norm_gradient_residual(%x: tensor<2x4x8xf32>, %m: tensor<2x4x1xf32>, %r: tensor<2x4x1xf32>, %dy: tensor<2x4x8xf32>, %s: tensor<8xf32>, %dres: tensor<2x4x8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8x8xbf16>) {
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %sum = kiln.add %dres, %dx : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %flat = kiln.reshape %sum : tensor<2x4x8xf32> to tensor<8x8xf32>
  %bias = kiln.reduce_sum %flat {axes = array<i64: 0>} : (tensor<8x8xf32>) -> tensor<8xf32>
  %copy = kiln.cast %flat : tensor<8x8xf32> to tensor<8x8xbf16>
  return %ds, %db, %sum, %bias, %copy : tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8x8xbf16>
}

// -----

// Tests the same sums over rows where they read the norm's input gradient
// itself (BERT's post-norm layers): the bias gradient and the bf16 copy
// join the norm gradient's kernel.
// CHECK-LABEL: func @norm_gradient_bias_sum
// CHECK: kiln.fusion %arg0, %arg1, %arg2, %arg3, %arg4 : {{.*}} -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xbf16>) {
// CHECK: kiln.layer_norm_grad
// CHECK-NEXT: kiln.reduce_sum {{.*}} {axes = array<i64: 0, 1>}
// CHECK-NEXT: kiln.cast
// CHECK-NEXT: kiln.yield
func.func @norm_gradient_bias_sum(%x: tensor<2x4x8xf32>, %m: tensor<2x4x1xf32>, %r: tensor<2x4x1xf32>, %dy: tensor<2x4x8xf32>, %s: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xbf16>) {
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %bias = kiln.reduce_sum %dx {axes = array<i64: 0, 1>} : (tensor<2x4x8xf32>) -> tensor<8xf32>
  %copy = kiln.cast %dx : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  return %ds, %db, %bias, %copy : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xbf16>
}

// -----

// Tests that the elementwise ops computing a norm gradient's output
// gradient (a post-norm block's: the residual's gradient plus the block's,
// a 16-bit product) join its kernel, which reads their operands rather
// than the sum stored; a group that reads through a transpose stays a
// kernel of its own.
// CHECK-LABEL: func @norm_gradient_of_a_sum
// CHECK: %[[F:.*]]:4 = kiln.fusion %arg5, %arg4, %arg0, %arg1, %arg2, %arg3 : {{.*}} -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xbf16>) {
// CHECK: kiln.cast
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.layer_norm_grad
// CHECK-NEXT: kiln.reduce_sum
// CHECK-NEXT: kiln.cast
// CHECK-NEXT: kiln.yield
// CHECK: %[[T:.*]] = kiln.fusion %arg6, %arg4
// CHECK: kiln.transpose
// CHECK: kiln.yield
// CHECK-NEXT: }
// CHECK-NEXT: kiln.layer_norm_grad %arg0, %arg1, %arg2, %[[T]]
func.func @norm_gradient_of_a_sum(%x: tensor<2x4x8xf32>, %m: tensor<2x4x1xf32>, %r: tensor<2x4x1xf32>, %s: tensor<8xf32>, %dres: tensor<2x4x8xf32>, %dblock: tensor<2x4x8xbf16>, %dt: tensor<2x8x4xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xbf16>, tensor<2x4x8xf32>) {
  %wide = kiln.cast %dblock : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %dy = kiln.add %dres, %wide : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %bias = kiln.reduce_sum %dx {axes = array<i64: 0, 1>} : (tensor<2x4x8xf32>) -> tensor<8xf32>
  %copy = kiln.cast %dx : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  %t = kiln.transpose %dt {permutation = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  %dy2 = kiln.add %dres, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %dx2, %ds2, %db2 = kiln.layer_norm_grad %x, %m, %r, %dy2 scale %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %ds, %db, %bias, %copy, %dx2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xbf16>, tensor<2x4x8xf32>
}

// -----

// Tests that a group with a value smaller than the norm's rows (a row's
// scale, broadcast over it) stays a kernel of its own.
// CHECK-LABEL: func @norm_gradient_of_a_scaled_sum
// CHECK: %[[S:.*]] = kiln.fusion
// CHECK: kiln.mul
// CHECK: kiln.add
// CHECK: kiln.yield
// CHECK-NEXT: }
// CHECK-NEXT: kiln.layer_norm_grad %arg0, %arg1, %arg2, %[[S]]
func.func @norm_gradient_of_a_scaled_sum(%x: tensor<2x4x8xf32>, %m: tensor<2x4x1xf32>, %r: tensor<2x4x1xf32>, %s: tensor<8xf32>, %dres: tensor<2x4x8xf32>, %a: tensor<2x4x1xf32>, %b: tensor<2x4x1xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %w = kiln.mul %a, %b : (tensor<2x4x1xf32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %dy = kiln.add %dres, %w : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx, %ds, %db : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a reshape of a norm gradient's stored result that only ops
// outside read (a product) stays a view of it rather than a second copy.
// CHECK-LABEL: func @norm_gradient_view
// CHECK: %[[G:.*]]:3 = kiln.fusion %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 : {{.*}} -> (tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) {
// CHECK: kiln.layer_norm_grad
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.yield
// CHECK: %[[V:.*]] = kiln.reshape %[[G]]#2 : tensor<2x4x8xf32> to tensor<8x8xf32>
// CHECK: kiln.matmul %[[V]], %arg6
func.func @norm_gradient_view(%x: tensor<2x4x8xf32>, %m: tensor<2x4x1xf32>, %r: tensor<2x4x1xf32>, %dy: tensor<2x4x8xf32>, %s: tensor<8xf32>, %dres: tensor<2x4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>) {
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %sum = kiln.add %dres, %dx : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %flat = kiln.reshape %sum : tensor<2x4x8xf32> to tensor<8x8xf32>
  %p = kiln.matmul %flat, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %ds, %db, %sum, %p : tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>
}

// -----

// Tests that a reader of a norm gradient's scale gradient (a sum over
// rows) stays out of its kernel, which a block per row computes.
// CHECK-LABEL: func @norm_gradient_sums
// CHECK: %[[G:.*]]:2 = kiln.fusion
// CHECK: kiln.layer_norm_grad
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.yield
// CHECK: kiln.mul %[[G]]#0, %[[G]]#0
func.func @norm_gradient_sums(%x: tensor<2x4x8xf32>, %m: tensor<2x4x1xf32>, %r: tensor<2x4x1xf32>, %dy: tensor<2x4x8xf32>, %s: tensor<8xf32>, %dres: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>) {
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %sum = kiln.add %dres, %dx : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %squares = kiln.mul %ds, %ds : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %sum, %squares : tensor<2x4x8xf32>, tensor<8xf32>
}

// -----

// Tests that only a cast to a 16-bit float rounds an epilogue's result as
// it is stored: a cast to an integer stays out of the GEMM's fusion.
// CHECK-LABEL: func @integer_after_bias
// CHECK: %[[E:.*]] = kiln.fusion
// CHECK: kiln.matmul
// CHECK-NEXT: kiln.add
// CHECK-NEXT: kiln.yield
// CHECK: kiln.cast %[[E]] : tensor<4x8xf32> to tensor<4x8xi16>
func.func @integer_after_bias(%x: tensor<4x8xbf16>, %w: tensor<8x8xbf16>, %b: tensor<8xf32>) -> tensor<4x8xi16> {
  %h = kiln.matmul %x, %w {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
  %s = kiln.add %h, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %c = kiln.cast %s : tensor<4x8xf32> to tensor<4x8xi16>
  return %c : tensor<4x8xi16>
}

// -----

// Tests that data movement fuses with the cast that follows it: the split of
// a fused q/k/v product into heads (slice, reshape, transpose) and its bf16
// cast are one kernel, which stores only the cast.
// CHECK-LABEL: func @split_heads
// CHECK: %[[Q:.*]] = kiln.fusion %arg0 : (tensor<2x4x24xf32>) -> tensor<2x2x4x4xbf16> {
// CHECK: kiln.slice
// CHECK: kiln.reshape
// CHECK: kiln.transpose
// CHECK: kiln.cast
// CHECK: return %[[Q]]
func.func @split_heads(%qkv: tensor<2x4x24xf32>) -> tensor<2x2x4x4xbf16> {
  %q = kiln.slice %qkv {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>}
      : tensor<2x4x24xf32> to tensor<2x4x8xf32>
  %h = kiln.reshape %q : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %t = kiln.transpose %h {permutation = array<i64: 0, 2, 1, 3>}
      : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %c = kiln.cast %t : tensor<2x2x4x4xf32> to tensor<2x2x4x4xbf16>
  return %c : tensor<2x2x4x4xbf16>
}

// -----

// Tests that a reshape of a value read from outside stays a view when
// something outside the fusion reads it too (no copy of the logits), and
// that a group ending in a reduction still takes a cast of its other
// values: the gradient is summed and cast to bf16 in one fusion, and is
// never stored in f32.
// CHECK-LABEL: func @views_and_reductions
// CHECK: %[[V:.*]] = kiln.reshape %arg0
// CHECK: kiln.fusion %[[V]]
// CHECK: %[[G:.*]]:2 = kiln.fusion %arg1, %arg2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xbf16>)
// CHECK: kiln.reduce_sum
// CHECK: kiln.cast
// CHECK: return {{.*}}%[[V]], %[[G]]#0, %[[G]]#1
func.func @views_and_reductions(%logits: tensor<2x2x8xf32>, %a: tensor<4x8xf32>, %b: tensor<4x8xf32>)
    -> (tensor<f32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xbf16>) {
  %flat = kiln.reshape %logits : tensor<2x2x8xf32> to tensor<4x8xf32>
  %e = kiln.exp %flat : tensor<4x8xf32>
  %s = kiln.reduce_sum %e {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = kiln.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %db = kiln.reduce_sum %g {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %gc = kiln.cast %g : tensor<4x8xf32> to tensor<4x8xbf16>
  return %s, %flat, %db, %gc : tensor<f32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xbf16>
}

// -----

// Tests that fusion first turns a transpose of a product into the product
// of the swapped operands (the tied embedding's gradient from the output
// projection's), which then adds the other gradient as cuBLASLt's C.
// CHECK-LABEL: func @transposed_product
// CHECK: kiln.fusion %arg1, %arg0, %arg2
// CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: kiln.add
func.func @transposed_product(%h: tensor<8x4xf32>, %dy: tensor<8x6xf32>, %g: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %p = kiln.matmul %h, %dy {transpose_lhs} : (tensor<8x4xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %t = kiln.transpose %p {permutation = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %s = kiln.add %t, %g : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return %s : tensor<6x4xf32>
}

// -----

// Tests that a reshape read inside the fusion and outside it, of a value
// the fusion stores anyway, is a view of that value for the ops outside
// (a head gradient put back in token order, read in 2-D and 3-D by two
// products): the fusion stores the elements once.
// CHECK-LABEL: func @reshape_read_inside_and_out
// CHECK: %[[F:.*]]:2 = kiln.fusion %arg0 : (tensor<2x4x8x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<64xf32>) {
// CHECK: %[[T:.*]] = kiln.transpose
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[T]]
// CHECK-NEXT: kiln.cast %[[R]]
// CHECK: kiln.yield %[[T]], %{{.*}} : tensor<2x8x4x16xbf16>, tensor<64xf32>
// CHECK: %[[V:.*]] = kiln.reshape %[[F]]#0 : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
// CHECK: return %[[F]]#0, %[[V]], %[[F]]#1
func.func @reshape_read_inside_and_out(%d: tensor<2x4x8x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x8x64xbf16>, tensor<64xf32>) {
  %t = kiln.transpose %d {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xbf16>) -> tensor<2x8x4x16xbf16>
  %r = kiln.reshape %t : tensor<2x8x4x16xbf16> to tensor<2x8x64xbf16>
  %w = kiln.cast %r : tensor<2x8x64xbf16> to tensor<2x8x64xf32>
  %s = kiln.reduce_sum %w {axes = array<i64: 0, 1>} : (tensor<2x8x64xf32>) -> tensor<64xf32>
  return %t, %r, %s : tensor<2x8x4x16xbf16>, tensor<2x8x64xbf16>, tensor<64xf32>
}

// -----

// Tests that consecutive fusions with scalar results that read none of
// each other's (the squares of each gradient a gradient norm adds up)
// become one fusion, whose kernels over tensors of one shape the CUDA
// target launches once; what adds them up stays a fusion after it.
// CHECK-LABEL: func @scalar_reductions
// CHECK: %[[S:.*]]:3 = kiln.fusion %arg0, %arg1, %arg2 : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<16xbf16>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
// CHECK-COUNT-3: kiln.reduce_sum
// CHECK: kiln.yield
// CHECK: kiln.fusion %[[S]]#0, %[[S]]#1, %[[S]]#2 : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<f32> {
func.func @scalar_reductions(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<16xbf16>) -> tensor<f32> {
  %a2 = kiln.mul %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sa = kiln.reduce_sum %a2 {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  %b2 = kiln.mul %b, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sb = kiln.reduce_sum %b2 {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  %t = kiln.add %sa, %sb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %cw = kiln.cast %c : tensor<16xbf16> to tensor<16xf32>
  %c2 = kiln.mul %cw, %cw : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %sc = kiln.reduce_sum %c2 {axes = array<i64: 0>} : (tensor<16xf32>) -> tensor<f32>
  %u = kiln.add %t, %sc : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %n = kiln.sqrt %u : tensor<f32>
  return %n : tensor<f32>
}

// -----

// Tests a bias gradient beside its weight gradient (GPT-2's Conv1D: the
// weight gradient is x^T dy, the bias gradient dy summed over the tokens,
// the product's k dimension): the sum, read through its exact widening,
// joins the product's fusion, after it, for cuBLASLt's BGRAD epilogue.
// CHECK-LABEL: func @bias_gradient_epilogue
// CHECK: %[[F:.*]]:2 = kiln.fusion %arg0, %arg1 : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> (tensor<4x6xf32>, tensor<6xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8x4xbf16>, %[[DY:.*]]: tensor<8x6xbf16>):
// CHECK-NEXT: kiln.matmul %[[X]], %[[DY]] {accumulate = f32, transpose_lhs}
// CHECK-NEXT: %[[W:.*]] = kiln.cast %[[DY]] : tensor<8x6xbf16> to tensor<8x6xf32>
// CHECK-NEXT: kiln.reduce_sum %[[W]] {axes = array<i64: 0>}
// CHECK-NEXT: kiln.yield
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @bias_gradient_epilogue(%x: tensor<8x4xbf16>, %dy: tensor<8x6xbf16>) -> (tensor<4x6xf32>, tensor<6xf32>) {
  %wide = kiln.cast %dy : tensor<8x6xbf16> to tensor<8x6xf32>
  %db = kiln.reduce_sum %wide {axes = array<i64: 0>} : (tensor<8x6xf32>) -> tensor<6xf32>
  %dw = kiln.matmul %x, %dy {accumulate = f32, transpose_lhs} : (tensor<8x4xbf16>, tensor<8x6xbf16>) -> tensor<4x6xf32>
  return %dw, %db : tensor<4x6xf32>, tensor<6xf32>
}

// -----

// Tests the other operand: a Linear layer's weight gradient dy^T x sums
// its lhs over k (BGRADB in cuBLASLt's terms).
// CHECK-LABEL: func @bias_gradient_of_lhs
// CHECK: kiln.fusion %arg0, %arg1 : (tensor<8x6xf32>, tensor<8x4xf32>) -> (tensor<6x4xf32>, tensor<6xf32>) {
// CHECK-NEXT: ^bb0(%[[DY:.*]]: tensor<8x6xf32>, %{{.*}}: tensor<8x4xf32>):
// CHECK-NEXT: kiln.matmul
// CHECK-NEXT: kiln.reduce_sum %[[DY]] {axes = array<i64: 0>}
// CHECK-NEXT: kiln.yield
func.func @bias_gradient_of_lhs(%dy: tensor<8x6xf32>, %x: tensor<8x4xf32>) -> (tensor<6x4xf32>, tensor<6xf32>) {
  %dw = kiln.matmul %dy, %x {transpose_lhs} : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %db = kiln.reduce_sum %dy {axes = array<i64: 0>} : (tensor<8x6xf32>) -> tensor<6xf32>
  return %dw, %db : tensor<6x4xf32>, tensor<6xf32>
}

// -----

// Tests sums that no GEMM computes: over the product's m dimension (not
// k); one read before the product (the fusion would come too late); one
// that a norm gradient's kernel adds up as it goes (GPT-2's projections
// after attention and MLP), where it costs no extra read.
// CHECK-LABEL: func @sums_beside_no_gemm
// CHECK-NEXT: kiln.reduce_sum %arg0 {axes = array<i64: 1>}
// CHECK-NEXT: %[[E:.*]] = kiln.reduce_sum %arg0 {axes = array<i64: 0>}
// CHECK-NEXT: kiln.add %[[E]], %[[E]]
// CHECK-NEXT: kiln.matmul %arg0, %arg1 {transpose_lhs}
// CHECK-NEXT: %[[N:.*]]:2 = kiln.fusion
// CHECK: kiln.layer_norm_grad
// CHECK-NEXT: kiln.reshape
// CHECK-NEXT: kiln.reduce_sum {{.*}} {axes = array<i64: 0>}
// CHECK-NEXT: kiln.yield
// CHECK: kiln.matmul %arg1, %[[N]]#0 {transpose_lhs}
func.func @sums_beside_no_gemm(%dy: tensor<8x6xf32>, %h: tensor<8x4xf32>, %x: tensor<2x4x8xf32>, %m: tensor<2x4x1xf32>, %r: tensor<2x4x1xf32>, %g: tensor<2x4x8xf32>, %s: tensor<8xf32>) -> (tensor<8xf32>, tensor<6xf32>, tensor<6x4xf32>, tensor<8xf32>, tensor<4x8xf32>) {
  %rows = kiln.reduce_sum %dy {axes = array<i64: 1>} : (tensor<8x6xf32>) -> tensor<8xf32>
  %early = kiln.reduce_sum %dy {axes = array<i64: 0>} : (tensor<8x6xf32>) -> tensor<6xf32>
  %twice = kiln.add %early, %early : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %dw = kiln.matmul %dy, %h {transpose_lhs} : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %g scale %s {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %flat = kiln.reshape %dx : tensor<2x4x8xf32> to tensor<8x8xf32>
  %bias = kiln.reduce_sum %flat {axes = array<i64: 0>} : (tensor<8x8xf32>) -> tensor<8xf32>
  %dw2 = kiln.matmul %h, %flat {transpose_lhs} : (tensor<8x4xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %rows, %twice, %dw, %bias, %dw2 : tensor<8xf32>, tensor<6xf32>, tensor<6x4xf32>, tensor<8xf32>, tensor<4x8xf32>
}

// -----

// Tests a bias gradient a fusion computes beside the gradient it puts in
// token order (BERT's query, key and value): the sum moves out, onto the
// weight gradient's operand (the same values, as the stored bf16 ones
// widen exactly), and joins that product's fusion; the other fusion only
// rearranges.
// CHECK-LABEL: func @bias_gradient_out_of_a_fusion
// CHECK: %[[T:.*]] = kiln.fusion %arg0 : (tensor<2x3x4x2xbf16>) -> tensor<8x6xbf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kiln.transpose
// CHECK-NEXT: kiln.reshape
// CHECK-NEXT: kiln.yield
// CHECK: %[[G:.*]]:2 = kiln.fusion %[[T]], %arg1 : (tensor<8x6xbf16>, tensor<8x5xbf16>) -> (tensor<6x5xf32>, tensor<6xf32>) {
// CHECK: kiln.matmul {{.*}} {accumulate = f32, transpose_lhs}
// CHECK-NEXT: kiln.cast
// CHECK-NEXT: kiln.reduce_sum {{.*}} {axes = array<i64: 0>}
// CHECK: return %[[G]]#0, %[[G]]#1
func.func @bias_gradient_out_of_a_fusion(%heads: tensor<2x3x4x2xbf16>, %x: tensor<8x5xbf16>) -> (tensor<6x5xf32>, tensor<6xf32>) {
  %t = kiln.transpose %heads {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x4x2xbf16>) -> tensor<2x4x3x2xbf16>
  %tokens = kiln.reshape %t : tensor<2x4x3x2xbf16> to tensor<2x4x6xbf16>
  %wide = kiln.cast %tokens : tensor<2x4x6xbf16> to tensor<2x4x6xf32>
  %db = kiln.reduce_sum %wide {axes = array<i64: 0, 1>} : (tensor<2x4x6xf32>) -> tensor<6xf32>
  %flat = kiln.reshape %t : tensor<2x4x3x2xbf16> to tensor<8x6xbf16>
  %dw = kiln.matmul %flat, %x {accumulate = f32, transpose_lhs} : (tensor<8x6xbf16>, tensor<8x5xbf16>) -> tensor<6x5xf32>
  return %dw, %db : tensor<6x5xf32>, tensor<6xf32>
}

// -----

// Tests a bias gradient of a gradient that a fusion computes element by
// element (BERT's erf GELU gradient, rounded to bf16 for the next
// products): the sum moves onto the weight gradient's operand, the stored
// bf16 gradient, and joins that product's fusion (cuBLASLt's BGRADB), so
// that the other fusion is elementwise: a kernel of 16-byte pieces rather
// than a block per 32 columns whose threads wait on memory row by row.
// CHECK-LABEL: func @bias_gradient_of_an_elementwise_gradient
// CHECK: %[[G:.*]] = kiln.fusion %arg0, %arg1 : (tensor<8x6xbf16>, tensor<8x6xbf16>) -> tensor<8x6xbf16> {
// CHECK-NOT: kiln.reduce_sum
// CHECK: kiln.yield
// CHECK: kiln.fusion %arg2, %[[G]] : (tensor<8x5xbf16>, tensor<8x6xbf16>) -> (tensor<5x6xf32>, tensor<6xf32>) {
// CHECK: kiln.matmul {{.*}} {accumulate = f32, transpose_lhs}
// CHECK-NEXT: kiln.cast
// CHECK-NEXT: kiln.reduce_sum {{.*}} {axes = array<i64: 0>}
func.func @bias_gradient_of_an_elementwise_gradient(%pre: tensor<8x6xbf16>, %dy: tensor<8x6xbf16>, %x: tensor<8x5xbf16>) -> (tensor<5x6xf32>, tensor<6xf32>) {
  %pw = kiln.cast %pre : tensor<8x6xbf16> to tensor<8x6xf32>
  %gw = kiln.cast %dy : tensor<8x6xbf16> to tensor<8x6xf32>
  %d = kiln.gelu_grad %pw, %gw approximation = none : tensor<8x6xf32>
  %d16 = kiln.cast %d : tensor<8x6xf32> to tensor<8x6xbf16>
  %wide = kiln.cast %d16 : tensor<8x6xbf16> to tensor<8x6xf32>
  %db = kiln.reduce_sum %wide {axes = array<i64: 0>} : (tensor<8x6xf32>) -> tensor<6xf32>
  %dw = kiln.matmul %x, %d16 {accumulate = f32, transpose_lhs} : (tensor<8x5xbf16>, tensor<8x6xbf16>) -> tensor<5x6xf32>
  return %dw, %db : tensor<5x6xf32>, tensor<6xf32>
}

// -----

// Tests a bias gradient summed from an exact assembly (GPT-2's packed q/k/v
// gradient: 16-bit parts widened, inserted into zeros at disjoint places,
// added, rounded back): the assembly holds the rounded values exactly, so
// the sum moves onto the weight gradient's operand, the rounded result.
// CHECK-LABEL: func @bias_gradient_of_an_assembly
// CHECK: %[[A:.*]] = kiln.fusion %arg0, %arg1 : (tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x4xbf16> {
// CHECK-NOT: kiln.reduce_sum
// CHECK: kiln.yield
// CHECK: kiln.fusion %arg2, %[[A]] : (tensor<4x3xbf16>, tensor<4x4xbf16>) -> (tensor<3x4xf32>, tensor<4xf32>) {
// CHECK: kiln.matmul {{.*}} {accumulate = f32, transpose_lhs}
// CHECK-NEXT: kiln.cast
// CHECK-NEXT: kiln.reduce_sum {{.*}} {axes = array<i64: 0>}
func.func @bias_gradient_of_an_assembly(%q: tensor<4x2xbf16>, %k: tensor<4x2xbf16>, %x: tensor<4x3xbf16>) -> (tensor<3x4xf32>, tensor<4xf32>) {
  %zeros = kiln.constant dense<0.0> : tensor<4x4xf32>
  %qw = kiln.cast %q : tensor<4x2xbf16> to tensor<4x2xf32>
  %kw = kiln.cast %k : tensor<4x2xbf16> to tensor<4x2xf32>
  %qi = kiln.insert_slice %zeros, %qw {start = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  %ki = kiln.insert_slice %zeros, %kw {start = array<i64: 0, 2>, stride = array<i64: 1, 1>} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  %packed = kiln.add %qi, %ki : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %db = kiln.reduce_sum %packed {axes = array<i64: 0>} : (tensor<4x4xf32>) -> tensor<4xf32>
  %rounded = kiln.cast %packed : tensor<4x4xf32> to tensor<4x4xbf16>
  %dw = kiln.matmul %x, %rounded {accumulate = f32, transpose_lhs} : (tensor<4x3xbf16>, tensor<4x4xbf16>) -> tensor<3x4xf32>
  return %dw, %db : tensor<3x4xf32>, tensor<4xf32>
}

// -----

// Merged projections' gradients (kiln-merge-projections): the bias
// gradients are slices of one sum, and the weight gradients slices of one
// product. The rounding of the summed gradient joins the sum's group, with
// the bias gradients' slices moved after it; slices of contiguous blocks
// stay out of kernels (views of their input), and the sums of squares
// around them still become one fusion.
// CHECK-LABEL: func @merged_bias_gradients
// CHECK: %[[G:.*]]:2 = kiln.fusion %arg0 : (tensor<16x192xf32>) -> (tensor<192xf32>, tensor<16x192xbf16>)
// CHECK: %[[W:.*]] = kiln.matmul %[[G]]#1, %arg1
// CHECK-COUNT-2: kiln.slice %[[W]]
// CHECK-COUNT-3: kiln.slice %[[G]]#0
// CHECK-NEXT: kiln.fusion {{.*}} -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
func.func @merged_bias_gradients(%d: tensor<16x192xf32>, %x: tensor<16x64xbf16>) -> (tensor<192x64xf32>, tensor<f32>) {
  %s = kiln.reduce_sum %d {axes = array<i64: 0>} : (tensor<16x192xf32>) -> tensor<192xf32>
  %b0 = kiln.slice %s {start = array<i64: 0>, stride = array<i64: 1>} : tensor<192xf32> to tensor<64xf32>
  %b1 = kiln.slice %s {start = array<i64: 64>, stride = array<i64: 1>} : tensor<192xf32> to tensor<64xf32>
  %b2 = kiln.slice %s {start = array<i64: 128>, stride = array<i64: 1>} : tensor<192xf32> to tensor<64xf32>
  %r = kiln.cast %d : tensor<16x192xf32> to tensor<16x192xbf16>
  %w = kiln.matmul %r, %x {accumulate = f32, transpose_lhs} : (tensor<16x192xbf16>, tensor<16x64xbf16>) -> tensor<192x64xf32>
  %w0 = kiln.slice %w {start = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<192x64xf32> to tensor<64x64xf32>
  %w1 = kiln.slice %w {start = array<i64: 64, 0>, stride = array<i64: 1, 1>} : tensor<192x64xf32> to tensor<64x64xf32>
  %n0 = kiln.mul %w0, %w0 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %q0 = kiln.reduce_sum %n0 {axes = array<i64: 0, 1>} : (tensor<64x64xf32>) -> tensor<f32>
  %m0 = kiln.mul %b0, %b0 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %p0 = kiln.reduce_sum %m0 {axes = array<i64: 0>} : (tensor<64xf32>) -> tensor<f32>
  %n1 = kiln.mul %w1, %w1 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %q1 = kiln.reduce_sum %n1 {axes = array<i64: 0, 1>} : (tensor<64x64xf32>) -> tensor<f32>
  %m1 = kiln.mul %b1, %b1 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %p1 = kiln.reduce_sum %m1 {axes = array<i64: 0>} : (tensor<64xf32>) -> tensor<f32>
  %m2 = kiln.mul %b2, %b2 : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %p2 = kiln.reduce_sum %m2 {axes = array<i64: 0>} : (tensor<64xf32>) -> tensor<f32>
  %t0 = kiln.add %q0, %p0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %t1 = kiln.add %q1, %p1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %t2 = kiln.add %t0, %t1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %t3 = kiln.add %t2, %p2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %w, %t3 : tensor<192x64xf32>, tensor<f32>
}

// -----

// Tests that a concatenation is index arithmetic like a slice: the rotary
// embedding's rotate_half (the halves of the last axis swapped, the first
// negated) is computed in the kernel that multiplies it by the sines, and
// never stored.
// CHECK-LABEL: func @rotary_embedding
// CHECK: %[[R:.*]] = kiln.fusion %arg0, %arg1, %arg2 : (tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32> {
// CHECK: kiln.slice
// CHECK: kiln.slice
// CHECK: kiln.neg
// CHECK: kiln.concat
// CHECK: kiln.mul
// CHECK: kiln.mul
// CHECK: kiln.add
// CHECK-NEXT: kiln.yield
// CHECK: return %[[R]]
func.func @rotary_embedding(%x: tensor<2x3x8xf32>, %cos: tensor<3x8xf32>, %sin: tensor<3x8xf32>) -> tensor<2x3x8xf32> {
  %x1 = kiln.slice %x {start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>}
      : tensor<2x3x8xf32> to tensor<2x3x4xf32>
  %x2 = kiln.slice %x {start = array<i64: 0, 0, 4>, stride = array<i64: 1, 1, 1>}
      : tensor<2x3x8xf32> to tensor<2x3x4xf32>
  %n = kiln.neg %x2 : tensor<2x3x4xf32>
  %r = kiln.concat %n, %x1 {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x8xf32>
  %a = kiln.mul %x, %cos : (tensor<2x3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  %b = kiln.mul %r, %sin : (tensor<2x3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  %y = kiln.add %a, %b : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Tests that the concatenation of merged projections' weights and its copy
// stay out of elementwise fusion: the parameter copies' fusion takes both
// (fuse-parameter-copies.mlir).
// CHECK-LABEL: func @stacked_weights_copy
// CHECK-NOT: kiln.fusion
// CHECK: %[[S:.*]] = kiln.concat
// CHECK-NEXT: kiln.cast %[[S]]
func.func @stacked_weights_copy(%x: tensor<8x8xbf16>) -> tensor<8x8xbf16> {
  %wq = kiln.parameter "q" : tensor<4x8xf32>
  %wk = kiln.parameter "k" : tensor<4x8xf32>
  %s = kiln.concat %wq, %wk {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %cs = kiln.cast %s : tensor<8x8xf32> to tensor<8x8xbf16>
  %p = kiln.matmul %x, %cs {transpose_rhs} : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  return %p : tensor<8x8xbf16>
}

// -----

// Tests that a broadcast joins the fusion of its readers, which read its
// stored input at the broadcast index, but not the fusion computing that
// input, which would then be computed once per copy (a mean's gradient
// spread over a row, as decomposed RMS norms have it).
// CHECK-LABEL: func @spread_gradient
// CHECK: %[[G:.*]] = kiln.fusion %arg0, %arg2 : (tensor<2x3x1xf32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32> {
// CHECK-NOT: kiln.broadcast
// CHECK: kiln.yield
// CHECK: %[[S:.*]] = kiln.fusion %[[G]], %arg1 : (tensor<2x3x1xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
// CHECK: kiln.broadcast
// CHECK: kiln.mul
// CHECK: kiln.add
// CHECK: return %[[S]]
func.func @spread_gradient(%g: tensor<2x3x1xf32>, %x: tensor<2x3x8xf32>, %r: tensor<2x3x1xf32>) -> tensor<2x3x8xf32> {
  %d = kiln.div %g, %r : (tensor<2x3x1xf32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = kiln.neg %d : tensor<2x3x1xf32>
  %b = kiln.broadcast %n : tensor<2x3x1xf32> to tensor<2x3x8xf32>
  %m = kiln.mul %b, %x : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %y = kiln.add %m, %x : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Tests that a join which would have a kernel compute one op more than 128
// times per element is refused: each square reads its operand twice, so
// the n-th value back from the end of a chain of squares is computed 2^n
// times. Eight squares fuse (the first computed 128 times); the ninth
// starts a second fusion, which reads the eighth's result stored.
// CHECK-LABEL: func @repeated_squares
// CHECK: %[[F:.*]] = kiln.fusion %arg0
// CHECK-COUNT-8: kiln.mul
// CHECK: kiln.yield
// CHECK: %[[G:.*]] = kiln.fusion %[[F]]
// CHECK-COUNT-2: kiln.mul
// CHECK: kiln.yield
// CHECK: return %[[G]]
func.func @repeated_squares(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a1 = kiln.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a2 = kiln.mul %a1, %a1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a3 = kiln.mul %a2, %a2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a4 = kiln.mul %a3, %a3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a5 = kiln.mul %a4, %a4 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a6 = kiln.mul %a5, %a5 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a7 = kiln.mul %a6, %a6 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a8 = kiln.mul %a7, %a7 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a9 = kiln.mul %a8, %a8 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a10 = kiln.mul %a9, %a9 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a10 : tensor<4xf32>
}
