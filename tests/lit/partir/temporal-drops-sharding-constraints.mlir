module @m {
  sdy.mesh @mesh = <["x"=2, "y"=3]>
  func.func @main(%x: tensor<8x6xf32>, %w: tensor<6x3xf32>) -> (tensor<8x3xf32>, tensor<8x3xf32>) {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x6xf32>, tensor<6x3xf32>) -> tensor<8x3xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<8x3xf32>
    %2 = stablehlo.tanh %1 : tensor<8x3xf32>
    %3 = sdy.reshard %2 <@mesh, [{"x"}, {}]> : tensor<8x3xf32>
    return %3, %2 : tensor<8x3xf32>, tensor<8x3xf32>
  }
}
// The loop view as a program (--view temporal) copied Shardy's sharding_constraint and reshard into
// each iteration of a tile loop.  They are printed in their own syntax, whose text holds the global
// type, so the copy that took a tile printed `sdy.sharding_constraint %1 <...> : tensor<8x3xf32>` on
// a 4x3 operand, and the program did not re-parse ("operand #0 of 'stablehlo.concatenate' has type
// tensor<8x3xf32> but the op's type says tensor<4x3xf32>").  They state a sharding and compute
// nothing: the view leaves them out, as the SPMD program does (spmd-drops-sharding-constraints).
// RUN: autopart apply %s --mesh x=2,y=3 --view temporal --schedule 'tile %%arg0 0 x; propagate' > %t.mlir
// RUN: autopart parse %t.mlir | filecheck %s
// CHECK-NOT: sdy.sharding_constraint
// CHECK-NOT: sdy.reshard
// CHECK: stablehlo.tanh {{%[0-9]+}} : tensor<4x3xf32>
// CHECK: stablehlo.tanh {{%[0-9]+}} : tensor<4x3xf32>
// RUN: autopart check %s --mesh x=2,y=3 --schedule 'tile %%arg0 0 x; propagate' | filecheck %s --check-prefix CHECKED
// CHECKED: equivalent: all 2 results within tolerance
