func.func private @twice(%x: tensor<8xf32>) -> tensor<8xf32> {
  cf.br ^bb1(%x : tensor<8xf32>)
^bb1(%y: tensor<8xf32>):
  %n = stablehlo.add %y, %y : tensor<8xf32>
  return %n : tensor<8xf32>
}
func.func @main(%a: tensor<8x4xf32> loc("a"), %b: tensor<8xf32> loc("b")) -> (tensor<8x4xf32>, tensor<8xf32>) {
  %0 = stablehlo.negate %a : tensor<8x4xf32>
  %1 = call @twice(%b) : (tensor<8xf32>) -> tensor<8xf32>
  return %0, %1 : tensor<8x4xf32>, tensor<8xf32>
}
// A call the inliner leaves (its callee has two blocks, as the XLA HLO importer writes loops: the
// corpus's iree_unidirectional_lstm.mlir) is opaque: its operand is gathered whole and the callee,
// copied as written, runs on global shapes.  Without the copy the SPMD program did not verify, so
// apply and search refused the program ("'func.call' calls @twice, which is not defined").
// RUN: autopart apply %s --mesh M=4 --schedule 'tile a 0 M; tile b 0 M; propagate' --view spmd | filecheck %s --match-full-lines --strict-whitespace
// CHECK: module attributes {autopart.mesh = "M=4", mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @main(%arg0: tensor<2x4xf32> {autopart.layout = [["M"], []]} loc("a"), %arg1: tensor<2xf32> {autopart.layout = [["M"]]} loc("b")) -> (tensor<2x4xf32> {autopart.layout = [["M"], []]}, tensor<8xf32> {autopart.layout = [[]]}) {
// CHECK-NEXT:     %0 = stablehlo.negate %arg0 : tensor<2x4xf32>
// CHECK-NEXT:     %1 = "stablehlo.all_gather"(%arg1) {all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<2xf32>) -> tensor<8xf32>
// CHECK-NEXT:     %2 = func.call @twice(%1) : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT:     return %0, %2 : tensor<2x4xf32>, tensor<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   func.func private @twice(%arg0: tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT:     cf.br ^bb1(%arg0 : tensor<8xf32>)
// CHECK-NEXT:   ^bb1(%arg1: tensor<8xf32>):
// CHECK-NEXT:     %0 = stablehlo.add %arg1, %arg1 : tensor<8xf32>
// CHECK-NEXT:     return %0 : tensor<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// The search lowers its best too.
// RUN: autopart search %s --mesh M=4 --episodes 20 | filecheck %s --check-prefix SEARCH
// SEARCH: search: {{[0-9]+}} episodes
// SEARCH: tile a 0 M; propagate
// The loop view as a program (what `autopart check` runs) keeps the callee likewise.
// RUN: autopart apply %s --mesh M=4 --schedule 'tile a 0 M; tile b 0 M; propagate' --view temporal | filecheck %s --check-prefix TEMPORAL
// TEMPORAL: func.call @twice(%arg1) : (tensor<8xf32>) -> tensor<8xf32>
// TEMPORAL: func.func private @twice(%arg0: tensor<8xf32>) -> tensor<8xf32> {
// TEMPORAL-NEXT: cf.br ^bb1(%arg0 : tensor<8xf32>)
