module @m {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<i32>, %arg2: tensor<4x6xf32>) -> (tensor<8x4xf32>, tensor<4x6xf32>) {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c3 = stablehlo.constant dense<3> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %r:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, tensor<8x4xf32>
     cond {
      %p = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %y = stablehlo.multiply %x, %x : tensor<8x4xf32>
      %z = sdy.sharding_constraint %y <@mesh, [{"x"}, {}]> : tensor<8x4xf32>
      %j = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %j, %z : tensor<i32>, tensor<8x4xf32>
    }
    %b = "stablehlo.case"(%arg1) ({
      %n = stablehlo.negate %arg2 : tensor<4x6xf32>
      %m = sdy.sharding_constraint %n <@mesh, [{}, {"y"}]> : tensor<4x6xf32>
      stablehlo.return %m : tensor<4x6xf32>
    }, {
      stablehlo.return %arg2 : tensor<4x6xf32>
    }) : (tensor<i32>) -> tensor<4x6xf32>
    return %r#1, %b : tensor<8x4xf32>, tensor<4x6xf32>
  }
}
// --import reads the sharding constraints inside a while's body and a case's branches (a scan's
// layers, as JAX writes with_sharding_constraint there): the partitioning opens those regions
// and tiles their values like the function's own.  The import read only the function's own ops,
// so these were dropped without a word (both arguments P(None, None)), though the values could
// be tiled as annotated.
// RUN: autopart apply %s --import --view shardings --verbose 2>&1 | filecheck %s --match-full-lines
// CHECK: argument  %arg0 {{ +}}tensor<8x4xf32> {{ +}}P('x', None)
// CHECK-NEXT: argument  %arg1 {{ +}}tensor<i32> {{ +}}P()
// CHECK-NEXT: argument  %arg2 {{ +}}tensor<4x6xf32> {{ +}}P(None, 'y')
// CHECK-NEXT: result    result #0 {{ +}}tensor<8x4xf32> {{ +}}P('x', None)
// CHECK-NEXT: result    result #1 {{ +}}tensor<4x6xf32> {{ +}}P(None, 'y')
// CHECK: schedule:
// CHECK-NEXT: tile %6 0 x
// CHECK-NEXT: atomic %6 y
// CHECK-NEXT: tile %10 1 y
// CHECK-NEXT: atomic %10 x
// CHECK-NEXT: propagate
// CHECK-NOT: note
// RUN: autopart check %s --import | filecheck %s --check-prefix CHECKED
// CHECKED: equivalent: all 2 results within tolerance
