func.func @main(%a: tensor<2xf32>) {
  %0 = stablehlo.transpose %a : (tensor<2xf32>) -> tensor<2xf32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:31: error: expected ',', found ':'
