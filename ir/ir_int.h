/*
 * ir_int.h - private to the IR and the parts of ir/ built on it (parse/,
 * partir/, interp/): the builder (constructors of types, attributes and ops,
 * for the code that makes IR: the parsers, the SPMD lowering, the temporal
 * view), intern tables, float conversions, and helpers the files of ir/
 * share (double-underscore prefix).  Code outside ir/ reads IR through
 * ir.h and never builds it.
 */
#ifndef IR_INT_H
#define IR_INT_H

#include "ir.h"

#include <string.h>

/* ================================================================ builder */

/* Type constructors besides ir_type_tensor (ir.h): interned, they live as
 * long as the module; NULL only when out of memory. */
const ir_type *ir_type_tensor_ex(ir_module *m, ir_elem e, const char *elem_text, int rank,
                                 const int64_t *dims, const char *encoding);
const ir_type *ir_type_tuple(ir_module *m, int n, const ir_type *const *elems);
const ir_type *ir_type_function(ir_module *m, int n_in, const ir_type *const *in, int n_out,
                                const ir_type *const *out);
const ir_type *ir_type_token(ir_module *m);
const ir_type *ir_type_scalar(ir_module *m, ir_elem e, const char *text);
const ir_type *ir_type_opaque(ir_module *m, const char *text);

/* Constructors allocate in the module's arena; NULL when out of memory. */
ir_attr *ir_attr_unit(ir_module *m);
ir_attr *ir_attr_bool(ir_module *m, bool v);
ir_attr *ir_attr_int(ir_module *m, int64_t v, const ir_type *type);
ir_attr *ir_attr_float(ir_module *m, double v, const ir_type *type);
ir_attr *ir_attr_string(ir_module *m, const char *s, size_t len);
ir_attr *ir_attr_symref(ir_module *m, const char *name);
ir_attr *ir_attr_type(ir_module *m, const ir_type *t);
ir_attr *ir_attr_array(ir_module *m, int n, ir_attr *const *items);
/* Sorts by name; duplicate names keep the last. */
ir_attr *ir_attr_dict(ir_module *m, int n, const ir_named_attr *items);
ir_attr *ir_attr_i64_array(ir_module *m, int n, const int64_t *v); /* array<i64: ...> */
ir_attr *ir_attr_bool_array(ir_module *m, int n, const bool *v);   /* array<i1: ...> */
/* dense<...> of an integer tensor type from int64 values (n == numel, or 1
 * for a splat). */
ir_attr *ir_attr_dense_ints(ir_module *m, const ir_type *tensor_type, size_t n, const int64_t *v);
ir_attr *ir_attr_dialect_kv(ir_module *m, const char *name, int n, const ir_named_attr *params);
ir_attr *ir_attr_dialect_raw(ir_module *m, const char *name, const char *body);

/* Looks up a registered op by full name ("stablehlo.add"); IR_OP_UNKNOWN if
 * absent. */
ir_opcode ir_opcode_lookup(const char *name, size_t len);

/* Expected attributes of an opcode, for the verifier and for users. */
typedef struct ir_attr_rule {
    ir_opcode op;
    const char *name;
    ir_attr_kind kind;
    bool required;
} ir_attr_rule;
/* All rules for op; sets *n. */
const ir_attr_rule *ir_attr_rules(ir_opcode op, int *n);

/* Interns a string in the module: equal strings give one pointer. */
const char *ir_intern(ir_module *m, const char *s, size_t len);

/* Sets (adds or replaces) an attribute of a registered op. */
int ir_op_set_attr(ir_module *m, ir_op *op, const char *name, ir_attr *value);

/* ============================================================== building */

/* Creates a detached op with `n_operands` operands, results of the given
 * types and `n_regions` empty regions.  The op lives in m's arena.  Returns
 * NULL when out of memory. */
ir_op *ir_op_new(ir_module *m, ir_opcode opcode, const char *name, uint32_t n_operands,
                 ir_value *const *operands, uint32_t n_results, const ir_type *const *result_types,
                 uint32_t n_regions);
ir_block *ir_block_new(ir_module *m, ir_region *parent, uint32_t n_args,
                       const ir_type *const *arg_types);
void ir_block_append(ir_block *b, ir_op *op);
void ir_block_insert_before(ir_block *b, ir_op *before, ir_op *op);
void ir_block_remove(ir_block *b, ir_op *op);
void ir_region_append(ir_region *r, ir_block *b);



/* ------------------------------------------------------- module internals */

typedef struct ir_ptr_table {
    const void **slots; /* open addressing, NULL = empty */
    uint32_t cap, n;    /* cap is a power of two */
} ir_ptr_table;

struct ir_module_impl {
    ir_ptr_table strings; /* const char * with a length prefix, see intern */
    ir_ptr_table types;   /* const ir_type * */
    ir_ptr_table attrs;   /* ir_attr *, uniqued */
    const ir_type *token;
    size_t table_bytes;
};

/* Doubles t (rehashing each entry by hash), counting the bytes in
 * m->impl->table_bytes; false when out of memory (t unchanged). */
bool ir__table_grow(ir_module *m, ir_ptr_table *t, uint64_t (*hash)(const void *));

static inline void *ir__alloc(ir_module *m, size_t n) { return ap_arena_alloc(&m->arena, n); }
static inline void *ir__zalloc(ir_module *m, size_t n) { return ap_arena_zalloc(&m->arena, n); }

