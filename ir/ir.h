/*
 * ir.h - the tensor IR of autopart: types, attributes, modules, functions,
 * values and ops; the StableHLO (MLIR text) and XLA HLO text parsers; the
 * canonical StableHLO printer; the op registry; the verifier.
 *
 * Everything a parsed module contains lives in one arena owned by the
 * ir_module and is freed at once by ir_module_free.  Types are interned per
 * module, so two types of one module are equal iff their pointers are.
 *
 * The IR follows MLIR's structure: a module is a `builtin.module` op whose
 * single region holds functions (`func.func` ops) and other top-level ops;
 * ops have operands, results, attributes, regions of blocks, successors and
 * a location.  Ops of other dialects are kept opaque and print back as they
 * came (see ir_op.tmpl).
 */
#ifndef IR_H
#define IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ap.h"
#include "ir_ops.h"

#define IR_MAX_RANK 32 /* ranks above this are rejected by the parser */
#define IR_DYN INT64_C(-1) /* a dynamic dimension, printed `?` */

typedef struct ir_module ir_module;
typedef struct ir_type ir_type;
typedef struct ir_attr ir_attr;
typedef struct ir_named_attr ir_named_attr;
typedef struct ir_loc ir_loc;
typedef struct ir_value ir_value;
typedef struct ir_op ir_op;
typedef struct ir_block ir_block;
typedef struct ir_region ir_region;
typedef struct ir_template ir_template;

/* ================================================================ types */

/* Element types: enum suffix, MLIR spelling, storage bytes per element
 * (sub-byte types take one byte), class (F float, I signless integer,
 * U unsigned, S signed, C complex, X other). */
#define IR_ELEMS(X)                         \
    X(F64, "f64", 8, F)                     \
    X(F32, "f32", 4, F)                     \
    X(F16, "f16", 2, F)                     \
    X(BF16, "bf16", 2, F)                   \
    X(TF32, "tf32", 4, F)                   \
    X(F8E4M3FN, "f8E4M3FN", 1, F)           \
    X(F8E5M2, "f8E5M2", 1, F)               \
    X(F8E4M3FNUZ, "f8E4M3FNUZ", 1, F)       \
    X(F8E5M2FNUZ, "f8E5M2FNUZ", 1, F)       \
    X(F8E4M3B11FNUZ, "f8E4M3B11FNUZ", 1, F) \
    X(F8E4M3, "f8E4M3", 1, F)               \
    X(F8E3M4, "f8E3M4", 1, F)               \
    X(F8E8M0FNU, "f8E8M0FNU", 1, F)         \
    X(F6E2M3FN, "f6E2M3FN", 1, F)           \
    X(F6E3M2FN, "f6E3M2FN", 1, F)           \
    X(F4E2M1FN, "f4E2M1FN", 1, F)           \
    X(I1, "i1", 1, I)                       \
    X(I2, "i2", 1, I)                       \
    X(I4, "i4", 1, I)                       \
    X(I8, "i8", 1, I)                       \
    X(I16, "i16", 2, I)                     \
    X(I32, "i32", 4, I)                     \
    X(I64, "i64", 8, I)                     \
    X(UI2, "ui2", 1, U)                     \
    X(UI4, "ui4", 1, U)                     \
    X(UI8, "ui8", 1, U)                     \
    X(UI16, "ui16", 2, U)                   \
    X(UI32, "ui32", 4, U)                   \
    X(UI64, "ui64", 8, U)                   \
    X(SI8, "si8", 1, S)                     \
    X(SI16, "si16", 2, S)                   \
    X(SI32, "si32", 4, S)                   \
    X(SI64, "si64", 8, S)                   \
    X(C64, "complex<f32>", 8, C)            \
    X(C128, "complex<f64>", 16, C)          \
    X(INDEX, "index", 8, X)

typedef enum ir_elem {
    IR_E_NONE = 0, /* not a tensor type */
#define IR_ELEM_ENUM(e, text, bytes, cls) IR_E_##e,
    IR_ELEMS(IR_ELEM_ENUM)
#undef IR_ELEM_ENUM
    IR_E_OPAQUE, /* kept as text: !quant.uniform<...>, other dialects */
    IR_E__COUNT
} ir_elem;

const char *ir_elem_name(ir_elem e);   /* "f32"; "?" for OPAQUE/NONE */
int ir_elem_bytes(ir_elem e);          /* storage bytes; 0 for OPAQUE */
int ir_elem_bits(ir_elem e);           /* 1 for i1, 4 for i4, 32 for f32 */
bool ir_elem_is_float(ir_elem e);
bool ir_elem_is_int(ir_elem e);        /* signless, signed or unsigned */
bool ir_elem_is_unsigned(ir_elem e);
bool ir_elem_is_complex(ir_elem e);

typedef enum ir_type_kind {
    IR_T_TENSOR,   /* tensor<2x?x4xf32>, tensor<*xf32> (rank -1) */
    IR_T_TUPLE,    /* tuple<T, ...> */
    IR_T_TOKEN,    /* !stablehlo.token */
    IR_T_FUNCTION, /* (T, ...) -> (T, ...); only as an attribute */
    IR_T_SCALAR,   /* a builtin scalar used as a value type (f32, index) */
    IR_T_OPAQUE,   /* anything else, kept as text */
} ir_type_kind;

struct ir_type {
    uint8_t kind;        /* ir_type_kind */
    uint8_t elem;        /* ir_elem for TENSOR and SCALAR */
    int32_t rank;        /* TENSOR: number of dims, -1 unranked */
    const int64_t *dims; /* TENSOR: rank entries, IR_DYN for `?` */
    const char *text;    /* OPAQUE: whole type text; TENSOR/SCALAR with
                            elem OPAQUE: element type text */
    const char *encoding; /* TENSOR: `#stablehlo.bounds<...>` etc. or NULL */
    int32_t n_elems;     /* TUPLE: members; FUNCTION: inputs + results */
    int32_t n_inputs;    /* FUNCTION: how many of elems are inputs */
    const ir_type *const *elems;
    uint64_t hash;
};

/* Interned constructors: the result lives as long as the module; NULL only
 * when out of memory.  `dims` is copied. */
const ir_type *ir_type_tensor(ir_module *m, ir_elem e, int rank, const int64_t *dims);
const ir_type *ir_type_tensor_ex(ir_module *m, ir_elem e, const char *elem_text, int rank,
                                 const int64_t *dims, const char *encoding);
const ir_type *ir_type_tuple(ir_module *m, int n, const ir_type *const *elems);
const ir_type *ir_type_function(ir_module *m, int n_in, const ir_type *const *in, int n_out,
                                const ir_type *const *out);
