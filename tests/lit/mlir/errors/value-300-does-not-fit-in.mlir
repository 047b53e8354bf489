func.func @main() {
  %0 = stablehlo.constant dense<300> : tensor<i8>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:33: error: value 300 does not fit in i8
