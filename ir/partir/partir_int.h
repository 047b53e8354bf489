/*
 * partir_int.h - private to the PartIR core (tmr.c, context.c, partition.c,
 * propagate.c, schedule.c, lower.c, loops.c): the partition context (ops, values, uses,
 * TMR entries) and the state arrays.
 */
#ifndef PARTIR_INT_H
#define PARTIR_INT_H

#ifndef AP_IR_PARTIR
#error "partir_int.h is private to PartIR (ir/partir/*.c): use partir.h"
#endif

#include "ir_build.h"
#include "partir.h"

#include <string.h>

/* ------------------------------------------------------------------ TMR */

/* Operand specs of a TMR entry. */
#define SP_NONE (-1)    /* the operand is needed whole along the loop's axis */
#define SP_PARTIAL (-2) /* the operand is taken as a pending partial sum */
/* (>= 0: the operand is sliced on that dim) */
/* Result actions of a TMR entry. */
#define SP_SUM (-2) /* partial results are combined with the entry's reduction */
#define SP_ANY (-3) /* replicated: every iteration computes the same (atomic) */
/* (>= 0: tile<d>, the result is stacked along that dim) */

/* An entry's specs are read for every loop of every nest a propagation
 * visit, a plan sync or an op record looks at.  Those of an entry with at
 * most TMR_INLINE of them sit in the entry itself, in the cache line its
 * offset was read from: one load after the nest's, not two (the entry's
 * pool offset, then the pool's line).  The others follow the entries in
 * the same block, so that the offset from the block's start finds either
 * without a test (ir__tmr_build's end lays them out). */
#define TMR_INLINE 11
typedef struct tmr_entry {
    uint32_t spec; /* offset of its specs from the start of c->entries: operand specs, then
                      result actions (while ir__tmr_build runs: in the pool) */
    uint8_t red;   /* ir_red of SUM results and PARTIAL operands */
    int8_t s[TMR_INLINE]; /* the specs, when they fit */
} tmr_entry;
_Static_assert(sizeof(tmr_entry) == 16, "four entries to a cache line, none across two");

/* ---------------------------------------------------------------- context */

#define VAL_NONE UINT32_MAX
#define USE_RETURN UINT32_MAX

