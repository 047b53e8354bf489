/*
 * ir_ops.h - the op registry as one X-macro table.
 *
 * Adding an op is one line here plus its rules elsewhere (type rule in
 * verify.c, and later its TMR entries, interpreter kernel and cost).  Each
 * row: enum suffix, op name as printed, kind (what the op computes, used by
 * the verifier and later passes) and pretty form (how the StableHLO printer
 * writes it; IR_FMT_GENERIC ops are printed in MLIR's generic form).
 *
 * This header is included by ir.h; do not include it directly.
 */

/*
 * Kinds:
 *   EW1/EW2/EW3   elementwise with 1/2/3 operands of the result's shape
 *   CMP           elementwise compare (result i1)
 *   CONV          elementwise type conversion
 *   OTHER         has its own rules
 *   STRUCT        structure (module, func, return, call)
 *   COLL          collective communication
 */
#define IR_OPS(X)                                                         \
    /* structure */                                                       \
    X(MODULE, "builtin.module", STRUCT, MODULE)                          \
    X(FUNC, "func.func", STRUCT, FUNC)                                    \
    X(FUNC_RETURN, "func.return", STRUCT, RETURN)                         \
    X(FUNC_CALL, "func.call", STRUCT, CALL)                               \
    X(RETURN, "stablehlo.return", STRUCT, RETURN)                         \
    /* elementwise unary */                                               \
    X(ABS, "stablehlo.abs", EW1, SAME)                                    \
    X(CBRT, "stablehlo.cbrt", EW1, SAME)                                  \
    X(CEIL, "stablehlo.ceil", EW1, SAME)                                  \
    X(COSINE, "stablehlo.cosine", EW1, SAME)                              \
    X(CLZ, "stablehlo.count_leading_zeros", EW1, SAME)                    \
    X(EXP, "stablehlo.exponential", EW1, SAME)                            \
    X(EXPM1, "stablehlo.exponential_minus_one", EW1, SAME)                \
    X(FLOOR, "stablehlo.floor", EW1, SAME)                                \
    X(IMAG, "stablehlo.imag", CONV, SAME)                                 \
    X(IS_FINITE, "stablehlo.is_finite", CONV, SAME)                       \
    X(LOG, "stablehlo.log", EW1, SAME)                                    \
    X(LOG1P, "stablehlo.log_plus_one", EW1, SAME)                         \
    X(LOGISTIC, "stablehlo.logistic", EW1, SAME)                          \
    X(NEGATE, "stablehlo.negate", EW1, SAME)                              \
    X(NOT, "stablehlo.not", EW1, SAME)                                    \
    X(POPCNT, "stablehlo.popcnt", EW1, SAME)                              \
    X(REAL, "stablehlo.real", CONV, SAME)                                 \
    X(ROUND_AFZ, "stablehlo.round_nearest_afz", EW1, SAME)                \
    X(ROUND_EVEN, "stablehlo.round_nearest_even", EW1, SAME)              \
    X(RSQRT, "stablehlo.rsqrt", EW1, SAME)                                \
    X(SIGN, "stablehlo.sign", EW1, SAME)                                  \
    X(SINE, "stablehlo.sine", EW1, SAME)                                  \
    X(SQRT, "stablehlo.sqrt", EW1, SAME)                                  \
    X(TAN, "stablehlo.tan", EW1, SAME)                                    \
    X(TANH, "stablehlo.tanh", EW1, SAME)                                  \
    X(COPY, "mhlo.copy", EW1, SAME)                                       \
    X(CONVERT, "stablehlo.convert", CONV, SAME)                           \
    X(BITCAST_CONVERT, "stablehlo.bitcast_convert", OTHER, SAME)          \
    X(REDUCE_PRECISION, "stablehlo.reduce_precision", EW1, REDUCE_PRECISION) \
    X(UNIFORM_QUANTIZE, "stablehlo.uniform_quantize", CONV, SAME)         \
    X(UNIFORM_DEQUANTIZE, "stablehlo.uniform_dequantize", CONV, SAME)     \
    /* elementwise binary */                                              \
    X(ADD, "stablehlo.add", EW2, SAME)                                    \
    X(ATAN2, "stablehlo.atan2", EW2, SAME)                                \
    X(AND, "stablehlo.and", EW2, SAME)                                    \
    X(COMPLEX, "stablehlo.complex", CONV, SAME)                           \
    X(DIVIDE, "stablehlo.divide", EW2, SAME)                              \
    X(MAXIMUM, "stablehlo.maximum", EW2, SAME)                            \
    X(MINIMUM, "stablehlo.minimum", EW2, SAME)                            \
    X(MULTIPLY, "stablehlo.multiply", EW2, SAME)                          \
    X(OR, "stablehlo.or", EW2, SAME)                                      \
    X(POWER, "stablehlo.power", EW2, SAME)                                \
    X(REMAINDER, "stablehlo.remainder", EW2, SAME)                        \
    X(SHIFT_LEFT, "stablehlo.shift_left", EW2, SAME)                      \
    X(SHIFT_RIGHT_ARITH, "stablehlo.shift_right_arithmetic", EW2, SAME)   \
    X(SHIFT_RIGHT_LOGICAL, "stablehlo.shift_right_logical", EW2, SAME)    \
    X(SUBTRACT, "stablehlo.subtract", EW2, SAME)                          \
    X(XOR, "stablehlo.xor", EW2, SAME)                                    \
    X(COMPARE, "stablehlo.compare", CMP, COMPARE)                         \
    /* elementwise ternary */                                             \
    X(SELECT, "stablehlo.select", EW3, SELECT)                            \
    X(CLAMP, "stablehlo.clamp", EW3, SAME)                                \
    /* shape and data movement */                                         \
    X(CONSTANT, "stablehlo.constant", OTHER, CONSTANT)                    \
    X(IOTA, "stablehlo.iota", OTHER, IOTA)                                \
    X(BROADCAST_IN_DIM, "stablehlo.broadcast_in_dim", OTHER, BROADCAST_IN_DIM) \
    X(BROADCAST, "stablehlo.broadcast", OTHER, GENERIC)                   \
    X(TRANSPOSE, "stablehlo.transpose", OTHER, TRANSPOSE)                 \
    X(RESHAPE, "stablehlo.reshape", OTHER, FUNCTIONAL)                    \
    X(REVERSE, "stablehlo.reverse", OTHER, REVERSE)                       \
    X(CONCATENATE, "stablehlo.concatenate", OTHER, CONCATENATE)           \
    X(SLICE, "stablehlo.slice", OTHER, SLICE)                             \
    X(DYNAMIC_SLICE, "stablehlo.dynamic_slice", OTHER, DYNAMIC_SLICE)     \
    X(DYNAMIC_UPDATE_SLICE, "stablehlo.dynamic_update_slice", OTHER, FUNCTIONAL) \
    X(PAD, "stablehlo.pad", OTHER, PAD)                                   \
    X(GATHER, "stablehlo.gather", OTHER, GENERIC)                         \
    X(SCATTER, "stablehlo.scatter", OTHER, GENERIC)                       \
    X(TORCH_INDEX_SELECT, "stablehlo.torch_index_select", OTHER, GENERIC) \
    X(DOT, "stablehlo.dot", OTHER, DOT)                                   \
    X(DOT_GENERAL, "stablehlo.dot_general", OTHER, DOT_GENERAL)           \
    X(CONVOLUTION, "stablehlo.convolution", OTHER, CONVOLUTION)           \
    X(REDUCE, "stablehlo.reduce", OTHER, REDUCE)                          \
    X(REDUCE_WINDOW, "stablehlo.reduce_window", OTHER, GENERIC)           \
    X(SELECT_AND_SCATTER, "stablehlo.select_and_scatter", OTHER, GENERIC) \
    X(SORT, "stablehlo.sort", OTHER, GENERIC)                             \
    X(MAP, "stablehlo.map", OTHER, GENERIC)                               \
    X(FFT, "stablehlo.fft", OTHER, FFT)                                   \
    X(TRIANGULAR_SOLVE, "stablehlo.triangular_solve", OTHER, GENERIC)     \
    X(CHOLESKY, "stablehlo.cholesky", OTHER, CHOLESKY)                    \
    X(BATCH_NORM_INFERENCE, "stablehlo.batch_norm_inference", OTHER, GENERIC) \
    X(BATCH_NORM_TRAINING, "stablehlo.batch_norm_training", OTHER, GENERIC) \
    X(BATCH_NORM_GRAD, "stablehlo.batch_norm_grad", OTHER, GENERIC)       \
    X(RNG, "stablehlo.rng", OTHER, RNG)                                   \
    X(RNG_BIT_GENERATOR, "stablehlo.rng_bit_generator", OTHER, RNG_BIT_GENERATOR) \
    X(GET_DIMENSION_SIZE, "stablehlo.get_dimension_size", OTHER, GET_DIMENSION_SIZE) \
    X(DYNAMIC_BROADCAST_IN_DIM, "stablehlo.dynamic_broadcast_in_dim", OTHER, DYNAMIC_BROADCAST_IN_DIM) \
    X(DYNAMIC_RESHAPE, "stablehlo.dynamic_reshape", OTHER, FUNCTIONAL)    \
    X(DYNAMIC_IOTA, "stablehlo.dynamic_iota", OTHER, DYNAMIC_IOTA)        \
    X(DYNAMIC_PAD, "stablehlo.dynamic_pad", OTHER, FUNCTIONAL)            \
    X(DYNAMIC_GATHER, "stablehlo.dynamic_gather", OTHER, GENERIC)         \
    X(REAL_DYNAMIC_SLICE, "stablehlo.real_dynamic_slice", OTHER, FUNCTIONAL) \
    X(EINSUM, "stablehlo.einsum", OTHER, GENERIC)                         \
    /* control flow */                                                    \
    X(WHILE, "stablehlo.while", OTHER, WHILE)                             \
    X(IF, "stablehlo.if", OTHER, GENERIC)                                 \
    X(CASE, "stablehlo.case", OTHER, GENERIC)                             \
    X(CUSTOM_CALL, "stablehlo.custom_call", OTHER, CUSTOM_CALL)           \
    X(COMPOSITE, "stablehlo.composite", OTHER, COMPOSITE)                 \
    X(OPTIMIZATION_BARRIER, "stablehlo.optimization_barrier", OTHER, TYPES) \
    X(TUPLE, "stablehlo.tuple", OTHER, TUPLE)                             \
    X(GET_TUPLE_ELEMENT, "stablehlo.get_tuple_element", OTHER, GET_TUPLE_ELEMENT) \
    X(AFTER_ALL, "stablehlo.after_all", OTHER, TYPES)                     \
    X(CREATE_TOKEN, "stablehlo.create_token", OTHER, TYPES)               \
    X(PARTITION_ID, "stablehlo.partition_id", OTHER, TYPES)               \
    X(REPLICA_ID, "stablehlo.replica_id", OTHER, TYPES)                   \
    X(INFEED, "stablehlo.infeed", OTHER, GENERIC)                         \
    X(OUTFEED, "stablehlo.outfeed", OTHER, GENERIC)                       \
    X(SEND, "stablehlo.send", OTHER, GENERIC)                             \
    X(RECV, "stablehlo.recv", OTHER, GENERIC)                             \
    /* collectives */                                                     \
    X(ALL_GATHER, "stablehlo.all_gather", COLL, GENERIC)                  \
    X(ALL_REDUCE, "stablehlo.all_reduce", COLL, GENERIC)                  \
    X(REDUCE_SCATTER, "stablehlo.reduce_scatter", COLL, GENERIC)          \
    X(ALL_TO_ALL, "stablehlo.all_to_all", COLL, GENERIC)                  \
    X(COLLECTIVE_PERMUTE, "stablehlo.collective_permute", COLL, GENERIC)  \
    X(COLLECTIVE_BROADCAST, "stablehlo.collective_broadcast", COLL, GENERIC)

