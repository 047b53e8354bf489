func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "stablehlo.all_reduce"(%arg1) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<> : tensor<0x0xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%arg1) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<> : tensor<0x0xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = stablehlo.add %arg0, %arg0 : tensor<8x4xf32>
  return %2, %0, %1 : tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>
}
// A program's own collectives with replica_groups empty (all replicas) or [[0]] mean one device in the program
// as written.  Without a channel (cross_replica) that is each partition alone with one replica, and the SPMD
// interpreter now reads it so (it summed over every device: MISMATCH, half of the sum off, on a PyTorch/XLA BERT
// graph with `all-reduce(...), replica_groups={}`).  With a channel and no global ids it would mean every
// partition of the SPMD module, so the lowering writes its groups as each device alone, in flattened ids.
// RUN: autopart check %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' | filecheck %s
// RUN: autopart apply %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' | filecheck %s --check-prefix SPMD
// CHECK: equivalent: all 3 results within tolerance
// SPMD: }) {replica_groups = dense<> : tensor<0x0xi64>} : (tensor<4xf32>) -> tensor<4xf32>
// SPMD: }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0], [1]]> : tensor<2x1xi64>, use_global_device_ids} : (tensor<4xf32>) -> tensor<4xf32>
