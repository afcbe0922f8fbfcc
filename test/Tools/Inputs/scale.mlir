func.func @main(%x: tensor<2x3xf32> {kiln.name = "x"}, %s: tensor<f32> {kiln.name = "s"}) -> (tensor<2x3xf32> {kiln.name = "y"}, tensor<f32> {kiln.name = "total"}) {
  %y = kiln.mul %x, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %t = kiln.reduce_sum %y {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  return %y, %t : tensor<2x3xf32>, tensor<f32>
}
