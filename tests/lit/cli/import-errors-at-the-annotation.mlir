module @m {
  func.func @main(%a: tensor<7x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %b: tensor<4x6xf32>) -> tensor<7x6xf32> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<7x4xf32>, tensor<4x6xf32>) -> tensor<7x6xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{devices=[1,2]<=[2]}"} : (tensor<7x6xf32>) -> tensor<7x6xf32>
    return %1 : tensor<7x6xf32>
  }
}
// What --import cannot use is reported in the module's text, where the annotation is: an argument's
// at its function (arguments carry no position of their own), a sharding constraint's at its op.
// The errors had no position ("autopart apply: error: --import: sdy sharding of %arg0 names axis
// 'x', ..."), or the position in the schedule the import writes ("schedule:1:12: error: tile
// %arg0: ..."), which is nowhere the user can look.
// RUN: not autopart apply %s --mesh y=2 --import 2>&1 | filecheck %s --check-prefix AXIS --match-full-lines
// AXIS: {{.*}}import-errors-at-the-annotation.mlir:2:3: error: sdy sharding of %arg0 names axis 'x', which the mesh does not have
// RUN: not autopart apply %s --mesh x=4 --import 2>&1 | filecheck %s --check-prefix TILES --match-full-lines
// TILES: {{.*}}import-errors-at-the-annotation.mlir:4:5: error: mhlo.sharding of %1 ({devices=[1,2]<=[2]}) places 2 tiles on a mesh of 4 devices
// RUN: not autopart apply %s --mesh x=2 --import 2>&1 | filecheck %s --check-prefix DIVIDE --match-full-lines
// DIVIDE: {{.*}}import-errors-at-the-annotation.mlir:2:3: error: the imported sharding does not apply: tile %arg0: dim 0 (local size 7) is not divisible by axis 'x' of size 2
// The same in check and search, which share the import.
// RUN: not autopart check %s --mesh x=2 --import 2>&1 | filecheck %s --check-prefix DIVIDE --match-full-lines
// RUN: not autopart search %s --mesh x=2 --import --episodes 10 2>&1 | filecheck %s --check-prefix DIVIDE --match-full-lines
