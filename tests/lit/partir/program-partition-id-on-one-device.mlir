func.func @main(%arg0: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = stablehlo.partition_id : tensor<ui32>
  %1 = stablehlo.convert %0 : (tensor<ui32>) -> tensor<f32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %3 = stablehlo.add %arg0, %2 : tensor<4x8xf32>
  %4 = stablehlo.replica_id : tensor<ui32>
  %5 = stablehlo.convert %4 : (tensor<ui32>) -> tensor<f32>
  %6 = stablehlo.broadcast_in_dim %5, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %7 = stablehlo.multiply %3, %6 : tensor<4x8xf32>
  return %3, %7 : tensor<4x8xf32>, tensor<4x8xf32>
}
// The program's own partition_id: the program as written runs on one device, where it is 0 (as its
// collectives over one device keep their meaning: program-collectives-over-one-device.mlir).  The SPMD
// module used to copy it, so that each device read its own id: another program (check: "devices 0 and 1
// hold replicated copies of one tile but differ", and NOT equivalent once %arg0 is tiled).  It is now
// replica_id: 0 on every device of the SPMD module, which has one replica.
// RUN: autopart check %s --mesh x=2 --schedule 'propagate' | filecheck %s
// RUN: autopart check %s --mesh x=2,y=2 --schedule 'tile %%arg0 1 x; tile %%arg0 0 y; propagate' | filecheck %s
// RUN: autopart apply %s --mesh x=2 --schedule 'tile %%arg0 1 x; propagate' | filecheck %s --check-prefix SPMD
// CHECK: equivalent: all 2 results within tolerance
// SPMD: %0 = stablehlo.replica_id : tensor<ui32>
// SPMD-NEXT: %1 = stablehlo.convert %0 : (tensor<ui32>) -> tensor<f32>
// SPMD-NOT: stablehlo.partition_id
