func.func @main(%x: tensor<8x16xf32>, %w: tensor<4x16x16xf32>, %b: tensor<16xf32>, %v: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<4x16x16xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %zg = stablehlo.constant dense<0.0> : tensor<4x16x16xf32>
  %u = stablehlo.dot_general %x, %v, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %r:4 = stablehlo.while(%i = %c0, %h = %x, %ws = %w, %g = %zg) : tensor<i32>, tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>
   cond {
    %n = stablehlo.constant dense<4> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %z = stablehlo.constant dense<0> : tensor<i32>
    %wl = stablehlo.dynamic_slice %ws, %i, %z, %z, sizes = [1, 16, 16] : (tensor<4x16x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x16x16xf32>
    %w2 = stablehlo.reshape %wl : (tensor<1x16x16xf32>) -> tensor<16x16xf32>
    %y = stablehlo.dot_general %h, %w2, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>
    %y2 = stablehlo.add %y, %bb : tensor<8x16xf32>
    %t = stablehlo.tanh %y2 : tensor<8x16xf32>
    %t2 = stablehlo.add %t, %u : tensor<8x16xf32>
    %gl = stablehlo.dot_general %h, %t2, contracting_dims = [0] x [0] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
    %g3 = stablehlo.reshape %gl : (tensor<16x16xf32>) -> tensor<1x16x16xf32>
    %gn = stablehlo.dynamic_update_slice %g, %g3, %i, %z, %z : (tensor<4x16x16xf32>, tensor<1x16x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x16x16xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %in = stablehlo.add %i, %one : tensor<i32>
    %two = stablehlo.constant dense<2> : tensor<i32>
    %k = stablehlo.remainder %i, %two : tensor<i32>
    %hn = "stablehlo.case"(%k) ({
      %a = stablehlo.tanh %t2 : tensor<8x16xf32>
      stablehlo.return %a : tensor<8x16xf32>
    }, {
      %a = stablehlo.add %y, %t2 : tensor<8x16xf32>
      stablehlo.return %a : tensor<8x16xf32>
    }) : (tensor<i32>) -> tensor<8x16xf32>
    stablehlo.return %in, %hn, %ws, %gn : tensor<i32>, tensor<8x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>
  }
  return %r#1, %r#3 : tensor<8x16xf32>, tensor<4x16x16xf32>
}
// Batch parallelism reaches into a while loop: the carried activations stay in shards on entry, in the
// body and on exit (nothing gathered), the body runs on local shapes, and the per-layer weight
// gradient is reduced inside the body, once per layer.
// RUN: autopart apply %s --mesh a=2,b=2 --schedule 'tile %%arg0 0 b; propagate' --view spmd | filecheck %s --match-full-lines --strict-whitespace
// CHECK: module attributes {autopart.mesh = "a=2,b=2", mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @main(%arg0: tensor<4x16xf32> {autopart.layout = [["b"], []]}, %arg1: tensor<4x16x16xf32> {autopart.layout = [[], [], []]}, %arg2: tensor<16xf32> {autopart.layout = [[]]}, %arg3: tensor<16x16xf32> {autopart.layout = [[], []]}) -> (tensor<4x16xf32> {autopart.layout = [["b"], []]}, tensor<4x16x16xf32> {autopart.layout = [[], [], []]}) {
// CHECK-NEXT:     %0 = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:     %1 = stablehlo.constant dense<0.0> : tensor<4x16x16xf32>
// CHECK-NEXT:     %2 = stablehlo.dot_general %arg0, %arg3, contracting_dims = [1] x [0] : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:     %3:4 = stablehlo.while(%arg4 = %0, %arg5 = %arg0, %arg6 = %arg1, %arg7 = %1) : tensor<i32>, tensor<4x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>
// CHECK-NEXT:      cond {
// CHECK-NEXT:       %4 = stablehlo.constant dense<4> : tensor<i32>
// CHECK-NEXT:       %5 = stablehlo.compare  LT, %arg4, %4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:       stablehlo.return %5 : tensor<i1>
// CHECK-NEXT:     } do {
// CHECK-NEXT:       %6 = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:       %7 = stablehlo.dynamic_slice %arg6, %arg4, %6, %6, sizes = [1, 16, 16] : (tensor<4x16x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x16x16xf32>
// CHECK-NEXT:       %8 = stablehlo.reshape %7 : (tensor<1x16x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT:       %9 = stablehlo.dot_general %arg5, %8, contracting_dims = [1] x [0] : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:       %10 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:       %11 = stablehlo.add %9, %10 : tensor<4x16xf32>
// CHECK-NEXT:       %12 = stablehlo.tanh %11 : tensor<4x16xf32>
// CHECK-NEXT:       %13 = stablehlo.add %12, %2 : tensor<4x16xf32>
// CHECK-NEXT:       %14 = stablehlo.dot_general %arg5, %13, contracting_dims = [0] x [0] : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT:       %15 = stablehlo.reshape %14 : (tensor<16x16xf32>) -> tensor<1x16x16xf32>
// CHECK-NEXT:       %16 = "stablehlo.all_reduce"(%15) ({
// CHECK-NEXT:       ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
// CHECK-NEXT:         %17 = stablehlo.add %arg8, %arg9 : tensor<f32>
// CHECK-NEXT:         stablehlo.return %17 : tensor<f32>
// CHECK-NEXT:       }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids} : (tensor<1x16x16xf32>) -> tensor<1x16x16xf32>
// CHECK-NEXT:       %18 = stablehlo.dynamic_update_slice %arg7, %16, %arg4, %6, %6 : (tensor<4x16x16xf32>, tensor<1x16x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x16x16xf32>
// CHECK-NEXT:       %19 = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:       %20 = stablehlo.add %arg4, %19 : tensor<i32>
// CHECK-NEXT:       %21 = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:       %22 = stablehlo.remainder %arg4, %21 : tensor<i32>
// CHECK-NEXT:       %23 = "stablehlo.case"(%22) ({
// CHECK-NEXT:         %24 = stablehlo.tanh %13 : tensor<4x16xf32>
// CHECK-NEXT:         stablehlo.return %24 : tensor<4x16xf32>
// CHECK-NEXT:       }, {
// CHECK-NEXT:         %25 = stablehlo.add %9, %13 : tensor<4x16xf32>
// CHECK-NEXT:         stablehlo.return %25 : tensor<4x16xf32>
// CHECK-NEXT:       }) : (tensor<i32>) -> tensor<4x16xf32>
// CHECK-NEXT:       stablehlo.return %20, %23, %arg6, %18 : tensor<i32>, tensor<4x16xf32>, tensor<4x16x16xf32>, tensor<4x16x16xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     return %3#1, %3#3 : tensor<4x16xf32>, tensor<4x16x16xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
