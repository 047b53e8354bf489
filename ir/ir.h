/*
 * ir.h - the IR core of autopart: types, attributes, locations, modules,
 * functions, values and ops; the op registry; device meshes; the printer
 * (ir_print: canonical StableHLO); the verifier, inlining, structural
 * equality, summaries and typed views of structured attributes.  The
 * parsers (ir_parse, StableHLO and XLA HLO text) are ir/parse/parse.h.
 *
 * Everything a parsed module contains lives in one arena owned by the
 * ir_module and is freed at once by ir_module_free.  Types are interned per
 * module, so two types of one module are equal iff their pointers are.
 *
 * The IR follows MLIR's structure: a module is a `builtin.module` op whose
 * single region holds functions (`func.func` ops) and other top-level ops;
 * ops have operands, results, attributes, regions of blocks, successors and
 * a location.  Ops of other dialects are kept opaque and print back as they
 * came (see ir_template).
 *
 * This header is for reading IR.  Making it (the constructors of types,
 * attributes and ops) is for the parts of ir/ that produce IR, the parsers
 * and the SPMD lowering: see ir_build.h.  The parts above the core have
 * their own headers: ir/parse/parse.h (the text parsers),
 * ir/partir/partir.h (partition states, actions, lowering,
 * redistribution), ir/interp/interp.h (tensors, interpreters) and
 * ir/check/ircheck.h (the equivalence check).
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

/* Number of elements, or -1 when any dim is dynamic or the type is not a
 * ranked tensor.  Saturates at INT64_MAX. */
int64_t ir_type_numel(const ir_type *t);
/* Bytes of a ranked static tensor (numel * elem bytes), -1 otherwise. */
int64_t ir_type_bytes(const ir_type *t);
bool ir_type_is_static(const ir_type *t);
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
    int fmt;          /* pretty form, internal to the printer */
    bool elementwise; /* EW1/EW2/EW3/CMP/CONV: each result element from the
                         operands' elements at its index (select and clamp
                         included; bitcast_convert not: it may change the
                         shape) */
} ir_op_info;

const ir_op_info *ir_op_info_get(ir_opcode op);


/* ================================================================ module */

struct ir_module {
    ap_arena arena;
    ir_op *top;           /* the builtin.module op */
    const char *filename; /* for messages; arena copy */
    const char *file_metadata; /* `{-# ... #-}` section as written, or NULL */
    /* `#name = ...` / `!name = ...` definitions as written, one per line,
     * of the aliases that ops kept as text name (the printer writes them
     * first); NULL when none */
    const char *alias_defs;
    struct ir_module_impl *impl; /* intern tables: private */
};

/* Creates an empty module (a builtin.module op with one empty block).
 * Returns NULL when out of memory.  Free with ir_module_free. */
ir_module *ir_module_new(const char *filename);

/* Copies into dst (its arena) the text src keeps beside its ops: the alias
 * definitions that opaque ops name and the `{-# ... #-}` section (dialect
 * resources), so that a module built from src's ops prints text that parses.
 * Returns 0, or -1 when out of memory (dst unchanged). */
int ir_module_copy_text(ir_module *dst, const ir_module *src);
void ir_module_free(ir_module *m);
/* Bytes the module holds (arena and tables), for memory reports. */
size_t ir_module_bytes(const ir_module *m);


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


