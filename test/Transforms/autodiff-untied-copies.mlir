// RUN: kiln-opt %s --kiln-autodiff -verify-diagnostics -o /dev/null
// RUN: kiln-opt %s --kiln-autodiff="freeze=^(head|copy)$" -o /dev/null 2>&1 | count 0

// A weight that an exporter wrote twice, as its transpose (torch.onnx's
// constant folding) or as a copy (the dynamo exporter), trains as two
// parameters: autodiff says so, naming both. Equal constant matrices and
// equal vectors (zero biases, unit norm weights) are no sign of a tie; a
// frozen parameter is not trained apart.
func.func @main(%ids: tensor<3xi64>) -> (tensor<f32> {kiln.name = "loss"}) {
  %table = kiln.parameter "table" = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32> : tensor<3x2xf32>
  // expected-warning @below {{parameter 'head' holds exactly the transpose of 'table', and kiln trains the two apart: if they are one tied weight in PyTorch, the exporter wrote it twice (torch.onnx.export's constant folding writes a weight's transpose as an initializer of its own: export with do_constant_folding=False)}}
  %head = kiln.parameter "head" = dense<[[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]> : tensor<2x3xf32> : tensor<2x3xf32>
  // expected-warning @below {{parameter 'copy' holds exactly the values of 'table'}}
  %copy = kiln.parameter "copy" = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32> : tensor<3x2xf32>
  %zeros1 = kiln.parameter "zeros1" = dense<0.0> : tensor<2x3xf32> : tensor<2x3xf32>
  %zeros2 = kiln.parameter "zeros2" = dense<0.0> : tensor<2x3xf32> : tensor<2x3xf32>
  %unit1 = kiln.parameter "unit1" = dense<[1.0, 2.0]> : tensor<2xf32> : tensor<2xf32>
  %unit2 = kiln.parameter "unit2" = dense<[1.0, 2.0]> : tensor<2xf32> : tensor<2xf32>
  %e = kiln.gather %table, %ids {axis = 0 : i64} : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
  %c = kiln.gather %copy, %ids {axis = 0 : i64} : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
  %s = kiln.add %e, %c : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %n = kiln.mul %s, %unit1 : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %m = kiln.mul %n, %unit2 : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %z = kiln.add %head, %zeros1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %w = kiln.add %z, %zeros2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %o = kiln.matmul %m, %w : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
  %l = kiln.reduce_mean %o {axes = array<i64: 0, 1>} : (tensor<3x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
