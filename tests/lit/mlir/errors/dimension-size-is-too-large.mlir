func.func @main() { %0 = stablehlo.constant dense<1> : tensor<4294967296000000000000xf32> }
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:1:63: error: dimension size is too large
