func.func @main(%x: tensor<256x8xf32> loc("x"), %w1: tensor<8x16xf32> loc("w1"), %w2: tensor<16x8xf32> loc("w2")) -> tensor<256x8xf32> {
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<256x8xf32>, tensor<8x16xf32>) -> tensor<256x16xf32>
  %1 = stablehlo.dot_general %0, %w2, contracting_dims = [1] x [0] : (tensor<256x16xf32>, tensor<16x8xf32>) -> tensor<256x8xf32>
  return %1 : tensor<256x8xf32>
}
// Paper Listing 3: batch parallelism: x arrives as 64x8 shards, w1 and w2 whole, no collective.
// RUN: autopart apply %s --mesh B=4,M=2 --schedule 'tile x 0 B; propagate' --view spmd | filecheck %s --match-full-lines --strict-whitespace
// CHECK: module attributes {autopart.mesh = "B=4,M=2", mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @main(%arg0: tensor<64x8xf32> {autopart.layout = [["B"], []]} loc("x"), %arg1: tensor<8x16xf32> {autopart.layout = [[], []]} loc("w1"), %arg2: tensor<16x8xf32> {autopart.layout = [[], []]} loc("w2")) -> (tensor<64x8xf32> {autopart.layout = [["B"], []]}) {
// CHECK-NEXT:     %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<64x8xf32>, tensor<8x16xf32>) -> tensor<64x16xf32>
// CHECK-NEXT:     %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<64x16xf32>, tensor<16x8xf32>) -> tensor<64x8xf32>
// CHECK-NEXT:     return %1 : tensor<64x8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
