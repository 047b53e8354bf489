func.func @main(%a: tensor<4x8x!quant.uniform<i8:f32, 0.5:3>> loc("a"), %b: tensor<8x6x!quant.uniform<i8:f32, 0.25:-2>> loc("b"), %c: tensor<4x8xi32> loc("c"), %d: tensor<8x6xi32> loc("d")) -> (tensor<4x6x!quant.uniform<i8:f32, 0.75:5>>, tensor<4x6xi32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8x!quant.uniform<i8:f32, 0.5:3>>, tensor<8x6x!quant.uniform<i8:f32, 0.25:-2>>) -> tensor<4x6x!quant.uniform<i8:f32, 0.75:5>>
  %1 = stablehlo.dot_general %c, %d, contracting_dims = [1] x [0] : (tensor<4x8xi32>, tensor<8x6xi32>) -> tensor<4x6xi32>
  return %0, %1 : tensor<4x6x!quant.uniform<i8:f32, 0.75:5>>, tensor<4x6xi32>
}
// A quantized dot_general is dequantize, dot, quantize (StableHLO's spec):
// split along its contraction, each device would round and saturate its
// partial sum to i8 on its own and the all_reduce would add the zero
// points, not the program's result.  So the contracting dim tiled along x
// reaches the quantized dot gathered, and the dot runs whole; the integer
// dot's partial sums add exactly and stay split, summed by an all_reduce.
// RUN: autopart apply %s --mesh x=2 --view spmd \
// RUN:   --schedule 'tile a 1 x; tile c 1 x; propagate' | filecheck %s
// RUN: autopart check %s --mesh x=2 \
// RUN:   --schedule 'tile a 1 x; tile c 1 x; propagate' | filecheck %s --check-prefix=CHECKED
// CHECK: %0 = "stablehlo.all_gather"(%arg0) {all_gather_dim = 1 : i64
// CHECK-SAME: -> tensor<4x8x!quant.uniform<i8:f32, 0.5:3>>
// CHECK-NEXT: %1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : (tensor<4x8x!quant.uniform<i8:f32, 0.5:3>>, tensor<8x6x!quant.uniform<i8:f32, 0.25:-2>>) -> tensor<4x6x!quant.uniform<i8:f32, 0.75:5>>
// CHECK-NEXT: %2 = stablehlo.dot_general %arg2, %arg3, contracting_dims = [1] x [0] : (tensor<4x4xi32>, tensor<4x6xi32>) -> tensor<4x6xi32>
// CHECK-NEXT: %3 = "stablehlo.all_reduce"(%2)
// CHECK-NOT: all_reduce
// CHECKED: equivalent: all 2 results within tolerance
