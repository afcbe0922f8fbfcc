// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// Round-trips every kiln op through its textual form.

// CHECK-LABEL: func @values
func.func @values() -> (tensor<4xi64>, tensor<2xf32>, tensor<3xf32>, tensor<8xi64>) {
  // CHECK: kiln.constant dense<[1, 32, 4, 16]> : tensor<4xi64>
  %c = kiln.constant dense<[1, 32, 4, 16]> : tensor<4xi64>
  // CHECK: kiln.parameter "w" : tensor<2xf32>
  %w = kiln.parameter "w" : tensor<2xf32>
  // CHECK: kiln.parameter "b" = dense<0.000000e+00> : tensor<3xf32> : tensor<3xf32>
  %b = kiln.parameter "b" = dense<0.0> : tensor<3xf32> : tensor<3xf32>
  // CHECK: kiln.range {start = 0.000000e+00 : f64, step = 2.000000e+00 : f64} : tensor<8xi64>
  %r = kiln.range {start = 0.0, step = 2.0} : tensor<8xi64>
  return %c, %w, %b, %r : tensor<4xi64>, tensor<2xf32>, tensor<3xf32>, tensor<8xi64>
}

// CHECK-LABEL: func @elementwise
func.func @elementwise(%x: tensor<2x8xf32>, %y: tensor<8xf32>, %i: tensor<2x8xi32>, %p: tensor<2x8xi1>) {
  // CHECK-COUNT-19: : tensor<2x8xf32>
  %0 = kiln.neg %x : tensor<2x8xf32>
  %1 = kiln.abs %x : tensor<2x8xf32>
  %2 = kiln.sign %x : tensor<2x8xf32>
  %3 = kiln.exp %x : tensor<2x8xf32>
  %4 = kiln.log %x : tensor<2x8xf32>
  %5 = kiln.tanh %x : tensor<2x8xf32>
  %6 = kiln.erf %x : tensor<2x8xf32>
  %7 = kiln.sigmoid %x : tensor<2x8xf32>
  %8 = kiln.silu %x : tensor<2x8xf32>
  %9 = kiln.relu %x : tensor<2x8xf32>
  %10 = kiln.sin %x : tensor<2x8xf32>
  %11 = kiln.cos %x : tensor<2x8xf32>
  %12 = kiln.sqrt %x : tensor<2x8xf32>
  %13 = kiln.rsqrt %x : tensor<2x8xf32>
  %14 = kiln.reciprocal %x : tensor<2x8xf32>
  %15 = kiln.floor %x : tensor<2x8xf32>
  %16 = kiln.ceil %x : tensor<2x8xf32>
  %17 = kiln.round %x : tensor<2x8xf32>
  // CHECK: kiln.tan %{{.*}} : tensor<2x8xf32>
  %t0 = kiln.tan %x : tensor<2x8xf32>
  // CHECK: kiln.asin %{{.*}} : tensor<2x8xf32>
  %t1 = kiln.asin %x : tensor<2x8xf32>
  // CHECK: kiln.acos %{{.*}} : tensor<2x8xf32>
  %t2 = kiln.acos %x : tensor<2x8xf32>
  // CHECK: kiln.atan %{{.*}} : tensor<2x8xf32>
  %t3 = kiln.atan %x : tensor<2x8xf32>
  // CHECK: kiln.sinh %{{.*}} : tensor<2x8xf32>
  %t4 = kiln.sinh %x : tensor<2x8xf32>
  // CHECK: kiln.cosh %{{.*}} : tensor<2x8xf32>
  %t5 = kiln.cosh %x : tensor<2x8xf32>
  // CHECK: kiln.asinh %{{.*}} : tensor<2x8xf32>
  %t6 = kiln.asinh %x : tensor<2x8xf32>
  // CHECK: kiln.acosh %{{.*}} : tensor<2x8xf32>
  %t7 = kiln.acosh %x : tensor<2x8xf32>
  // CHECK: kiln.atanh %{{.*}} : tensor<2x8xf32>
  %t8 = kiln.atanh %x : tensor<2x8xf32>
  // CHECK: kiln.gelu %{{.*}} approximation = tanh : tensor<2x8xf32>
  %18 = kiln.gelu %x approximation = tanh : tensor<2x8xf32>
  // CHECK: kiln.not %{{.*}} : tensor<2x8xi1>
  %19 = kiln.not %p : tensor<2x8xi1>
  // CHECK: kiln.is_nan %{{.*}} : tensor<2x8xf32>
  %20 = kiln.is_nan %x : tensor<2x8xf32>
  // CHECK: kiln.is_inf %{{.*}} {detect_negative = false, detect_positive = true} : tensor<2x8xf32>
  %21 = kiln.is_inf %x {detect_negative = false, detect_positive = true} : tensor<2x8xf32>
  // CHECK: kiln.cast %{{.*}} : tensor<2x8xi32> to tensor<2x8xbf16>
  %22 = kiln.cast %i : tensor<2x8xi32> to tensor<2x8xbf16>
  // CHECK-COUNT-7: (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %23 = kiln.add %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %24 = kiln.sub %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %25 = kiln.mul %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %26 = kiln.div %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %27 = kiln.pow %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %28 = kiln.max %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %29 = kiln.min %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // CHECK-COUNT-3: (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
  %30 = kiln.and %p, %p : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
  %31 = kiln.or %p, %p : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
  %32 = kiln.xor %p, %p : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
  // CHECK: kiln.compare le, %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xi1>
  %33 = kiln.compare le, %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xi1>
  // CHECK: kiln.remainder %{{.*}}, %{{.*}} {floored} : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  %37 = kiln.remainder %i, %i {floored} : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  // CHECK: kiln.and %{{.*}}, %{{.*}} : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  // CHECK: kiln.not %{{.*}} : tensor<2x8xi32>
  // CHECK: kiln.shift_left %{{.*}}, %{{.*}} : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  // CHECK: kiln.shift_right %{{.*}}, %{{.*}} : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  %39 = kiln.and %i, %i : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  %40 = kiln.not %39 : tensor<2x8xi32>
  %41 = kiln.shift_left %40, %i : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  %42 = kiln.shift_right %41, %i : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  // CHECK: kiln.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %34 = kiln.where %p, %x, %y : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // CHECK: kiln.dropout %{{.*}} {ratio = 1.000000e-01 : f64, seed = 7 : i64} : tensor<2x8xf32>
  %35, %36 = kiln.dropout %x {ratio = 0.1, seed = 7} : tensor<2x8xf32>
  // CHECK: kiln.fake_quantize %{{.*}}, %{{.*}}, %{{.*}} {quant_max = 1.270000e+02 : f64, quant_min = -1.280000e+02 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %38 = kiln.fake_quantize %x, %y, %zero {quant_min = -128.0, quant_max = 127.0} : (tensor<2x8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return
}

