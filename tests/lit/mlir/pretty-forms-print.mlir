module {
  func.func public @main(%arg0: tensor<4x8xf32> {mhlo.sharding = "{replicated}"} loc("params['w']"), %arg1: tensor<8xi32>) -> (tensor<8x4xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.iota dim = 0 : tensor<8xi32>
    %1 = stablehlo.compare  EQ, %0, %arg1,  SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %2 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %3 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<8xi1>) -> tensor<8x4xi1>
    %4 = stablehlo.select %3, %2, %2 : tensor<8x4xi1>, tensor<8x4xf32>
    %5 = stablehlo.add %4, %2 : tensor<8x4xf32>
    %6 = stablehlo.convert %0 : (tensor<8xi32>) -> tensor<8xf32>
    %7 = stablehlo.reshape %6 : (tensor<8xf32>) -> tensor<2x4xf32>
    %8 = stablehlo.concatenate %7, %7, dim = 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %9 = stablehlo.dynamic_slice %8, %arg1, %arg1, sizes = [1, 4] : (tensor<4x4xf32>, tensor<8xi32>, tensor<8xi32>) -> tensor<1x4xf32>
    %10 = stablehlo.custom_call @my.target(%9) {has_side_effect = true} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %11 = stablehlo.tuple %10, %9 : tuple<tensor<1x4xf32>, tensor<1x4xf32>>
    %12 = stablehlo.get_tuple_element %11[1] : (tuple<tensor<1x4xf32>, tensor<1x4xf32>>) -> tensor<1x4xf32>
    %13 = stablehlo.reverse %12, dims = [1] : tensor<1x4xf32>
    %14 = stablehlo.partition_id : tensor<ui32>
    return %5 : tensor<8x4xf32>
  }
}
// The pretty forms of common StableHLO ops print back as written.
// RUN: autopart parse %s | filecheck %s --match-full-lines --strict-whitespace
// RUN: autopart parse %s > %t.mlir && autopart parse %t.mlir | diff -u %t.mlir -
// CHECK: module {
// CHECK-NEXT:   func.func public @main(%arg0: tensor<4x8xf32> {mhlo.sharding = "{replicated}"} loc("params['w']"), %arg1: tensor<8xi32>) -> (tensor<8x4xf32> {jax.result_info = "result"}) {
// CHECK-NEXT:     %0 = stablehlo.iota dim = 0 : tensor<8xi32>
// CHECK-NEXT:     %1 = stablehlo.compare  EQ, %0, %arg1,  SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
// CHECK-NEXT:     %2 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:     %3 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<8xi1>) -> tensor<8x4xi1>
// CHECK-NEXT:     %4 = stablehlo.select %3, %2, %2 : tensor<8x4xi1>, tensor<8x4xf32>
// CHECK-NEXT:     %5 = stablehlo.add %4, %2 : tensor<8x4xf32>
// CHECK-NEXT:     %6 = stablehlo.convert %0 : (tensor<8xi32>) -> tensor<8xf32>
// CHECK-NEXT:     %7 = stablehlo.reshape %6 : (tensor<8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:     %8 = stablehlo.concatenate %7, %7, dim = 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:     %9 = stablehlo.dynamic_slice %8, %arg1, %arg1, sizes = [1, 4] : (tensor<4x4xf32>, tensor<8xi32>, tensor<8xi32>) -> tensor<1x4xf32>
// CHECK-NEXT:     %10 = stablehlo.custom_call @my.target(%9) {has_side_effect = true} : (tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:     %11 = stablehlo.tuple %10, %9 : tuple<tensor<1x4xf32>, tensor<1x4xf32>>
// CHECK-NEXT:     %12 = stablehlo.get_tuple_element %11[1] : (tuple<tensor<1x4xf32>, tensor<1x4xf32>>) -> tensor<1x4xf32>
// CHECK-NEXT:     %13 = stablehlo.reverse %12, dims = [1] : tensor<1x4xf32>
// CHECK-NEXT:     %14 = stablehlo.partition_id : tensor<ui32>
// CHECK-NEXT:     return %5 : tensor<8x4xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
