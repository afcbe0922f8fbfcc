// RUN: kiln-opt %s -split-input-file --kiln-assign-precision | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-assign-precision="precision=fp32" | FileCheck %s --check-prefix=FP32
// RUN: kiln-opt %s -split-input-file --kiln-assign-precision="precision=tf32" | FileCheck %s --check-prefix=TF32
// RUN: not kiln-opt %s --kiln-assign-precision="precision=fp8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: kiln-opt %s -split-input-file --kiln-assign-precision="gelu-epilogue=false" | FileCheck %s --check-prefix=STORED-SUM

// Tests that products read bf16 operands, accumulate in f32 and store
// their result rounded once to bf16, which readers computing in f32 (tanh,
// softmax) read widened; that a value read by two products is cast once;
// and that the other ops stay f32.
// CHECK-LABEL: func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[W:.*]] = kiln.parameter "w"
// CHECK-DAG: %[[XB:.*]] = kiln.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-DAG: %[[WB:.*]] = kiln.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK: %[[H:.*]] = kiln.matmul %[[XB]], %[[WB]] : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[HW:.*]] = kiln.cast %[[H]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: %[[T:.*]] = kiln.tanh %[[HW]] : tensor<4x8xf32>
// CHECK: %[[O:.*]] = kiln.matmul %{{.*}}, %[[WB]] : {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[OW:.*]] = kiln.cast %[[O]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: kiln.softmax %[[OW]] {{.*}} : tensor<4x8xf32>
// FP32-LABEL: func @mlp
// FP32-NOT: bf16
// tf32 is a way of computing products: their results stay f32.
// TF32-LABEL: func @mlp
// TF32: kiln.matmul {{.*}} {accumulate = f32} : (tensor<4x8xtf32>, tensor<8x8xtf32>) -> tensor<4x8xf32>
// TF32-NEXT: kiln.tanh %{{.*}} : tensor<4x8xf32>
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = kiln.parameter "w" : tensor<8x8xf32>
  %h = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = kiln.tanh %h : tensor<4x8xf32>
  %o = kiln.matmul %t, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = kiln.softmax %o {axis = 1 : i64} : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Tests that widening and narrowing back folds away, while narrowing and
// widening back (which rounds) stays.
// FP32-LABEL: func @casts
// CHECK-LABEL: func @casts
// CHECK-SAME: (%[[B:.*]]: tensor<4xbf16>, %[[F:.*]]: tensor<4xf32>)
// CHECK: %[[N:.*]] = kiln.cast %[[F]] : tensor<4xf32> to tensor<4xbf16>
// CHECK: %[[W:.*]] = kiln.cast %[[N]] : tensor<4xbf16> to tensor<4xf32>
// CHECK: return %[[B]], %[[W]]
func.func @casts(%b: tensor<4xbf16>, %f: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>) {
  %0 = kiln.cast %b : tensor<4xbf16> to tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> to tensor<4xbf16>
  %2 = kiln.cast %f : tensor<4xf32> to tensor<4xbf16>
  %3 = kiln.cast %2 : tensor<4xbf16> to tensor<4xf32>
  return %1, %3 : tensor<4xbf16>, tensor<4xf32>
}
// UNKNOWN: error: kiln-assign-precision: unknown precision 'fp8' (fp32, tf32, bf16 or fp16)

// -----

