func.func @main() { %0 = stablehlo.constant dense<"0xABC"> : tensor<f32> }
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:1:51: error: hex constant has an odd number of digits
