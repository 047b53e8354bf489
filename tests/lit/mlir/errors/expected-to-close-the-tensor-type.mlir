module { func.func @main(%a: tensor<2xf32) { } }
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:1:42: error: expected '>' to close the tensor type, found ')'
