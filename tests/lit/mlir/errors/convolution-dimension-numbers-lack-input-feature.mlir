module attributes {c = #stablehlo.conv<raw input_batch_dimension = 0>} {}
// RUN: not autopart parse - < %s 2>&1 | filecheck %s --match-full-lines
// CHECK: <stdin>:1:40: error: convolution dimension numbers lack 'input_feature_dimension'
