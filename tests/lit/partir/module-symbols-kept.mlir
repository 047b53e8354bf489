module @m {
  sdy.mesh @mesh = <["x"=2]>
  util.global private @bias = dense<1.000000e+00> : tensor<4xf32>
  func.func @main(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x4xf32> {
    %b = util.global.load @bias : tensor<4xf32>
    %0 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.add %a, %0 : tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
}
// The ops beside the functions (Shardy's mesh, IREE's globals: the corpus's iree_*.mlir hold
// 1,113 of them) are what the function refers to by symbol; the programs made from it kept the
// references (@mesh, @bias) but dropped the definitions, so no MLIR tool could read them back.
// RUN: autopart apply %s --mesh x=2 --schedule 'tile %%arg0 0 x; propagate' --view spmd | filecheck %s
// CHECK: module @m attributes {autopart.mesh = "x=2"
// CHECK-NEXT: sdy.mesh @mesh = <["x"=2]>
// CHECK-NEXT: util.global private @bias = dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT: func.func @main(%arg0: tensor<4x4xf32> {autopart.layout = [["x"], []]
// CHECK: util.global.load @bias : tensor<4xf32>
// RUN: autopart apply %s --mesh x=2 --schedule 'tile %%arg0 0 x; propagate' --view temporal | filecheck %s --check-prefix TEMPORAL
// TEMPORAL: sdy.mesh @mesh = <["x"=2]>
// TEMPORAL-NEXT: util.global private @bias = dense<1.000000e+00> : tensor<4xf32>
// TEMPORAL-NEXT: func.func @main(