struct ir_pctx {
    ir_module *m;
    ir_op *func;
    ir_mesh mesh;
    size_t room;            /* nest_room: the loops a nest has room for (read for every nest looked at) */
    uint32_t n_args;
    uint32_t n_ops;         /* top-level ops of the body, without the return */
    ir_op **ops;
    ir_op *ret;             /* the func.return */
    /* values: arguments first, then the results of each op */
    uint32_t n_vals;
    const ir_value **vals;
    const ir_type **vtype;  /* vals[v]->type, flat: read on every visit,
                               where the values themselves lie scattered */
    int32_t *val_op;        /* producing op, -1 for an argument */
    uint32_t *op_val0;      /* first value of each op's results */
    uint32_t *printed_max;  /* per op: the most its results' printed %N can
                               be (every op inside earlier regions counted) */
    /* operands as value ids */
    uint32_t *opd0;         /* n_ops + 1 */
    uint32_t *opd_val;
    uint32_t *ret_val;      /* value of each returned operand */
    uint32_t n_ret;
    /* uses: CSR over values; use_op USE_RETURN for the return */
    uint32_t *use0;
    uint32_t *use_op, *use_idx;
    /* values the regions of an op run whole (a reduce body, a case not
     * flattened) read: per op, CSR, in the order the lowering's cloner
     * meets them, each once (a use of its own in the lowering plan,
     * plan.c, not in use0); and per value, 1 when some op's regions read
     * it */
    uint32_t *cap0, *cap_val;
    uint8_t *val_captured;
    /* results that must come back in an argument's layout (tf.aliasing_output) */
    int32_t *ret_alias_arg; /* per returned value: argument index or -1 */
    /* TMR */
    uint32_t *tmr0;         /* per op: entries [tmr0[i], tmr0[i+1]) */
    tmr_entry *entries;
    uint32_t n_entries;
    int8_t *pool;           /* specs while ir__tmr_build runs (then NULL: tmr_spec) */
    uint32_t n_pool;
    /* identity entries for tiling/atomic ops on values, by rank */
    uint32_t id_rank_max;
    uint32_t *id0;          /* id_rank_max + 2: entries of rank r at [id0[r], id0[r+1]) */
    uint32_t any_entry;     /* the atomic entry (NONE) -> ANY */
    uint32_t *entry_div;    /* per entry: a divisor of every static dim its specs slice or tile
                               (their gcd when it fits), 0 when one is dynamic, none is, or the
                               entry is an identity op's: propagation's divisibility shortcut
                               (tmr.c, propagate.c's entry_divisible) */
    ir_ptrmap val_index;    /* ir_value* -> value id (aliases included: a
                               get_tuple_element of a tuple the context sees
                               through, a loop's block argument) */
    /* control flow (context.c's header): ops are listed in pre-order,
     * the ops of a flattened while's regions after its carry ops, a
     * case's branches between its index and its merge ops; everything
     * else holding regions is one op, run whole */
    uint8_t *op_kind;       /* PK_* per op */
    uint32_t *op_scope;     /* per op: the region it runs in (0: the function) */
    uint32_t *scope_parent; /* per scope: the enclosing scope (0 for 0) */
    uint32_t n_scopes;
    struct pgroup *groups;  /* the flattened whiles and cases, in op order */
    struct pbranch *branches;
    uint32_t n_groups;
    int32_t *op_group;      /* per op: its group for PK_CARRY / PK_CONDRET, else -1 */
    uint32_t *carry_layer;  /* per op: for PK_CARRY, the dims (bit mask) the
                               body reads or writes one slice at a time with
                               dynamic_slice / dynamic_update_slice (the
                               layer dim of a stacked weight): never tiled */
    uint32_t *val_loopdims; /* per value: dims that are a loop's layer dim
                               (carried, or elementwise-tied to one) */
    ir_module *scratch;     /* the carry ops live here */
    ir_ptrmap op_index;     /* source op -> its op index (skipped ops: the next one's) */
};

/* Kinds of ops in the context. */
enum {
    PK_OP = 0,  /* an op of the function (maybe holding regions it runs whole) */
    PK_CARRY,   /* carried value #i of a flattened while: operands (init,
                   yield), results (body argument, cond argument, result),
                   one layout for all */
    PK_CONDRET, /* the condition's predicate: needed whole */
    PK_CASEIDX, /* a flattened case's index (if's predicate): needed whole */
    PK_MERGE,   /* result #j of a flattened case: operands the branches'
                   yields, result the case's result; one layout for all */
    PK_BARRIER, /* operand #i of an optimization_barrier: an identity; the
                   group's ops lower to one barrier */
};

/* A while whose regions are partitioned with the function (ops
 * [carry0, body_end)): carry ops, the condition's ops and its PK_CONDRET,
 * the body's ops.  tuple_form: HLO's while over one tuple, lowered as the
 * variadic while it means. */
typedef struct pbranch {
    uint32_t begin, end, scope;
} pbranch;

typedef struct pgroup {
    ir_op *src;
    bool is_barrier; /* an optimization_barrier: n PK_BARRIER ops from carry0 */
    bool is_case;   /* a case / if: [carry0] its PK_CASEIDX, then each
                       branch's ops (branches[br0 ...]), then n PK_MERGE
                       ops from merge0 to body_end */
    uint32_t br0, n_br, merge0;
    uint32_t carry0, n;
    uint32_t cond0, cond_end; /* cond_end - 1 is the PK_CONDRET */
    uint32_t body0, body_end;
    uint32_t scope_cond, scope_body;
    bool tuple_form;
} pgroup;

/* The carry op whose loop steps through dim `dim` of value v (v enters,
 * is yielded as, or is that carried value), -1 none. */
int32_t ir__loop_dim_op(const ir_pctx *c, uint32_t v, int dim);

