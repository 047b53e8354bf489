module {
  func.func @w(%arg0: tensor<i64>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0:2 = stablehlo.while(%arg2 = %arg0, %arg3 = %arg1) : tensor<i64>, tensor<4xf32>
     cond {
      %1 = stablehlo.compare  LT, %arg2, %arg2,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %2 = stablehlo.add %arg3, %arg3 : tensor<4xf32>
      stablehlo.return %arg2, %2 : tensor<i64>, tensor<4xf32>
    }
    %3 = stablehlo.constant dense<0.0> : tensor<f32>
    %4 = stablehlo.reduce(%0#1 init: %3) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
     reducer(%arg4: tensor<f32>, %arg5: tensor<f32>) {
      %5 = stablehlo.maximum %arg5, %arg4 : tensor<f32>
      stablehlo.return %5 : tensor<f32>
    }
    return %0#1 : tensor<4xf32>
  }
}
// The pretty while (cond/do) and reduce (reducer) forms print back as written.
// RUN: autopart parse %s | filecheck %s --match-full-lines --strict-whitespace
// RUN: autopart parse %s > %t.mlir && autopart parse %t.mlir | diff -u %t.mlir -
// CHECK: module {
// CHECK-NEXT:   func.func @w(%arg0: tensor<i64>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:     %0:2 = stablehlo.while(%arg2 = %arg0, %arg3 = %arg1) : tensor<i64>, tensor<4xf32>
// CHECK-NEXT:      cond {
// CHECK-NEXT:       %1 = stablehlo.compare  LT, %arg2, %arg2,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK-NEXT:       stablehlo.return %1 : tensor<i1>
// CHECK-NEXT:     } do {
// CHECK-NEXT:       %2 = stablehlo.add %arg3, %arg3 : tensor<4xf32>
// CHECK-NEXT:       stablehlo.return %arg2, %2 : tensor<i64>, tensor<4xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     %3 = stablehlo.constant dense<0.0> : tensor<f32>
// CHECK-NEXT:     %4 = stablehlo.reduce(%0#1 init: %3) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:      reducer(%arg4: tensor<f32>, %arg5: tensor<f32>) {
// CHECK-NEXT:       %5 = stablehlo.maximum %arg5, %arg4 : tensor<f32>
// CHECK-NEXT:       stablehlo.return %5 : tensor<f32>
// CHECK-NEXT:     }
// CHECK-NEXT:     return %0#1 : tensor<4xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
