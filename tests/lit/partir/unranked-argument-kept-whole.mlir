func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<*xf32>) -> tensor<8x4xf32> {
  %0:2 = chlo.top_k(%arg1, k=8) : tensor<*xf32> -> (tensor<*xf32>, tensor<*xi32>)
  %1 = stablehlo.add %arg0, %arg0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}
// An unranked argument (tensor<*x...>, as chlo tests and dynamic exports have) stays whole; the SPMD lowering
// wrote its layout as an array of -1 dimensions (a crash: SIGSEGV in ap_hash_bytes).
// RUN: autopart apply %s --mesh M=2 --schedule 'tile %arg0 0 M; propagate' --view spmd | filecheck %s --match-full-lines
// CHECK:  func.func @main(%arg0: tensor<4x4xf32> {autopart.layout = [["M"], []]}, %arg1: tensor<*xf32> {autopart.layout = []}) -> (tensor<4x4xf32> {autopart.layout = [["M"], []]}) {
