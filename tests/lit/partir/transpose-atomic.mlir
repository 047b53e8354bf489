func.func @main(%x: tensor<256x256xf32> loc("x")) -> tensor<256x256xf32> {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<256x256xf32>) -> tensor<256x256xf32> loc("transposed")
  %y = stablehlo.dot_general %x, %t, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  return %y : tensor<256x256xf32>
}
// Paper section 8: y = x @ transpose(x) with x tiled blocks on the matmul; atomic on the tagged
// transpose resolves it with an all_gather of it.
// RUN: autopart apply %s --mesh M=4 --schedule 'atomic transposed M; tile x 0 M; propagate' --view spmd | filecheck %s --match-full-lines --strict-whitespace
// CHECK: module attributes {autopart.mesh = "M=4", mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @main(%arg0: tensor<64x256xf32> {autopart.layout = [["M"], []]} loc("x")) -> (tensor<64x256xf32> {autopart.layout = [["M"], []]}) {
// CHECK-NEXT:     %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<64x256xf32>) -> tensor<256x64xf32> loc("transposed")
// CHECK-NEXT:     %1 = "stablehlo.all_gather"(%0) {all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<256x64xf32>) -> tensor<256x256xf32>
// CHECK-NEXT:     %2 = stablehlo.dot_general %arg0, %1, contracting_dims = [1] x [0] : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
// CHECK-NEXT:     return %2 : tensor<64x256xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