// CHECK-LABEL: func @contractions
func.func @contractions(%q: tensor<2x4x32x16xf32>, %k: tensor<4x32x16xf32>, %x: tensor<2x32x64xf32>, %g: tensor<64xf32>) {
  // CHECK: kiln.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x4x32x16xf32>, tensor<4x32x16xf32>) -> tensor<2x4x32x32xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x4x32x16xf32>, tensor<4x32x16xf32>) -> tensor<2x4x32x32xf32>
  // CHECK: kiln.reduce_sum %{{.*}} {axes = array<i64: 1, 3>, keep_dims}
  %0 = kiln.reduce_sum %q {axes = array<i64: 1, 3>, keep_dims} : (tensor<2x4x32x16xf32>) -> tensor<2x1x32x1xf32>
  %1 = kiln.reduce_mean %q {axes = array<i64: 3>} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32xf32>
  %2 = kiln.reduce_max %q {axes = array<i64: 3>} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32xf32>
  %3 = kiln.reduce_min %q {axes = array<i64: 3>} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32xf32>
  %4 = kiln.reduce_prod %q {axes = array<i64: 3>} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32xf32>
  // CHECK: kiln.argmax %{{.*}} {axis = 3 : i64, select_last_index} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32xi64>
  %5 = kiln.argmax %q {axis = 3 : i64, select_last_index} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32xi64>
  %6 = kiln.argmin %q {axis = 0 : i64, keep_dims} : (tensor<2x4x32x16xf32>) -> tensor<1x4x32x16xi64>
  // CHECK: kiln.softmax %{{.*}} {axis = 3 : i64} : tensor<2x4x32x32xf32>
  %7 = kiln.softmax %s {axis = 3 : i64} : tensor<2x4x32x32xf32>
  %8 = kiln.log_softmax %s {axis = 3 : i64} : tensor<2x4x32x32xf32>
  // CHECK: kiln.layer_norm %{{.*}} scale %{{.*}} bias %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
  %9, %10, %11 = kiln.layer_norm %x scale %g bias %g {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x1xf32>, tensor<2x32x1xf32>)
  // CHECK: kiln.layer_norm %{{.*}} {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x32x64xf32>) -> (tensor<2x32x64xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  %12, %13, %14 = kiln.layer_norm %x {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x32x64xf32>) -> (tensor<2x32x64xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  // CHECK: kiln.rms_norm %{{.*}} scale %{{.*}} {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64}
  %15, %16 = kiln.rms_norm %x scale %g {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x32x64xf32>, tensor<64xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x1xf32>)
  return
}

