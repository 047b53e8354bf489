func.func @main(%x: tensor<256x8xf32> loc("x"), %w1: tensor<8x16xf32> loc("w1"), %w2: tensor<16x8xf32> loc("w2")) -> tensor<256x8xf32> {
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<256x8xf32>, tensor<8x16xf32>) -> tensor<256x16xf32>
  %1 = stablehlo.dot_general %0, %w2, contracting_dims = [1] x [0] : (tensor<256x16xf32>, tensor<16x8xf32>) -> tensor<256x8xf32>
  return %1 : tensor<256x8xf32>
}
// Paper Listing 4: Megatron: w1 8x8, w2 inferred 8x8, one all_reduce over M (pairs of neighbouring
// devices).
// RUN: autopart apply %s --mesh B=4,M=2 --schedule 'tile x 0 B; propagate; tile w1 1 M; propagate' --view spmd | filecheck %s --match-full-lines --strict-whitespace
// CHECK: module attributes {autopart.mesh = "B=4,M=2", mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @main(%arg0: tensor<64x8xf32> {autopart.layout = [["B"], []]} loc("x"), %arg1: tensor<8x8xf32> {autopart.layout = [[], ["M"]]} loc("w1"), %arg2: tensor<8x8xf32> {autopart.layout = [["M"], []]} loc("w2")) -> (tensor<64x8xf32> {autopart.layout = [["B"], []]}) {
// CHECK-NEXT:     %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
// CHECK-NEXT:     %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
// CHECK-NEXT:     %2 = "stablehlo.all_reduce"(%1) ({
// CHECK-NEXT:     ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
// CHECK-NEXT:       %3 = stablehlo.add %arg3, %arg4 : tensor<f32>
// CHECK-NEXT:       stablehlo.return %3 : tensor<f32>
// CHECK-NEXT:     }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>, use_global_device_ids} : (tensor<64x8xf32>) -> tensor<64x8xf32>
// CHECK-NEXT:     return %2 : tensor<64x8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
