module @m {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %b: tensor<4x6xf32> {mhlo.sharding = "{devices=[1,2,2]<=[4] last_tile_dim_replicate}"}) -> (tensor<8x6xf32> {jax.result_info = "out", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    return %0 : tensor<8x6xf32>
  }
}
// The device-local program does not carry the input's sdy.sharding / mhlo.sharding on its
// arguments and results: they describe the global values before partitioning, and beside
// the local types a reader (Shardy, XLA's SPMD partitioner, `autopart apply --import` of
// the output) would take them as a layout still to apply and split the shard again; here
// they also contradict autopart.layout (%arg0 was tiled on dim 0 along x; the schedule
// tiles dim 1 along y).  Other attributes (jax.result_info) stay, and so does the mesh the
// module's symbols name.  The SPMD program was carrying both.
// RUN: autopart apply %s --mesh x=2,y=2 --schedule 'tile %%arg0 1 y; propagate' --view spmd | filecheck %s
// CHECK: module @m attributes {autopart.mesh = "x=2,y=2"
// CHECK-NEXT: sdy.mesh @mesh = <["x"=2, "y"=2]>
// CHECK-NEXT: func.func @main(%arg0: tensor<8x2xf32> {autopart.layout = [[], ["y"]]}, %arg1: tensor<2x6xf32> {autopart.layout = [["y"], []]}) -> (tensor<8x6xf32> {autopart.layout = [[], []], jax.result_info = "out"}) {
// CHECK-NOT: sharding
// CHECK: return
// Imported, the annotations become the layout, and only autopart.layout says it.
// RUN: autopart apply %s --import --view spmd | filecheck %s --check-prefix IMPORTED
// IMPORTED: func.func @main(%arg0: tensor<4x4xf32> {autopart.layout = [["x"], []]}, %arg1: tensor<4x3xf32> {autopart.layout = [[], ["x"]]}) -> (tensor<8x6xf32> {autopart.layout = [[], []], jax.result_info = "out"}) {
// RUN: autopart check %s --import | filecheck %s --check-prefix CHECKED
// CHECKED: equivalent: all 1 results within tolerance
