func.func @main(%re: tensor<2xf32>) -> () {
  %0 = stablehlo.complex %re, %re : tensor<2xf32>
  return
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:35: error: 'stablehlo.complex' must have a complex result type
