func.func @main(%a: tensor<2xfoo>) {}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:1:30: error: unknown element type 'foo'
