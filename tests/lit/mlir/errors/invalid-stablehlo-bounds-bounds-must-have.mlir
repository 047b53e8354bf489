func.func @f(%a: tensor<?x?xi32, #stablehlo.bounds<4>>) {
  return
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:1:34: error: invalid #stablehlo.bounds: bounds must have one entry per dimension
