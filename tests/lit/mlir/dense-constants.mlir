module {
  func.func @c() {
    %0 = stablehlo.constant dense<1.500000e+00> : tensor<2x3xf32>
    %1 = stablehlo.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi32>
    %2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %3 = stablehlo.constant dense<[(1.0, -2.0), (0.5, 0.25)]> : tensor<2xcomplex<f32>>
    %4 = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
    %5 = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
    %6 = stablehlo.constant dense<4294967295> : tensor<ui32>
    %7 = stablehlo.constant dense<> : tensor<0xf32>
    %8 = stablehlo.constant dense<1.0e-01> : tensor<bf16>
    %9 = stablehlo.constant dense_resource<__elided__> : tensor<3xf32>
    return
  }
}
// Dense constants print canonically: splats, nested lists, hex floats and blobs, complex, i1, unsigned, empty, bf16, elided resources.
// RUN: autopart parse %s | filecheck %s --match-full-lines --strict-whitespace
// RUN: autopart parse %s > %t.mlir && autopart parse %t.mlir | diff -u %t.mlir -
// CHECK: module {
// CHECK-NEXT:   func.func @c() {
// CHECK-NEXT:     %0 = stablehlo.constant dense<1.5> : tensor<2x3xf32>
// CHECK-NEXT:     %1 = stablehlo.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi32>
// CHECK-NEXT:     %2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT:     %3 = stablehlo.constant dense<[(1.0, -2.0), (0.5, 0.25)]> : tensor<2xcomplex<f32>>
// CHECK-NEXT:     %4 = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>
// CHECK-NEXT:     %5 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
// CHECK-NEXT:     %6 = stablehlo.constant dense<4294967295> : tensor<ui32>
// CHECK-NEXT:     %7 = stablehlo.constant dense<> : tensor<0xf32>
// CHECK-NEXT:     %8 = stablehlo.constant dense<0.1> : tensor<bf16>
// CHECK-NEXT:     %9 = stablehlo.constant dense_resource<__elided__> : tensor<3xf32>
// CHECK-NEXT:     return
// CHECK-NEXT:   }
// CHECK-NEXT: }
