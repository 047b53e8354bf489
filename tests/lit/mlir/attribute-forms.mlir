module @m attributes {mhlo.num_partitions = 2 : i32, z.unit, a.str = "q\22uote\0A", b.arr = [1, 2.5 : f32, "s", @sym, [true]], c.dense_arr = array<i64: 1, -2>, c.bools = array<i1: true, false>, c.empty = array<i64>, d.dict = {y = 2 : i64, x = 1 : i64}, e.type = tensor<2xf32>, f.dot = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, g.cmp = #stablehlo<comparison_direction GT>, h.shard = #sdy.sharding<@mesh, [{"x"}, {}]>, i.float = 1.000000e-03 : f32, j.neg = -7 : i64, k.fn = (tensor<f32>) -> tensor<i1>} {
}
// Attributes of every form print back, a dictionary in sorted key order, floats at their shortest exact spelling.
// RUN: autopart parse %s | filecheck %s --match-full-lines --strict-whitespace
// RUN: autopart parse %s > %t.mlir && autopart parse %t.mlir | diff -u %t.mlir -
// CHECK: module @m attributes {a.str = "q\22uote\0A", b.arr = [1, 2.5 : f32, "s", @sym, [true]], c.bools = array<i1: true, false>, c.dense_arr = array<i64: 1, -2>, c.empty = array<i64>, d.dict = {x = 1 : i64, y = 2 : i64}, e.type = tensor<2xf32>, f.dot = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, g.cmp = #stablehlo<comparison_direction GT>, h.shard = #sdy.sharding<@mesh, [{"x"}, {}]>, i.float = 0.001 : f32, j.neg = -7 : i64, k.fn = (tensor<f32>) -> tensor<i1>, mhlo.num_partitions = 2 : i32, z.unit} {
// CHECK-NEXT: }
