func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = sdy.constant dense<[1.0, 2.0]
  %1 = stablehlo.add %x, %0 : tensor<2xf32>
  return %1 : tensor<2xf32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:26: error: unterminated dense<...> in sdy.constant
