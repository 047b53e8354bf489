module @m {
  util.global private @w = dense<1.000000e+00> : tensor<64x32xf32>
  func.func @serving_default() -> tensor<64x32xf32> {
    %w = util.global.load @w : tensor<64x32xf32>
    %0 = stablehlo.tanh %w : tensor<64x32xf32>
    return %0 : tensor<64x32xf32>
  }
}
// A function without arguments (IREE's models load every weight from a util.global) leaves the
// search nothing to decide: the message says that, at the function, and what to do; it blamed the
// device count ("no factor of 8 but 1 divides one"; ask for a number of devices whose factors
// divide the program's dimensions), though 8 divides every dim here.
// RUN: not autopart search %s --devices 8 --episodes 10 --func serving_default 2>&1 | filecheck %s
// CHECK: search-devices-no-arguments.mlir:3:3: error: devices: @serving_default takes no arguments, so the search has nothing to shard
// CHECK-SAME: pass the weights and inputs as arguments of the function