/* Does scope `outer` enclose (or equal) scope `inner`? */
static inline bool ir__scope_encloses(const ir_pctx *c, uint32_t outer, uint32_t inner)
{
    for (;;) {
        if (inner == outer)
            return true;
        if (inner == 0)
            return false;
        inner = c->scope_parent[inner];
    }
}

int ir__tmr_build(ir_pctx *c, ap_error *err);
/* Specs of entry e: n_operands operand specs followed by n_results actions. */
static inline const int8_t *tmr_spec(const ir_pctx *c, uint32_t e) { return (const int8_t *)c->entries + c->entries[e].spec; }

uint32_t ir__value_id(const ir_pctx *c, const ir_value *v); /* VAL_NONE if not in the function */

/* The identity entries of rank r start at id0[r]: tile<d> for d < r, then
 * one (partial) -> sum entry per reduction, IR_RED_ADD to IR_RED_OR. */
static inline uint32_t ir__id_partial_entry(const ir_pctx *c, uint32_t rank, ir_red red)
{
    return c->id0[rank] + rank + (uint32_t)(red - IR_RED_ADD);
}

/* ------------------------------------------------------------------ state */

/* A loop of an op's nest.  spec: its entry's first LOOP_SPECS specs
 * (tmr_spec(ctx, entry)[0..2]; past the entry's own, zero), copied in by
 * ir__push_loop: most ops have at most three slots, so a look at a nest
 * (nest_layout, loop_spec) reads them from the nest's own line, not from
 * the entry's, a line per op the state's nests do not share.  A function of
 * entry: compared, hashed and copied with it, never on its own. */
#define LOOP_SPECS 3
typedef struct ir_loop {
    uint8_t axis;
    int8_t spec[LOOP_SPECS];
    uint32_t entry;
} ir_loop;

/* An identity op on an intermediate value (or an argument, for atomic):
 * its users see its result; its operand is the value itself. */
typedef struct vop {
    uint32_t val;
    uint32_t rank;
} vop;

typedef struct action_rec {
    char kind;     /* 't' tile, 'a' atomic, 'p' propagate */
    uint32_t val;
    int dim, axis;
} action_rec;

/* ir_partition_clone and ir_partition_copy copy every field: a new field
 * goes into both. */
struct ir_partition {
    const ir_pctx *ctx;
    /* loop nests: real ops 0..n_ops-1, then virtual ops */
    uint8_t *nlen;
    ir_loop *nest; /* nest_room(ctx) per op */
    uint8_t *pending; /* per op: touched by an action since the last propagate */
    uint8_t *inert;   /* per op: the axes (bit a for mesh axis a) along which it is inert: its
                         last look found no operand tiled or summed along the axis and no user
                         slicing it along it (ir_propagate); a clear bit says nothing */
    uint32_t cap_ops;
    ir_layout *arg_layout;
    int32_t *vop_of; /* per value: virtual op index (not op id) or -1 */
    vop *vops;
    uint32_t n_vops;
    ir_blocked *blocked;
    uint32_t n_blocked, cap_blocked;
    action_rec *log;
    uint32_t n_log, cap_log;
    /* axes of the actions since the last propagate, in the order the actions
     * named them: the next propagate runs them in that order (then the other
     * axes in mesh order), so that tiling along a then b and propagating once
     * gives what propagating after each tiling gives */
    uint8_t axis_seq[IR_MAX_AXES];
    uint8_t n_axis_seq;
    bool quiet; /* propagation records nothing blocked (ir_partition_set_diagnostics) */
    uint64_t hash; /* ir_partition_hash: the sum of the state's facts' terms (state_hash_*),
                      kept up by every change of a nest, an argument's tiling or the
                      identity ops (ir__push_loop, ir__arg_layout_set, get_vop) */
};

/* Op ids of virtual ops follow the real ops. */
static inline uint32_t vop_id(const ir_partition *p, uint32_t k) { return p->ctx->n_ops + k; }

/* Global type of value v. */
static inline const ir_type *val_type(const ir_pctx *c, uint32_t v) { return c->vtype[v]; }