const ir_type *ir_type_token(ir_module *m);
const ir_type *ir_type_scalar(ir_module *m, ir_elem e, const char *text);
const ir_type *ir_type_opaque(ir_module *m, const char *text);

/* Number of elements, or -1 when any dim is dynamic or the type is not a
 * ranked tensor.  Saturates at INT64_MAX. */
int64_t ir_type_numel(const ir_type *t);
/* Bytes of a ranked static tensor (numel * elem bytes), -1 otherwise. */
int64_t ir_type_bytes(const ir_type *t);
bool ir_type_is_static(const ir_type *t);
bool ir_type_is_tensor(const ir_type *t);
/* Structural equality (for types of different modules). */
bool ir_type_equal(const ir_type *a, const ir_type *b);
/* Appends the MLIR spelling of t. */
void ir_type_print(ap_buf *b, const ir_type *t);

/* ============================================================ attributes */

typedef enum ir_attr_kind {
    IR_A_UNIT,        /* a key without a value */
    IR_A_BOOL,        /* true / false */
    IR_A_INT,         /* 42, 42 : i32 (type NULL when untyped) */
    IR_A_FLOAT,       /* 1.5 : f32 */
    IR_A_STRING,      /* "..." (may hold any bytes) */
    IR_A_TYPE,        /* a type used as an attribute */
    IR_A_SYMREF,      /* @name, @a::@b (text without the first '@') */
    IR_A_ARRAY,       /* [a, b] */
    IR_A_DICT,        /* {a = 1, b} sorted by name */
    IR_A_DENSE_ARRAY, /* array<i64: 1, 2> */
    IR_A_DENSE,       /* dense<...> : tensor<...> */
    IR_A_DENSE_RESOURCE, /* dense_resource<name> : tensor<...> */
    IR_A_DIALECT,     /* #stablehlo.dot<k = v, ...>, #stablehlo<comparison_direction GT> */
    IR_A_OPAQUE,      /* kept as text: affine maps, #sdy..., unknown forms */
    IR_A_ANY          /* registry wildcard only */
} ir_attr_kind;

struct ir_named_attr {
    const char *name; /* interned */
    ir_attr *value;
};

/* Dense element data.  Values are stored in the element type's natural
 * layout (little endian; i1 one byte per element; f16/bf16/f8 as raw bits;
 * complex as two floats), `splat` when one value fills the tensor.  Element
 * types we cannot decode (opaque, strings) keep their text in `text`. */
typedef struct ir_dense {
    bool splat;
    size_t nbytes; /* bytes in data: one element when splat */
    uint8_t *data;
    const char *text; /* body between `dense<` and `>` when not decoded */
} ir_dense;

/* Attributes are uniqued per module (equal attributes are one object):
 * never modify one after it is made; make a new one instead. */
struct ir_attr {
    uint8_t kind;        /* ir_attr_kind */
    uint32_t hash;       /* for uniquing */
    const ir_type *type; /* INT/FLOAT: `: type` or NULL; DENSE/DENSE_RESOURCE:
                            the tensor type; DENSE_ARRAY: scalar element type;
                            TYPE: the type */
    union {
        bool b;
        int64_t i; /* INT (ui64 values above INT64_MAX wrap; see text) */
        double f;  /* FLOAT */
        struct {
            const char *s; /* NUL-terminated; may contain NULs within len */
            size_t len;
        } str;             /* STRING, SYMREF, OPAQUE, DENSE_RESOURCE handle */
        struct {
            int32_t n;
            ir_attr **items;
        } arr;             /* ARRAY */
        struct {
            int32_t n;
            ir_named_attr *items;
        } dict;            /* DICT */
        struct {
            int32_t n;
            int64_t *ints; /* integer and i1 elements */
            double *floats; /* float elements (ints is NULL then) */
        } darr;            /* DENSE_ARRAY */
        ir_dense dense;    /* DENSE */
        struct {
            const char *name; /* "stablehlo.dot", "stablehlo", "sdy.sharding" */
            int32_t n;        /* > 0: body was `key = value, ...` */
            ir_named_attr *params;
            const char *body; /* otherwise: raw body text between < > */
        } dia;             /* DIALECT */
    } u;
};

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

bool ir_attr_equal(const ir_attr *a, const ir_attr *b);
void ir_attr_print(ap_buf *b, const ir_attr *a);
/* Lookup in a DICT attribute; NULL when absent or not a dict. */
ir_attr *ir_dict_get(const ir_attr *dict, const char *name);
/* Lookup of a `key = value` parameter of a DIALECT attribute. */
ir_attr *ir_dialect_param(const ir_attr *a, const char *name);
/* Integer list from DENSE_ARRAY, ARRAY of INT, or integer DENSE; returns the
 * count or -1 when `a` is not such a list.  Writes at most `cap` values. */
int ir_attr_int_list(const ir_attr *a, int64_t *out, int cap);
/* Value of the i-th element of an integer DENSE attribute. */
int64_t ir_dense_int_at(const ir_attr *a, size_t i);
/* Value of the i-th element of a float DENSE attribute (f64/f32/f16/bf16). */
double ir_dense_float_at(const ir_attr *a, size_t i);

/* ============================================================= locations */

typedef enum ir_loc_kind {
    IR_L_UNKNOWN,  /* loc(unknown) */
    IR_L_NAME,     /* loc("name") or loc("name"(child)) */
    IR_L_FILE,     /* loc("file":line:col) with optional `to` range */
    IR_L_CALLSITE, /* loc(callsite(callee at caller)) */
    IR_L_FUSED,    /* loc(fused<meta>[a, b]) */
    IR_L_OPAQUE,   /* anything else, kept as text */
    IR_L_PENDING   /* parser internal: alias used before its definition */
} ir_loc_kind;

struct ir_loc {
    uint8_t kind;
    const char *str;     /* NAME: name; FILE: file; OPAQUE: text;
                            FUSED: metadata attribute text or NULL */
    int32_t line, col, end_line, end_col; /* FILE; end_* 0 when absent,
                            end_line -1 for `to :col` */
    const ir_loc *a, *b; /* NAME: child (or NULL); CALLSITE: callee, caller */
    int32_t n;           /* FUSED */
    const ir_loc *const *locs;
};

bool ir_loc_equal(const ir_loc *a, const ir_loc *b);
/* The innermost user-visible name of a location: for NAME its string, for
 * CALLSITE the callee's name, for FUSED the first named member; NULL if none.
 * This is how arguments are selected by JAX parameter path. */
const char *ir_loc_name(const ir_loc *l);

/* ============================================================ values, ops */

