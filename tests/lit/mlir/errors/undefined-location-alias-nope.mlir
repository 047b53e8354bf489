func.func @main() -> tensor<f32> {
  %0 = stablehlo.constant dense<1.0> : tensor<f32> loc(#nope)
  return %0 : tensor<f32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:56: error: undefined location alias '#nope'
