func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = call @foo(%arg0) : (tensor<8xf32>) -> (tensor<8xf32>)
  return %0 : tensor<8xf32>
}
func.func private @foo(%arg0: tensor<8xf32>) -> tensor<8xf32> {
}
// A callee with an empty body was read; inlined, it left `check` with "returned value #0 is not a
// value of @main", which names nothing the user wrote.
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:5:1: error: 'func.func' @foo has a block without ops: its body must end with `return` (func.return)
// RUN: not autopart check %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' 2>&1 | filecheck %s --check-prefix CHECKCMD --match-full-lines
// CHECKCMD: {{.*}}function-with-an-empty-body.mlir:5:1: error: 'func.func' @foo has a block without ops: its body must end with `return` (func.return)
