func.func @main(%a: tensor<2xf32>) -> tensor<3xf32> {
  return %a : tensor<2xf32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:3: error: 'func.return' returns tensor<2xf32> as result #0 but @main declares tensor<3xf32>
