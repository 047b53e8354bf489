func.func @main(%n: tensor<i64>, %x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = stablehlo.negate %x : tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
// check cannot draw inputs of a dynamic shape: it names the argument (%argN when it has no location
// name; it printed "argument 1 ()") at the function's position.
// RUN: not autopart check %s --mesh a=2 --schedule propagate 2>&1 | filecheck %s --match-full-lines
// CHECK: {{.*}}check-names-a-dynamic-argument.mlir:1:1: error: argument 1 (%arg1): dynamic shape tensor<?x5xf32>
