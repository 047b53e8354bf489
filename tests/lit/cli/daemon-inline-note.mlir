func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<4x6xf32>) -> tensor<8x6xf32> {
  %0 = call @f(%arg0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = stablehlo.negate %0 : tensor<8x4xf32>
  %2 = stablehlo.dot_general %1, %arg1, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  return %2 : tensor<8x6xf32>
}
func.func private @f(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.tanh %x : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}
// A schedule's %N counts the values of the function with its calls inlined;
// `autopart apply` and `search` say so on stderr when the function had calls
// and the schedule names a %N, in this process and through autopartd (whose
// answer's report carries the note, "notes"), a cache hit included.
// RUN: autopart apply %s --mesh x=2 --schedule 'tile %2 0 x; propagate' --view shardings 2>&1 | filecheck %s
// RUN: rm -f %t.db %t.listen; autopartd --db %t.db --listen 127.0.0.1:0 > %t.listen 2>&1 & pid=$!; \
// RUN:   trap "kill $pid; wait $pid" EXIT; \
// RUN:   for i in $(seq 200); do grep -q ', port ' %t.listen && break; sleep 0.05; done; \
// RUN:   port=$(sed -n 's/.*, port \([0-9]*\),.*/\1/p' %t.listen); \
// RUN:   autopart apply %s --mesh x=2 --schedule 'tile %2 0 x; propagate' --view shardings --server 127.0.0.1:$port 2>&1 | filecheck %s; \
// RUN:   autopart apply %s --mesh x=2 --schedule 'tile %2 0 x; propagate' --view shardings --server 127.0.0.1:$port 2>&1 | filecheck %s; \
// RUN:   autopart apply %s --mesh x=2 --schedule 'tile %2 0 x; propagate' --json --server 127.0.0.1:$port 2>/dev/null | filecheck %s --check-prefix=JSON; \
// RUN:   autopart search %s --mesh x=2 --episodes 5 --manual 'tile %2 0 x' --server 127.0.0.1:$port 2>&1 | filecheck %s; \
// RUN:   autopart apply %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' --server 127.0.0.1:$port 2>&1 | filecheck %s --check-prefix=NONE
// CHECK: note: @main calls other functions (1 call), inlined before partitioning: %N in the schedule counts the values of the inlined @main, as `autopart parse --inline` prints it, not as the module is written
// JSON: "notes": [{{$}}
// JSON-NEXT: "@main calls other functions (1 call), inlined before partitioning: %N in the schedule counts the values of the inlined @main, as `autopart parse --inline` prints it, not as the module is written"
// NONE: answered by
// NONE-NOT: note:
