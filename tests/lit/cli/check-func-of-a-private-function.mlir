module @m {
  func.func public @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
  func.func private @foo(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
// `--func` may name a private function (a callee, as Shardy's and JAX's exports have them).  Its
// SPMD program kept `private`, so the module had no entry: XLA cannot run it, and check refused
// every schedule with "the SPMD module has no entry function".  The partitioned function is the
// SPMD program's entry: it is public now, and check runs the function it partitioned by name.
// RUN: autopart apply %s --func foo --mesh x=2 --schedule 'tile %arg0 0 x; propagate' | filecheck %s --match-full-lines
// CHECK: module @m attributes {autopart.mesh = "x=2", mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @foo(%arg0: tensor<4x4xf32> {autopart.layout = [["x"], []]}) -> (tensor<4x4xf32> {autopart.layout = [["x"], []]}) {
// CHECK-NEXT:     %0 = stablehlo.multiply %arg0, %arg0 : tensor<4x4xf32>
// RUN: autopart check %s --func foo --mesh x=2 --schedule 'tile %arg0 0 x; propagate' | filecheck %s --check-prefix CHECKED
// CHECKED: spmd {{.*}} 2 ops evaluated
// CHECKED: equivalent: all 1 results within tolerance