struct ir_value {
    const ir_type *type;
    ir_op *def;         /* defining op, NULL for a block argument */
    ir_block *block;    /* owning block of a block argument */
    uint32_t index;     /* result index or argument index */
    uint32_t id;        /* dense number within the enclosing function, set by
                           ir_func_renumber (parsers call it) */
    const ir_loc *loc;  /* block arguments: their location (or NULL) */
};

/* Opaque ops written in a dialect's custom syntax are kept as a template:
 * literal text pieces interleaved with references to the op's operands,
 * successors, regions and the block arguments of its regions, so that they
 * print back as they came even after values are renumbered. */
typedef enum ir_tmpl_kind {
    IR_TP_TEXT,      /* literal text */
    IR_TP_OPERAND,   /* name of operand `index` (`%x` or `%x#1`) */
    IR_TP_SUCCESSOR, /* label of successor `index` */
    IR_TP_REGION,    /* region `index`, printed as `{ ... }` */
    IR_TP_REGION_ARG, /* `%name: type loc(..)` of argument `index` of region
                         `region`'s entry block */
    IR_TP_LOC         /* a location inside the syntax: `loc(...)` */
} ir_tmpl_kind;

typedef struct ir_tmpl_piece {
    uint8_t kind;
    uint32_t index, region;
    const char *text; /* IR_TP_TEXT */
    uint32_t len;
    const ir_loc *loc; /* IR_TP_LOC */
} ir_tmpl_piece;

struct ir_template {
    uint32_t n;
    ir_tmpl_piece *pieces;
};

#define IR_OP_ENUM(id, name, kind, fmt) IR_OP_##id,
typedef enum ir_opcode {
    IR_OP_UNKNOWN = 0,
    IR_OPS(IR_OP_ENUM)
    IR_OP__COUNT
} ir_opcode;
#undef IR_OP_ENUM

typedef enum ir_op_kind {
    IR_K_STRUCT,
    IR_K_EW1,
    IR_K_EW2,
    IR_K_EW3,
    IR_K_CMP,
    IR_K_CONV,
    IR_K_COLL,
    IR_K_OTHER
} ir_op_kind;

/* Flags on named attributes of opaque ops: written inside `<{...}>`. */
enum { IR_OPF_GENERIC_PROPS = 1 };

struct ir_op {
    uint16_t opcode;        /* ir_opcode; IR_OP_UNKNOWN when not registered */
    uint16_t flags;
    uint32_t id;            /* dense number within the enclosing function */
    const char *name;       /* interned full name: "stablehlo.add" */
    uint32_t n_operands, n_results, n_attrs, n_props;
    uint32_t n_regions, n_successors;
    ir_value **operands;
    ir_value *results;      /* array of n_results */
    /* Attributes: the first n_props are inherent (`<{...}>` in generic
     * form), then n_attrs - n_props discardable (`{...}`).  Registered ops
     * keep every attribute sorted by name and n_props = 0; the printer
     * decides which to print where. */
    ir_named_attr *attrs;
    ir_region *regions;     /* array of n_regions */
    ir_block **successors;
    const ir_loc *loc;      /* NULL when unknown */
    const ir_template *tmpl; /* opaque custom-syntax ops; NULL otherwise */
    uint32_t src_line, src_col; /* position in the parsed text, 0 if built */
    ir_block *parent;
    ir_op *prev, *next;
};

struct ir_block {
    ir_region *parent;
    uint32_t n_args;
    ir_value *args;
    ir_op *first, *last;
    uint32_t n_ops;
    ir_block *next;
};

struct ir_region {
    ir_op *parent;
    ir_block *first, *last;
    uint32_t n_blocks;
};

/* ============================================================== registry */

typedef struct ir_op_info {
    const char *name;
    ir_op_kind kind;
    int fmt; /* pretty form, internal to the printer */
} ir_op_info;

const ir_op_info *ir_op_info_get(ir_opcode op);
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

/* ================================================================ module */

struct ir_module {
    ap_arena arena;
    ir_op *top;           /* the builtin.module op */
    const char *filename; /* for messages; arena copy */
    const char *file_metadata; /* `{-# ... #-}` section as written, or NULL */
    struct ir_module_impl *impl; /* intern tables: private */
};

/* Creates an empty module (a builtin.module op with one empty block).
 * Returns NULL when out of memory.  Free with ir_module_free. */
ir_module *ir_module_new(const char *filename);
void ir_module_free(ir_module *m);
/* Bytes the module holds (arena and tables), for memory reports. */
size_t ir_module_bytes(const ir_module *m);

/* Interns a string in the module: equal strings give one pointer. */
const char *ir_intern(ir_module *m, const char *s, size_t len);

/* The body block of the module op. */
ir_block *ir_module_body(const ir_module *m);
/* The func.func op named `name` ("main"); NULL when absent. */
ir_op *ir_module_func(const ir_module *m, const char *name);
/* The public function a tool should partition: "main" if present, else the
 * only public function, else NULL. */
ir_op *ir_module_entry(const ir_module *m);

/* Function accessors (op must be a func.func). */
const char *ir_func_name(const ir_op *f);
const ir_type *ir_func_type(const ir_op *f);
ir_block *ir_func_entry(const ir_op *f); /* NULL for a declaration */
uint32_t ir_func_num_args(const ir_op *f);
uint32_t ir_func_num_results(const ir_op *f);
ir_value *ir_func_arg(const ir_op *f, uint32_t i);
/* The attribute `name` of argument / result i, or NULL. */
ir_attr *ir_func_arg_attr(const ir_op *f, uint32_t i, const char *name);
ir_attr *ir_func_result_attr(const ir_op *f, uint32_t i, const char *name);
/* Name a user knows argument i by: its location name (JAX parameter path),
 * else NULL. */
const char *ir_func_arg_name(const ir_op *f, uint32_t i);
/* The terminator of the function's last block (func.return), or NULL. */
ir_op *ir_func_return(const ir_op *f);
/* Numbers the values and ops of a function densely (ir_value.id, ir_op.id);
 * returns the counts. */
void ir_func_renumber(ir_op *f, uint32_t *n_values, uint32_t *n_ops);

/* Op attribute lookup by name; NULL when absent. */
ir_attr *ir_op_attr(const ir_op *op, const char *name);
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

/* ============================================================ text I/O */

typedef enum ir_format {
    IR_FMT_AUTO,      /* detect from the content */
    IR_FMT_STABLEHLO, /* MLIR text */
    IR_FMT_HLO        /* XLA HLO text */
} ir_format;

/* Guesses the format of text: HLO when the first significant token is
 * `HloModule`, StableHLO otherwise. */
ir_format ir_detect_format(const char *text, size_t len);

