module @m {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%a: tensor<4x4xf32>) {
      %1 = stablehlo.negate %a : tensor<4x4xf32>
      %2 = sdy.sharding_constraint %1 <@mesh, [{}, {"y"}]> : tensor<4x4xf32>
      sdy.return %2 : tensor<4x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
// A constraint in a region the partitioning runs whole (here sdy.manual_computation's body; also
// a reduce body, a loop or case it does not open) names a value no action can tile: --import
// says it does not read it, at the constraint, and goes on (it was dropped without a word).
// RUN: autopart apply %s --import --view shardings --verbose 2>&1 | filecheck %s --match-full-lines
// CHECK: {{.*}}import-constraint-in-a-region-run-whole.mlir:6:7: note: --import does not read this sharding constraint: it is in a region partitioned whole (the body of a reduce, scatter or sort, a loop or case the partitioning does not open, sdy.manual_computation), whose values no action can tile
// CHECK-NEXT: argument  %arg0 {{ +}}tensor<8x4xf32> {{ +}}P(None, None)
