func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<4xf32>) -> (tensor<8xf32>, tensor<2x!quant.uniform<i8:f32, 2.000000e+00:15>>) {
  %0:2 = stablehlo.optimization_barrier {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}]>, <@mesh, [{?}]>]>} %arg0, %arg1 : tensor<8xf32>, tensor<4xf32>
  %1 = stablehlo.optimization_barrier %0#0 {z.after = 1 : i32} : tensor<8xf32>
  stablehlo.optimization_barrier()
  %2 = stablehlo.constant() {value = dense<[1, 2]> : tensor<2xi8>} : () -> tensor<2x!quant.uniform<i8:f32, 2.000000e+00:15>>
  %3 = stablehlo.constant() <{value = dense<[3, 4]> : tensor<2xi8>}> {z.attr = 1 : i32} : () -> tensor<2x!quant.uniform<i8:f32, 2.000000e+00:15>>
  return %1, %2 : tensor<8xf32>, tensor<2x!quant.uniform<i8:f32, 2.000000e+00:15>>
}
// StableHLO's own forms, as stablehlo-opt and shardy print them: an optimization_barrier's attributes come
// before its operands (`()` when it has none), and a quantized constant is its bare name and then the generic
// form.  Both were refused ("produces 0 results", "expected '->'"); the barrier printed its attributes after the
// operands, which stablehlo-opt does not read.
// RUN: autopart parse %s --no-locs | filecheck %s --match-full-lines
// RUN: autopart parse %s > %t.mlir && autopart parse %t.mlir | diff -u %t.mlir -
// CHECK:    %0:2 = stablehlo.optimization_barrier {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}]>, <@mesh, [{?}]>]>} %arg0, %arg1 : tensor<8xf32>, tensor<4xf32>
// CHECK-NEXT:    %1 = stablehlo.optimization_barrier {z.after = 1 : i32} %0#0 : tensor<8xf32>
// CHECK-NEXT:    stablehlo.optimization_barrier()
// CHECK-NEXT:    %2 = "stablehlo.constant"() {value = dense<[1, 2]> : tensor<2xi8>} : () -> tensor<2x!quant.uniform<i8:f32, 2.000000e+00:15>>
// CHECK-NEXT:    %3 = "stablehlo.constant"() {value = dense<[3, 4]> : tensor<2xi8>, z.attr = 1 : i32} : () -> tensor<2x!quant.uniform<i8:f32, 2.000000e+00:15>>
