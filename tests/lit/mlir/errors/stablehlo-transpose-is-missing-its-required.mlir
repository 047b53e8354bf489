func.func @main() {
  %0 = "stablehlo.transpose"() : () -> tensor<2xf32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:3: error: 'stablehlo.transpose' is missing its required attribute 'permutation'
