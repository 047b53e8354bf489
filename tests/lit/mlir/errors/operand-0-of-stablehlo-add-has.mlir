func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<3xf32>
  return %0 : tensor<2xf32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:29: error: operand #0 of 'stablehlo.add' has type tensor<2xf32> but the op's type says tensor<3xf32>
