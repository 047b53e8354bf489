func.func @main(%x: tensor<8x4xf32>, %i: tensor<1xi32>, %u: tensor<4xf32>) -> (tensor<4xf32>, tensor<8x4xf32>) {
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [0], start_index_map = [0]>, slice_sizes = array<i64: 1, 4>}> : (tensor<8x4xf32>, tensor<1xi32>) -> tensor<4xf32>
  %1 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0]>, unique_indices = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<8x4xf32>, tensor<1xi32>, tensor<4xf32>) -> tensor<8x4xf32>
  return %0, %1 : tensor<4xf32>, tensor<8x4xf32>
}
// StableHLO prints no index_vector_dim when it is 0 (x[i] with a scalar index, as JAX writes it: 605 of
// stablehlo/testdata's 2325 programs).  A missing one was read as the rank of the indices, so the interpreter
// refused every such scatter ("dimension numbers do not fit the inputs, indices and updates").
// RUN: autopart check %s --mesh x=2 --schedule 'tile %arg0 1 x; propagate' | filecheck %s
// RUN: autopart check %s --mesh x=2 --schedule 'tile %arg0 0 x; propagate' | filecheck %s
// RUN: autopart check %s --mesh x=2 --schedule 'tile %arg2 0 x; propagate' | filecheck %s
// CHECK: equivalent: all 2 results within tolerance
