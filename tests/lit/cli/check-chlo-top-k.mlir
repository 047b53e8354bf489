func.func @main(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<2x3xf32>, tensor<2x3xi32>) {
  %a = stablehlo.constant dense<[[1.0, 5.0, 5.0, 0x7FC00000, -2.0], [0xFFC00000, 0xFF800000, 3.0, 0x7F800000, 3.0]]> : tensor<2x5xf32>
  %v, %i = chlo.top_k(%a, k = 3) : tensor<2x5xf32> -> (tensor<2x3xf32>, tensor<2x3xi32>)
  %wv = stablehlo.constant dense<[[0x7FC00000, 5.0, 5.0], [0x7F800000, 3.0, 3.0]]> : tensor<2x3xf32>
  %wi = stablehlo.constant dense<[[3, 1, 2], [3, 2, 4]]> : tensor<2x3xi32>
  stablehlo.custom_call @check.expect_eq(%v, %wv) {has_side_effect = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> ()
  stablehlo.custom_call @check.expect_eq(%i, %wi) {has_side_effect = true} : (tensor<2x3xi32>, tensor<2x3xi32>) -> ()
  %r = stablehlo.add %x, %x : tensor<4x2xf32>
  return %r, %v, %i : tensor<4x2xf32>, tensor<2x3xf32>, tensor<2x3xi32>
}
// chlo.top_k (lax.top_k, MoE routers) is evaluated: largest first, the lower index first among equals, in the
// total order of floats (NaN above inf, -NaN below -inf).  The 15 top_k programs of stablehlo/testdata were
// refused ("cannot evaluate an op unknown to the interpreter") and now meet their own check.expect_eq.
// RUN: autopart check %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' | filecheck %s
// CHECK: equivalent: all 3 results within tolerance
