!vec = tensor<8xf32>
#attr = {k = 1 : i32}
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = chlo.erf %arg0 : !vec -> !vec
  %1 = "test.opaque"(%0) {a = #attr} : (tensor<8xf32>) -> tensor<8xf32>
  %2 = stablehlo.constant dense_resource<blob1> : tensor<8xf32>
  %3 = stablehlo.add %1, %2 : tensor<8xf32>
  return %3 : tensor<8xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F000000400000404000008040000080400000404000000040000080BF"
    }
  }
#-}
// An op kept as written names the file's aliases (!vec) and resources (blob1): the SPMD and temporal
// modules carry their definitions, so that what apply prints parses again (it printed `!vec` undefined).
// RUN: autopart apply %s --mesh M=2 --schedule 'tile %arg0 0 M; propagate' --view spmd > %t.mlir && autopart parse %t.mlir | filecheck %s --match-full-lines
// RUN: autopart apply %s --mesh M=2 --schedule 'tile %arg0 0 M; propagate' --view temporal > %t2.mlir && autopart parse %t2.mlir | filecheck %s --check-prefix TEMPORAL
// CHECK: !vec = tensor<8xf32>
// CHECK: {{.*}}chlo.erf {{.*}} : !vec -> !vec
// CHECK: {{.*}}"test.opaque"{{.*}}{a = {k = 1 : i32}}{{.*}}
// CHECK: {{.*}}blob1: "0x04000000{{.*}}
// TEMPORAL: !vec = tensor<8xf32>
// TEMPORAL: chlo.erf
