#loc1 = loc("model.py":12:3)
module {
  func.func @f(%arg0: tensor<f32> loc("params['w']")) -> tensor<f32> {
    %0 = stablehlo.negate %arg0 : tensor<f32> loc(#loc3)
    %1 = stablehlo.abs %0 : tensor<f32> loc(fused["a", #loc1])
    return %1 : tensor<f32> loc(unknown)
  }
}
#loc2 = loc("jit(f)/neg"(#loc1))
#loc3 = loc(callsite(#loc2 at "caller.py":7:1 to :9))
// Locations: aliases defined before or after use, fused, callsite and named locations print as aliases in order of use; unknown is dropped.
// RUN: autopart parse %s | filecheck %s --match-full-lines --strict-whitespace
// RUN: autopart parse %s > %t.mlir && autopart parse %t.mlir | diff -u %t.mlir -
// CHECK: module {
// CHECK-NEXT:   func.func @f(%arg0: tensor<f32> loc("params['w']")) -> tensor<f32> {
// CHECK-NEXT:     %0 = stablehlo.negate %arg0 : tensor<f32> loc(#loc1)
// CHECK-NEXT:     %1 = stablehlo.abs %0 : tensor<f32> loc(#loc2)
// CHECK-NEXT:     return %1 : tensor<f32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: #loc1 = loc(callsite(#loc3 at "caller.py":7:1 to :9))
// CHECK-NEXT: #loc2 = loc(fused["a", "model.py":12:3])
// CHECK-NEXT: #loc3 = loc("jit(f)/neg"("model.py":12:3))
