func.func @main(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0:17 = "foo.split"(%x) : (tensor<4x2xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %1 = stablehlo.negate %x : tensor<4x2xf32>
  return %1, %0#0, %0#1, %0#2, %0#3, %0#4, %0#5, %0#6, %0#7, %0#8, %0#9, %0#10, %0#11, %0#12, %0#13, %0#14, %0#15, %0#16 : tensor<4x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
// The loop view as a program takes an op of more than 16 results (the corpus's
// tt_qwen3_32b_tp8_manual.mlir has an sdy.manual_computation of 129): it refused the whole program,
// whatever the schedule ("ops with more than 16 results are not supported by the temporal view").
// RUN: autopart apply %s --mesh M=2 --schedule 'tile %%arg0 0 M; propagate' --view temporal | filecheck %s
// CHECK: %0:17 = "foo.split"(%arg0) : (tensor<4x2xf32>) -> (tensor<4xf32>,
// CHECK: %2 = stablehlo.negate %1 : tensor<2x2xf32>
// CHECK: return %5, %0#0, %0#1,
