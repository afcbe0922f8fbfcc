// RUN: kiln-opt %s --kiln-autodiff -verify-diagnostics | FileCheck %s

// Sinusoidal position tables are not trained, recognized by their values
// whatever their names: the sine and cosine of each position, interleaved
// (the PyTorch tutorial's `pe` buffer, here with a leading 1) or sines then
// cosines with a zero padding row (fairseq's), or with positions
// descending to 0 (Transformer-XL's relative ones). A table whose first row is
// the same but whose other rows are not sines and cosines (a weight
// initialized so, then trained) is a weight, and so is a learned table.
// expected-remark @below {{not training 'pe', 'embed_positions.weight', 'pos_emb': sinusoidal position tables by their values (the sine and cosine of each position), which PyTorch keeps as buffers or frozen embeddings (--train=REGEX trains them)}}
func.func @main(%x: tensor<3x4xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %pe = kiln.parameter "pe" = dense<[[[0.0, 1.0, 0.0, 1.0], [0.8414709568023682, 0.5403022766113281, 0.009999833069741726, 0.9999499917030334], [0.9092974066734314, -0.416146844625473, 0.019998665899038315, 0.9998000264167786]]]> : tensor<1x3x4xf32> : tensor<1x3x4xf32>
  %fairseq = kiln.parameter "embed_positions.weight" = dense<[[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.9092974066734314, 0.019998665899038315, -0.416146844625473, 0.9998000264167786]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %relative = kiln.parameter "pos_emb" = dense<[[0.9092974066734314, 0.019998665899038315, -0.416146844625473, 0.9998000264167786], [0.8414709568023682, 0.009999833069741726, 0.5403022766113281, 0.9999499917030334], [0.0, 0.0, 1.0, 1.0]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %trained = kiln.parameter "trained_positions" = dense<[[0.0, 1.0, 0.0, 1.0], [0.8, 0.5, 0.01, 1.0], [0.9, -0.4, 0.02, 1.0]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %learned = kiln.parameter "learned_positions" = dense<[[0.1, 0.9, -0.2, 0.3], [0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 0.0, 1.0]]> : tensor<3x4xf32> : tensor<3x4xf32>
  %pe2 = kiln.reshape %pe : tensor<1x3x4xf32> to tensor<3x4xf32>
  %a = kiln.add %x, %pe2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %f = kiln.add %a, %fairseq : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %b = kiln.add %f, %relative : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %c = kiln.mul %b, %trained : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %d = kiln.mul %c, %learned : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %l = kiln.reduce_sum %d {axes = array<i64: 0, 1>} : (tensor<3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: kiln.gradient_of = "trained_positions"
// CHECK-SAME: kiln.gradient_of = "learned_positions"
// CHECK-NOT: kiln.gradient_of