/* ------------------------------------------------------- op addressing
 * The ops of a state: the context's ops, then the state's identity ops. */

static inline uint32_t n_all_ops(const ir_partition *p) { return p->ctx->n_ops + p->n_vops; }

static inline bool is_vop(const ir_partition *p, uint32_t op) { return op >= p->ctx->n_ops; }

static inline uint32_t op_n_operands(const ir_partition *p, uint32_t op)
{
    /* from the context's operand table: no trip to the op itself */
    return is_vop(p, op) ? 1 : p->ctx->opd0[op + 1] - p->ctx->opd0[op];
}

static inline uint32_t op_n_results(const ir_partition *p, uint32_t op)
{
    return is_vop(p, op) ? 1 : p->ctx->op_val0[op + 1] - p->ctx->op_val0[op];
}

static inline uint32_t operand_val(const ir_partition *p, uint32_t op, uint32_t i)
{
    return is_vop(p, op) ? p->vops[op - p->ctx->n_ops].val : p->ctx->opd_val[p->ctx->opd0[op] + i];
}

/* Global type of result j of an op. */
static inline const ir_type *result_type(const ir_partition *p, uint32_t op, uint32_t j)
{
    if (is_vop(p, op))
        return val_type(p->ctx, p->vops[op - p->ctx->n_ops].val);
    return val_type(p->ctx, p->ctx->op_val0[op] + j);
}

static inline const ir_type *operand_type(const ir_partition *p, uint32_t op, uint32_t i)
{
    return val_type(p->ctx, operand_val(p, op, i));
}

/* Entries of an op: [*lo, *hi). */
static inline void op_entries(const ir_partition *p, uint32_t op, uint32_t *lo, uint32_t *hi)
{
    const ir_pctx *c = p->ctx;
    if (!is_vop(p, op)) {
        *lo = c->tmr0[op];
        *hi = c->tmr0[op + 1];
        return;
    }
    const ir_type *t = val_type(c, p->vops[op - c->n_ops].val);
    uint32_t r = t && t->kind == IR_T_TENSOR && t->rank >= 0 ? (uint32_t)t->rank : 0;
    if (r > c->id_rank_max)
        r = c->id_rank_max;
    *lo = c->id0[r];
    *hi = c->id0[r + 1];
}

/* Loops an op's nest has room for: one per mesh axis (an op loops over an
 * axis at most once).  The nests are copied with every state, so they take
 * no room for axes the mesh does not have. */
static inline size_t nest_room(const ir_pctx *c) { return c->room; }

static inline const ir_loop *nest_of(const ir_partition *p, uint32_t op) { return &p->nest[(size_t)op * nest_room(p->ctx)]; }

static inline int nest_find(const ir_partition *p, uint32_t op, int axis)
{
    const ir_loop *n = nest_of(p, op);
    for (int k = 0; k < p->nlen[op]; k++)
        if (n[k].axis == axis)
            return k;
    return -1;
}

/* Spec of slot `slot` of loop l's entry (tmr_spec(c, l->entry)[slot]). */
static inline int8_t loop_spec(const ir_pctx *c, const ir_loop *l, uint32_t slot)
{
    return slot < LOOP_SPECS ? l->spec[slot] : tmr_spec(c, l->entry)[slot];
}

/* ---------------------------------------------------------------- layouts
 * Made millions of times a search (every propagation visit, every use the
 * lowering plan looks at, every op record): inline, and copied from a
 * constant rather than built axis by axis.  ir_layout_init, ir_layout_equal,
 * ir_layout_push and ir_layout_dim_axes are these for the other libraries. */

static inline void layout_init(ir_layout *l)
{
    memset(l->dim, 0xff, sizeof l->dim); /* IR_AX_NONE */
    memset(l->pos, 0, sizeof l->pos);
    memset(l->red, 0, sizeof l->red);
}

/* Same tiling, positions and pending sums: the dims of all axes at once,
 * then positions and reductions only where they mean something (a layout
 * made from a nest has zeros elsewhere, so most equal pairs are equal
 * byte for byte). */
