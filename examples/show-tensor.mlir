// Prints a scalar tensor file through kiln-run (used by the examples).
func.func @main(%x: tensor<f32> {kiln.name = "x"}) -> (tensor<f32> {kiln.name = "x"}) {
  return %x : tensor<f32>
}
