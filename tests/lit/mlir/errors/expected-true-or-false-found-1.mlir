func.func @f(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.cholesky %a, lower = 1 : tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:39: error: expected true or false, found '1'
