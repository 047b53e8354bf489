module {
  func.func @f(%arg0: tensor<2x?x4xf32>, %arg1: tensor<bf16>, %arg2: tensor<3xcomplex<f64>>, %arg3: tensor<4x!quant.uniform<i8:f32, 5.000000e-01:-3>>, %arg4: tensor<*xf32>, %arg5: tensor<2xf8E4M3FN>, %arg6: tuple<tensor<f32>, tensor<i1>>, %arg7: !stablehlo.token, %arg8: tensor<4xui8>, %arg9: tensor<?xi64, #stablehlo.bounds<8>>, %arg10: tensor<0x3xf16>) {
    return
  }
}
// Types print back exactly as written: dynamic and unranked dims, bf16/f8/complex, quantized and bounded tensors, tuples, tokens.
// RUN: autopart parse %s | filecheck %s --match-full-lines --strict-whitespace
// RUN: autopart parse %s > %t.mlir && autopart parse %t.mlir | diff -u %t.mlir -
// CHECK: module {
// CHECK-NEXT:   func.func @f(%arg0: tensor<2x?x4xf32>, %arg1: tensor<bf16>, %arg2: tensor<3xcomplex<f64>>, %arg3: tensor<4x!quant.uniform<i8:f32, 5.000000e-01:-3>>, %arg4: tensor<*xf32>, %arg5: tensor<2xf8E4M3FN>, %arg6: tuple<tensor<f32>, tensor<i1>>, %arg7: !stablehlo.token, %arg8: tensor<4xui8>, %arg9: tensor<?xi64, #stablehlo.bounds<8>>, %arg10: tensor<0x3xf16>) {
// CHECK-NEXT:     return
// CHECK-NEXT:   }
// CHECK-NEXT: }