/*
 * Attributes each op expects: op, attribute name, kind, whether required.
 * The verifier checks presence and kind; typed accessors (ir_dot_dims, ...)
 * read them.  Kinds are ir_attr_kind suffixes; ANY accepts every kind.
 */
#define IR_OP_ATTRS(X)                                                     \
    X(CONSTANT, "value", DENSE, 1)                                         \
    X(IOTA, "iota_dimension", INT, 1)                                      \
    X(BROADCAST_IN_DIM, "broadcast_dimensions", DENSE_ARRAY, 1)           \
    X(BROADCAST, "broadcast_sizes", DENSE_ARRAY, 1)                       \
    X(TRANSPOSE, "permutation", DENSE_ARRAY, 1)                           \
    X(REVERSE, "dimensions", DENSE_ARRAY, 1)                              \
    X(CONCATENATE, "dimension", INT, 1)                                    \
    X(SLICE, "start_indices", DENSE_ARRAY, 1)                             \
    X(SLICE, "limit_indices", DENSE_ARRAY, 1)                             \
    X(SLICE, "strides", DENSE_ARRAY, 1)                                   \
    X(DYNAMIC_SLICE, "slice_sizes", DENSE_ARRAY, 1)                       \
    X(PAD, "edge_padding_low", DENSE_ARRAY, 1)                            \
    X(PAD, "edge_padding_high", DENSE_ARRAY, 1)                           \
    X(PAD, "interior_padding", DENSE_ARRAY, 1)                            \
    X(COMPARE, "comparison_direction", DIALECT, 1)                        \
    X(COMPARE, "compare_type", DIALECT, 0)                                \
    X(DOT_GENERAL, "dot_dimension_numbers", DIALECT, 1)                   \
    X(DOT_GENERAL, "precision_config", ARRAY, 0)                          \
    X(DOT, "precision_config", ARRAY, 0)                                  \
    X(CONVOLUTION, "dimension_numbers", DIALECT, 1)                       \
    X(CONVOLUTION, "feature_group_count", INT, 1)                         \
    X(CONVOLUTION, "batch_group_count", INT, 1)                           \
    X(REDUCE, "dimensions", DENSE_ARRAY, 1)                               \
    X(GATHER, "dimension_numbers", DIALECT, 1)                            \
    X(GATHER, "slice_sizes", DENSE_ARRAY, 1)                              \
    X(SCATTER, "scatter_dimension_numbers", DIALECT, 1)                   \
    X(REDUCE_WINDOW, "window_dimensions", DENSE_ARRAY, 1)                 \
    X(SELECT_AND_SCATTER, "window_dimensions", DENSE_ARRAY, 0)            \
    X(SORT, "dimension", INT, 0)                                           \
    X(FFT, "fft_type", DIALECT, 1)                                        \
    X(FFT, "fft_length", DENSE_ARRAY, 1)                                  \
    X(GET_TUPLE_ELEMENT, "index", INT, 1)                                  \
    X(CUSTOM_CALL, "call_target_name", STRING, 1)                         \
    X(COMPOSITE, "name", STRING, 1)                                        \
    X(COMPOSITE, "decomposition", SYMREF, 1)                              \
    X(FUNC_CALL, "callee", SYMREF, 1)                                      \
    X(FUNC, "sym_name", STRING, 1)                                         \
    X(FUNC, "function_type", TYPE, 1)                                      \
    X(ALL_GATHER, "all_gather_dim", INT, 1)                                \
    X(ALL_GATHER, "replica_groups", DENSE, 1)                             \
    X(ALL_REDUCE, "replica_groups", DENSE, 1)                             \
    X(REDUCE_SCATTER, "scatter_dimension", INT, 1)                         \
    X(REDUCE_SCATTER, "replica_groups", DENSE, 1)                         \
    X(ALL_TO_ALL, "split_dimension", INT, 1)                               \
    X(ALL_TO_ALL, "concat_dimension", INT, 1)                              \
    X(ALL_TO_ALL, "split_count", INT, 1)                                   \
    X(COLLECTIVE_PERMUTE, "source_target_pairs", DENSE, 1)                \
    X(DYNAMIC_BROADCAST_IN_DIM, "broadcast_dimensions", DENSE_ARRAY, 1)   \
    X(DYNAMIC_IOTA, "iota_dimension", INT, 1)                              \
    X(TORCH_INDEX_SELECT, "dim", INT, 1)                                   \
    X(TORCH_INDEX_SELECT, "batch_dims", INT, 1)                            \
    X(BATCH_NORM_INFERENCE, "feature_index", INT, 1)                       \
    X(BATCH_NORM_TRAINING, "feature_index", INT, 1)                        \
    X(BATCH_NORM_GRAD, "feature_index", INT, 1)
