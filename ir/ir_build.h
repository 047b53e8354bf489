/*
 * ir_build.h - making and copying IR, for the libraries of ir/ that produce
 * it or read its raw element data: the parsers (ir/parse), the SPMD
 * lowering and the loop view (ir/partir), the interpreter and the check
 * (ir/interp, ir/check).  The constructors of types, attributes, ops and
 * blocks; copying ops, attributes, types and locations into a module; the
 * element codecs of dense data; a pointer map; a cursor for one-line
 * texts.
 *
 * Code above ir/ (the cost model, the search, the service, the tools)
 * reads IR through ir.h and never builds it.  What the files of the core
 * share among themselves is ir_int.h, which nothing else can include.
 *
 * Names with a double underscore are the core's helpers that these
 * libraries also use.
 */
#ifndef IR_BUILD_H
#define IR_BUILD_H

#include "ir.h"

#include <string.h>

/* ================================================================= types */

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
/* The part type of a complex tensor type (complex<f32> -> f32), NULL if t
 * is not one (or out of memory). */
const ir_type *ir__complex_part_type(ir_module *m, const ir_type *t);

/* ============================================================ attributes */

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

/* Returns the module's one attribute equal to key (children must already be
 * uniqued).  key_in_arena: key was allocated in m's arena and becomes the
 * canonical copy when new; otherwise a new key is copied into the arena.
 * For builders that fill an ir_attr themselves (dense data). */
ir_attr *ir__attr_intern(ir_module *m, ir_attr *key, bool key_in_arena);
/* Sorts named attributes by name (stable for equal names). */
void ir__sort_named(ir_named_attr *items, int n);

/* ================================================== strings, allocation */

/* Interns a string in the module: equal strings give one pointer. */
const char *ir_intern(ir_module *m, const char *s, size_t len);
/* Strings and types the module has interned so far (it only grows): a
 * builder that rewinds the arena after making something it did not keep
 * may do so only when this did not change, as an interned object may point
 * into what it rewinds. */
size_t ir__interned_count(const ir_module *m);

/* Memory in the module's arena, freed with the module. */
static inline void *ir__alloc(ir_module *m, size_t n) { return ap_arena_alloc(&m->arena, n); }
static inline void *ir__zalloc(ir_module *m, size_t n) { return ap_arena_zalloc(&m->arena, n); }

/* Length of a string returned by ir_intern, without strlen (it is stored
 * before the characters). */
static inline uint32_t ir__intern_len(const char *s)
{
    uint32_t n;
    memcpy(&n, s - sizeof n, sizeof n);
    return n;
}

/* UTF-8 validity of [p, p+n): returns the first bad byte or NULL. */
const char *ir__utf8_invalid(const char *p, size_t n);

/* =================================================================== ops */

/* Looks up a registered op by full name ("stablehlo.add"); IR_OP_UNKNOWN if
 * absent. */
ir_opcode ir_opcode_lookup(const char *name, size_t len);

/* Sets (adds or replaces) an attribute of a registered op. */
int ir_op_set_attr(ir_module *m, ir_op *op, const char *name, ir_attr *value);

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

/* The pretty forms of registered ops (ir_op_info.fmt). */
#include "ir_forms.h"

/* The value the canonical printer names %N (result k) in func, or NULL. */
const ir_value *ir__printed_value(const ir_op *func, uint32_t n, uint32_t k);
/* The number N the canonical printer names the results of each of ops[0..n)
 * in func (%N, or %N#k for result k), -1 for an op it does not number;
 * one printing for all.  AP_ENOMEM when out of memory. */
int ir__printed_numbers(const ir_op *func, const ir_op *const *ops, uint32_t n, int64_t *out);

/* ================================================================ copying */

/* Deep copies into module m (of objects of another module, or of m). */
ir_attr *ir__attr_clone(ir_module *m, const ir_attr *a);
const ir_type *ir__type_clone(ir_module *m, const ir_type *t);
const ir_loc *ir__loc_clone(ir_module *m, const ir_loc *l);

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

/* --------------------------------------------------------- copying ops */

typedef struct ir_cloner {
    ir_module *dst;
    ir_ptrmap map; /* source value -> index into tab */
    ir_value **tab;
    uint32_t n, cap;
    /* values not in the map (captured from outside what is cloned) */
    ir_value *(*resolve)(void *ctx, const ir_value *v);
    void *resolve_ctx;
    const ir_value *failed_value; /* the operand nothing could resolve */
    bool oom;
} ir_cloner;

void ir__cloner_init(ir_cloner *c, ir_module *dst);
void ir__cloner_free(ir_cloner *c);
/* Copies src (and its regions) into c->dst, detached.  Operands come from
 * `operands` when given, else from the map; result types from
 * `result_types` when given, else copies of src's.  Its results are added to
 * the map.  NULL on failure (c->oom, or c->failed_value unresolved). */
ir_op *ir__clone_op(ir_cloner *c, const ir_op *src, ir_value *const *operands, const ir_type *const *result_types);
/* Copies into dst, as written, every function that a func.call (or a
 * stablehlo.composite) in `r` names and dst lacks, found in src, and in turn
 * what those call.  The inliner leaves such calls when the callee has
 * several blocks (a cf.br loop, as the XLA HLO importer writes them) or no
 * body; a program made from r in dst does not verify without them.  The
 * functions an interpreter.run_parallel names ({programs = [[@f]]}) too.
 * False when out of memory. */
bool ir__clone_callees(ir_module *dst, const ir_module *src, const ir_region *r);
/* Appends to dst's body a copy of every op at the top of src's body that is
 * not a function (sdy.mesh, IREE's util.global, ...): what the functions
 * of a program made from src refer to by symbol.  False when out of
 * memory. */
bool ir__clone_module_decls(ir_module *dst, const ir_module *src);

/* ====================================================== element codecs */

/* bf16 <-> f32: bf16 is the top half of an f32, so widening is exact;
 * narrowing rounds to nearest even (a NaN stays a quiet NaN).  Inline:
 * the interpreter's loads and stores of bf16 elements use them per
 * element (ip_ldf, ip_stf). */
static inline uint16_t ir__f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);        /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static inline float ir__bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Reads a float element of dense data (any float elem) as double. */
double ir__float_load(ir_elem e, const uint8_t *p);
/* Stores v as element type e; returns false if e is not a float type. */
bool ir__float_store(ir_elem e, uint8_t *p, double v);
int64_t ir__int_load(ir_elem e, const uint8_t *p);
void ir__int_store(ir_elem e, uint8_t *p, int64_t v);

/* ============================================= one-line text scanning */

/* A cursor over a one-line text, for the small parsers of the core and
 * partir (meshes, distributions); each reports its own errors. */
typedef struct ir__scanner {
    const char *text, *p;
    ap_error *err;
} ir__scanner;

static inline void ir__skip_space(ir__scanner *s)
{
    while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')
        s->p++;
}

/* Skips spaces, then consumes `c` if it comes next. */
static inline bool ir__scan_char(ir__scanner *s, char c)
{
    ir__skip_space(s);
    if (*s->p != c)
        return false;
    s->p++;
    return true;
}

#endif /* IR_BUILD_H */
