module @m {
  sdy.mesh @mesh = <["x"=2]>
  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    sdy.manual_computation() in_shardings=[] out_shardings=[] manual_axes={"x"} () {
      sdy.return
    } : () -> ()
    %0 = stablehlo.negate %arg0 : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
// An op of another dialect written as its name alone (`sdy.return` closing an empty
// sdy.manual_computation, as Shardy's tests and exports write it) is kept as a template of no
// pieces; copying it into the SPMD and temporal programs read one piece from a NULL array:
// apply, check and search crashed (SIGSEGV) on any schedule.
// RUN: autopart apply %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' > %t.mlir && autopart parse %t.mlir | filecheck %s --match-full-lines
// CHECK: module @m attributes {autopart.mesh = "x=2", mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   sdy.mesh @mesh = <["x"=2]>
// CHECK-NEXT:   func.func @main(%arg0: tensor<4xf32> {autopart.layout = [["x"]]}) -> (tensor<4xf32> {autopart.layout = [["x"]]}) {
// CHECK-NEXT:     sdy.manual_computation() in_shardings=[] out_shardings=[] manual_axes={"x"} () {
// CHECK-NEXT:       sdy.return
// CHECK-NEXT:     } : () -> ()
// CHECK-NEXT:     %0 = stablehlo.negate %arg0 : tensor<4xf32>
// CHECK-NEXT:     return %0 : tensor<4xf32>
// RUN: autopart apply %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' --view temporal | filecheck %s --check-prefix TEMPORAL
// TEMPORAL: sdy.return