/* Parses text (need not be NUL-terminated) into a new module.  `filename`
 * names the input in error messages ("FILE:LINE:COL: error: ...").
 * On success *out owns a module (ir_module_free); on failure *out is NULL,
 * err is filled and a negative AP_E* code is returned.  The module is
 * verified (ir_verify) before it is returned. */
int ir_parse(const char *text, size_t len, const char *filename, ir_format fmt, ir_module **out,
             ap_error *err);
int ir_parse_mlir(const char *text, size_t len, const char *filename, ir_module **out,
                  ap_error *err);
int ir_parse_hlo(const char *text, size_t len, const char *filename, ir_module **out,
                 ap_error *err);

typedef struct ir_print_opts {
    bool no_locs;   /* omit locations */
    bool generic;   /* print every op in generic form */
} ir_print_opts;

/* Prints the canonical StableHLO text of m into b (appending).  Returns 0, or
 * AP_ENOMEM when the buffer could not grow. */
int ir_print(const ir_module *m, ap_buf *b, const ir_print_opts *opts);

/* Checks every op's operand/result types against its type rule, required
 * attributes and their kinds, and region structure.  The first problem is
 * reported with the op's source position when known. */
int ir_verify(ir_module *m, ap_error *err);

/* Structural equality of two modules: same functions, ops, attributes,
 * types, locations and value wiring.  On difference returns false and, if
 * why != NULL, describes the first difference. */
bool ir_module_equal(const ir_module *a, const ir_module *b, char *why, size_t why_size);


/* ========================================================= transforms */

/* Inlines every func.call (and stablehlo.composite, a call of its
 * decomposition) of a function reachable from `func` (recursively), leaving
 * one flat function; callees that become unused are
 * kept (they print back).  Fails with AP_EUNSUPPORTED on recursion. */
int ir_inline_calls(ir_module *m, ir_op *func, ap_error *err);

/* ============================================================ summaries */

typedef struct ir_stats_entry {
    const char *name; /* op name */
    uint64_t count;
} ir_stats_entry;

typedef struct ir_stats {
    uint64_t n_ops;         /* every op, nested ones included, module and
                               functions included */
    uint32_t n_kinds;
    ir_stats_entry *by_name; /* n_kinds entries, most frequent first (ties
                                by name); heap, free with ir_stats_free */
} ir_stats;

int ir_stats_compute(const ir_module *m, ir_stats *out);
void ir_stats_free(ir_stats *s);

/* ========================================================== typed attrs */

/* Dimension numbers of dot_general (or dot, which has the implied ones). */
typedef struct ir_dot_dims {
    int n_batch, n_contract;
    int64_t lhs_batch[IR_MAX_RANK], rhs_batch[IR_MAX_RANK];
    int64_t lhs_contract[IR_MAX_RANK], rhs_contract[IR_MAX_RANK];
} ir_dot_dims;
int ir_dot_dims_get(const ir_op *op, ir_dot_dims *out);

/* Convolution dimension numbers. */
typedef struct ir_conv_dims {
    int64_t in_batch, in_feature, kernel_in, kernel_out, out_batch, out_feature;
    int n_spatial;
    int64_t in_spatial[IR_MAX_RANK], kernel_spatial[IR_MAX_RANK], out_spatial[IR_MAX_RANK];
} ir_conv_dims;
int ir_conv_dims_get(const ir_op *op, ir_conv_dims *out);

/* Gather dimension numbers. */
typedef struct ir_gather_dims {
    int n_offset, n_collapsed, n_start_index_map, n_operand_batching, n_start_indices_batching;
    int64_t offset_dims[IR_MAX_RANK], collapsed_slice_dims[IR_MAX_RANK];
    int64_t start_index_map[IR_MAX_RANK], operand_batching_dims[IR_MAX_RANK];
    int64_t start_indices_batching_dims[IR_MAX_RANK];
    int64_t index_vector_dim;
} ir_gather_dims;
int ir_gather_dims_get(const ir_op *op, ir_gather_dims *out);

/* Scatter dimension numbers. */
typedef struct ir_scatter_dims {
    int n_update_window, n_inserted_window, n_scatter_to_operand, n_input_batching,
        n_scatter_indices_batching;
    int64_t update_window_dims[IR_MAX_RANK], inserted_window_dims[IR_MAX_RANK];
    int64_t scatter_dims_to_operand_dims[IR_MAX_RANK], input_batching_dims[IR_MAX_RANK];
    int64_t scatter_indices_batching_dims[IR_MAX_RANK];
    int64_t index_vector_dim;
} ir_scatter_dims;
int ir_scatter_dims_get(const ir_op *op, ir_scatter_dims *out);

/* Comparison direction of a compare op: "EQ", "NE", "LT", "LE", "GT",
 * "GE"; NULL if absent. Writes into buf. */
const char *ir_compare_direction(const ir_op *op, char *buf, size_t size);

/* The single op a reduction region applies (add, max, ...): the opcode of
 * the one computing op before the return when the region is a plain binary
 * reduction of its two block arguments; IR_OP_UNKNOWN otherwise. */
ir_opcode ir_region_reduction(const ir_region *r);

/* ============================================================ PartIR core */

/*
 * The partition state of PartIR:Core kept as data (see DESIGN.md and
 * notes/partir-semantics.md): for every op of the partitioned function its
 * loop nest, an ordered list of (mesh axis, TMR entry); for every argument
 * its value tiling; tiling and atomic identity ops on intermediate values.
 * Actions (tile, atomic, propagate) only ever add loops.
 */

#define IR_MAX_AXES 8

typedef struct ir_mesh {
    int n_axes;
    char names[IR_MAX_AXES][32];
    int64_t sizes[IR_MAX_AXES];
} ir_mesh;

/* "batch=4,model=2" (also "batch:4, model:2" and "{batch:4, model:2}"). */
int ir_mesh_parse(const char *text, ir_mesh *out, ap_error *err);
int ir_mesh_axis(const ir_mesh *m, const char *name, size_t len); /* -1 if absent */
int64_t ir_mesh_devices(const ir_mesh *m);
/* "batch=4,model=2" */
void ir_mesh_format(const ir_mesh *m, ap_buf *b);

/* How pending partial results combine. */
typedef enum ir_red { IR_RED_NONE = 0, IR_RED_ADD, IR_RED_MUL, IR_RED_MAX, IR_RED_MIN, IR_RED_AND, IR_RED_OR } ir_red;
const char *ir_red_name(ir_red r);

/* Layout of a value over the mesh, per axis: the tensor dim the axis tiles
 * (and the axis's position among that dim's axes, 0 = major), or that the
 * value is a pending partial result along the axis (IR_AX_PARTIAL, with its
 * reduction), or nothing (replicated along the axis). */
