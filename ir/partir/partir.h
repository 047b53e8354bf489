/*
 * partir.h - PartIR on the IR: the op registry's tile-mapping rules (TMR),
 * partition states kept as data, the actions (tile, atomic, propagate),
 * schedules as text, the PartIR:Core loop view and PartIR:Temporal, the
 * SPMD lowering to device-local StableHLO with collectives, and the
 * redistribution synthesis the lowering uses.  See DESIGN.md and
 * docs/partir-semantics.md for what a state means.
 */
#ifndef PARTIR_H
#define PARTIR_H

#include <stdbool.h>
#include <stdint.h>

#include "ap.h"
#include "ir.h"

/* ========================================================= partition state */

/*
 * The partition state of PartIR:Core kept as data (see DESIGN.md and
 * docs/partir-semantics.md): for every op of the partitioned function its
 * loop nest, an ordered list of (mesh axis, TMR entry); for every argument
 * its value tiling; tiling and atomic identity ops on intermediate values.
 * Actions (tile, atomic, propagate) only ever add loops.
 */

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
/* A value of more bytes is refused by ir_pctx_new (AP_ELIMIT): the cost
 * model counts bytes in int64 sums, which such values would overflow. */
#define IR_MAX_VALUE_BYTES ((double)((int64_t)1 << 52))
void ir_pctx_free(ir_pctx *c);
const ir_mesh *ir_pctx_mesh(const ir_pctx *c);
/* Gives the mesh's axes the names of `names` (the same axes and sizes):
 * what was found on placeholder names is then printed with the names it
 * earned.  Fails with AP_EINVALID when the axes or sizes differ. */
int ir_pctx_rename_axes(ir_pctx *c, const ir_mesh *names, ap_error *err);
ir_op *ir_pctx_func(const ir_pctx *c);
ir_module *ir_pctx_module(const ir_pctx *c);
uint32_t ir_pctx_num_ops(const ir_pctx *c);
ir_op *ir_pctx_op(const ir_pctx *c, uint32_t i);
/* The optimization_barrier op k is an operand of: the context holds one
 * identity op per operand (each value keeps its own layout through it),
 * ops *first .. *first + n - 1, which lower to one barrier over them all.
 * Returns n, or 0 when op k is no barrier's. */
uint32_t ir_pctx_barrier(const ir_pctx *c, uint32_t k, uint32_t *first);
/* Is dim `dim` of value v the dim a while loop steps through one slice per
 * iteration (the layer dim of a stacked weight)?  Tiling it is refused:
 * that would pipeline the loop (the search over meshes leaves such dims
 * out of the axis sizes it tries). */
bool ir_pctx_loop_dim(const ir_pctx *c, uint32_t v, int dim);

/* A fresh state (everything replicated) over ctx; free with
 * ir_partition_free.  ir_partition_clone copies a state. */
int ir_partition_new(const ir_pctx *ctx, ir_partition **out, ap_error *err);
int ir_partition_clone(const ir_partition *p, ir_partition **out, ap_error *err);
/* Makes dst (a state over the same ctx) a copy of src, reusing dst's
 * buffers: what a search that copies states thousands of times uses
 * instead of clone + free.  AP_EINVALID for another ctx, AP_ENOMEM (dst
 * is then a valid state, but not a copy). */
int ir_partition_copy(ir_partition *dst, const ir_partition *src, ap_error *err);
void ir_partition_free(ir_partition *p);
const ir_pctx *ir_partition_ctx(const ir_partition *p);

/* The actions.  `v` is a value of the partitioned function (an argument or
 * a result of one of its top-level ops).  tile fails with AP_EINVALID and a
 * message when the dim is out of range, dynamic, not divisible, or the
 * axis is already used by the value; atomic when the value is tiled along
 * the axis or a pending sum along it (actions never undo a decision).  A
 * refused action changes nothing.  The message names the value as
 * schedules do, which for a result asks the printer: pass err = NULL to
 * try actions cheaply. */
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
    char why[320];
} ir_blocked;

/* Blocked propagations recorded so far (latest per op and axis). */
const ir_blocked *ir_partition_blocked(const ir_partition *p, uint32_t *n);
/* Whether propagation records what blocked it (on in a new state; clones
 * and copies keep the setting).  Off, it finds the same state faster (the
 * diagnosis looks again at every op it passes that already loops over the
 * axis): a search turns it off for its candidates and replays the answer
 * with it on. */