static inline bool layout_equal(const ir_layout *a, const ir_layout *b)
{
    if (!memcmp(a, b, sizeof *a))
        return true;
    if (memcmp(a->dim, b->dim, sizeof a->dim) != 0)
        return false;
    for (int x = 0; x < IR_MAX_AXES; x++) {
        if (a->dim[x] >= 0 && a->pos[x] != b->pos[x])
            return false;
        if (a->dim[x] == IR_AX_PARTIAL && a->red[x] != b->red[x])
            return false;
    }
    return true;
}

/* The axes whose dim is d, as the high bit of byte a for axis a: the eight
 * dims compared in one word (a zero byte of dim ^ d, found without a
 * borrow crossing bytes), not axis by axis - layout_push and
 * layout_dim_axes run for every layout a propagation visit, a plan sync
 * or an op record builds.  A d no int8_t holds matches no axis. */
_Static_assert(IR_MAX_AXES == 8 && sizeof(((ir_layout *)0)->dim) == 8, "one word holds a layout's dims");
static inline uint64_t layout_dim_match(const ir_layout *l, int d)
{
    if (d != (int8_t)d)
        return 0;
    uint64_t w;
    memcpy(&w, l->dim, sizeof w);
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    uint64_t x = w ^ (0x0101010101010101ULL * (uint8_t)(int8_t)d);
    return ~(((x & low7) + low7) | x | low7);
}

/* The axis of the lowest byte set in a layout_dim_match word (bytes in
 * memory order: byte a of the word is dim[a]). */
static inline int layout_match_axis(uint64_t m)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_clzll(m) >> 3;
#else
    return __builtin_ctzll(m) >> 3;
#endif
}

/* The lowest byte's bit taken out of a layout_dim_match word. */
static inline uint64_t layout_match_next(uint64_t m)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return m & ~(0x8000000000000000ULL >> __builtin_clzll(m));
#else
    return m & (m - 1);
#endif
}

/* The axes in a layout_dim_match word: its bytes (0 or 1 once shifted)
 * summed into the top byte by one multiply (no popcount instruction on the
 * build's baseline x86-64: __builtin_popcountll would be a libgcc call). */
static inline int layout_match_count(uint64_t m) { return (int)(((m >> 7) * 0x0101010101010101ULL) >> 56); }

/* Axis as the minor-most axis of dim d. */
static inline void layout_push(ir_layout *l, int axis, int d)
{
    int n = layout_match_count(layout_dim_match(l, d));
    l->dim[axis] = (int8_t)d;
    l->pos[axis] = (uint8_t)n;
}

/* The axes tiling dim d, major to minor; returns the count. */
static inline int layout_dim_axes(const ir_layout *l, int d, int *axes)
{
    /* one pass over the axes of d (in axis order): each by its position,
     * then those within the count (a well-formed layout numbers its axes
     * of d 0 .. n-1) */
    uint64_t m = layout_dim_match(l, d);
    if (!m)
        return 0;
    int n = layout_match_count(m), at[IR_MAX_AXES];
    unsigned seen = 0;
    for (; m; m = layout_match_next(m)) {
        int a = layout_match_axis(m);
        if (l->pos[a] < IR_MAX_AXES) {
            at[l->pos[a]] = a;
            seen |= 1u << l->pos[a];
        }
    }
    for (int i = 0; i < n; i++)
        if (seen & (1u << i))
            axes[i] = at[i];
    return n;
}

/* Layout of slot `slot` of op `op` (real or virtual) from its nest: an
 * operand's as the op needs it (SP_PARTIAL: taken as a pending sum), a
 * result's (slot past the operands) as the op produces it (SP_SUM: left
 * as one; the same spec). */
_Static_assert(SP_PARTIAL == SP_SUM, "nest_layout reads one spec for both");
_Static_assert(sizeof(((ir_layout *)0)->pos) == 8 && sizeof(((ir_layout *)0)->red) == 8, "a word per field");

/* The shift of byte a of a layout field read as one word (byte a in
 * memory: layout_dim_match's order). */