#define IR_AX_NONE (-1)
#define IR_AX_PARTIAL (-2)
typedef struct ir_layout {
    int8_t dim[IR_MAX_AXES];
    uint8_t pos[IR_MAX_AXES];
    uint8_t red[IR_MAX_AXES];
} ir_layout;

void ir_layout_init(ir_layout *l);
bool ir_layout_equal(const ir_layout *a, const ir_layout *b);
/* The axes tiling dim d, major to minor; returns the count. */
int ir_layout_dim_axes(const ir_layout *l, int d, int *axes);
/* Appends axis as the minor-most axis of dim d. */
void ir_layout_push(ir_layout *l, int axis, int d);
bool ir_layout_has_partial(const ir_layout *l);
/* Local (per-device) dims of a global static tensor type; false when a
 * tiled dim does not divide or is dynamic. */
bool ir_layout_local_dims(const ir_layout *l, const ir_mesh *mesh, const ir_type *t, int64_t *out);
/* "[{batch}, {}]" with partial axes as " sum{model}" */
void ir_layout_format(const ir_layout *l, const ir_mesh *mesh, int rank, ap_buf *b);
/* JAX-style partition spec: P('batch', None), P(('batch', 'model'),) */
void ir_layout_pspec(const ir_layout *l, const ir_mesh *mesh, int rank, ap_buf *b);

typedef struct ir_pctx ir_pctx;           /* what never changes: ops, uses, TMR */
typedef struct ir_partition ir_partition; /* one partition state */

/* Builds the context for partitioning function `func` of module m (usually
 * the entry function after ir_inline_calls) over `mesh`: numbers its top-
 * level ops and values, builds the uses and instantiates the TMR of every
 * op.  The module must outlive the context.  Free with ir_pctx_free. */
int ir_pctx_new(ir_module *m, ir_op *func, const ir_mesh *mesh, ir_pctx **out, ap_error *err);
void ir_pctx_free(ir_pctx *c);
const ir_mesh *ir_pctx_mesh(const ir_pctx *c);
ir_op *ir_pctx_func(const ir_pctx *c);
uint32_t ir_pctx_num_ops(const ir_pctx *c);
ir_op *ir_pctx_op(const ir_pctx *c, uint32_t i);
uint32_t ir_pctx_num_entries(const ir_pctx *c, uint32_t op);

/* A fresh state (everything replicated) over ctx; free with
 * ir_partition_free.  ir_partition_clone copies a state. */
int ir_partition_new(const ir_pctx *ctx, ir_partition **out, ap_error *err);
int ir_partition_clone(const ir_partition *p, ir_partition **out, ap_error *err);
void ir_partition_free(ir_partition *p);
const ir_pctx *ir_partition_ctx(const ir_partition *p);

/* The actions.  `v` is a value of the partitioned function (an argument or
 * a result of one of its top-level ops).  tile fails with AP_EINVALID and a
 * message when the dim is out of range, dynamic, not divisible, or the
 * axis is already used by the value. */
int ir_tile(ir_partition *p, const ir_value *v, int dim, int axis, ap_error *err);
int ir_atomic(ir_partition *p, const ir_value *v, int axis, ap_error *err);
int ir_propagate(ir_partition *p, ap_error *err);
/* The first dim of v divisible by the axis size after its existing tiling,
 * -1 if none. */
int ir_first_divisible_dim(const ir_partition *p, const ir_value *v, int axis);

/* The layout of v as its users see it (after any tiling/atomic identity). */
void ir_partition_value_layout(const ir_partition *p, const ir_value *v, ir_layout *out);
/* The loop nest of top-level op i: fills axes and whether each loop is a
 * sum ('s'), a tile ('t', dims[k] the result dim of result 0) or any
 * ('a'); returns its length. */
int ir_partition_op_nest(const ir_partition *p, uint32_t op, int *axes, char *kinds, int *dims);

/* Why propagation stopped somewhere. */
typedef enum ir_block_kind {
    IR_BLK_CONFLICT,     /* several TMR entries or users disagree */
    IR_BLK_AXIS_USED,    /* the op already has a loop over the axis */
    IR_BLK_INDIVISIBLE,  /* a dim does not divide by the axis size */
    IR_BLK_ATOMIC,       /* an atomic value is in the way */
    IR_BLK_DYNAMIC,      /* a dynamic dim */
    IR_BLK_NO_RULE       /* the op has no TMR entries (custom_call, unknown, while) */
} ir_block_kind;

typedef struct ir_blocked {
    ir_block_kind kind;
    uint32_t op;   /* top-level op index */
    int axis;
    char why[200];
} ir_blocked;

/* Blocked propagations recorded so far (latest per op and axis). */
const ir_blocked *ir_partition_blocked(const ir_partition *p, uint32_t *n);

/* ----------------------------------------------------------- schedules */

/* Applies a schedule: actions one per line or ';'-separated:
 *   tile ARG DIM AXIS       ARG: %argN, a location name, or a glob over
 *                           location names ('*', '?'); DIM: a number or
 *                           first_divisible
 *   atomic VALUE AXIS       VALUE: as ARG, or %N (a value of the printed
 *                           canonical function)
 *   propagate
 *   manual AXIS ARG=DIM ... the paper's manual tactic: tile each then
 *                           propagate
 * '#' starts a comment.  Errors name the line and column of the schedule
 * ("schedule:LINE:COL: error: ..."). */
int ir_schedule_apply(ir_partition *p, const char *text, ap_error *err);
/* The same, calling fn after every tactic (each `propagate`, explicit or
 * ending a `manual` tactic) with the tactic's text; a negative return from
 * fn stops the schedule with that code. */
typedef int (*ir_tactic_fn)(void *ctx, ir_partition *p, const char *tactic, size_t len, ap_error *err);
int ir_schedule_apply_cb(ir_partition *p, const char *text, ir_tactic_fn fn, void *ctx, ap_error *err);
/* The schedule of a state as text (one action per line), as applied. */
void ir_partition_schedule(const ir_partition *p, ap_buf *b);
/* Reads the sharding annotations on the function's arguments
 * (sdy.sharding, mhlo.sharding) into a schedule of tile actions over mesh
 * (appended to b); returns the number of actions. */
int ir_schedule_import(const ir_module *m, const ir_op *func, const ir_mesh *mesh, ap_buf *b, ap_error *err);

/* --------------------------------------------------------- SPMD lowering */

typedef enum ir_coll_kind { IR_COLL_ALL_GATHER, IR_COLL_ALL_REDUCE, IR_COLL_REDUCE_SCATTER, IR_COLL_ALL_TO_ALL,
                            IR_COLL_PERMUTE, IR_COLL__COUNT } ir_coll_kind;
