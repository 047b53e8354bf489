func.func @main() {
  %0 = stablehlo.iota dim = 0 : tensor<4xi64>
  check.expect_eq_const %0, dense<[0, 1, 2, 3]
  func.return
}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:3:34: error: unterminated dense<...> in check.expect_eq_const
