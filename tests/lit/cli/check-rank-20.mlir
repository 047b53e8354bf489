module @m {
  func.func @main(%arg0: tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2xf32>, %arg1: tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x4x2xf32>) -> tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x4x2xf32> {
    %0 = stablehlo.reshape %arg0 : (tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2xf32>) -> tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x4x2xf32>
    %1 = stablehlo.multiply %0, %arg1 : tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x4x2xf32>
    %2 = stablehlo.transpose %1, dims = [18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0] : (tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x4x2xf32>) -> tensor<2x4x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2xf32>
    %3 = stablehlo.transpose %2, dims = [18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0] : (tensor<2x4x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2xf32>) -> tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x4x2xf32>
    return %3 : tensor<2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x4x2xf32>
  }
}
// Ranks up to 32 (IR_MAX_RANK) are read: the MLIR parser held a tensor type's dims in 16 slots and
// refused ranks 17-32 with "tensor rank too large" (openxla/shardy's sharding_rule tests, rank 20),
// though the HLO parser and the rest of autopart take them.
// RUN: autopart check %s --mesh x=2,y=2 --schedule 'tile %arg0 19 x; tile %arg1 17 y; propagate' | filecheck %s
// CHECK: equivalent: all 1 results within tolerance
// RUN: autopart search %s --mesh x=2,y=2 --episodes 20 | filecheck %s --check-prefix SEARCH
// SEARCH: schedule (for autopart apply
