module @m {
  sdy.mesh @mesh = <["a"=2, "b"=3]>
  func.func @main(%x: tensor<6x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {"a"}]>}, %w: tensor<4x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {?}]>}, %v: tensor<4x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {?}]>}) -> tensor<6x6xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<6x4xf32>, tensor<4x6xf32>) -> tensor<6x6xf32>
    %1 = stablehlo.dot_general %x, %v, contracting_dims = [1] x [0] : (tensor<6x4xf32>, tensor<4x6xf32>) -> tensor<6x6xf32>
    %2 = stablehlo.add %0, %1 : tensor<6x6xf32>
    %3 = sdy.sharding_constraint %2 <@mesh, [{}, {"b"}]> : tensor<6x6xf32>
    %4 = stablehlo.tanh %3 : tensor<6x6xf32>
    return %4 : tensor<6x6xf32>
  }
}
// --import reads Shardy's sdy.sharding_constraint in the body as it reads XLA's custom_call
// @Sharding (the value tiled as annotated), and a closed dim (no `?`) as Shardy means it: it takes
// no more axes, so a closed `{}` stays replicated.  A sharding with a closed dim keeps its value
// atomic along the mesh axes it does not name (the state pins axes per value, not per dim, so %w's
// open dim 1 is held too); an all-open sharding (%v) pins nothing.  The import skipped the
// constraint (result P(None, None)) and let propagation tile %w's closed dim 0 by 'a'.
// RUN: autopart apply %s --import --view shardings --verbose | filecheck %s --match-full-lines
// CHECK: argument  %arg0 {{ +}}tensor<6x4xf32> {{ +}}P('b', 'a')
// CHECK-NEXT: argument  %arg1 {{ +}}tensor<4x6xf32> {{ +}}P(None, None)
// CHECK-NEXT: argument  %arg2 {{ +}}tensor<4x6xf32> {{ +}}P('a', None)
// CHECK-NEXT: result    result #0 {{ +}}tensor<6x6xf32> {{ +}}P(None, 'b')
// CHECK: schedule:
// CHECK-NEXT: tile %arg0 0 b
// CHECK-NEXT: tile %arg0 1 a
// CHECK-NEXT: atomic %arg1 a
// CHECK-NEXT: atomic %arg1 b
// CHECK-NEXT: tile %3 1 b
// CHECK-NEXT: atomic %3 a
// CHECK-NEXT: propagate
// RUN: autopart check %s --import | filecheck %s --check-prefix CHECKED
// CHECKED: equivalent: all 1 results within tolerance
