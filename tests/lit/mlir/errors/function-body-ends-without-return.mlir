func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8xf32>
  %1 = stablehlo.add %0, %arg0 : tensor<8xf32>
}
// A function body must end with its terminator (MLIR: "block with no terminator").  This was read,
// and `check` failed with "@main does not end with func.return", no position.
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:3:3: error: 'stablehlo.add' ends a block of @main: its body must end with `return` (func.return)