void ir_partition_set_diagnostics(ir_partition *p, bool on);

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
/* Whether the schedule glob pat[0..len) matches all of s: '*' any run, '?'
 * one character, anything else itself (how a VALUE of a schedule selects
 * arguments by name). */
bool ir_schedule_glob_match(const char *pat, size_t len, const char *s);

/* Which arguments of func share their location name with another argument
 * (HLO from PyTorch/XLA names every parameter "xla__device_data"): a
 * schedule word names every argument it matches, so such an argument must be
 * written %argN.  Returns an array of ir_func_num_args(func) + 1 flags that
 * the caller frees with ap_free, or NULL when out of memory. */
bool *ir_schedule_shared_arg_names(const ir_op *func);
/* The schedule of a state as text (one action per line), as applied. */
void ir_partition_schedule(const ir_partition *p, ap_buf *b);
/* Reads the sharding annotations on the function's arguments
 * (sdy.sharding, mhlo.sharding) and the sharding constraints in its own
 * body (custom calls @Sharding with an mhlo.sharding and
 * sdy.sharding_constraint, as XLA and Shardy write
 * jax.lax.with_sharding_constraint; not those inside regions: see
 * ir_schedule_import_apply) into a schedule of tile actions over mesh, a
 * constraint's value named %N as `autopart parse` numbers it (appended to
 * b); an sdy sharding with a closed dim (no `?`: it takes no more axes)
 * adds `atomic` along every mesh axis it does not name, which with open
 * dims beside also holds those (atomic is per value, not per dim).
 * Returns the number of actions. */
int ir_schedule_import(const ir_module *m, const ir_op *func, const ir_mesh *mesh, ap_buf *b, ap_error *err);
/* Imports func's annotations as ir_schedule_import does, and also the
 * constraints inside the regions p's context partitions with the function
 * (a while's body and condition, a case's branches: a scan's layers), and
 * applies them to p; returns the number of actions.  An error, of the
 * import or of applying it (a dim the annotation's axes do not divide), is
 * placed at the module's text: an argument's at the function, a
 * constraint's at its op (an error of ir_schedule_import is placed
 * likewise). */
int ir_schedule_import_apply(ir_partition *p, const ir_module *m, const ir_op *func, ap_error *err);
/* The sharding constraints ir_schedule_import_apply does not read: those in
 * regions c runs whole (a reduce, scatter or sort body, a while or case it does not
 * flatten, sdy.manual_computation), whose values no action can name.
 * Returns their number; *first is the first in the text (NULL if none). */
uint32_t ir_schedule_import_skipped(const ir_pctx *c, const ir_op **first);

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

/* ------------------------------------------------------ lowering plan */

/*
 * What the SPMD lowering inserts for a state, decided without building it.
 * For every use of every value of the partitioned function the plan says
 * whether the user takes the value as produced or a copy redistributed to
 * the layout the user needs; each distinct copy (a "materialization") is
 * made once, at its first use, by a transfer: pending sums reduced
 * (all_reduce, or one reduce_scatter), then the tiling changed by the
 * redistribution synthesis below.  ir_lower emits exactly this plan, and the
 * cost model's fast scorer (costmodel/cost.h) counts it, so what is
 * estimated and what is lowered cannot drift apart.
 *
 * A plan follows one state at a time: ir_lplan_sync brings it up to date
 * with a state, redoing only the values whose producer, users or identity
 * op changed since the state it last followed, and says which ops and values
 * changed.  A plan is used by one thread at a time; it owns the
 * redistribution plans it synthesized (memoized by problem).
 */

/* Value ids: the function's arguments first, then the results of each
 * top-level op in order. */
