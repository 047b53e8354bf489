module @m {
  func.func public @main(%arg0: tensor<8x4xf32> {tf.aliasing_output = 0 : i32}, %arg1: tensor<32xf32>) -> (tensor<32xf32>, tensor<8x4xf32>) {
    %0 = stablehlo.exponential %arg1 : tensor<32xf32>
    %1 = stablehlo.negate %arg0 : tensor<8x4xf32>
    return %0, %1 : tensor<32xf32>, tensor<8x4xf32>
  }
}
// A donated argument's buffer holds the result it names, so both have one type; this was accepted and
// `autopart apply` wrote an SPMD module donating a tensor<8x2xf32> to a tensor<32xf32> (XLA refuses it).
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:2:3: error: 'func.func' argument %arg0, tensor<8x4xf32>, is donated to result #0 (tf.aliasing_output), a tensor<32xf32>: a donated argument's buffer holds the result, so both must have one type
// The commands that partition read the module the same way.
// RUN: not autopart check %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' 2>&1 | filecheck %s --check-prefix CHECKCMD --match-full-lines
// CHECKCMD: {{.*}}argument-is-donated-to-a-result-of-another-type.mlir:2:3: error: 'func.func' argument %arg0, tensor<8x4xf32>, is donated to result #0 (tf.aliasing_output), a tensor<32xf32>: a donated argument's buffer holds the result, so both must have one type
