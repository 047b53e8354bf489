func.func @main() {
  "x.y"() : () -> ()
  %0 = "x.z"(%0) : (tensor<f32>) -> tensor<f32>
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:3:14: error: use of value '%0' before its definition