uint32_t ir_pctx_num_values(const ir_pctx *c);
uint32_t ir_pctx_num_args(const ir_pctx *c);
const ir_value *ir_pctx_value(const ir_pctx *c, uint32_t v);
/* ir_pctx_value(c, v)->type from a flat array (v must be a value id) */
const ir_type *ir_pctx_value_type(const ir_pctx *c, uint32_t v);
/* Producing op of value v, -1 for an argument. */
int32_t ir_pctx_value_op(const ir_pctx *c, uint32_t v);
/* Value id of operand i / result j of top-level op k. */
uint32_t ir_pctx_operand_value(const ir_pctx *c, uint32_t k, uint32_t i);
uint32_t ir_pctx_result_value(const ir_pctx *c, uint32_t k, uint32_t j);
/* The returned values. */
uint32_t ir_pctx_num_returns(const ir_pctx *c);
uint32_t ir_pctx_return_value(const ir_pctx *c, uint32_t r);

/* Layout op k needs for operand i, and the layout of its result j. */
void ir_partition_operand_layout(const ir_partition *p, uint32_t k, uint32_t i, ir_layout *out);
void ir_partition_result_layout(const ir_partition *p, uint32_t k, uint32_t j, ir_layout *out);
/* Op k's loop nest as words (a loop's axis and TMR entry each), into out
 * (room for the mesh's axes); returns its length.  Op k's operand and
 * result layouts are a function of these words alone: a cache of what an
 * op's layouts imply can be keyed by them. */
int ir_partition_nest_words(const ir_partition *p, uint32_t k, uint64_t *out);
/* Layout of value v as produced (an argument's tiling, or read off its
 * producer's loop nest), before any tiling or atomic action on it. */
void ir_partition_produced_layout(const ir_partition *p, uint32_t v, ir_layout *out);
/* A 64-bit hash of everything that defines a state (loop nests, argument
 * tilings, identity ops): equal states hash equal, whatever the order of
 * the actions that made them. */
uint64_t ir_partition_hash(const ir_partition *p);
/* The same hash worked out afresh from the whole state (ir_partition_hash
 * keeps it up as the state changes; tests hold the two equal). */
uint64_t ir_partition_hash_full(const ir_partition *p);
/* Whether two states of one context are the same state (what
 * ir_partition_hash hashes). */
bool ir_partition_same(const ir_partition *a, const ir_partition *b);

/* One transfer: value of global type `type` from layout `from` to `to`. */
typedef struct ir_xfer {
    const ir_type *type;
    ir_layout from, to;
    uint8_t n_ar;                  /* 1. all_reduce over these axes (mesh order) */
    uint8_t ar_axes[IR_MAX_AXES];
    uint8_t ar_red;                /* ir_red */
    int8_t rs_axis, rs_dim;        /* 2. a reduce_scatter onto rs_dim along rs_axis; -1 none */
    uint8_t rs_red;
    bool empty;                    /* 3. no elements: an empty constant of the target type */
    const struct ir_redist_plan *redist; /* 3. else these steps (below); NULL when the tilings agree.
                                            Its device ids (groups, pairs) are over the whole mesh: with
                                            pending sums that flow on (partial in both `from` and `to`)
                                            it was made over the mesh without their axes and is repeated
                                            along them, summand by summand (its types stay over that
                                            sub-mesh, its device maps are NULL) */
} ir_xfer;

/* Whether a transfer inserts nothing: the value passes as it is. */
bool ir_xfer_is_noop(const ir_xfer *x);

/* A materialization of a value: made at its first use, in segment `seg`
 * (the op being lowered, or the return: ir_pctx_num_ops), before the op's
 * operand `slot` is passed (slots count the op's operands, then values its
 * regions capture, then return values). */
typedef struct ir_mat {
    ir_xfer x;
    int32_t src;   /* -1: from the value as produced; else the mat (of the
                      same value) it continues from */
    uint32_t seg, slot;
} ir_mat;

#define IR_LPLAN_DIRECT (-1) /* a use takes the value as produced */

typedef struct ir_lplan ir_lplan;

/* A plan over ctx, following no state yet.  Free with ir_lplan_free. */
int ir_lplan_new(const ir_pctx *ctx, ir_lplan **out, ap_error *err);
void ir_lplan_free(ir_lplan *pl);
/* Brings the plan up to date with p.  Fails (with the lowering's message)
 * when p cannot be lowered; the plan then follows no state until the next
 * successful sync. */
int ir_lplan_sync(ir_lplan *pl, const ir_partition *p, ap_error *err);
/* What the last sync changed: ops whose loop nest differs (or every op
 * after a full rebuild, *all set), and values whose plan was redone. */
