module @m {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%x: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %w: tensor<4x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {?}]>}) -> tensor<8x6xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{?}, {"b", ?}]> : tensor<8x6xf32>
    %2 = stablehlo.tanh %1 : tensor<8x6xf32>
    return %2 : tensor<8x6xf32>
  }
}
// Shardy's sharding_constraint (and reshard) is the identity on its value, as XLA's custom_call
// @Sharding is: tiles and pending sums pass through it both ways.  Propagation used to stop at it
// ("blocked propagation ... no TMR entries for this op"), so the constraint's tile along b reached
// neither the dot that computes its operand nor %w, and the result came out P('a', None).
// RUN: autopart apply %s --import --view shardings | filecheck %s
// RUN: autopart apply %s --mesh a=2,b=2 --view spmd --schedule 'tile %%1 1 b; propagate' | filecheck %s --check-prefix SPMD
// RUN: autopart check %s --mesh a=2,b=2 --schedule 'tile %%arg0 0 a; tile %%1 1 b; propagate' | filecheck %s --check-prefix CHECKED
// CHECK: argument  %arg0 {{ +}}tensor<8x4xf32> {{ +}}P('a', None)
// CHECK-NEXT: argument  %arg1 {{ +}}tensor<4x6xf32> {{ +}}P(None, 'b')
// CHECK-NEXT: result    result #0 {{ +}}tensor<8x6xf32> {{ +}}P('a', 'b')
// SPMD-NOT: sharding_constraint
// SPMD: %0 = stablehlo.dot_general %arg0, %arg1, {{.*}} -> tensor<8x3xf32>
// SPMD-NEXT: %1 = stablehlo.tanh %0 : tensor<8x3xf32>
// SPMD-NEXT: return %1 : tensor<8x3xf32>
// CHECKED: equivalent: all 1 results within tolerance