// Tests that a product read only narrowed (here through a transpose, as
// attention reads its output's gradient) is stored narrow: the views
// follow and the cast goes. Readers in f32 (the residual add) read it
// widened, each with its own cast, which fusion computes in its kernel. A
// product that becomes a result of the function in f32 stays f32.
// CHECK-LABEL: func @read_narrow
// CHECK: %[[P:.*]] = kiln.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %[[P]] {{.*}} -> tensor<8x4xbf16>
// CHECK: %[[Q:.*]] = kiln.matmul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[QW:.*]] = kiln.cast %[[Q]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = kiln.add %[[QW]], %arg0
// CHECK: %[[QW2:.*]] = kiln.cast %[[Q]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: kiln.mul %[[QW2]], %[[S]]
// CHECK: return %[[T]], %[[Q]]
// CHECK-LABEL: func @returned
// CHECK: kiln.matmul {{.*}} {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
func.func @read_narrow(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<8x4xbf16>, tensor<4x8xbf16>, tensor<8xf32>) {
  %p = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = kiln.transpose %p {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %c = kiln.cast %t : tensor<8x4xf32> to tensor<8x4xbf16>
  %q = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %d = kiln.cast %q : tensor<4x8xf32> to tensor<4x8xbf16>
  %s = kiln.add %q, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = kiln.mul %q, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = kiln.reduce_sum %m {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  return %c, %d, %r : tensor<8x4xbf16>, tensor<4x8xbf16>, tensor<8xf32>
}

func.func @returned(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %p = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = kiln.add %p, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Tests that a product reading a reshape of a value that already has a
// 16-bit copy (the backward weight gradient reading a forward activation
// flattened) reads the same reshape of that copy: the f32 value is rounded
// once and need not stay alive for a second copy.
// CHECK-LABEL: func @reshaped_copy
// CHECK: %[[X:.*]] = kiln.cast %arg0 : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK: kiln.matmul %[[X]]
// CHECK-NOT: kiln.reshape %arg0
// CHECK: %[[R:.*]] = kiln.reshape %[[X]] : tensor<2x4x8xbf16> to tensor<8x8xbf16>
// CHECK-NOT: kiln.reshape %arg0
// CHECK: kiln.matmul %[[R]], %{{.*}} {accumulate = f32, transpose_lhs}
func.func @reshaped_copy(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %dy: tensor<8x8xf32>) -> (tensor<2x4x8xf32>, tensor<8x8xf32>) {
  %y = kiln.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %flat = kiln.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  %dw = kiln.matmul %flat, %dy {transpose_lhs} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y, %dw : tensor<2x4x8xf32>, tensor<8x8xf32>
}

// -----

// Tests a linear layer's epilogue: the bias is read in bf16 (one copy), the
// biased sum is rounded once where it is computed, and its readers read the
// rounded value, reshaped in bf16 and widened where they compute (GELU's
// derivative backward), except the tanh GELU, which reads the f32 sum as
// cuBLASLt's GELU_AUX epilogue computes it (with gelu-epilogue=false, the
// rounded sum too). The product scaled by GELU's derivative is rounded
// after the scaling (cuBLASLt's DGELU), and the weight gradient, which the
// optimizer reads, stays f32.
// CHECK-LABEL: func @linear_epilogues
// CHECK: %[[H:.*]] = kiln.matmul {{.*}} {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
// CHECK: %[[BB:.*]] = kiln.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// CHECK: %[[BW:.*]] = kiln.cast %[[BB]] : tensor<8xbf16> to tensor<8xf32>
// CHECK: %[[SUM:.*]] = kiln.add %[[H]], %[[BW]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: %[[PRE:.*]] = kiln.cast %[[SUM]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK: %[[R:.*]] = kiln.reshape %[[PRE]] : tensor<4x8xbf16> to tensor<2x2x8xbf16>
// CHECK: %[[RF:.*]] = kiln.reshape %[[SUM]] : tensor<4x8xf32> to tensor<2x2x8xf32>
// CHECK: kiln.gelu %[[RF]]
// STORED-SUM-LABEL: func @linear_epilogues
// STORED-SUM: %[[SUM:.*]] = kiln.add
// STORED-SUM: %[[PRE:.*]] = kiln.cast %[[SUM]] : tensor<4x8xf32> to tensor<4x8xbf16>
// STORED-SUM: %[[R:.*]] = kiln.reshape %[[PRE]] : tensor<4x8xbf16> to tensor<2x2x8xbf16>
// STORED-SUM: %[[RW:.*]] = kiln.cast %[[R]] : tensor<2x2x8xbf16> to tensor<2x2x8xf32>
// STORED-SUM: kiln.gelu %[[RW]]
// CHECK: %[[G:.*]] = kiln.matmul {{.*}} {accumulate = f32, transpose_rhs} : {{.*}} -> tensor<4x8xf32>
// CHECK: %[[GR:.*]] = kiln.reshape %[[G]] : tensor<4x8xf32> to tensor<2x2x8xf32>
// CHECK: %[[RW2:.*]] = kiln.cast %[[R]] : tensor<2x2x8xbf16> to tensor<2x2x8xf32>
// CHECK: %[[DX:.*]] = kiln.gelu_grad %[[RW2]], %[[GR]]
// CHECK: %[[DXB:.*]] = kiln.cast %[[DX]] : tensor<2x2x8xf32> to tensor<2x2x8xbf16>
// CHECK: %[[FLAT:.*]] = kiln.reshape %[[DXB]] : tensor<2x2x8xbf16> to tensor<4x8xbf16>
// CHECK: %[[DW:.*]] = kiln.matmul %{{.*}}, %[[FLAT]] {accumulate = f32, transpose_lhs} : {{.*}} -> tensor<8x8xf32>
// CHECK: kiln.sgd %{{.*}}, %[[DW]]
func.func @linear_epilogues(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %dy: tensor<4x8xf32>, %lr: tensor<f32>, %t: tensor<i64>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8x8xf32>) {
  %h = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %sum = kiln.add %h, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %pre = kiln.reshape %sum : tensor<4x8xf32> to tensor<2x2x8xf32>
  %y = kiln.gelu %pre approximation = tanh : tensor<2x2x8xf32>
  %g = kiln.matmul %dy, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gr = kiln.reshape %g : tensor<4x8xf32> to tensor<2x2x8xf32>
  %dx = kiln.gelu_grad %pre, %gr approximation = tanh : tensor<2x2x8xf32>
  %flat = kiln.reshape %dx : tensor<2x2x8xf32> to tensor<4x8xf32>
  %dw = kiln.matmul %x, %flat {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %w1:2 = kiln.sgd %w, %dw, %w, %lr, %t {momentum = 0.0, dampening = 0.0, weight_decay = 0.0} : tensor<8x8xf32>, tensor<f32>, tensor<i64>
  %ys = kiln.reduce_sum %y {axes = array<i64: 0>} : (tensor<2x2x8xf32>) -> tensor<2x8xf32>
  %dxs = kiln.reduce_sum %dx {axes = array<i64: 0>} : (tensor<2x2x8xf32>) -> tensor<2x8xf32>
  return %ys, %dxs, %w1#0 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8x8xf32>
}

// -----

// Tests the erf GELU's derivative, which no cuBLASLt epilogue computes: the
// product it scales is stored in bf16 and read widened, as autocast's GELU
// backward reads it, and the derivative's result is rounded to bf16 where
// it is computed, so that the weight gradient's product and the bias
// gradient read 16 bits, as after the tanh derivative (DGELU).
// CHECK-LABEL: func @erf_gelu_gradient
// CHECK: %[[PRE:.*]] = kiln.reshape %{{.*}} : tensor<4x8xbf16> to tensor<2x2x8xbf16>
// CHECK: %[[G:.*]] = kiln.matmul {{.*}} {transpose_rhs} : {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[GR:.*]] = kiln.reshape %[[G]] : tensor<4x8xbf16> to tensor<2x2x8xbf16>
// CHECK: %[[PW:.*]] = kiln.cast %[[PRE]] : tensor<2x2x8xbf16> to tensor<2x2x8xf32>
// CHECK: %[[GW:.*]] = kiln.cast %[[GR]] : tensor<2x2x8xbf16> to tensor<2x2x8xf32>
// CHECK: %[[DX:.*]] = kiln.gelu_grad %[[PW]], %[[GW]] approximation = none : tensor<2x2x8xf32>
// CHECK: %[[DXB:.*]] = kiln.cast %[[DX]] : tensor<2x2x8xf32> to tensor<2x2x8xbf16>
// CHECK: %[[FLAT:.*]] = kiln.reshape %[[DXB]] : tensor<2x2x8xbf16> to tensor<4x8xbf16>
// CHECK: kiln.matmul %{{.*}}, %[[FLAT]] {accumulate = f32, transpose_lhs} : {{.*}} -> tensor<8x8xf32>
// CHECK: %[[DXW:.*]] = kiln.cast %[[DXB]] : tensor<2x2x8xbf16> to tensor<2x2x8xf32>
// CHECK: kiln.reduce_sum %[[DXW]]
func.func @erf_gelu_gradient(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %dy: tensor<4x8xf32>, %lr: tensor<f32>, %t: tensor<i64>) -> (tensor<2x8xf32>, tensor<8x8xf32>) {
  %h = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %sum = kiln.add %h, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %pre = kiln.reshape %sum : tensor<4x8xf32> to tensor<2x2x8xf32>
  %g = kiln.matmul %dy, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %gr = kiln.reshape %g : tensor<4x8xf32> to tensor<2x2x8xf32>
  %dx = kiln.gelu_grad %pre, %gr approximation = none : tensor<2x2x8xf32>
  %flat = kiln.reshape %dx : tensor<2x2x8xf32> to tensor<4x8xf32>
  %dw = kiln.matmul %x, %flat {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %w1:2 = kiln.sgd %w, %dw, %w, %lr, %t {momentum = 0.0, dampening = 0.0, weight_decay = 0.0} : tensor<8x8xf32>, tensor<f32>, tensor<i64>
  %dxs = kiln.reduce_sum %dx {axes = array<i64: 0>} : (tensor<2x2x8xf32>) -> tensor<2x8xf32>
  return %dxs, %w1#0 : tensor<2x8xf32>, tensor<8x8xf32>
}

// -----

// Tests that a norm's gradient reads a product's gradient stored in bf16 as
// stored (its kernel widens it), while a product that an embedding's
// gradient scatters stays f32: that kernel reads its operands from memory,
// so a 16-bit copy would be widened into a stored f32 copy.
// CHECK-LABEL: func @read_from_memory
// CHECK: %[[DY:.*]] = kiln.matmul {{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: kiln.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[DY]] {{.*}} : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xbf16>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: %[[E:.*]] = kiln.matmul {{.*}} {accumulate = f32} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT: kiln.gather_grad %[[E]]
func.func @read_from_memory(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %m: tensor<4x1xf32>, %r: tensor<4x1xf32>, %s: tensor<8xf32>, %i: tensor<4xi64>) -> (tensor<4x8xf32>, tensor<16x8xf32>) {
  %dy = kiln.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dx, %ds, %db = kiln.layer_norm_grad %x, %m, %r, %dy scale %s {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %e = kiln.matmul %dx, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = kiln.gather_grad %e, %i {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<16x8xf32>
  return %dx, %t : tensor<4x8xf32>, tensor<16x8xf32>
}

// -----

// Tests that attention's output and its operands' gradients are stored in
// bf16 like other products: the gradient reads the output as stored, and
// the gradients' readers (data movement into one tensor) widen them.
// CHECK-LABEL: func @attention_results
// CHECK: %[[O:.*]], %{{.*}} = kiln.attention {{.*}} -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>)
// CHECK: %[[DQ:.*]], %{{.*}}, %{{.*}} = kiln.attention_grad {{.*}} output %[[O]], {{.*}} -> (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
// CHECK: %[[W:.*]] = kiln.cast %[[DQ]] : tensor<1x2x4x8xbf16> to tensor<1x2x4x8xf32>
// CHECK-NEXT: kiln.insert_slice %{{.*}}, %[[W]]
func.func @attention_results(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %g: tensor<1x2x4x8xf32>, %z: tensor<1x2x4x16xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x16xf32>) {
  %o, %lse = kiln.attention %q, %k, %v {causal, scale = 0.35 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v output %o, %lse, %g {causal, scale = 0.35 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>)
      -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  %t = kiln.neg %o : tensor<1x2x4x8xf32>
  %s = kiln.insert_slice %z, %dq {start = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x16xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x16xf32>
  %s2 = kiln.insert_slice %s, %dk {start = array<i64: 0, 0, 0, 8>, stride = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x16xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x16xf32>
  %m = kiln.mul %s2, %z : (tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32>
  %r = kiln.reduce_sum %m {axes = array<i64: 0>} : (tensor<1x2x4x16xf32>) -> tensor<2x4x16xf32>
  %e = kiln.reshape %r : tensor<2x4x16xf32> to tensor<1x2x4x16xf32>
  %n = kiln.reduce_sum %t {axes = array<i64: 0>} : (tensor<1x2x4x8xf32>) -> tensor<2x4x8xf32>
  %f = kiln.reshape %n : tensor<2x4x8xf32> to tensor<1x2x4x8xf32>
  return %f, %e : tensor<1x2x4x8xf32>, tensor<1x2x4x16xf32>
}
