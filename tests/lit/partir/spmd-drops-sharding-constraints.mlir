module @m {
  sdy.mesh @mesh = <["x"=2, "y"=3]>
  func.func @main(%x: tensor<8x6xf32>, %w: tensor<6x3xf32>) -> (tensor<8x3xf32>, tensor<8x3xf32>) {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x6xf32>, tensor<6x3xf32>) -> tensor<8x3xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<8x3xf32>
    %2 = stablehlo.tanh %1 : tensor<8x3xf32>
    %3 = stablehlo.custom_call @Sharding(%2) {mhlo.sharding = "{devices=[2,1,3]<=[6] last_tile_dim_replicate}"} : (tensor<8x3xf32>) -> tensor<8x3xf32>
    %4 = stablehlo.exponential %3 : tensor<8x3xf32>
    return %4, %3 : tensor<8x3xf32>, tensor<8x3xf32>
  }
}
// Sharding constraints state a global value's sharding (JAX's with_sharding_constraint: Shardy's
// sdy.sharding_constraint, XLA's custom_call @Sharding).  On a device they are the identity, and
// in the device-local program their global sharding beside local types would be read by Shardy
// or XLA's SPMD partitioner as a layout still to apply: the SPMD program leaves them out, their
// users read the local operand.  The program stays the global one's.
// RUN: autopart apply %s --mesh x=2,y=3 --view spmd --schedule 'tile %%arg0 0 x; tile %%arg1 0 y; propagate' | filecheck %s
// RUN: autopart check %s --mesh x=2,y=3 --schedule 'tile %%arg0 0 x; tile %%arg1 0 y; propagate' | filecheck %s --check-prefix CHECKED
// RUN: autopart check %s --import | filecheck %s --check-prefix CHECKED
// CHECK-NOT: sharding_constraint
// CHECK-NOT: @Sharding
// Tiles pass through them (the identity), so the rows tiled along x stay tiled: no all_gather.
// CHECK-NOT: all_gather
// CHECK: %3 = stablehlo.tanh %1 : tensor<4x3xf32>
// CHECK-NEXT: %4 = stablehlo.exponential %3 : tensor<4x3xf32>
// CHECK-NEXT: return %4, %3 : tensor<4x3xf32>, tensor<4x3xf32>
// CHECKED: equivalent: all 2 results within tolerance