const char *ir_coll_name(ir_coll_kind k); /* "all_gather", ... */

typedef struct ir_lowered {
    ir_module *module;               /* device-local program; owned */
    uint64_t count[IR_COLL__COUNT];  /* collectives by kind */
    uint64_t bytes[IR_COLL__COUNT];  /* per-device bytes communicated */
    uint64_t n_dynslice;             /* local slicing by device coordinate */
} ir_lowered;

/* Lowers a state to the device-local SPMD program with explicit
 * collectives (see the contract in DESIGN.md: autopart.mesh, autopart.layout
 * on arguments and results).  Free with ir_lowered_free. */
int ir_lower(const ir_partition *p, ir_lowered *out, ap_error *err);
/* Options of ir_lower_ex; zero-initialized is not the default: use
 * IR_LOWER_OPTS_DEFAULT. */
typedef struct ir_lower_opts {
    /* For tests of the equivalence check only: leave out the N-th all_reduce
     * (0-based, in program order), which makes the program wrong; -1 none. */
    int64_t drop_all_reduce;
} ir_lower_opts;
#define IR_LOWER_OPTS_DEFAULT ((ir_lower_opts){.drop_all_reduce = -1})
int ir_lower_ex(const ir_partition *p, const ir_lower_opts *opts, ir_lowered *out, ap_error *err);
void ir_lowered_free(ir_lowered *l);

/* Prints the PartIR:Core loop view of a state. */
int ir_print_loops(const ir_partition *p, ap_buf *b);

/* The loop view as a runnable single-device program (PartIR:Temporal):
 * every loop unrolled, iterations on slices of global values, tile loops
 * concatenating their results and sum loops adding them.  It computes what
 * the partitioned function computes, with global arguments and results;
 * running it checks a state independently of the SPMD lowering.  *out is a
 * new module (ir_module_free). */
int ir_temporal(const ir_partition *p, ir_module **out, ap_error *err);
/* The view writes the iterations of an `any` loop (a value replicated along
 * an axis, e.g. by `atomic`) as `stablehlo.custom_call
 * @autopart.iterations_agree(%it0, %it1, ...)`: its value is the first
 * iteration's, and a checker must see that they are all equal. */
#define IR_ITERATIONS_AGREE "autopart.iterations_agree"

/* ---------------------------------------------------------------- interpreter
 *
 * The reference interpreter: host tensors, evaluation of a
 * function of a module on concrete arrays, and the SPMD interpreter that runs
 * a device-local program on every device of a mesh and carries out its
 * collectives across the simulated devices.
 *
 * The interpreter is for checking, not speed: naive loops over small shapes.
 * It evaluates every registered op with defined semantics: all element-wise
 * ops (integer ops wrap; x / 0 = -1, x % 0 = x, INT_MIN / -1 = INT_MIN as
 * XLA; shifts by the width or more give 0 or the sign; float -> int convert
 * truncates and saturates, NaN -> 0), compare (all directions, FLOAT,
 * TOTALORDER, SIGNED, UNSIGNED), select, clamp, convert, bitcast_convert
 * (byte-sized types), reduce_precision, complex/real/imag, map; constant,
 * iota, broadcast(_in_dim), transpose, reshape, reverse, concatenate,
 * slice, dynamic_slice / dynamic_update_slice (indices clamped), pad,
 * gather, scatter (with batching dims; out-of-bounds updates skipped),
 * torch_index_select, get_dimension_size, the dynamic_* ops when every
 * shape is static; dot, dot_general, convolution (groups, padding, strides,
 * dilations, reversal), reduce, reduce_window, select_and_scatter, sort
 * (stable), batch_norm_*, triangular_solve, cholesky, fft; while, if, case,
 * func.call, composite (as a call of its decomposition), tuple,
 * get_tuple_element, optimization_barrier, after_all, create_token,
 * partition_id, replica_id and the collectives.  Sums of products
 * accumulate in double and round once; region reductions round per step.
 *
 * An op it cannot evaluate (ops of other dialects, dynamic shapes,
 * custom_call without a handler, rng, rng_bit_generator, quantized types,
 * infeed/outfeed/send/recv, einsum, multi-block regions) is an error naming
 * the op and its source position, never a wrong answer.  Nothing here keeps
 * process-wide state: runs on different threads are independent as long as
 * they do not share tensors being freed.
 */
/* =============================================================== tensors */

typedef enum ir_tensor_kind {
    IR_TENSOR_ARRAY = 0, /* a dense array of one element type */
    IR_TENSOR_TUPLE,     /* tuple<...>: elems */
    IR_TENSOR_TOKEN      /* !stablehlo.token: no data */
} ir_tensor_kind;

/* A host value.  Every field is read-only to users: make tensors with the
 * constructors below and free them with ir_tensor_free.  A tensor owns its
 * data and, for a tuple, its elements; it holds no pointer into any module,
 * so it may outlive the module whose types made it.
 *
 * Element data is row-major in the layout of ir_dense (ir.h): little
 * endian, i1 one byte (0 or 1) per element, f16/bf16/f8 as raw bits,
 * complex as (real, imag) pairs.  Every element type of ir.h is accepted
 * except opaque ones (quantized and other dialects' types); floats narrower
 * than f32 (f16, bf16, f8, tf32) are computed in f32 (via double) and stored
 * rounded to nearest even. */
typedef struct ir_tensor {
    uint8_t kind;             /* ir_tensor_kind */
    uint8_t elem;             /* ARRAY: ir_elem */
    int32_t rank;             /* ARRAY */
    const int64_t *dims;      /* ARRAY: rank entries */
    int64_t numel;            /* ARRAY: product of dims (1 for a scalar) */
    size_t nbytes;            /* ARRAY: numel * ir_elem_bytes(elem) */
    uint8_t *data;            /* ARRAY: nbytes bytes (NULL when 0) */
    uint32_t n_elems;         /* TUPLE */
    struct ir_tensor **elems; /* TUPLE: n_elems owned members */
} ir_tensor;

/* Above this many elements a tensor is refused (AP_ELIMIT) unless
 * ir_interp_opts.max_elems says otherwise. */
#define IR_INTERP_MAX_ELEMS ((int64_t)1 << 28)

