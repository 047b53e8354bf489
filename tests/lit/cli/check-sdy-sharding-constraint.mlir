module @m {
  sdy.mesh @mesh = <["x"=2, "y"=3]>
  func.func @main(%x: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %w: tensor<6x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x3xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x6xf32>, tensor<6x3xf32>) -> tensor<8x3xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<8x3xf32>
    %2 = stablehlo.tanh %1 : tensor<8x3xf32>
    return %2 : tensor<8x3xf32>
  }
}
// A JAX export's with_sharding_constraint under Shardy is an sdy.sharding_constraint: the check
// evaluates it as what it is, the value unchanged (it refused: "sdy.sharding_constraint: cannot
// evaluate an op unknown to the interpreter").
// RUN: autopart check %s --import | filecheck %s
// RUN: autopart check %s --schedule 'tile %%arg0 0 x; tile %%arg1 1 y; propagate' | filecheck %s
// CHECK: equivalent: all 1 results within tolerance
