// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// One case per verifier and type-inference rule of the kiln ops.

func.func @parameter_without_name() {
  // expected-error @+1 {{needs a non-empty name}}
  %0 = kiln.parameter "" : tensor<2xf32>
  return
}

// -----

func.func @parameter_value_type() {
  // expected-error @+1 {{initial value has type 'tensor<3xf32>' but the parameter has type 'tensor<2xf32>'}}
  %0 = kiln.parameter "w" = dense<0.0> : tensor<3xf32> : tensor<2xf32>
  return
}

// -----

func.func @range_rank() {
  // expected-error @+1 {{result must be 1-D}}
  %0 = kiln.range {start = 0.0, step = 1.0} : tensor<2x2xi64>
  return
}

// -----

func.func @fake_quantize_widens(%x: tensor<8xf32>, %s: tensor<2x8xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{scale and zero point must broadcast to the input's shape, not widen it}}
  %0 = kiln.fake_quantize %x, %s, %z {quant_min = 0.0, quant_max = 255.0} : (tensor<8xf32>, tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @fake_quantize_range(%x: tensor<8xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{quantization range [1.270000e+02, -1.280000e+02] is not a range of integers}}
  %0 = kiln.fake_quantize %x, %s, %s {quant_min = 127.0, quant_max = -128.0} : (tensor<8xf32>, tensor<f32>, tensor<f32>) -> tensor<8xf32>
  return
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) {
  // expected-error @+1 {{ratio 1.000000e+00 is outside [0, 1)}}
  %0, %1 = kiln.dropout %x {ratio = 1.0, seed = 0} : tensor<4xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{axis 2 is outside [0, 2)}}
  %0 = kiln.softmax %x {axis = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_mismatch(%x: tensor<2x3xf32>, %y: tensor<4xf32>) {
  // expected-error @+2 {{shapes [2, 3] and [4] do not broadcast: dimension 1 has sizes 3 and 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @result_type_mismatch(%x: tensor<2x3xf32>, %y: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.mul %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @where_branch_types(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xi64>) {
  // expected-error @+2 {{where branches have different element types 'f32' and 'i64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.where %c, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_rank(%x: tensor<4xf32>, %y: tensor<4x2xf32>) {
  // expected-error @+2 {{matmul operands need rank 2 or more}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %x, %y : (tensor<4xf32>, tensor<4x2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @matmul_contraction(%x: tensor<3x4xf32>, %y: tensor<5x2xf32>) {
  // expected-error @+2 {{matmul contracting dimensions differ: 4 (lhs) vs 5 (rhs)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %x, %y : (tensor<3x4xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @reduction_axis(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{reduction axis 2 is outside [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.reduce_sum %x {axes = array<i64: 2>} : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @reduction_repeated_axis(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{reduction axis 1 appears twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.reduce_max %x {axes = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{layer_norm axis 2 is outside [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1, %2 = kiln.layer_norm %x {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>) {
  // expected-error @+2 {{layer_norm scale and bias must broadcast to the normalized dimensions}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1, %2 = kiln.layer_norm %x scale %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return
}

// -----

func.func @rms_norm_scale(%x: tensor<4x8xf32>, %g: tensor<5xf32>) {
  // expected-error @+2 {{do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0, %1 = kiln.rms_norm %x scale %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<5xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>)
  return
}

// -----

func.func @reshape_count(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{cannot reshape 'tensor<4x8xf32>' (32 elements) to 'tensor<5x8xf32>' (40 elements)}}
  %0 = kiln.reshape %x : tensor<4x8xf32> to tensor<5x8xf32>
  return
}

// -----

func.func @transpose_length(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{transpose permutation has 3 entries for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.transpose %x {permutation = array<i64: 0, 1, 2>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{is not a permutation of [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.transpose %x {permutation = array<i64: 0, 0>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @broadcast_rank(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{cannot broadcast rank 3 to the smaller rank 2}}
  %0 = kiln.broadcast %x : tensor<2x4x8xf32> to tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_size(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{input dimension 0 of size 3 cannot broadcast to size 4}}
  %0 = kiln.broadcast %x : tensor<3x8xf32> to tensor<4x8xf32>
  return
}

// -----

func.func @slice_rank(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{start, stride and window must all have the tensor's rank 2}}
  %0 = kiln.slice %x {start = array<i64: 0>, stride = array<i64: 1>} : tensor<4x8xf32> to tensor<4x8xf32>
  return
}

// -----

func.func @slice_zero_stride(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{stride of dimension 1 is zero}}
  %0 = kiln.slice %x {start = array<i64: 0, 0>, stride = array<i64: 1, 0>} : tensor<4x8xf32> to tensor<4x2xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dimension 1 reads indices 4 to 10, outside [0, 8)}}
  %0 = kiln.slice %x {start = array<i64: 0, 4>, stride = array<i64: 1, 2>} : tensor<4x8xf32> to tensor<4x4xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{concat axis 2 is outside [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.concat %x, %x {axis = 2 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @concat_shapes(%x: tensor<4x8xf32>, %y: tensor<3x8xf32>) {
  // expected-error @+2 {{concat inputs 'tensor<4x8xf32>' and 'tensor<3x8xf32>' differ outside axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.concat %x, %y {axis = 1 : i64} : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @pad_entries(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{pad amounts need one entry per dimension of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pad %x constant {low = array<i64: 1>, high = array<i64: 1>, value = 0.0} : (tensor<4x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @pad_negative_size(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{padding dimension 0 gives negative size -2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pad %x constant {low = array<i64: -3, 0>, high = array<i64: -3, 0>, value = 0.0} : (tensor<4x8xf32>) -> tensor<0x8xf32>
  return
}

// -----

func.func @pad_empty_reflect(%x: tensor<0x8xf32>) {
  // expected-error @+2 {{cannot pad empty dimension 0 except with a constant}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.pad %x edge {low = array<i64: 1, 0>, high = array<i64: 0, 0>, value = 0.0} : (tensor<0x8xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @trilu_rank(%x: tensor<8xf32>) {
  // expected-error @+1 {{needs rank 2 or more}}
  %0 = kiln.trilu %x {diagonal = 0 : i64, upper = true} : tensor<8xf32>
  return
}

// -----

func.func @gather_axis(%w: tensor<16x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{gather axis 2 is outside [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.gather %w, %i {axis = 2 : i64} : (tensor<16x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_elements_axis(%w: tensor<16x4xf32>, %i: tensor<3x4xi64>) {
  // expected-error @+2 {{gather_elements axis -1 is outside [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.gather_elements %w, %i {axis = -1 : i64} : (tensor<16x4xf32>, tensor<3x4xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_elements_rank(%w: tensor<16x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{gather_elements indices have rank 1 but data has rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.gather_elements %w, %i {axis = 0 : i64} : (tensor<16x4xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @gather_elements_size(%w: tensor<16x4xf32>, %i: tensor<3x5xi64>) {
  // expected-error @+2 {{gather_elements indices dimension 1 (5) exceeds the data's (4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.gather_elements %w, %i {axis = 0 : i64} : (tensor<16x4xf32>, tensor<3x5xi64>) -> tensor<3x5xf32>
  return
}

// -----

func.func @loss_rank(%x: tensor<8xf32>, %y: tensor<8xi64>) {
  // expected-error @+2 {{loss input must have shape [N, C, ...], got rank 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.cross_entropy %x, %y reduction = mean : (tensor<8xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_labels(%x: tensor<4x10xf32>, %y: tensor<5xi64>) {
  // expected-error @+2 {{labels have shape [5] but input [4, 10] needs labels of shape [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.cross_entropy %x, %y reduction = sum : (tensor<4x10xf32>, tensor<5xi64>) -> tensor<f32>
  return
}

// -----

func.func @loss_weight(%x: tensor<4x10xf32>, %y: tensor<4xi64>, %w: tensor<9xf32>) {
  // expected-error @+2 {{class weight has shape [9], expected [10]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.nll_loss %x, %y weight %w reduction = none : (tensor<4x10xf32>, tensor<4xi64>, tensor<9xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @scatter_shapes(%w: tensor<16x4xf32>, %i: tensor<3x4xi64>, %u: tensor<3x3xf32>) {
  // expected-error @+1 {{indices 'tensor<3x4xi64>' and updates 'tensor<3x3xf32>' differ in shape}}
  %0 = kiln.scatter_elements %w, %i, %u reduction = none {axis = 0 : i64} : (tensor<16x4xf32>, tensor<3x4xi64>, tensor<3x3xf32>) -> tensor<16x4xf32>
  return
}

// -----

func.func @scatter_axis(%w: tensor<16x4xf32>, %i: tensor<3x4xi64>, %u: tensor<3x4xf32>) {
  // expected-error @+1 {{axis 2 is outside [0, 2)}}
  %0 = kiln.scatter_elements %w, %i, %u reduction = add {axis = 2 : i64} : (tensor<16x4xf32>, tensor<3x4xi64>, tensor<3x4xf32>) -> tensor<16x4xf32>
  return
}

// -----

func.func @scatter_update_type(%w: tensor<16x4xf32>, %i: tensor<3x4xi64>, %u: tensor<3x4xf16>) {
  // expected-error @+1 {{updates must have the data's element type}}
  %0 = kiln.scatter_elements %w, %i, %u reduction = add {axis = 0 : i64} : (tensor<16x4xf32>, tensor<3x4xi64>, tensor<3x4xf16>) -> tensor<16x4xf32>
  return
}

// -----

func.func @scatter_rank(%w: tensor<16x4xf32>, %i: tensor<3xi64>, %u: tensor<3xf32>) {
  // expected-error @+1 {{indices have rank 1 but data has rank 2}}
  %0 = kiln.scatter_elements %w, %i, %u reduction = add {axis = 0 : i64} : (tensor<16x4xf32>, tensor<3xi64>, tensor<3xf32>) -> tensor<16x4xf32>
  return
}

// -----

func.func @scatter_size(%w: tensor<16x4xf32>, %i: tensor<3x5xi64>, %u: tensor<3x5xf32>) {
  // expected-error @+1 {{indices dimension 1 (5) exceeds the data's (4)}}
  %0 = kiln.scatter_elements %w, %i, %u reduction = add {axis = 0 : i64} : (tensor<16x4xf32>, tensor<3x5xi64>, tensor<3x5xf32>) -> tensor<16x4xf32>
  return
}

// -----

func.func @cumsum_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{axis -1 is outside [0, 2)}}
  %0 = kiln.cumsum %x {axis = -1 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @softmax_grad_axis(%y: tensor<4x8xf32>) {
  // expected-error @+1 {{axis 2 is outside [0, 2)}}
  %0 = kiln.softmax_grad %y, %y {axis = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_grad_statistics(%x: tensor<4x8xf32>, %s: tensor<4x8xf32>) {
  // expected-error @+1 {{statistics have type 'tensor<4x8xf32>', expected the input's shape with the normalized dimensions set to 1}}
  %0, %1, %2 = kiln.layer_norm_grad %x, %s, %s, %x {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_grad_parameters(%x: tensor<4x8xf32>, %s: tensor<4x1xf32>) {
  // expected-error @+1 {{parameter gradients must have type 'tensor<8xf32>'}}
  %0, %1, %2 = kiln.layer_norm_grad %x, %s, %s, %x {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @rms_norm_grad_types(%x: tensor<4x8xf32>, %g: tensor<4x4xf32>, %s: tensor<4x1xf32>) {
  // expected-error @+1 {{grad and input_grad must have the input's shape}}
  %0, %1 = kiln.rms_norm_grad %x, %s, %g {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return
}

// -----

// A bf16 input (narrow norms) or output gradient (a 16-bit product) is
// fine; the gradients computed still share one type.
func.func @rms_norm_grad_mixed(%x: tensor<4x8xbf16>, %g: tensor<4x8xf32>, %s: tensor<4x1xf32>) {
  // expected-error @+1 {{parameter gradients must have type 'tensor<8xbf16>'}}
  %0, %1 = kiln.rms_norm_grad %x, %s, %g {axis = 1 : i64} : (tensor<4x8xbf16>, tensor<4x1xf32>, tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>)
  return
}

// -----

func.func @cross_entropy_grad_shape(%x: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<4xf32>) {
  // expected-error @+1 {{grad has type 'tensor<4xf32>' but the loss has type 'tensor<f32>'}}
  %0 = kiln.cross_entropy_grad %x, %y, %g reduction = mean : (tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @gather_grad_shape(%g: tensor<3x5xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{grad has type 'tensor<3x5xf32>' but gathering from 'tensor<16x4xf32>' gives results of shape [3, 4]}}
  %0 = kiln.gather_grad %g, %i {axis = 0 : i64} : (tensor<3x5xf32>, tensor<3xi64>) -> tensor<16x4xf32>
  return
}

// -----

func.func @insert_slice_bounds(%d: tensor<4x8xf32>, %s: tensor<4x4xf32>) {
  // expected-error @+1 {{dimension 1 reads indices 6 to 9, outside [0, 8)}}
  %0 = kiln.insert_slice %d, %s {start = array<i64: 0, 6>, stride = array<i64: 1, 1>} : (tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_accumulate_narrower(%x: tensor<4x4xf32>) {
  // expected-error @+2 {{matmul cannot accumulate 'f32' operands in 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %x, %x {accumulate = bf16} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xbf16>
  return
}

// -----

func.func @parameter_logical_shape_too_large() {
  // expected-error @+1 {{logical shape [9, 4] does not fit in the stored type 'tensor<8x4xf32>'}}
  %0 = kiln.parameter "w" {logical_shape = array<i64: 9, 4>} : tensor<8x4xf32>
  return
}

// -----

func.func @parameter_padded_value_type() {
  // expected-error @+1 {{initial value has type 'tensor<8x4xf32>' but the parameter has type 'tensor<7x4xf32>'}}
  %0 = kiln.parameter "w" = dense<0.0> : tensor<8x4xf32> {logical_shape = array<i64: 7, 4>} : tensor<8x4xf32>
  return
}

// -----

func.func @cross_entropy_num_classes(%x: tensor<4x8xf32>, %l: tensor<4xi64>) {
  // expected-error @+1 {{num_classes 9 is outside [1, 8]}}
  %0 = kiln.cross_entropy %x, %l reduction = mean {num_classes = 9 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @attention_heads(%q: tensor<1x3x4x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{query heads (3) must be a multiple of key/value heads (2)}}
  %o, %l = kiln.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<1x3x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x3x4x8xf32>, tensor<1x3x4xf32>)
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<1x2x4x8xf32>, %m: tensor<3x4xf32>) {
  // expected-error @+1 {{mask of shape [3, 4] does not broadcast to the scores [1, 2, 4, 4]}}
  %o, %l = kiln.attention %q, %q, %q mask %m {scale = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<3x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_window(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{window must be [left, right]}}
  %o, %l = kiln.attention %q, %q, %q {scale = 1.0 : f64, window = array<i64: 3>} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_softcap(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{softcap must be positive}}
  %o, %l = kiln.attention %q, %q, %q {scale = 1.0 : f64, softcap = 0.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_mask_gradient(%q: tensor<1x2x4x8xf32>, %m: tensor<4x4xi1>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{mask_grad needs a float mask}}
  %dq, %dk, %dv, %dm = kiln.attention_grad %q, %q, %q mask %m output %q, %lse, %q {scale = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x4xi1>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x4xf32>)
  return
}

// -----

func.func @attention_mask_gradient_type(%q: tensor<1x2x4x8xf32>, %m: tensor<4x4xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{mask_grad must have the mask's type}}
  %dq, %dk, %dv, %dm = kiln.attention_grad %q, %q, %q mask %m output %q, %lse, %q {scale = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x4xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4xf32>)
  return
}

// -----

func.func @attention_dropout(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{dropout_ratio 1.000000e+00 is outside [0, 1)}}
  %o, %l = kiln.attention %q, %q, %q {scale = 1.0 : f64, dropout_ratio = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_logsumexp_type(%q: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{logsumexp must have element type 'f32'}}
  %o, %l = kiln.attention %q, %q, %q {scale = 1.0 : f64} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf64>)
  return
}

// -----

func.func @attention_grad_shapes(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %g: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{output_grad must have shape [1, 2, 4, 8]}}
  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q output %q, %lse, %g {scale = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}