/* Constructors.  Each returns 0 and stores a new tensor owned by the caller
 * in *out, or a negative AP_E* code with *out = NULL and err filled: AP_EINVALID
 * for a dynamic, unranked or opaque type, a negative dim or a wrong buffer
 * size, AP_ELIMIT above IR_INTERP_MAX_ELEMS elements, AP_ENOMEM.
 *
 * ir_tensor_new: an array of zeros.
 * ir_tensor_zeros: zeros of any value type: a static tensor, a tuple of
 *   them, or a token.
 * ir_tensor_from_buffer: an array of type t from nbytes bytes in the layout
 *   above (copied).
 * ir_tensor_from_f64 / ir_tensor_from_i64: an array from n values (n ==
 *   numel, or 1 to fill it), converted to the element type as
 *   stablehlo.convert does (floats rounded to nearest even, integers
 *   wrapped, booleans != 0).
 * ir_tensor_random: reproducible values for a seed: floats uniform in
 *   [-1, 1), integers uniform in [0, 8) (so they are valid small indices),
 *   booleans 50/50, complex with both parts uniform in [-1, 1).
 * ir_tensor_random_range: floats uniform in [lo, hi), integers uniform in
 *   [ceil(lo), floor(hi)], booleans 50/50.
 * ir_tensor_clone: a deep copy. */
int ir_tensor_new(ir_elem e, int rank, const int64_t *dims, ir_tensor **out, ap_error *err);
int ir_tensor_zeros(const ir_type *t, ir_tensor **out, ap_error *err);
int ir_tensor_from_buffer(const ir_type *t, const void *data, size_t nbytes, ir_tensor **out, ap_error *err);
int ir_tensor_from_f64(ir_elem e, int rank, const int64_t *dims, const double *v, size_t n, ir_tensor **out,
                       ap_error *err);
int ir_tensor_from_i64(ir_elem e, int rank, const int64_t *dims, const int64_t *v, size_t n, ir_tensor **out,
                       ap_error *err);
int ir_tensor_random(const ir_type *t, uint64_t seed, ir_tensor **out, ap_error *err);
int ir_tensor_random_range(const ir_type *t, uint64_t seed, double lo, double hi, ir_tensor **out, ap_error *err);
int ir_tensor_clone(const ir_tensor *t, ir_tensor **out, ap_error *err);

/* Frees t and everything it owns; NULL is a no-op. */
void ir_tensor_free(ir_tensor *t);
/* Frees n tensors and the heap array v holding them (as ir_interp_run hands
 * them back); NULL is a no-op. */
void ir_tensors_free(ir_tensor **v, uint32_t n);

/* Element i (row-major) of an array as a double / an int64: floats and
 * integers are converted (unsigned 64-bit values above INT64_MAX wrap in
 * get_i64), complex gives its real part.  set_* store with the rounding of
 * stablehlo.convert.  i must be < numel. */
double ir_tensor_get_f64(const ir_tensor *t, int64_t i);
int64_t ir_tensor_get_i64(const ir_tensor *t, int64_t i);
void ir_tensor_set_f64(ir_tensor *t, int64_t i, double v);
void ir_tensor_set_i64(ir_tensor *t, int64_t i, int64_t v);

/* Whether t (an array, or every array of a tuple) has the element type and
 * static shape of type ty. */
bool ir_tensor_has_type(const ir_tensor *t, const ir_type *ty);
/* Whether every float or complex element is finite (true for integers). */
bool ir_tensor_all_finite(const ir_tensor *t);

/* Differences between two arrays of the same element type and shape,
 * computed in f64 (complex: the modulus of the difference). */
typedef struct ir_tensor_diff {
    double max_abs;     /* max |a - b| */
    double max_rel;     /* max |a - b| / max(|a|, |b|) over elements that
                            differ (0 when all are equal) */
    int64_t n_diff;     /* elements that are not bitwise equal (NaNs of the
                            same kind count as equal) */
    int64_t first_diff; /* row-major index of the first such element, -1 */
    int64_t worst;      /* index of the element with the largest |a - b|, -1 */
} ir_tensor_diff;

/* Fills *out.  A NaN against a number counts as an infinite difference.
 * Fails with AP_EINVALID (message saying how) when the element types or
 * shapes differ or either is not an array. */
int ir_tensor_compare(const ir_tensor *a, const ir_tensor *b, ir_tensor_diff *out, ap_error *err);

/* Appends "tensor<2x3xf32> [[1, 2, 3], [4, 5, 6]]" (MLIR dense syntax) to b,
 * eliding the middle after max_elems elements (0: no limit). */
void ir_tensor_print(ap_buf *b, const ir_tensor *t, int64_t max_elems);

/* =========================================================== interpreter */

/* A handler for stablehlo.custom_call: given the op and its operands, it
 * stores n_results new tensors of the op's result types in results (the
 * interpreter takes ownership and checks the types) and returns 0, or fills
 * err and returns a negative AP_E* code.  AP_EUNSUPPORTED makes the call an
 * error as if there were no handler. */
typedef int (*ir_custom_call_fn)(void *ctx, const ir_op *op, uint32_t n_operands, const ir_tensor *const *operands,
                                 uint32_t n_results, ir_tensor **results, ap_error *err);

typedef struct ir_interp_opts {
    int64_t max_elems;             /* per tensor; 0: IR_INTERP_MAX_ELEMS */
    int64_t max_while_iters;       /* iterations of one while op; 0: 1 << 20 */
    int max_depth;                 /* nested calls; 0: 64 */
    ir_custom_call_fn custom_call; /* NULL: every custom_call is an error */
    void *custom_call_ctx;
    uint64_t *ops_evaluated; /* if not NULL, incremented per op evaluated (per
                                device in SPMD runs, region bodies included) */
} ir_interp_opts;

/* Evaluates function `func` (a func.func of m, not a declaration) on args
 * (n_args tensors, borrowed; their types must match the function's argument
 * types exactly).  On success stores a heap array of the function's results
 * in *results (free with ir_tensors_free(*results, *n_results)) and returns 0.
 * On failure returns a negative AP_E* code with *results = NULL and err filled;
 * errors about an op carry its source position (m->filename, op->src_line,
 * op->src_col) and say which op could not be evaluated and why.  opts may be
 * NULL for the defaults.
 *
 * stablehlo.partition_id and replica_id evaluate to 0 here; collectives run
 * as on a single device (every replica group must then be [[0]] or empty). */
int ir_interp_run(const ir_module *m, const ir_op *func, const ir_tensor *const *args, uint32_t n_args,
                  ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts, ap_error *err);

/* ========================================================== SPMD programs */

