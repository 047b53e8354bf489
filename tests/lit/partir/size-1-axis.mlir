func.func @main(%x: tensor<256x8xf32> loc("x"), %w1: tensor<8x16xf32> loc("w1"), %w2: tensor<16x8xf32> loc("w2")) -> (tensor<256x8xf32>, tensor<8x16xf32>) {
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<256x8xf32>, tensor<8x16xf32>) -> tensor<256x16xf32>
  %1 = stablehlo.dot_general %0, %w2, contracting_dims = [1] x [0] : (tensor<256x16xf32>, tensor<16x8xf32>) -> tensor<256x8xf32>
  %2 = stablehlo.dot_general %x, %0, contracting_dims = [0] x [0] : (tensor<256x8xf32>, tensor<256x16xf32>) -> tensor<8x16xf32>
  %3 = stablehlo.subtract %w1, %2 : tensor<8x16xf32>
  return %1, %3 : tensor<256x8xf32>, tensor<8x16xf32>
}
// An axis of size 1 (data=1: what a search over the meshes of 4 devices may
// choose, or a user's --mesh): tactics along it split nothing, and the sums
// and tilings along it need no collective.  A sum over a group of one device
// is its one summand, so the gradient %2 (a sum over the batch, tiled along
// data) goes to the update as it is: no all_reduce or reduce_scatter over
// replica_groups [[0], [1], [2], [3]], and w1, tiled along data, reaches the
// first matmul without an all_gather.  The Megatron sum along model stays.
// RUN: autopart apply %s --mesh data=1,model=4 --view spmd \
// RUN:   --schedule 'tile x 0 data; tile w1 0 data; propagate; tile w1 1 model; propagate' \
// RUN:   | filecheck %s --match-full-lines --strict-whitespace
// The report counts what the program has, per tactic too:
// RUN: autopart apply %s --mesh data=1,model=4 --view report \
// RUN:   --schedule 'tile x 0 data; tile w1 0 data; propagate; tile w1 1 model; propagate' | filecheck %s --check-prefix=REPORT
// The program is still the global one's (run on every device and compared):
// RUN: autopart check %s --mesh data=1,model=4 \
// RUN:   --schedule 'tile x 0 data; tile w1 0 data; propagate; tile w1 1 model; propagate' | filecheck %s --check-prefix=CHECKED
// Where data splits (data=2), the gather and the scatter along it are there:
// RUN: autopart apply %s --mesh data=2,model=2 --view spmd \
// RUN:   --schedule 'tile x 0 data; tile w1 0 data; propagate; tile w1 1 model; propagate' | filecheck %s --check-prefix=SPLITS
// CHECK: module attributes {autopart.mesh = "data=1,model=4", mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
// CHECK-NEXT:   func.func @main(%arg0: tensor<256x8xf32> {autopart.layout = [["data"], []]} loc("x"), %arg1: tensor<8x4xf32> {autopart.layout = [["data"], ["model"]]} loc("w1"), %arg2: tensor<4x8xf32> {autopart.layout = [["model"], []]} loc("w2")) -> (tensor<256x8xf32> {autopart.layout = [["data"], []]}, tensor<8x4xf32> {autopart.layout = [["data"], ["model"]]}) {
// CHECK-NEXT:     %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<256x8xf32>, tensor<8x4xf32>) -> tensor<256x4xf32>
// CHECK-NEXT:     %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<256x4xf32>, tensor<4x8xf32>) -> tensor<256x8xf32>
// CHECK-NEXT:     %2 = stablehlo.dot_general %arg0, %0, contracting_dims = [0] x [0] : (tensor<256x8xf32>, tensor<256x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:     %3 = stablehlo.subtract %arg1, %2 : tensor<8x4xf32>
// CHECK-NEXT:     %4 = "stablehlo.all_reduce"(%1) ({
// CHECK-NEXT:     ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
// CHECK-NEXT:       %5 = stablehlo.add %arg3, %arg4 : tensor<f32>
// CHECK-NEXT:       stablehlo.return %5 : tensor<f32>
// CHECK-NEXT:     }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<256x8xf32>) -> tensor<256x8xf32>
// CHECK-NEXT:     return %4, %3 : tensor<256x8xf32>, tensor<8x4xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// REPORT:   all_gather                0              0 bytes per device
// REPORT-NEXT:   all_reduce                1           8192 bytes per device
// REPORT-NEXT:   reduce_scatter            0              0 bytes per device
// REPORT:   #       AG    AR    RS   A2A    CP      step ms     peak GiB  tactic
// REPORT-NEXT:   1        0     0     0     0     0 {{.*}}  tile x 0 data;tile w1 0 data;propagate
// REPORT-NEXT:   2        0     1     0     0     0 {{.*}}  tile w1 1 model;propagate
// CHECKED: equivalent: all 2 results within tolerance
// SPLITS: %0 = "stablehlo.all_gather"(%arg1) {all_gather_dim = 0 : i64, {{.*}} replica_groups = dense<{{\[\[}}0, 2], [1, 3]]> : tensor<2x2xi64>
// SPLITS: "stablehlo.reduce_scatter"
// SPLITS: replica_groups = dense<{{\[\[}}0, 2], [1, 3]]> : tensor<2x2xi64>, scatter_dimension = 0 : i64