static inline unsigned layout_byte_shift(int a)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return 56 - 8 * (unsigned)a;
#else
    return 8 * (unsigned)a;
#endif
}

/* Word w with byte a set to b. */
static inline uint64_t layout_byte_set(uint64_t w, int a, uint8_t b)
{
    unsigned sh = layout_byte_shift(a);
    return (w & ~((uint64_t)0xff << sh)) | (uint64_t)b << sh;
}

/* What layout_init then layout_push per tiling loop give, built in three
 * words and stored once: the byte stores of layout_push, each followed by a
 * word load of the same bytes (the next push's, layout_equal's), would
 * each wait for the store to reach the cache instead of being forwarded
 * (a plan sync and a propagation visit build layouts by the million). */
static inline void nest_layout(const ir_partition *p, uint32_t op, uint32_t slot, ir_layout *out)
{
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    uint64_t dim = ~(uint64_t)0, pos = 0, red = 0; /* IR_AX_NONE everywhere */
    const ir_loop *n = nest_of(p, op);
    for (int k = 0; k < p->nlen[op]; k++) {
        int8_t s = loop_spec(p->ctx, &n[k], slot);
        if (s >= 0) {
            /* layout_push: the place after the axes already tiling dim s */
            uint64_t x = dim ^ (0x0101010101010101ULL * (uint8_t)s);
            int at = layout_match_count(~(((x & low7) + low7) | x | low7));
            dim = layout_byte_set(dim, n[k].axis, (uint8_t)s);
            pos = layout_byte_set(pos, n[k].axis, (uint8_t)at);
        } else if (s == SP_PARTIAL) {
            dim = layout_byte_set(dim, n[k].axis, (uint8_t)IR_AX_PARTIAL);
            red = layout_byte_set(red, n[k].axis, p->ctx->entries[n[k].entry].red);
        }
    }
    memcpy(out->dim, &dim, sizeof dim);
    memcpy(out->pos, &pos, sizeof pos);
    memcpy(out->red, &red, sizeof red);
}

/* Needed layout of operand i of op `op` (real or virtual) from its nest. */
static inline void ir__needed_layout(const ir_partition *p, uint32_t op, uint32_t i, ir_layout *out)
{
    nest_layout(p, op, i, out);
}

/* Layout of result j of op `op` (real or virtual). */
static inline void ir__result_layout(const ir_partition *p, uint32_t op, uint32_t j, ir_layout *out)
{
    nest_layout(p, op, op_n_operands(p, op) + j, out);
}

/* Layout of value v as produced (argument tiling or producer's nest). */
static inline void ir__produced_layout(const ir_partition *p, uint32_t v, ir_layout *out)
{
    const ir_pctx *c = p->ctx;
    if (c->val_op[v] < 0) {
        *out = p->arg_layout[v];
        return;
    }
    uint32_t op = (uint32_t)c->val_op[v];
    ir__result_layout(p, op, v - c->op_val0[op], out);
}

/* Layout of value v as seen by its users (through its virtual op). */
static inline void ir__seen_layout(const ir_partition *p, uint32_t v, ir_layout *out)
{
    if (p->vop_of[v] >= 0)
        ir__result_layout(p, vop_id(p, (uint32_t)p->vop_of[v]), 0, out);
    else
        ir__produced_layout(p, v, out);
}

/* Local size of dim d of a global type under a layout, -1 when dynamic. */
static inline int64_t local_dim(const ir_pctx *c, const ir_type *t, const ir_layout *l, int d)
{
    if (!t || t->kind != IR_T_TENSOR || d >= t->rank || t->dims[d] < 0)
        return -1;
    int64_t n = t->dims[d];
    for (int a = 0; a < c->mesh.n_axes; a++)
        if (l->dim[a] == d)
            n /= c->mesh.sizes[a];
    return n;
}