/* ============================================================== printer */

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
 * kept (they print back).  Fails with AP_EUNSUPPORTED on recursion, and
 * with AP_ELIMIT (at the function's position, before anything changes) when
 * the function would grow past a million ops, or twice the ops written in
 * the module when that is more (nested calls grow exponentially). */
int ir_inline_calls(ir_module *m, ir_op *func, ap_error *err);
/* The calls in func's body (its regions included, not its callees') that
 * ir_inline_calls would inline: when non-zero the function partitioned is
 * not the function as written, and its values number otherwise (%N). */
uint32_t ir_inline_count(const ir_module *m, const ir_op *func);

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

/* cuDNN's fused attention as JAX emits it (jax.nn.dot_product_attention(
 * implementation='cudnn'), layout BTNH):
 *   __cudnn$fmhaSoftmax(q, k, v) -> (out, stats, workspace): q [b, s, h, d],
 *     k and v [b, t, kv, d] (kv divides h: query heads grouped over the
 *     key/value heads), out [b, h, s, d], stats [b, h, s] f32 (the
 *     log-sum-exp of each row of scale * q k^T), workspace [0] ui8;
 *   __cudnn$fmhaSoftmaxBackward(q, k, v, stats, d_out, out) -> (dq, dk, dv,
 *     workspace): d_out and out [b, s, h, d], dq [b, h, s, d], dk and dv
 *     [b, kv, t, d].
 * The backend_config JSON holds the scale and the mask (CAUSAL: row i sees
 * columns j <= i; NO_MASK). */
enum { IR_FMHA_NONE = 0, IR_FMHA_FWD = 1, IR_FMHA_BWD = 2 };
typedef struct ir_fmha {
    int kind;    /* IR_FMHA_FWD or IR_FMHA_BWD */
    double scale;
    bool causal;
} ir_fmha;
/* IR_FMHA_FWD / _BWD by the custom call's target name, else IR_FMHA_NONE. */
int ir_fmha_kind(const ir_op *op);
/* Reads op's kind, scale and mask: 0, or AP_EINVALID (not one, no or bad
 * backend_config) / AP_EUNSUPPORTED (dropout, other masks) with err. */
int ir_fmha_get(const ir_op *op, ir_fmha *out, ap_error *err);

/* ================================================================= meshes */

/* A device mesh: ordered named axes with sizes.  Device ids are row-major
 * over the axes (the last axis varies fastest).  Every mesh is held to one
 * set of limits where it is made (ir_mesh_parse, ir_mesh_init), so one that
 * is accepted can be partitioned and lowered. */
#define IR_MAX_AXES 8              /* axes of a mesh */
#define IR_MESH_NAME_MAX 24        /* characters of an axis name */
#define IR_MESH_MAX_DEVICES 65536  /* devices of a mesh */
/* The redistribution works on the prime factors of a mesh's axes, as a mesh
 * of up to IR_MESH_MAX_FACTORS axes named after them ("x1", "x_2", ...);
 * only such meshes exceed IR_MAX_AXES. */
#define IR_MESH_MAX_FACTORS 32
#define IR_MESH_NAME_SIZE 32       /* bytes of a stored name, factor suffix and NUL included */

typedef struct ir_mesh {
    int n_axes;
    char names[IR_MESH_MAX_FACTORS][IR_MESH_NAME_SIZE];
    int64_t sizes[IR_MESH_MAX_FACTORS];
} ir_mesh;

/* Fills *out from n_axes names and sizes (copied; no axes: one device).
 * AP_EINVALID for more than IR_MAX_AXES, an empty, too long or repeated
 * name, a name
 * holding '"' or a control character, a size below 1; AP_ELIMIT for more
 * than IR_MESH_MAX_DEVICES devices.  The message names the axis. */
int ir_mesh_init(ir_mesh *out, int n_axes, const char *const *names, const int64_t *sizes, ap_error *err);
/* "batch=4,model=2", also "batch:4, model:2", "{x:4, y:6}" and quoted names
 * ("\"data parallel\"=4"), with the checks of ir_mesh_init; AP_ESYNTAX
 * naming the column on malformed text. */
int ir_mesh_parse(const char *text, ir_mesh *out, ap_error *err);
int ir_mesh_axis(const ir_mesh *m, const char *name, size_t len); /* -1 if absent */
int64_t ir_mesh_devices(const ir_mesh *m);
/* "batch=4,model=2" (names quoted when they need it), read back by
 * ir_mesh_parse. */
void ir_mesh_format(const ir_mesh *m, ap_buf *b);

#endif /* IR_H */
