module @jit_f attributes {mhlo.num_partitions = 2 : i32} {
  sdy.mesh @mesh = <["a"=2]>
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {}]> : tensor<2x4xf32>
    %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg1: tensor<1x4xf32> loc("shard")) {
      %3 = stablehlo.negate %arg1 : tensor<1x4xf32>
      sdy.return %3 : tensor<1x4xf32>
    } : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %2:2 = chlo.top_k(%1, k = 2) : tensor<2x4xf32> -> (tensor<2x2xf32>, tensor<2x2xi32>)
    %4 = "foo.bar"(%1) <{p = 1 : i64}> {q = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
}
// Ops of other dialects (sdy, chlo, unknown) are kept and print back as written, with their regions renumbered.
// RUN: autopart parse %s | filecheck %s --match-full-lines --strict-whitespace
// RUN: autopart parse %s > %t.mlir && autopart parse %t.mlir | diff -u %t.mlir -
// CHECK: module @jit_f attributes {mhlo.num_partitions = 2 : i32} {
// CHECK-NEXT:   sdy.mesh @mesh = <["a"=2]>
// CHECK-NEXT:   func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:     %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {}]> : tensor<2x4xf32>
// CHECK-NEXT:     %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg1: tensor<1x4xf32> loc("shard")) {
// CHECK-NEXT:       %2 = stablehlo.negate %arg1 : tensor<1x4xf32>
// CHECK-NEXT:       sdy.return %2 : tensor<1x4xf32>
// CHECK-NEXT:     } : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:     %3:2 = chlo.top_k(%1, k = 2) : tensor<2x4xf32> -> (tensor<2x2xf32>, tensor<2x2xi32>)
// CHECK-NEXT:     %4 = "foo.bar"(%1) <{p = 1 : i64}> {q = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:     return %4 : tensor<2x4xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