/* ---------------------------------------------------------------- hash
 * A state is a set of facts: loop #i of real op k's nest is (axis, entry);
 * value v has an identity op, and its loop #i is (axis, entry); argument
 * a is tiled (or a pending sum) along an axis, as (dim, position or
 * reduction).  ir_partition_hash is the sum (mod 2^64) of one well-mixed
 * term per fact, so it is kept up as the state changes: a new loop adds
 * its term, a new tiling of an argument swaps the argument's terms.  Equal
 * states hold the same facts and so hash equal, whatever the order of the
 * actions that made them (the search's transposition table needs no more:
 * it compares hashes for equality only), and reading the hash costs
 * nothing where a walk over every nest cost one multiply chain per op. */

enum { HASH_OP_LOOP = 1, HASH_VOP = 2, HASH_VOP_LOOP = 3, HASH_ARG = 4 };

/* A bijective 64-bit mixer (splitmix64's finalizer). */
static inline uint64_t state_hash_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The term of a fact: what it is about (kind, id, place: key) and what it
 * says (val). */
static inline uint64_t state_hash_term(int kind, uint32_t id, uint32_t place, uint64_t val)
{
    uint64_t key = (uint64_t)kind << 48 | (uint64_t)id << 8 | place;
    return state_hash_mix(state_hash_mix(key) + val);
}

/* The term of loop #i of op's nest (an identity op's by its value). */
static inline uint64_t state_hash_loop(const ir_partition *p, uint32_t op, uint32_t i, const ir_loop *l)
{
    uint64_t val = (uint64_t)l->axis << 32 | l->entry;
    if (op < p->ctx->n_ops)
        return state_hash_term(HASH_OP_LOOP, op, i, val);
    return state_hash_term(HASH_VOP_LOOP, p->vops[op - p->ctx->n_ops].val, i, val);
}

/* The terms of argument a's tiling l: one per axis it says something
 * about (the position where the axis tiles, the reduction where it sums:
 * what layout_equal compares). */
static inline uint64_t state_hash_arg(uint32_t a, const ir_layout *l)
{
    uint64_t h = 0;
    for (int x = 0; x < IR_MAX_AXES; x++)
        if (l->dim[x] != IR_AX_NONE)
            h += state_hash_term(HASH_ARG, a, (uint32_t)x,
                                 (uint64_t)(uint8_t)l->dim[x] << 8 | (l->dim[x] >= 0 ? l->pos[x] : l->red[x]));
    return h;
}

/* Sets argument a's tiling (the hash follows). */
static inline void ir__arg_layout_set(ir_partition *p, uint32_t a, const ir_layout *l)
{
    p->hash += state_hash_arg(a, l) - state_hash_arg(a, &p->arg_layout[a]);
    p->arg_layout[a] = *l;
}

/* Adds axis to argument a's tiling as the minor-most axis of dim d. */
static inline void ir__arg_layout_push(ir_partition *p, uint32_t a, int axis, int d)
{
    ir_layout l = p->arg_layout[a];
    layout_push(&l, axis, d);
    ir__arg_layout_set(p, a, &l);
}

/* Appends a loop over axis with TMR entry e to op's nest; false when the
 * nest is full. */
static inline bool ir__push_loop(ir_partition *p, uint32_t op, int axis, uint32_t e)
{
    if (p->nlen[op] >= nest_room(p->ctx))
        return false;
    ir_loop *n = &p->nest[(size_t)op * nest_room(p->ctx) + p->nlen[op]];
    n->axis = (uint8_t)axis;
    memcpy(n->spec, tmr_spec(p->ctx, e), LOOP_SPECS); /* an entry's specs are at least 11 bytes */
    n->entry = e;
    p->hash += state_hash_loop(p, op, p->nlen[op], n);
    p->nlen[op]++;
    return true;
}

/* Appends an action to the state's log (ir_partition_schedule). */
void ir__log_action(ir_partition *p, char kind, uint32_t val, int dim, int axis);

/* Slice limits / slice sizes of dims tiled in the first operand become
 * local (lower.c; used by the temporal view too). */
bool ir__localize_attrs(ir_module *m, ir_op *op, const ir_layout *in0);

#endif /* PARTIR_INT_H */
