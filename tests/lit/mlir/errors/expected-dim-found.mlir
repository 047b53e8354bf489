func.func @main() {
  %0 = stablehlo.iota : tensor<2xf32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:23: error: expected 'dim', found ':'
