// RUN: kiln-opt %s --kiln-autodiff -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --kiln-autodiff="train=.*" 2>&1 | FileCheck %s --check-prefix=ALL

// Initializers that PyTorch keeps as buffers (by their names) or that hold
// a mask (by their values) are not trained unless --train names them; a
// weight holding large but finite values is, and so is a buffer-like name
// that is only a prefix (`inv_freq_scale`, `where_weight`), and so is
// wav2vec2's `masked_spec_embed`, which is no `masked_bias`. A `where` the
// dynamo exporter folded (BERT's all-zero padding mask) is a mask by name.
// expected-remark @below {{not training 'rotary.inv_freq', 'layers.0.cos_cached', 'blocks.1.attn_mask' and 2 more: PyTorch buffers by name, which its optimizers skip (--train=REGEX trains them)}}
// expected-remark @below {{not training 'causal', 'where': masks by their values (-inf or a float type's lowest) or folded selections named 'where' (--train=REGEX trains them)}}
func.func @main(%x: tensor<2x2xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %inv = kiln.parameter "rotary.inv_freq" = dense<[1.0, 0.5]> : tensor<2xf32> : tensor<2xf32>
  %cos = kiln.parameter "layers.0.cos_cached" = dense<[[1.0, 0.5], [0.25, 2.0]]> : tensor<2x2xf32> : tensor<2x2xf32>
  %mask = kiln.parameter "causal" = dense<[[0.0, -3.40282347E+38], [0.0, 0.0]]> : tensor<2x2xf32> : tensor<2x2xf32>
  %big = kiln.parameter "big" = dense<[[1.0E+20, 1.0], [2.0, 3.0]]> : tensor<2x2xf32> : tensor<2x2xf32>
  %window = kiln.parameter "blocks.1.attn_mask" = dense<[[0.0, -100.0], [-100.0, 0.0]]> : tensor<2x2xf32> : tensor<2x2xf32>
  %token = kiln.parameter "mask_token" = dense<[0.5, 1.5]> : tensor<2xf32> : tensor<2xf32>
  %spec = kiln.parameter "masked_spec_embed" = dense<[0.25, 0.75]> : tensor<2xf32> : tensor<2xf32>
  %scale = kiln.parameter "inv_freq_scale" = dense<[2.0, 3.0]> : tensor<2xf32> : tensor<2xf32>
  %a = kiln.mul %x, %inv : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %b = kiln.mul %a, %cos : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %c = kiln.add %b, %mask : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %d = kiln.mul %c, %big : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %e = kiln.mul %d, %scale : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %f = kiln.add %e, %window : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %spec_token = kiln.mul %token, %spec : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %g = kiln.mul %f, %spec_token : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %temperature = kiln.parameter "logit_scale" = dense<2.0> : tensor<f32> : tensor<f32>
  %literal = kiln.parameter "val_7" = dense<3.0> : tensor<f32> : tensor<f32>
  %masked = kiln.parameter "h.0.attn.masked_bias" = dense<-1.0E+4> : tensor<f32> : tensor<f32>
  %logits_bias = kiln.parameter "model.final_logits_bias" = dense<0.0> : tensor<2xf32> : tensor<2xf32>
  %h = kiln.mul %g, %temperature : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %i = kiln.mul %h, %literal : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %j = kiln.add %i, %masked : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %m = kiln.add %j, %logits_bias : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %folded = kiln.parameter "where" = dense<0.0> : tensor<2x2xf32> : tensor<2x2xf32>
  %where_weight = kiln.parameter "where_weight" = dense<[1.0, 2.0]> : tensor<2xf32> : tensor<2xf32>
  %n = kiln.add %m, %folded : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %o = kiln.mul %n, %where_weight : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %l = kiln.reduce_mean %o {axes = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: kiln.gradient_of = "big"
// CHECK-SAME: kiln.gradient_of = "mask_token"
// CHECK-SAME: kiln.gradient_of = "masked_spec_embed"
// CHECK-SAME: kiln.gradient_of = "inv_freq_scale"
// CHECK-SAME: kiln.gradient_of = "logit_scale"
// CHECK-SAME: kiln.gradient_of = "where_weight"
// CHECK-NOT: kiln.gradient_of

// ALL-NOT: remark
// ALL-LABEL: func.func @main_grad
// ALL-SAME: kiln.gradient_of = "rotary.inv_freq"
// ALL-SAME: kiln.gradient_of = "layers.0.cos_cached"
// ALL-SAME: kiln.gradient_of = "causal"
// ALL-SAME: kiln.gradient_of = "big"
// ALL-SAME: kiln.gradient_of = "blocks.1.attn_mask"
// ALL-SAME: kiln.gradient_of = "mask_token"
// ALL-SAME: kiln.gradient_of = "masked_spec_embed"
// ALL-SAME: kiln.gradient_of = "inv_freq_scale"
// ALL-SAME: kiln.gradient_of = "logit_scale"
// ALL-SAME: kiln.gradient_of = "val_7"
// ALL-SAME: kiln.gradient_of = "h.0.attn.masked_bias"
// ALL-SAME: kiln.gradient_of = "model.final_logits_bias"
// ALL-SAME: kiln.gradient_of = "where"
// ALL-SAME: kiln.gradient_of = "where_weight"
