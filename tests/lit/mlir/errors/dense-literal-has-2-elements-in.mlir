func.func @main() {
  %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<3xf32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:33: error: dense literal has 2 elements in dimension 0 but its type has 3
