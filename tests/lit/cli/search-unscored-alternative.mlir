func.func @main(%arg0: tensor<4x4xf32>) -> tensor<16xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<4x4xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}
// An alternative whose subtree has no scored state (best = inf) is written with "best_below": null.  The
// explanation's JSON could not hold the infinity, and the search ended with "error: out of memory" (a
// reshape from shardy's propagation tests, over 8 devices).
// RUN: autopart search %s --devices 8 --episodes 50 | filecheck %s
// RUN: autopart search %s --mesh replica=2,data=4 --episodes 50 --json | filecheck %s --check-prefix JSON
// CHECK: schedule (for autopart apply --schedule):
// CHECK-NEXT: # found by the search:
// CHECK-NEXT: tile %arg0 0 data
// JSON: "best_below": null
