func.func @main(%x: tensor<256x8xf32> loc("x"), %w1: tensor<8x16xf32> loc("w1"), %w2: tensor<16x8xf32> loc("w2")) -> tensor<256x8xf32> {
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<256x8xf32>, tensor<8x16xf32>) -> tensor<256x16xf32>
  %1 = stablehlo.dot_general %0, %w2, contracting_dims = [1] x [0] : (tensor<256x16xf32>, tensor<16x8xf32>) -> tensor<256x8xf32>
  return %1 : tensor<256x8xf32>
}
// Paper Listing 5: ZeRO-3 on top: deep tilings of w1 [[B], [M]] and w2 [[M], [B]], gathered over B
// (devices with one M coordinate) before each matmul.
// RUN: autopart apply %s --mesh B=4,M=2 --schedule 'tile x 0 B; propagate; tile w1 1 M; propagate; tile w1 0 B; tile w2 1 B; propagate' --view spmd | filecheck %s --match-full-lines --strict-whitespace
// CHECK: module attributes {autopart.mesh = "B=4,M=2", mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @main(%arg0: tensor<64x8xf32> {autopart.layout = [["B"], []]} loc("x"), %arg1: tensor<2x8xf32> {autopart.layout = [["B"], ["M"]]} loc("w1"), %arg2: tensor<8x2xf32> {autopart.layout = [["M"], ["B"]]} loc("w2")) -> (tensor<64x8xf32> {autopart.layout = [["B"], []]}) {
// CHECK-NEXT:     %0 = "stablehlo.all_gather"(%arg1) {all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, use_global_device_ids} : (tensor<2x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:     %1 = stablehlo.dot_general %arg0, %0, contracting_dims = [1] x [0] : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
// CHECK-NEXT:     %2 = "stablehlo.all_gather"(%arg2) {all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, use_global_device_ids} : (tensor<8x2xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:     %3 = stablehlo.dot_general %1, %2, contracting_dims = [1] x [0] : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
// CHECK-NEXT:     %4 = "stablehlo.all_reduce"(%3) ({
// CHECK-NEXT:     ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
// CHECK-NEXT:       %5 = stablehlo.add %arg3, %arg4 : tensor<f32>
// CHECK-NEXT:       stablehlo.return %5 : tensor<f32>
// CHECK-NEXT:     }) {channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>, use_global_device_ids} : (tensor<64x8xf32>) -> tensor<64x8xf32>
// CHECK-NEXT:     return %4 : tensor<64x8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