const uint32_t *ir_lplan_changed_ops(const ir_lplan *pl, uint32_t *n, bool *all);
const uint32_t *ir_lplan_changed_values(const ir_lplan *pl, uint32_t *n);

uint32_t ir_lplan_num_mats(const ir_lplan *pl, uint32_t v);
const ir_mat *ir_lplan_mat(const ir_lplan *pl, uint32_t v, uint32_t m);
/* All mats of v (*n of them), valid until the next sync. */
const ir_mat *ir_lplan_mats(const ir_lplan *pl, uint32_t v, uint32_t *n);
/* What each use slot of op k receives (as ir_lplan_use), valid until the
 * next sync. */
const int32_t *ir_lplan_uses(const ir_lplan *pl, uint32_t k);
/* What use `slot` of op k (k = ir_pctx_num_ops: the return, slot the
 * result index) receives of the value it uses: IR_LPLAN_DIRECT or a mat of
 * that value. */
int32_t ir_lplan_use(const ir_lplan *pl, uint32_t k, uint32_t slot);
/* Values op k's regions use from outside them ("captured"), one slot each
 * after its operands: count, and value of each (in order).  Each is a use
 * that takes the value whole (replicated, pending sums reduced): the ops
 * inside a region run on global shapes. */
uint32_t ir_lplan_num_captured(const ir_lplan *pl, uint32_t k);
uint32_t ir_lplan_captured_value(const ir_lplan *pl, uint32_t k, uint32_t i);
/* The layout result r leaves the function in. */
const ir_layout *ir_lplan_result_layout(const ir_lplan *pl, uint32_t r);
/* How many lowered ops take the value as produced (direct uses, and the
 * first step of each transfer made from it); when exactly one and that is
 * operand `*slot` of top-level op `*op`, those are set, else *op is -1. */
uint32_t ir_lplan_produced_uses(const ir_lplan *pl, uint32_t v, int32_t *op, uint32_t *slot);

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


/* Whether op is a custom_call that only annotates its operand (Sharding,
 * tt.mark_argument, ...): partitioning and the checker treat it as the
 * identity. */
bool ir_custom_call_is_identity(const ir_op *op);
/* Whether op is Shardy's sharding_constraint or reshard of one value:
 * the identity on it (tiles and pending sums pass). */
bool ir_sdy_is_identity(const ir_op *op);

/* ========================================================= redistribution */

/*
 * Synthesis of array redistributions between distributed
 * types, as in "Memory-efficient array redistribution through portable
 * collective communication" (shared/seeds/redistribution-paper.md, sections
 * 2-7).  The SPMD lowering calls it on every use whose value layout differs
 * from the layout the user needs; `autopart redistribute` shows it.
 *
 * A distributed type gives, per dimension, the global size, the per-device
 * (local) size and the mesh axes tiling that dimension.  Text form, as in the
 * paper: `[3{x}12, 2{y}12]`; a replicated dim is `12` or `12{}12`; several
 * axes `1{y1,x1,x2}12`; names may be quoted (`{"x"}`).
 *
 * ORDER OF AXES.  Everywhere in autopart (struct and text) the axes of a dim
 * are listed MAJOR TO MINOR: in `8{x,y}32` over {x:2, y:2} the device at
 * coordinates (x=i, y=j) holds the tile that starts at 8 * (i * 2 + j).  The
 * paper writes the same list the other way round (minor-most first, "the
 * left-most axis"), so the paper's `{y, x}` is our `{x, y}`, and what the paper
 * calls the minor-most (left-most) axis is our LAST axis: all_gather removes
 * axes from the end of a dim, dynslice and all_to_all append at the end.
 *
 * DEVICES.  Physical device ids are row-major over the mesh axes in mesh
 * order (the last axis varies fastest).  The synthesis splits every axis into
 * prime factors (x:4 -> x1:2, x2:2; y:6 -> y1:3, y2:2): larger primes first,
 * the first factor being the major one, so that x = x1 * 2 + x2 and device ids
 * are also row-major over the factor axes.  A prime axis keeps its name, a
 * size-1 axis has no factor.  Factor names are `<axis><k>` (1-based), or
 * `<axis>_<k>` if that would clash with another name.
 *
 * THE PLAN.  Steps are all_gather, all_to_all and dynslice found by a
 * shortest-path search over weak types (local types, section 7), with
 * per-device memory never above max(local size in, local size out), then
 * lowered to concrete factor axes, replica groups and device maps, with at
 * most one collective_permute when the device order must change.  Costs
 * follow the paper's Figure 11: bytes communicated per device.  When the
 * lowering of the weak shortest path needs the permutation, the plan is the
 * cheaper of: the permutation where it costs least over all weak types s,
 * i.e. the least cost(from -> s) + tile(s) + cost(s -> to) (often off the
 * weak shortest path: e.g. a free dynslice first so that the permutation
 * moves smaller tiles); and a permutation-free plan from a search over
 * concrete types, which wins ties.  The weak optimum W is a lower bound that
 * such problems cannot reach (no plan without a permutation costs W there);
 * tests/test_redist.c checks plans against an exhaustive search.
 *
 * Every function that can fail returns 0 or a negative AP_E* code and fills
 * `err` (which may be NULL).  No function keeps global state; a context may be
 * used by one thread at a time, plans are immutable and may be shared.
 */

