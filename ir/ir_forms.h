/*
 * ir_forms.h - the pretty forms of registered ops (the last column of
 * ir_ops.h) as one table: for each form, the function that says whether an
 * op can be written in it as it is (check), the one that writes it (print)
 * and the one that reads it back (parse), side by side.  Check and print
 * are static functions of ir/print.c, parse of ir/parse/pretty.c; each file
 * expands the columns it owns, so a form missing one of them fails to
 * compile.  Adding a form: a row here, its three functions, and the form
 * named in the ops' rows of ir_ops.h.
 *
 * The forms not in the table: GENERIC (MLIR's generic form, for every op),
 * MODULE and FUNC (builtin.module and func.func, printed and parsed with
 * the structure they hold).
 */
#ifndef IR_FORMS_H
#define IR_FORMS_H

/*  form                         check                              print                           parse */
#define IR_FORMS(X) \
    X(RETURN,                    form_ok_return,                    form_print_return,              form_parse_return)                     \
    X(CALL,                      form_ok_call,                      form_print_call,                form_parse_call)                       \
    X(SAME,                      form_ok_same,                      form_print_same,                form_parse_same)                       \
    X(FUNCTIONAL,                form_ok_functional,                form_print_functional,          form_parse_functional)                 \
    X(TYPES,                     form_ok_types,                     form_print_types,               form_parse_types)                      \
    X(SELECT,                    form_ok_select,                    form_print_select,              form_parse_select)                     \
    X(COMPARE,                   form_ok_compare,                   form_print_compare,             form_parse_compare)                    \
    X(CONSTANT,                  form_ok_constant,                  form_print_constant,            form_parse_constant)                   \
    X(IOTA,                      form_ok_iota,                      form_print_iota,                form_parse_iota)                       \
    X(BROADCAST_IN_DIM,          form_ok_broadcast_in_dim,          form_print_dims,                form_parse_broadcast_in_dim)           \
    X(DYNAMIC_BROADCAST_IN_DIM,  form_ok_dynamic_broadcast_in_dim,  form_print_dims,                form_parse_dynamic_broadcast_in_dim)   \
    X(DYNAMIC_IOTA,              form_ok_dynamic_iota,              form_print_dynamic_iota,        form_parse_dynamic_iota)               \
    X(TRANSPOSE,                 form_ok_transpose,                 form_print_dims,                form_parse_transpose)                  \
    X(REVERSE,                   form_ok_reverse,                   form_print_same,                form_parse_reverse)                    \
    X(CONCATENATE,               form_ok_concatenate,               form_print_concatenate,         form_parse_concatenate)                \
    X(SLICE,                     form_ok_slice,                     form_print_slice,               form_parse_slice)                      \
    X(DYNAMIC_SLICE,             form_ok_dynamic_slice,             form_print_dynamic_slice,       form_parse_dynamic_slice)              \
    X(PAD,                       form_ok_pad,                       form_print_pad,                 form_parse_pad)                        \
    X(DOT,                       form_ok_dot,                       form_print_dot,                 form_parse_dot)                        \
    X(DOT_GENERAL,               form_ok_dot_general,               form_print_dot,                 form_parse_dot_general)                \
    X(CONVOLUTION,               form_ok_convolution,               form_print_convolution,         form_parse_convolution)                \
    X(REDUCE,                    form_ok_reduce,                    form_print_reduce,              form_parse_reduce)                     \
    X(WHILE,                     form_ok_while,                     form_print_while,               form_parse_while)                      \
    X(CUSTOM_CALL,               form_ok_custom_call,               form_print_custom_call,         form_parse_custom_call)                \
    X(COMPOSITE,                 form_ok_composite,                 form_print_composite,           form_parse_composite)                  \
    X(TUPLE,                     form_ok_tuple,                     form_print_types,               form_parse_types)                      \
    X(GET_TUPLE_ELEMENT,         form_ok_get_tuple_element,         form_print_get_tuple_element,   form_parse_get_tuple_element)          \
    X(FFT,                       form_ok_fft,                       form_print_fft,                 form_parse_fft)                        \
    X(RNG,                       form_ok_rng,                       form_print_rng,                 form_parse_rng)                        \
    X(RNG_BIT_GENERATOR,         form_ok_rng_bit_generator,         form_print_rng_bit_generator,   form_parse_rng_bit_generator)          \
    X(REDUCE_PRECISION,          form_ok_reduce_precision,          form_print_reduce_precision,    form_parse_reduce_precision)           \
    X(CHOLESKY,                  form_ok_cholesky,                  form_print_cholesky,            form_parse_cholesky)                   \
    X(GET_DIMENSION_SIZE,        form_ok_get_dimension_size,        form_print_get_dimension_size,  form_parse_get_dimension_size)        

enum ir_fmt {
    IR_FMT_GENERIC,
    IR_FMT_MODULE,
    IR_FMT_FUNC,
#define IR_FORM_ENUM(id, ok, print, parse) IR_FMT_##id,
    IR_FORMS(IR_FORM_ENUM)
#undef IR_FORM_ENUM
    IR_FMT__COUNT
};

#endif /* IR_FORMS_H */