// CHECK-LABEL: func @data_movement
func.func @data_movement(%x: tensor<2x32x64xf32>, %ids: tensor<2x32xi64>, %w: tensor<512x64xf32>) {
  // CHECK: kiln.reshape %{{.*}} : tensor<2x32x64xf32> to tensor<64x64xf32>
  %0 = kiln.reshape %x : tensor<2x32x64xf32> to tensor<64x64xf32>
  // CHECK: kiln.transpose %{{.*}} {permutation = array<i64: 1, 0, 2>}
  %1 = kiln.transpose %x {permutation = array<i64: 1, 0, 2>} : (tensor<2x32x64xf32>) -> tensor<32x2x64xf32>
  // CHECK: kiln.broadcast %{{.*}} : tensor<2x32x64xf32> to tensor<3x2x32x64xf32>
  %2 = kiln.broadcast %x : tensor<2x32x64xf32> to tensor<3x2x32x64xf32>
  // CHECK: kiln.slice %{{.*}} {start = array<i64: 1, 31, 0>, stride = array<i64: 1, -2, 4>} : tensor<2x32x64xf32> to tensor<1x16x16xf32>
  %3 = kiln.slice %x {start = array<i64: 1, 31, 0>, stride = array<i64: 1, -2, 4>} : tensor<2x32x64xf32> to tensor<1x16x16xf32>
  // CHECK: kiln.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x32x64xf32>, tensor<2x32x64xf32>) -> tensor<2x64x64xf32>
  %4 = kiln.concat %x, %x {axis = 1 : i64} : (tensor<2x32x64xf32>, tensor<2x32x64xf32>) -> tensor<2x64x64xf32>
  // CHECK: kiln.pad %{{.*}} reflect {high = array<i64: 0, 1>, low = array<i64: 0, -1>, value = 0.000000e+00 : f64}
  %5 = kiln.pad %ids reflect {low = array<i64: 0, -1>, high = array<i64: 0, 1>, value = 0.0} : (tensor<2x32xi64>) -> tensor<2x32xi64>
  // CHECK: kiln.trilu %{{.*}} {diagonal = -1 : i64, upper = false} : tensor<2x32x64xf32>
  %6 = kiln.trilu %x {diagonal = -1 : i64, upper = false} : tensor<2x32x64xf32>
  // CHECK: kiln.gather %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
  %7 = kiln.gather %w, %ids {axis = 0 : i64} : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
  // CHECK: kiln.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} reduction = add {axis = 0 : i64} : (tensor<512x64xf32>, tensor<2x32xi64>, tensor<2x32xf32>) -> tensor<512x64xf32>
  %u = kiln.gather_elements %w, %ids {axis = 0 : i64} : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32xf32>
  %9 = kiln.scatter_elements %w, %ids, %u reduction = add {axis = 0 : i64} : (tensor<512x64xf32>, tensor<2x32xi64>, tensor<2x32xf32>) -> tensor<512x64xf32>
  // CHECK: kiln.cumsum %{{.*}} {axis = 1 : i64, exclusive, reverse} : tensor<2x32xi64>
  %10 = kiln.cumsum %ids {axis = 1 : i64, exclusive, reverse} : tensor<2x32xi64>
  // CHECK: kiln.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32xf32>
  %8 = kiln.gather_elements %w, %ids {axis = 1 : i64} : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32xf32>
  return
}

// CHECK-LABEL: func @losses
func.func @losses(%logits: tensor<2x512x32xf32>, %labels: tensor<2x32xi64>, %w: tensor<512xf32>) {
  // CHECK: kiln.cross_entropy %{{.*}}, %{{.*}} reduction = mean {ignore_index = -100 : i64} : (tensor<2x512x32xf32>, tensor<2x32xi64>) -> tensor<f32>
  %0 = kiln.cross_entropy %logits, %labels reduction = mean {ignore_index = -100 : i64} : (tensor<2x512x32xf32>, tensor<2x32xi64>) -> tensor<f32>
  // CHECK: kiln.nll_loss %{{.*}}, %{{.*}} weight %{{.*}} reduction = none : (tensor<2x512x32xf32>, tensor<2x32xi64>, tensor<512xf32>) -> tensor<2x32xf32>
  %1 = kiln.nll_loss %logits, %labels weight %w reduction = none : (tensor<2x512x32xf32>, tensor<2x32xi64>, tensor<512xf32>) -> tensor<2x32xf32>
  return
}