#define IR_REDIST_MAX_RANK 8

/* ------------------------------------------------------------------ mesh */

/* The redistribution's meshes are ir_mesh (ir.h), made by ir_mesh_parse or
 * ir_mesh_init, so they hold the one set of mesh limits. */

/* Appends `{x:4, y:6}`, the redistribution's spelling of a mesh, to `out`
 * (check out->oom once at the end). */
void ir_redist_mesh_format(const ir_mesh *mesh, ap_buf *out);

/* Splits every axis of `mesh` into prime factors (see the top of this file)
 * and writes the factor mesh to `factors` and, for each factor, the index of
 * its mesh axis to `factor_axis` (IR_MESH_MAX_FACTORS entries).  Cannot fail
 * for a mesh made by ir_mesh_init/parse; AP_EINVALID otherwise. */
int ir_redist_mesh_factor(const ir_mesh *mesh, ir_mesh *factors, int *factor_axis,
                          ap_error *err);

/* ------------------------------------------------------------------ types */

typedef struct ir_redist_dim {
    int64_t global; /* size of the global array in this dim */
    int64_t local;  /* size of each device's tile: global / product of axes */
    int naxes;
    uint8_t axes[IR_MESH_MAX_FACTORS]; /* mesh axis indices, MAJOR to minor */
} ir_redist_dim;

/* A distributed type over some mesh (the axis indices refer to it).  A plain
 * value: copy it freely. */
typedef struct ir_redist_type {
    int rank;
    ir_redist_dim dims[IR_REDIST_MAX_RANK];
} ir_redist_type;

/* Parses the text form (see the top of this file) of a type over `mesh` into
 * `out` and validates it.  The local size may be left out (`{x}12`); it is
 * then computed.  On failure err->col is the 1-based column of the problem:
 *   AP_ESYNTAX     malformed text, e.g. "expected ',' or ']'"
 *   AP_EUNDEFINED  `unknown mesh axis "z"`
 *   AP_ETYPE       `mesh axis "x" used twice`,
 *                  `dim 0: global size 10 is not divisible by 4, the product of {x}`,
 *                  `dim 0: local size 3 times the product 4 of {x} is 12, not the global size 16`
 *   AP_ELIMIT      rank above IR_REDIST_MAX_RANK, a size above 2^53 */
int ir_redist_parse_type(const ir_mesh *mesh, const char *text, ir_redist_type *out,
                         ap_error *err);

/* Checks a type built by hand against `mesh`, with the messages of
 * ir_redist_parse_type (no column): axis indices in range, each axis used
 * at most once, sizes positive, local * product of axes == global. */
int ir_redist_validate_type(const ir_mesh *mesh, const ir_redist_type *type, ap_error *err);

/* Checks that a redistribution from `from` to `to` is meaningful (section
 * 2.5): AP_ETYPE with `rank mismatch: from has rank 2, to has rank 3` or
 * `global shapes differ: from is [12, 12], to is [12, 24]`. */
int ir_redist_check_problem(const ir_redist_type *from, const ir_redist_type *to, ap_error *err);

