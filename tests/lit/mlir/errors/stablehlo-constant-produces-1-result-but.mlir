func.func @main() {
  %0:2 = stablehlo.constant dense<1.0> : tensor<f32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:3: error: 'stablehlo.constant' produces 1 result but 2 names are given