// CHECK-LABEL: func @gradients_and_optimizers
func.func @gradients_and_optimizers(%x: tensor<2x8xf32>, %s: tensor<2x1xf32>, %g: tensor<8xf32>, %ids: tensor<2xi64>, %lr: tensor<f32>, %t: tensor<i64>) {
  // CHECK: kiln.softmax_grad %{{.*}}, %{{.*}} {axis = 1 : i64} : tensor<2x8xf32>
  %0 = kiln.softmax_grad %x, %x {axis = 1 : i64} : tensor<2x8xf32>
  // CHECK: kiln.log_softmax_grad
  %1 = kiln.log_softmax_grad %x, %x {axis = 1 : i64} : tensor<2x8xf32>
  // CHECK: kiln.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale %{{.*}} {axis = 1 : i64}
  %2:3 = kiln.layer_norm_grad %x, %s, %s, %x scale %g {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: kiln.rms_norm_grad
  %3:2 = kiln.rms_norm_grad %x, %s, %x {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  %l = kiln.constant dense<1.0> : tensor<f32>
  // CHECK: kiln.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} reduction = mean {ignore_index = -100 : i64}
  %4 = kiln.cross_entropy_grad %x, %ids, %l reduction = mean {ignore_index = -100 : i64} : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: kiln.nll_loss_grad
  %5 = kiln.nll_loss_grad %x, %ids, %l reduction = sum : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: kiln.gather_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<16x8xf32>
  %6 = kiln.gather_grad %x, %ids {axis = 0 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<16x8xf32>
  // CHECK: kiln.insert_slice
  %7 = kiln.insert_slice %6, %x {start = array<i64: 3, 0>, stride = array<i64: 1, 1>} : (tensor<16x8xf32>, tensor<2x8xf32>) -> tensor<16x8xf32>
  // CHECK: kiln.adamw {{.*}}weight_decay = 1.000000e-02 : f64} : tensor<2x8xf32>, tensor<f32>, tensor<i64>
  %8:3 = kiln.adamw %x, %x, %x, %x, %lr, %t {beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, weight_decay = 0.01} : tensor<2x8xf32>, tensor<f32>, tensor<i64>
  // CHECK: kiln.sgd {{.*}}momentum = 9.000000e-01 : f64, nesterov
  %9:2 = kiln.sgd %x, %x, %x, %lr, %t {momentum = 0.9, dampening = 0.0, weight_decay = 0.0, nesterov} : tensor<2x8xf32>, tensor<f32>, tensor<i64>
  // CHECK: kiln.adagrad
  %10:2 = kiln.adagrad %x, %x, %x, %lr, %t {lr_decay = 0.0, weight_decay = 0.0, epsilon = 1.0e-10} : tensor<2x8xf32>, tensor<f32>, tensor<i64>
  return
}

// CHECK-LABEL: func @attention
func.func @attention(%q: tensor<2x4x8x16xbf16>, %kv: tensor<2x2x8x16xbf16>, %m: tensor<2x1x1x8xi1>, %step: tensor<i64>) {
  // CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} offset %{{.*}} {causal, dropout_ratio = 1.000000e-01 : f64, scale = 2.500000e-01 : f64, seed = 3 : i64} : (tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x1x1x8xi1>, tensor<i64>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>)
  %o, %lse = kiln.attention %q, %kv, %kv mask %m offset %step {scale = 0.25 : f64, causal, dropout_ratio = 0.1 : f64, seed = 3} : (tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x1x1x8xi1>, tensor<i64>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>)
  // CHECK: kiln.attention_grad %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} offset %{{.*}} output %{{.*}}, %{{.*}}, %{{.*}} {causal
  %dq, %dk, %dv = kiln.attention_grad %q, %kv, %kv mask %m offset %step output %o, %lse, %o {scale = 0.25 : f64, causal, dropout_ratio = 0.1 : f64, seed = 3} : (tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x1x1x8xi1>, tensor<i64>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x8x16xbf16>)
  return
}

// CHECK-LABEL: func @padded_parameter
func.func @padded_parameter() -> tensor<8x4xf32> {
  // CHECK: kiln.parameter "w" = dense<1.000000e+00> : tensor<7x4xf32> {logical_shape = array<i64: 7, 4>} : tensor<8x4xf32>
  %w = kiln.parameter "w" = dense<1.0> : tensor<7x4xf32> {logical_shape = array<i64: 7, 4>} : tensor<8x4xf32>
  return %w : tensor<8x4xf32>
}

// CHECK-LABEL: func @gelu_grad
func.func @gelu_grad(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: kiln.gelu_grad %{{.*}}, %{{.*}} approximation = tanh : tensor<4x8xf32>
  %dx = kiln.gelu_grad %x, %dy approximation = tanh : tensor<4x8xf32>
  return %dx : tensor<4x8xf32>
}
