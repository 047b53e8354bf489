func.func @main(%x: tensor<8x16xf32> loc("x"), %w: tensor<16x4xf32> loc("w"), %g: tensor<4xf32> loc("g")) -> (tensor<8x4xf32>, tensor<4xf32>) {
  %0 = "stablehlo.all_reduce"(%g) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {channel_handle = #stablehlo.channel_handle<handle = 7, type = 1>, replica_groups = dense<> : tensor<0x0xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %1, %0 : tensor<8x4xf32>, tensor<4xf32>
}
// A channel id names one collective in the module (XLA rejects a module
// where two collectives share one).  The program holds channel 7; the
// lowering's own collective (the sum of the matmul split on its contracting
// dim) takes the next, 8, not 1.
// RUN: autopart apply %s --mesh x=2 --view spmd --schedule 'tile x 1 x; propagate' | filecheck %s
// RUN: autopart check %s --mesh x=2 --schedule 'tile x 1 x; propagate' | filecheck %s --check-prefix CHECKED
// CHECK-NOT: handle = 1,
// CHECK: channel_handle = #stablehlo.channel_handle<handle = 7, type = 1>
// CHECK-NOT: handle = 1,
// CHECK: channel_handle = #stablehlo.channel_handle<handle = 8, type = 1>
// CHECKED: equivalent: all 2 results within tolerance
