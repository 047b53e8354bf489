func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "stablehlo.collective_permute"(%arg1) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%arg1) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0]]> : tensor<1x1xi64>, use_global_device_ids} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stablehlo.collective_permute"(%arg1) {channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, source_target_pairs = dense<> : tensor<0x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = stablehlo.add %arg0, %arg0 : tensor<8x4xf32>
  %4 = "stablehlo.collective_permute"(%arg1) {source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %3, %0, %1, %2, %4 : tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
// More of a program's own collectives over the one device it is written for (as
// program-collectives-over-one-device.mlir): a collective_permute of device 0 to itself, and an
// all_reduce over [[0]] in global ids (flattened_ids).  Copied as they were, on x=2 device 1 received
// nothing (zeros: check said "devices 0 and 1 hold replicated copies of one tile but differ") and was in
// no replica group (the SPMD run failed).  They are now each device to itself, each device alone.  A
// permute with no pairs (zeros everywhere) stays as it is, and so does one without a channel: its pairs
// are replica ids, (0, 0) the one replica of each partition to itself (the SPMD interpreter read them as
// device ids: device 1 received zeros).
// RUN: autopart check %s --mesh x=2 --schedule 'tile %%arg0 0 x; propagate' | filecheck %s
// RUN: autopart check %s --mesh x=2,y=3 --schedule 'propagate' | filecheck %s
// RUN: autopart apply %s --mesh x=2 --schedule 'tile %%arg0 0 x; propagate' | filecheck %s --check-prefix SPMD
// CHECK: equivalent: all 5 results within tolerance
// SPMD: source_target_pairs = dense<{{\[\[}}0, 0], [1, 1]]> : tensor<2x2xi64>
// SPMD: replica_groups = dense<{{\[\[}}0], [1]]> : tensor<2x1xi64>, use_global_device_ids
// SPMD: source_target_pairs = dense<> : tensor<0x2xi64>
// SPMD: "stablehlo.collective_permute"(%arg1) {source_target_pairs = dense<{{\[\[}}0, 0]]> : tensor<1x2xi64>}
