// RUN: kiln-opt %s --split-input-file --kiln-autodiff -verify-diagnostics -o /dev/null
// RUN: kiln-opt %s --split-input-file --kiln-autodiff="freeze=^(unit|zero)$" -o /dev/null 2>&1 | count 0

// An exporter that merges initializers of equal value (the dynamo
// exporter's optimizer) makes fresh norm weights and zero biases one
// parameter that several ops read: autodiff warns about a parameter of one
// value that more ops read than any parameter of varied values, whether
// its bytes are stored (an imported initializer) or a splat. A frozen one
// is not trained at all.
func.func @main(%x: tensor<2x2xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %w1 = kiln.parameter "w1" = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32> : tensor<2x2xf32>
  %w2 = kiln.parameter "w2" = dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf32> : tensor<2x2xf32>
  // expected-warning @below {{parameter 'unit' holds one value in all its elements and is read by 2 ops, more than any parameter of varied values, and kiln trains it as one parameter: if these are parameters PyTorch trains apart (fresh norm weights, zero biases), the exporter merged initializers of equal value (torch.onnx.export(dynamo=True) optimizes the graph so by default, and drops zero biases): export with optimize=False}}
  %unit = kiln.parameter "unit" = dense_resource<unit> : tensor<2xf32> : tensor<2xf32>
  // expected-warning @below {{parameter 'zero' holds one value in all its elements and is read by 2 ops}}
  %zero = kiln.parameter "zero" = dense<0.0> : tensor<2xf32> : tensor<2xf32>
  %a = kiln.matmul %x, %w1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %b, %mb, %rb = kiln.layer_norm %a scale %unit bias %zero {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %c = kiln.matmul %b, %w2 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %d, %md, %rd = kiln.layer_norm %c scale %unit bias %zero {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %l = kiln.reduce_mean %d {axes = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

{-#
  dialect_resources: {
    builtin: {
      unit: "0x040000000000803F0000803F"
    }
  }
#-}

// -----

// A layer shared on purpose (ALBERT's) reads its weights of varied values
// as often as its norm weights: no warning. Nor for a parameter of one
// value read once, or one of varied values read twice.
func.func @main(%x: tensor<2x2xf32>) -> (tensor<f32> {kiln.name = "loss"}) {
  %w = kiln.parameter "w" = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32> : tensor<2x2xf32>
  %unit = kiln.parameter "unit" = dense<[1.0, 1.0]> : tensor<2xf32> : tensor<2xf32>
  %zero = kiln.parameter "zero" = dense<0.0> : tensor<2xf32> : tensor<2xf32>
  %a = kiln.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %b, %mb, %rb = kiln.layer_norm %a scale %unit {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x2xf32>, tensor<2xf32>) -> (tensor<2x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %c = kiln.matmul %b, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %d, %md, %rd = kiln.layer_norm %c scale %unit {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x2xf32>, tensor<2xf32>) -> (tensor<2x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %e = kiln.add %d, %zero : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %l = kiln.reduce_mean %e {axes = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