/*
 * An SPMD module (what the lowering produces) has the module attributes
 * `mhlo.num_partitions = N : i32` and `autopart.mesh = "batch=4,model=2"`
 * (ordered axes; device ids are row-major over them, the last axis varying
 * fastest; N is the product of the sizes) and, on each argument and result
 * of the function, `autopart.layout = [[AXIS, ...], ...]`: per dimension of
 * the GLOBAL tensor the mesh axes that split it, major to minor.  The tile a
 * device holds along a dim is its coordinates over that dim's axes read
 * row-major (first listed axis major).  Axes listed nowhere replicate the
 * value.  Without the attribute a value is replicated.
 *
 * Collectives follow StableHLO with num_replicas = 1: the ids in
 * replica_groups and source_target_pairs are partition (device) ids in every
 * mode; an empty replica_groups means one group of all devices; [[0]] with
 * more than one device means each device alone when there is no
 * channel_handle (cross_replica) and all devices when there is one and no
 * use_global_device_ids (cross_replica_and_partition), as the spec gives for
 * one replica.  Every device must be in exactly one group.  Devices run in
 * lock step, op by op (inside while/if/case/call bodies too); devices that
 * take different branches or iteration counts are an error.
 */

/* Splits a global array into the tile `device` holds under `layout` (an
 * autopart.layout attribute, or NULL for replicated) on `mesh`.  Fails with
 * AP_EINVALID when the layout names unknown axes, repeats an axis, has the
 * wrong number of dims or does not divide the shape. */
int ir_tensor_shard(const ir_tensor *global, const ir_attr *layout, const ir_mesh *mesh, int64_t device,
                    ir_tensor **out, ap_error *err);

/* The mesh of an SPMD module (autopart.mesh, checked against
 * mhlo.num_partitions). AP_EINVALID with a message when absent or wrong. */
int ir_spmd_mesh(const ir_module *m, ir_mesh *out, ap_error *err);

/* Runs an SPMD `func` on every device of the module's mesh with GLOBAL
 * arguments: each is split per its argument's autopart.layout, the program
 * runs on all devices, and each global result is reassembled per its
 * result's autopart.layout.  Replicated copies must agree bit for bit; the
 * first disagreement is an AP_ECONFLICT error naming the result, the devices,
 * the index and both values (a broken partitioning).  Results and ownership
 * as ir_interp_run. */
int ir_spmd_run(const ir_module *m, const ir_op *func, const ir_tensor *const *global_args, uint32_t n_args,
                ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts, ap_error *err);

/* The same with every device's arguments given: args[d * n_args + i] is
 * argument i on device d (n_devices = mhlo.num_partitions).  Stores the
 * devices' results in *results as one heap array, results[d * n_results +
 * j] (free with ir_tensors_free(*results, n_devices * *n_results)). */
int ir_spmd_run_local(const ir_module *m, const ir_op *func, uint32_t n_devices, const ir_tensor *const *args,
                      uint32_t n_args, ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts,
                      ap_error *err);

/* ============================================== the equivalence check */

/*
 * `autopart check`: runs the unpartitioned function, the PartIR:Core loop
 * view (ir_temporal: tile loops stack their iterations, sum loops add them,
 * any loops must agree) and the SPMD program (ir_lower run on every device
 * by ir_spmd_run) on the same seeded random inputs, and compares each
 * result of the two partitioned runs with the unpartitioned one.
 *
 * The error of a result is max |x - ref| / max(1, max |ref|): absolute for
 * values below one, relative to the result's largest magnitude above (an
 * element-wise relative error would flag every reordered sum that lands
 * near zero).  It must not exceed the tolerance of the result's element
 * type (ir_check_default_tol) unless ir_check_opts.tol overrides it.
 */

/* Default tolerance per element type: 1e-9 for f64, 1e-4 for f32 and tf32,
 * 1e-2 for f16, 5e-2 for bf16, 0.25 for the 8-bit and narrower floats,
 * those of the parts for complex, and 0 (exact) for integers and booleans.
 * Sums are reordered by partitioning, so floats cannot be held to exact
 * equality; the bounds leave room for a few thousand roundings. */
double ir_check_default_tol(ir_elem e);

typedef struct ir_check_opts {
    uint64_t seed;           /* of the random inputs */
    double tol;              /* > 0: for every result; 0: per element type */
    int64_t drop_all_reduce; /* ir_lower_opts (tests only); -1 none */
    int64_t max_elems;       /* per tensor, 0: the interpreter's default */
    int64_t max_arg_bytes;   /* all arguments together; 0: IR_CHECK_MAX_ARG_BYTES */
} ir_check_opts;
#define IR_CHECK_OPTS_DEFAULT ((ir_check_opts){.seed = 0, .tol = 0, .drop_all_reduce = -1})
/* The check holds several copies of every value (three runs, each SPMD
 * device's tiles): above this much argument data it refuses with
 * AP_ELIMIT rather than exhaust memory.  It is meant for small
 * configurations of a model (the zoo's `tiny`). */
#define IR_CHECK_MAX_ARG_BYTES ((int64_t)1 << 30)

enum { IR_CHECK_REF, IR_CHECK_LOOPS, IR_CHECK_SPMD, IR_CHECK__RUNS };

typedef struct ir_check_result {
    char name[96];  /* jax.result_info, or "result #J" */
    char type[96];  /* tensor<4x8xf32> */
    double tol;
    /* [0]: the loop view, [1]: SPMD, against the unpartitioned run */
    double max_abs[2]; /* largest |x - ref| */
    double max_rel[2]; /* largest |x - ref| / max(|x|, |ref|) */
    double error[2];   /* what is held to tol (see above) */
    bool ok;
} ir_check_result;

typedef struct ir_check_report {
    uint32_t n_results;
    ir_check_result *results; /* owned */
    bool ok;                  /* every result within its tolerance */
    int64_t n_devices;
    double input_lo, input_hi;        /* range of the float inputs */
    double seconds[IR_CHECK__RUNS];   /* per run: unpartitioned, loops, SPMD */
    uint64_t ops[IR_CHECK__RUNS];     /* ops evaluated per run */
    char note[160];                   /* e.g. why inputs were redrawn */
} ir_check_report;

/* Runs the check of state p (its context's function and module) and fills
 * *report (free with ir_check_report_free), returning 0 whether or not the
 * results agree: report->ok says.  A negative AP_E* code with err filled
 * when a run fails: an op the interpreter cannot evaluate, the lowering
 * failing, replicated copies disagreeing across devices (AP_ECONFLICT), or
 * iterations of an `any` loop disagreeing (AP_ECONFLICT). */
int ir_check(const ir_partition *p, const ir_check_opts *opts, ir_check_report *report, ap_error *err);
void ir_check_report_free(ir_check_report *r);

/* Whether op is a custom_call that only annotates its operand (Sharding,
 * tt.mark_argument, ...): partitioning and the checker treat it as the
 * identity. */
bool ir_custom_call_is_identity(const ir_op *op);

#endif /* IR_H */
