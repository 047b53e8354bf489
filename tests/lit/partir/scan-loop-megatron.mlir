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
// Megatron on a stacked weight's non-layer dim: its per-layer slice is tiled in the body and the
// pending sum reduced in the body, per layer.
// RUN: autopart apply %s --mesh a=2,b=2 --schedule 'tile %%arg1 1 a; propagate' --view spmd | filecheck %s --match-full-lines --strict-whitespace
// CHECK: module attributes {autopart.mesh = "a=2,b=2", mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @main(%arg0: tensor<8x16xf32> {autopart.layout = [[], []]}, %arg1: tensor<4x8x16xf32> {autopart.layout = [[], ["a"], []]}, %arg2: tensor<8xf32> {autopart.layout = [["a"]]}, %arg3: tensor<16x8xf32> {autopart.layout = [[], ["a"]]}) -> (tensor<8x8xf32> {autopart.layout = [[], ["a"]]}, tensor<4x8x16xf32> {autopart.layout = [[], ["a"], []]}) {
// CHECK-NEXT:     %0 = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:     %1 = stablehlo.constant dense<0.0> : tensor<4x16x16xf32>
// CHECK-NEXT:     %2 = stablehlo.dot_general %arg0, %arg3, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:     %3 = stablehlo.partition_id : tensor<ui32>
// CHECK-NEXT:     %4 = stablehlo.convert %3 : (tensor<ui32>) -> tensor<i32>
// CHECK-NEXT:     %5 = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:     %6 = stablehlo.constant dense<[0, 0, 8, 8]> : tensor<4xi32>
// CHECK-NEXT:     %7 = stablehlo.dynamic_slice %6, %4, sizes = [1] : (tensor<4xi32>, tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:     %8 = stablehlo.reshape %7 : (tensor<1xi32>) -> tensor<i32>
// CHECK-NEXT:     %9 = stablehlo.dynamic_slice %arg0, %5, %8, sizes = [8, 8] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x8xf32>
// CHECK-NEXT:     %10 = stablehlo.constant dense<[0, 0, 8, 8]> : tensor<4xi32>
// CHECK-NEXT:     %11 = stablehlo.dynamic_slice %10, %4, sizes = [1] : (tensor<4xi32>, tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:     %12 = stablehlo.reshape %11 : (tensor<1xi32>) -> tensor<i32>
// CHECK-NEXT:     %13 = stablehlo.dynamic_slice %1, %5, %12, %5, sizes = [4, 8, 16] : (tensor<4x16x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x8x16xf32>
// CHECK-NEXT:     %14:4 = stablehlo.while(%arg4 = %0, %arg5 = %9, %arg6 = %arg1, %arg7 = %13) : tensor<i32>, tensor<8x8xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>
// CHECK-NEXT:      cond {
// CHECK-NEXT:       %15 = stablehlo.constant dense<4> : tensor<i32>
// CHECK-NEXT:       %16 = stablehlo.compare  LT, %arg4, %15 : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:       stablehlo.return %16 : tensor<i1>
// CHECK-NEXT:     } do {
// CHECK-NEXT:       %17 = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:       %18 = stablehlo.dynamic_slice %arg6, %arg4, %17, %17, sizes = [1, 8, 16] : (tensor<4x8x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x16xf32>
// CHECK-NEXT:       %19 = stablehlo.reshape %18 : (tensor<1x8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:       %20 = stablehlo.dot_general %arg5, %19, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:       %21 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:       %22 = "stablehlo.reduce_scatter"(%20) ({
// CHECK-NEXT:       ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
// CHECK-NEXT:         %23 = stablehlo.add %arg8, %arg9 : tensor<f32>
// CHECK-NEXT:         stablehlo.return %23 : tensor<f32>
// CHECK-NEXT:       }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, scatter_dimension = 1 : i64, use_global_device_ids} : (tensor<8x16xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:       %24 = stablehlo.add %22, %21 : tensor<8x8xf32>
// CHECK-NEXT:       %25 = stablehlo.tanh %24 : tensor<8x8xf32>
// CHECK-NEXT:       %26 = stablehlo.add %25, %2 : tensor<8x8xf32>
// CHECK-NEXT:       %27 = "stablehlo.all_gather"(%26) {all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids} : (tensor<8x8xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:       %28 = stablehlo.dot_general %arg5, %27, contracting_dims = [0] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:       %29 = stablehlo.reshape %28 : (tensor<8x16xf32>) -> tensor<1x8x16xf32>
// CHECK-NEXT:       %30 = stablehlo.dynamic_update_slice %arg7, %29, %arg4, %17, %17 : (tensor<4x8x16xf32>, tensor<1x8x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x8x16xf32>
// CHECK-NEXT:       %31 = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:       %32 = stablehlo.add %arg4, %31 : tensor<i32>
// CHECK-NEXT:       %33 = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:       %34 = stablehlo.remainder %arg4, %33 : tensor<i32>
// CHECK-NEXT:       %35 = "stablehlo.case"(%34) ({
// CHECK-NEXT:         %36 = stablehlo.tanh %26 : tensor<8x8xf32>
// CHECK-NEXT:         stablehlo.return %36 : tensor<8x8xf32>
// CHECK-NEXT:       }, {
// CHECK-NEXT:         %37 = stablehlo.add %22, %26 : tensor<8x8xf32>
// CHECK-NEXT:         stablehlo.return %37 : tensor<8x8xf32>
// CHECK-NEXT:       }) : (tensor<i32>) -> tensor<8x8xf32>
// CHECK-NEXT:       stablehlo.return %32, %35, %arg6, %30 : tensor<i32>, tensor<8x8xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     return %14#1, %14#3 : tensor<8x8xf32>, tensor<4x8x16xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