/* Appends the text form to `out`: replicated dims as `12`, names quoted only
 * when they are not C identifiers, `[]` for rank 0.  Parsing the result gives
 * back an equal type. */
void ir_redist_format_type(const ir_mesh *mesh, const ir_redist_type *type, ap_buf *out);

/* Same rank, sizes and axis lists (order included). */
bool ir_redist_type_equal(const ir_redist_type *a, const ir_redist_type *b);

/* Elements of one device's tile: the product of the local sizes. */
int64_t ir_redist_type_local_size(const ir_redist_type *type);


/* ------------------------------------------------------------------ plans */

/* X-macro: enum suffix, printed name. */
#define IR_REDIST_KINDS(X)      \
    X(ALL_GATHER, "all_gather") \
    X(ALL_TO_ALL, "all_to_all") \
    X(DYNSLICE, "dynslice")     \
    X(COLLECTIVE_PERMUTE, "collective_permute")

typedef enum ir_redist_kind {
#define IR_REDIST_KIND_ENUM(name, text) IR_REDIST_##name,
    IR_REDIST_KINDS(IR_REDIST_KIND_ENUM)
#undef IR_REDIST_KIND_ENUM
} ir_redist_kind;

const char *ir_redist_kind_name(ir_redist_kind kind);

/* One collective.  Device ids are physical (row-major over the mesh).  The
 * collective itself is given by kind, dims, group_size and groups (or
 * pairs); `axes` and `type` say what it does in the paper's terms.  For
 * all_gather and all_to_all, `axes` are the last axes of `dim` in the
 * previous step's `type` (read through its device map; before the first
 * step, `from` may have to be re-read with another device map for that to
 * hold: Figure 10's phi'); for dynslice they are axes no dim uses yet.
 *
 * all_gather(dim, axes): gathers `axes` along `dim`; a device's position in
 *   its replica group is the index of its piece in the gathered tile.
 * all_to_all(dim -> to_dim, axes): moves `axes` from `dim` to the end of
 *   `to_dim`.  In StableHLO terms split_dimension = to_dim, concat_dimension
 *   = dim, split_count = group_size; position in the group = chunk index.
 * dynslice(dim, axes): local; each device keeps piece number (its position in
 *   its group) of `group_size` pieces of `dim`.  No communication.
 * collective_permute: `pairs` lists (source, target) for every device as a
 *   target exactly once, (d, d) included: a device that is nobody's target
 *   would receive zeros in StableHLO. */
typedef struct ir_redist_step {
    ir_redist_kind kind;
    int dim;    /* the dim acted on; for all_to_all the one giving up axes; -1 for the permute */
    int to_dim; /* all_to_all: the dim receiving axes; -1 otherwise */
    int naxes;  /* factor axes acted on, indices into plan->factors, in group order */
    uint8_t axes[IR_MESH_MAX_FACTORS];
    int64_t group_size;        /* product of the sizes of `axes`; 1 for the permute */
    int64_t ngroups;           /* ndevices / group_size; 0 for the permute */
    const int32_t *groups;     /* ngroups rows of group_size device ids, rows sorted by first id */
    int64_t npairs;            /* the permute: ndevices; 0 otherwise */
    const int32_t *pairs;      /* npairs (source, target) pairs, by target */
    ir_redist_type type;       /* after the step, over plan->factors, read through device_map */
    const int32_t *device_map; /* after the step: logical position (row-major over
                                  plan->factors) -> physical device id */
    int64_t bytes;             /* communicated per device (paper, Figure 11) */
    int64_t local_bytes;       /* a device's tile after the step */
} ir_redist_step;

/* "All-gather everything, then dynslice" (the paper's equation (2), XLA's
 * fallback): one all_gather per partitioned dim, fewest pieces first. */
typedef struct ir_redist_baseline {
    int64_t cost_bytes;
    int64_t peak_local_bytes;
    int nsteps; /* all_gathers plus dynslices */
} ir_redist_baseline;

/* A synthesized redistribution.  Read-only for callers; all of it lives in
 * `arena` and is freed by ir_redist_plan_free. */
