func.func @f(%a: tensor<2x?xi32, #stablehlo.bounds<2, 4>>) {
  return
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:1:52: error: invalid #stablehlo.bounds: a static dimension cannot have a bound