/* Length of an interned string without strlen (stored before the chars). */
static inline uint32_t ir__intern_len(const char *s)
{
    uint32_t n;
    memcpy(&n, s - sizeof n, sizeof n);
    return n;
}

/* Copies an attribute (deeply) into module m; used by the inliner and by
 * builders that take attributes from another module. */
ir_attr *ir__attr_clone(ir_module *m, const ir_attr *a);
/* Returns the module's one attribute equal to key (children must already be
 * uniqued).  key_in_arena: key was allocated in m's arena and becomes the
 * canonical copy when new; otherwise a new key is copied into the arena. */
ir_attr *ir__attr_intern(ir_module *m, ir_attr *key, bool key_in_arena);
const ir_type *ir__type_clone(ir_module *m, const ir_type *t);
/* The part type of a complex tensor type (complex<f32> -> f32), NULL if t
 * is not one (or out of memory). */
const ir_type *ir__complex_part_type(ir_module *m, const ir_type *t);
const ir_loc *ir__loc_clone(ir_module *m, const ir_loc *l);

/* Sorts named attributes by name (stable for equal names). */
void ir__sort_named(ir_named_attr *items, int n);

/* Valid bare identifier for attribute keys and symbol names. */
bool ir__is_bare_ident(const char *s, size_t len);
/* Appends s as an MLIR string literal with escapes. */
void ir__print_string(ap_buf *b, const char *s, size_t len);
/* Appends a location `loc(...)` body (without `loc(`) for inline printing. */
void ir__print_loc_inline(ap_buf *b, const ir_loc *l);
/* Appends a float in the shortest form that reads back to the same value of
 * element type e (finite values; callers print non-finite ones as hex). */
void ir__print_float(ap_buf *b, double v, ir_elem e);

/* ------------------------------------------------------ float conversion */

uint16_t ir__f32_to_f16(float f);
float ir__f16_to_f32(uint16_t h);
uint16_t ir__f32_to_bf16(float f);
float ir__bf16_to_f32(uint16_t h);
/* Small float formats (8 bits and below, tf32): decode raw bits, and encode
 * the nearest representable value (ties to even). */
double ir__minifloat_decode(ir_elem e, uint32_t bits);
uint32_t ir__minifloat_encode(ir_elem e, double v);
/* Reads a float element of dense data (any float elem) as double. */
double ir__float_load(ir_elem e, const uint8_t *p);
/* Stores v as element type e; returns false if e is not a float type. */
bool ir__float_store(ir_elem e, uint8_t *p, double v);
/* Raw bits of a float element (for hex printing of NaN/inf). */
uint64_t ir__float_bits(ir_elem e, const uint8_t *p);
int64_t ir__int_load(ir_elem e, const uint8_t *p);
void ir__int_store(ir_elem e, uint8_t *p, int64_t v);

/* ------------------------------------------------------------- registry */

enum ir_fmt {
    IR_FMT_GENERIC,
    IR_FMT_MODULE,
    IR_FMT_FUNC,
    IR_FMT_RETURN,
    IR_FMT_CALL,
    IR_FMT_SAME,
    IR_FMT_FUNCTIONAL,
    IR_FMT_TYPES,
    IR_FMT_SELECT,
    IR_FMT_COMPARE,
    IR_FMT_CONSTANT,
    IR_FMT_IOTA,
    IR_FMT_BROADCAST_IN_DIM,
    IR_FMT_DYNAMIC_BROADCAST_IN_DIM,
    IR_FMT_DYNAMIC_IOTA,
    IR_FMT_TRANSPOSE,
    IR_FMT_REVERSE,
    IR_FMT_CONCATENATE,
    IR_FMT_SLICE,
    IR_FMT_DYNAMIC_SLICE,
    IR_FMT_PAD,
    IR_FMT_DOT,
    IR_FMT_DOT_GENERAL,
    IR_FMT_CONVOLUTION,
    IR_FMT_REDUCE,
    IR_FMT_WHILE,
    IR_FMT_CUSTOM_CALL,
    IR_FMT_COMPOSITE,
    IR_FMT_TUPLE,
    IR_FMT_GET_TUPLE_ELEMENT,
    IR_FMT_FFT,
    IR_FMT_RNG,
    IR_FMT_RNG_BIT_GENERATOR,
    IR_FMT_REDUCE_PRECISION,
    IR_FMT_CHOLESKY,
    IR_FMT_GET_DIMENSION_SIZE,
};

/* ------------------------------------------------------------ pointer map */

typedef struct ir_ptrmap {
    const void **keys;
    uint32_t *vals;
    uint32_t cap, n;
} ir_ptrmap;

bool ir__map_get(const ir_ptrmap *m, const void *k, uint32_t *v);
bool ir__map_put(ir_ptrmap *m, const void *k, uint32_t v); /* false: out of memory */
void ir__map_clear(ir_ptrmap *m);
void ir__map_free(ir_ptrmap *m);

/* The value the canonical printer names %N (result k) in func, or NULL. */
const ir_value *ir__printed_value(const ir_op *func, uint32_t n, uint32_t k);

/* UTF-8 validity of [p, p+n): returns the first bad byte or NULL. */
const char *ir__utf8_invalid(const char *p, size_t n);

#endif /* IR_INT_H */