typedef struct ir_redist_plan {
    ir_mesh factors;              /* prime-factor mesh: axes of all types below */
    int factor_axis[IR_MESH_MAX_FACTORS]; /* mesh axis each factor comes from */
    int64_t ndevices;
    int elem_bytes;
    ir_redist_type from, to;     /* the problem, over `factors` */
    const int32_t *identity_map; /* device map of `from` and of the final `to` */
    int nsteps;
    const ir_redist_step *steps;
    int64_t cost_bytes;       /* sum of step bytes */
    int64_t peak_local_bytes; /* the height: largest tile along the way */
    int64_t from_local_bytes, to_local_bytes;
    int permute_step; /* index of the collective_permute, -1 if none */
    ir_redist_baseline baseline;
    ap_arena arena;
} ir_redist_plan;

/* Reusable search buffers (hash set of visited types, heap, device maps), so
 * that a lowering pass synthesizing many redistributions allocates little.
 * One thread at a time.  ir_redist_ctx_new fails only with AP_ENOMEM. */
typedef struct ir_redist_ctx ir_redist_ctx;
int ir_redist_ctx_new(ir_redist_ctx **out, ap_error *err);
void ir_redist_ctx_free(ir_redist_ctx *ctx); /* NULL is a no-op */

/* Synthesizes the redistribution of an array of type `from` into type `to`,
 * both over `mesh`, with `elem_bytes` bytes per element (0 means 4).  On
 * success *out is a new plan owned by the caller (ir_redist_plan_free).  On
 * failure *out is NULL: AP_ETYPE/AP_EUNDEFINED for an invalid type or problem
 * (messages as ir_redist_parse_type and ir_redist_check_problem), AP_EINVALID
 * for a negative elem_bytes, AP_ELIMIT when sizes in bytes overflow 64 bits or
 * the search space is too large, AP_ENOMEM.  `ctx` may be NULL (a temporary
 * one is made).  Identical inputs give identical plans. */
int ir_redist_synthesize(ir_redist_ctx *ctx, const ir_mesh *mesh, const ir_redist_type *from,
                         const ir_redist_type *to, int elem_bytes, ir_redist_plan **out,
                         ap_error *err);

/* ir_redist_synthesize with a temporary context. */
int ir_redist_plan_make(const ir_mesh *mesh, const ir_redist_type *from,
                        const ir_redist_type *to, int elem_bytes, ir_redist_plan **out,
                        ap_error *err);

void ir_redist_plan_free(ir_redist_plan *plan); /* NULL is a no-op */

/* Appends one line per step to `out`, e.g.
 *   all_to_all(dims 1->0, axes {y1})  [1{x1,x2,y1}12, 6{y2}12]  24 bytes
 * (nothing for an empty plan). */
void ir_redist_plan_format(const ir_redist_plan *plan, ap_buf *out);

/* Appends the line of one step, without the newline. */
void ir_redist_step_format(const ir_redist_plan *plan, const ir_redist_step *step, ap_buf *out);

/* Cost and height of the all-gather-then-dynslice baseline for the same
 * problem (validated as in ir_redist_synthesize). */
int ir_redist_baseline_of(const ir_mesh *mesh, const ir_redist_type *from,
                          const ir_redist_type *to, int elem_bytes, ir_redist_baseline *out,
                          ap_error *err);

/* --------------------------------------------------------------- checking */


/* Checks a whole plan: every step with ir_redist_check_step from the previous
 * step's result (the first from `from` with the identity map), each step's
 * bytes against the paper's cost model, the totals, the height bound
 * max(from, to), at most one collective_permute, and that the last step leaves
 * exactly `to` with the identity device map. */
int ir_redist_plan_check(const ir_redist_plan *plan, ap_error *err);

/* ---------------------------------------------------------------- testing */

/* A random redistribution problem like the paper's evaluation (section 8):
 * a mesh {x, y, z} with sizes drawn from {2, 3, 4, 6, 8}, rank 1 to
 * `max_rank` (at most IR_REDIST_MAX_RANK), every axis either replicated or
 * partitioning a random dim in `from` and, independently, in `to`, global
 * sizes divisible by both.  Deterministic in *seed, which it advances. */
void ir_redist_random_problem(uint64_t *seed, int max_rank, ir_mesh *mesh,
                              ir_redist_type *from, ir_redist_type *to);

#endif /* PARTIR_H */
