/*
 * plan.c - the lowering plan: what the SPMD lowering inserts for a state,
 * decided without building IR (partir.h, "lowering plan").
 *
 * The lowering (lower.c) and the cost model's fast scorer both read this
 * plan, so the collectives a report counts are the ones the lowering
 * emits.  Two decisions live here:
 *
 *   - per use, which copy of a value the user gets: one copy per distinct
 *     (value, needed layout), made at its first use, through the value's
 *     identity op when it has one (an atomic one only when some use takes
 *     its replicated copy: otherwise straight from the value as made, so
 *     that all_slice(all_gather) is one all_to_all); a sharded argument is
 *     gathered afresh for each op that needs more of it (ZeRO-3: holding
 *     the whole of a parameter from the forward to the backward pass would
 *     undo the sharding), and so is its cast to another element type (the
 *     bf16 copy a mixed-precision step computes with), or either carried
 *     unchanged through a loop; a returned value leaves in its layout with
 *     pending sums reduced, reusing a reduced copy made for another use
 *     when there is one;
 *   - per copy, the transfer: pending sums the target does not take are
 *     reduced (all_reduce, or reduce_scatter onto a dim the target tiles
 *     next along that axis), then the tiling is changed by a synthesized
 *     redistribution (redist.c), memoized per problem.  An axis of size 1
 *     (data=1 of a search over the meshes of N devices) moves nothing: a
 *     sum along it is its one summand and a tiling along it is the whole
 *     dim, so it gets no collective over groups of one device (XLA's
 *     AllReduceSimplifier would drop one; the cost model charges none).  A pending sum that
 *     flows on (the target takes it too) is redistributed summand by
 *     summand: over the mesh without its axes, the plan's device ids
 *     repeated along them (see submesh).
 *
 * A plan follows one state.  Syncing it with another state redoes only the
 * values whose producer, users or identity op changed (compared with a
 * snapshot of the loop nests it last followed), which is what makes
 * scoring a search's candidates cheap.
 */
#include "partir_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#define ANY_OP UINT32_MAX

/* ======================================================= public accessors */

uint32_t ir_pctx_num_values(const ir_pctx *c) { return c->n_vals; }
uint32_t ir_pctx_num_args(const ir_pctx *c) { return c->n_args; }
const ir_value *ir_pctx_value(const ir_pctx *c, uint32_t v) { return v < c->n_vals ? c->vals[v] : NULL; }
const ir_type *ir_pctx_value_type(const ir_pctx *c, uint32_t v) { return val_type(c, v); }
int32_t ir_pctx_value_op(const ir_pctx *c, uint32_t v) { return v < c->n_vals ? c->val_op[v] : -1; }
uint32_t ir_pctx_operand_value(const ir_pctx *c, uint32_t k, uint32_t i) { return c->opd_val[c->opd0[k] + i]; }
uint32_t ir_pctx_result_value(const ir_pctx *c, uint32_t k, uint32_t j) { return c->op_val0[k] + j; }
uint32_t ir_pctx_num_returns(const ir_pctx *c) { return c->n_ret; }
uint32_t ir_pctx_return_value(const ir_pctx *c, uint32_t r) { return c->ret_val[r]; }

void ir_partition_operand_layout(const ir_partition *p, uint32_t k, uint32_t i, ir_layout *out)
{
    ir__needed_layout(p, k, i, out);
}

void ir_partition_result_layout(const ir_partition *p, uint32_t k, uint32_t j, ir_layout *out)
{
    ir__result_layout(p, k, j, out);
}

void ir_partition_produced_layout(const ir_partition *p, uint32_t v, ir_layout *out) { ir__produced_layout(p, v, out); }

int ir_partition_nest_words(const ir_partition *p, uint32_t k, uint64_t *out)
{
    const ir_loop *n = nest_of(p, k);
    for (int i = 0; i < p->nlen[k]; i++)
        out[i] = (uint64_t)n[i].axis << 32 | n[i].entry;
    return p->nlen[k];
}

/* ================================================================ hashing */

/* The sum of the terms of every fact of p (partir_int.h: state_hash_*),
 * worked out afresh: what p->hash keeps up as p changes. */
uint64_t ir_partition_hash_full(const ir_partition *p)
{
    const ir_pctx *c = p->ctx;
    uint64_t h = 0;
    for (uint32_t k = 0; k < n_all_ops(p); k++)
        for (uint32_t i = 0; i < p->nlen[k]; i++)
            h += state_hash_loop(p, k, i, &nest_of(p, k)[i]);
    for (uint32_t a = 0; a < c->n_args; a++)
        h += state_hash_arg(a, &p->arg_layout[a]);
    for (uint32_t k = 0; k < p->n_vops; k++)
        h += state_hash_term(HASH_VOP, p->vops[k].val, 0, 0);
    return h;
}

uint64_t ir_partition_hash(const ir_partition *p)
{
    assert(p->hash == ir_partition_hash_full(p)); /* debug builds: every change kept it up */
    return p->hash;
}

static bool same_nest(const ir_partition *a, uint32_t oa, const ir_partition *b, uint32_t ob)
{
    if (a->nlen[oa] != b->nlen[ob])
        return false;
    const ir_loop *x = nest_of(a, oa), *y = nest_of(b, ob);
    for (int i = 0; i < a->nlen[oa]; i++)
        if (x[i].axis != y[i].axis || x[i].entry != y[i].entry)
            return false;
    return true;
}

bool ir_partition_same(const ir_partition *a, const ir_partition *b)
{
    const ir_pctx *c = a->ctx;
    if (c != b->ctx)
        return false;
    for (uint32_t k = 0; k < c->n_ops; k++)
        if (!same_nest(a, k, b, k))
            return false;
    for (uint32_t v = 0; v < c->n_args; v++)
        if (!layout_equal(&a->arg_layout[v], &b->arg_layout[v]))
            return false;
    for (uint32_t v = 0; v < c->n_vals; v++) {
        if ((a->vop_of[v] >= 0) != (b->vop_of[v] >= 0))
            return false;
        if (a->vop_of[v] >= 0 &&
            !same_nest(a, vop_id(a, (uint32_t)a->vop_of[v]), b, vop_id(b, (uint32_t)b->vop_of[v])))
            return false;
    }
    return true;
}

/* ============================================================== transfers */

bool ir_xfer_is_noop(const ir_xfer *x) { return !x->n_ar && x->rs_axis < 0 && !x->empty && !x->redist; }

/* Whether the first op a transfer inserts reads the value (an empty value
 * is replaced by a constant). */
static bool xfer_uses_source(const ir_xfer *x) { return x->n_ar || x->rs_axis >= 0 || (!x->empty && x->redist); }

/* Memo of synthesized redistributions, keyed by the problem: the tilings,
 * and in fdim the axes the value is a pending sum along (-2), which the
 * redistribution must not use. */
typedef struct memo_key {
    int32_t rank, eb;
    int64_t dims[IR_REDIST_MAX_RANK];
    int8_t fdim[IR_MAX_AXES], fpos[IR_MAX_AXES], tdim[IR_MAX_AXES], tpos[IR_MAX_AXES];
} memo_key;

typedef struct memo_ent {
    uint64_t hash;
    memo_key key;
    ir_redist_plan *plan;
} memo_ent;

/* Memo of decided transfers, keyed by all that decides one (xfer_decide):
 * the type, both layouts as given, and whether a reduce_scatter may be
 * used.  A sync redoes every value an action changed, and they ask for the
 * same few hundred transfers again and again; the redistribution memo
 * above answers only the synthesis, after the submesh and both redist
 * types are worked out and the problem's key is hashed byte by byte. */
typedef struct xmemo_ent {
    uint64_t hash; /* 0 marks an empty slot */
    const ir_type *g;
    ir_layout from, to;
    bool no_scatter;
    ir_xfer x;
} xmemo_ent;

typedef struct xfer_ctx {
    const ir_pctx *c;
    ir_redist_ctx *rctx;
    memo_ent *memo;
    uint32_t n_memo, cap_memo; /* cap a power of two */
    xmemo_ent *xmemo;
    uint32_t n_xmemo, cap_xmemo; /* cap a power of two */
    bool no_scatter;           /* xfer_decide reduces with all_reduce only (plan_value) */
} xfer_ctx;

static void xctx_free(xfer_ctx *x)
{
    for (uint32_t i = 0; i < x->cap_memo; i++)
        ir_redist_plan_free(x->memo[i].plan);
    ap_free(x->memo);
    ap_free(x->xmemo);
    ir_redist_ctx_free(x->rctx);
    memset(x, 0, sizeof *x);
}

static int xctx_init(xfer_ctx *x, const ir_pctx *c, ap_error *err)
{
    memset(x, 0, sizeof *x);
    x->c = c;
    return ir_redist_ctx_new(&x->rctx, err);
}

/* The axes a redistribution may use: all of the mesh, except the axes along
 * which the value is a pending sum that flows on.  Along those the devices
 * hold different summands, so a collective over them would mix summands
 * (and a dynslice keyed by them would cut each summand differently): each
 * summand is redistributed on its own, over the other axes. */
typedef struct submesh {
    int n;                   /* axes kept */
    int axis[IR_MAX_AXES];   /* kept index -> mesh axis */
    int index[IR_MAX_AXES];  /* mesh axis -> kept index, -1 when frozen */
    int64_t n_frozen_coords; /* devices along the frozen axes together */
} submesh;

static void submesh_init(const ir_mesh *m, const ir_layout *from, submesh *sm)
{
    sm->n = 0;
    sm->n_frozen_coords = 1;
    for (int a = 0; a < m->n_axes; a++) {
        if (from->dim[a] == IR_AX_PARTIAL) {
            sm->index[a] = -1;
            sm->n_frozen_coords *= m->sizes[a];
        } else {
            sm->index[a] = sm->n;
            sm->axis[sm->n++] = a;
        }
    }
}

/* The device of the whole mesh that is device `sub` of the kept axes (row-
 * major over them) at position q (row-major) along the frozen axes. */
static int32_t full_device(const ir_mesh *m, const submesh *sm, int64_t sub, int64_t q)
{
    int64_t coord[IR_MAX_AXES];
    for (int a = m->n_axes - 1; a >= 0; a--) {
        if (sm->index[a] >= 0) {
            coord[a] = sub % m->sizes[a];
            sub /= m->sizes[a];
        } else {
            coord[a] = q % m->sizes[a];
            q /= m->sizes[a];
        }
    }
    int64_t dev = 0;
    for (int a = 0; a < m->n_axes; a++)
        dev = dev * m->sizes[a] + coord[a];
    return (int32_t)dev;
}

/* Per-device lists of a plan over the kept axes (`n` rows of `width` ids)
 * repeated for every position along the frozen axes, over the whole mesh,
 * in the plan's arena.  NULL when out of memory. */
static const int32_t *expand_devices(ap_arena *arena, const ir_mesh *m, const submesh *sm, const int32_t *ids,
                                     int64_t n, int64_t width)
{
    int64_t total = n * width * sm->n_frozen_coords;
    int32_t *out = ap_arena_alloc(arena, sizeof *out * (size_t)(total ? total : 1));
    if (!out)
        return NULL;
    int64_t k = 0;
    for (int64_t q = 0; q < sm->n_frozen_coords; q++)
        for (int64_t i = 0; i < n * width; i++)
            out[k++] = full_device(m, sm, ids[i], q);
    return out;
}

/* Rewrites a plan synthesized over the kept axes of sm into the plan the
 * lowering runs on the whole mesh: every step's replica groups and pairs
 * repeated along the frozen axes (ndevices, ngroups and npairs grow
 * accordingly; bytes per device stay).  The plan is new and not yet shared;
 * what is added lives in its arena.  Its types and `factors` stay over the
 * sub-mesh (factor_axis now names mesh axes); its device maps, which number
 * sub-mesh positions, are dropped (NULL).  false when out of memory. */
static bool repeat_plan(ir_redist_plan *plan, const ir_mesh *m, const submesh *sm)
{
    size_t n_steps = (size_t)(plan->nsteps ? plan->nsteps : 1);
    ir_redist_step *steps = ap_arena_memdup(&plan->arena, plan->steps, sizeof *steps * n_steps);
    if (!steps)
        return false;
    for (int s = 0; s < plan->nsteps; s++) {
        ir_redist_step *st = &steps[s];
        if (st->kind == IR_REDIST_COLLECTIVE_PERMUTE) {
            if (!(st->pairs = expand_devices(&plan->arena, m, sm, st->pairs, st->npairs, 2)))
                return false;
            st->npairs *= sm->n_frozen_coords;
        } else {
            if (!(st->groups = expand_devices(&plan->arena, m, sm, st->groups, st->ngroups, st->group_size)))
                return false;
            st->ngroups *= sm->n_frozen_coords;
        }
        st->device_map = NULL;
    }
    plan->steps = steps;
    plan->identity_map = NULL;
    plan->ndevices *= sm->n_frozen_coords;
    for (int f = 0; f < plan->factors.n_axes; f++)
        plan->factor_axis[f] = sm->axis[plan->factor_axis[f]];
    return true;
}

/* A layout's tiling as a distributed type over the kept axes of sm, axes of
 * size 1 left out: two layouts that differ only in them are the same
 * pieces on every device (no redistribution; the synthesis splits axes
 * into prime factors, so its gathers, all_to_alls and permutes never span
 * a group of one device either). */
static void to_redist_type(const ir_pctx *c, const submesh *sm, const ir_type *g, const ir_layout *lay,
                           ir_redist_type *out)
{
    memset(out, 0, sizeof *out);
    out->rank = g->rank;
    int axes[IR_MAX_AXES];
    for (int d = 0; d < g->rank; d++) {
        int n = layout_dim_axes(lay, d, axes), kept = 0;
        out->dims[d].global = g->dims[d];
        out->dims[d].local = g->dims[d];
        for (int k = 0; k < n; k++) {
            if (c->mesh.sizes[axes[k]] == 1)
                continue; /* splits nothing: tiled along it or not, the same pieces */
            out->dims[d].axes[kept++] = (uint8_t)sm->index[axes[k]];
            out->dims[d].local /= c->mesh.sizes[axes[k]];
        }
        out->dims[d].naxes = kept;
    }
}

static uint64_t key_hash(const memo_key *k)
{
    const unsigned char *s = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ s[i]) * 1099511628211ULL;
    return h | 1; /* 0 marks an empty slot */
}

static bool memo_grow(xfer_ctx *x)
{
    uint32_t cap = x->cap_memo ? x->cap_memo * 2 : 256;
    memo_ent *m = ap_calloc(cap, sizeof *m);
    if (!m)
        return false;
    for (uint32_t i = 0; i < x->cap_memo; i++) {
        if (!x->memo[i].hash)
            continue;
        uint32_t j = (uint32_t)x->memo[i].hash & (cap - 1);
        while (m[j].hash)
            j = (j + 1) & (cap - 1);
        m[j] = x->memo[i];
    }
    ap_free(x->memo);
    x->memo = m;
    x->cap_memo = cap;
    return true;
}

/* The redistribution of a value of type g from tiling `from` to `to`,
 * synthesized once per problem.  The pending sums left in `from` flow on
 * (xfer_decide reduced the others): the plan runs over the mesh without
 * their axes, repeated along them (submesh, repeat_plan).  *out NULL when
 * the tilings agree. */
static int retile_plan(xfer_ctx *x, const ir_type *g, const ir_layout *from, const ir_layout *to,
                       const ir_redist_plan **out, ap_error *err)
{
    const ir_pctx *c = x->c;
    *out = NULL;
    memo_key key;
    memset(&key, 0, sizeof key);
    key.rank = g->rank;
    int eb = ir_elem_bytes((ir_elem)g->elem);
    key.eb = eb > 0 ? eb : 4;
    for (int d = 0; d < g->rank; d++)
        key.dims[d] = g->dims[d];
    for (int a = 0; a < IR_MAX_AXES; a++) {
        key.fdim[a] = from->dim[a] >= 0 ? from->dim[a] : from->dim[a] == IR_AX_PARTIAL ? -2 : -1;
        key.fpos[a] = from->dim[a] >= 0 ? (int8_t)from->pos[a] : 0;
        key.tdim[a] = to->dim[a] >= 0 ? to->dim[a] : -1;
        key.tpos[a] = to->dim[a] >= 0 ? (int8_t)to->pos[a] : 0;
    }
    uint64_t h = key_hash(&key);
    if (x->cap_memo) {
        for (uint32_t j = (uint32_t)h & (x->cap_memo - 1); x->memo[j].hash; j = (j + 1) & (x->cap_memo - 1))
            if (x->memo[j].hash == h && !memcmp(&x->memo[j].key, &key, sizeof key)) {
                *out = x->memo[j].plan;
                return 0;
            }
    }
    submesh sm;
    submesh_init(&c->mesh, from, &sm);
    ir_redist_type rf, rt;
    to_redist_type(c, &sm, g, from, &rf);
    to_redist_type(c, &sm, g, to, &rt);
    ir_mesh sub_mesh;
    const ir_mesh *rmesh = &c->mesh;
    ap_error e;
    int rc;
    if (sm.n < c->mesh.n_axes) {
        const char *names[IR_MAX_AXES];
        int64_t sizes[IR_MAX_AXES];
        for (int k = 0; k < sm.n; k++) {
            names[k] = c->mesh.names[sm.axis[k]];
            sizes[k] = c->mesh.sizes[sm.axis[k]];
        }
        if ((rc = ir_mesh_init(&sub_mesh, sm.n, names, sizes, &e)) < 0)
            return ap_error_set(err, rc, "redistribution failed: %s", e.msg);
        rmesh = &sub_mesh;
    }
    ir_redist_plan *plan = NULL;
    rc = ir_redist_synthesize(x->rctx, rmesh, &rf, &rt, key.eb, &plan, &e);
    if (rc < 0)
        return ap_error_set(err, rc, "redistribution failed: %s", e.msg);
    if (sm.n < c->mesh.n_axes && !repeat_plan(plan, &c->mesh, &sm)) {
        ir_redist_plan_free(plan);
        return ap_error_set(err, AP_ENOMEM, "out of memory while lowering");
    }
    if ((x->n_memo + 1) * 2 > x->cap_memo && !memo_grow(x)) {
        ir_redist_plan_free(plan);
        return ap_error_set(err, AP_ENOMEM, "out of memory while lowering");
    }
    uint32_t j = (uint32_t)h & (x->cap_memo - 1);
    while (x->memo[j].hash)
        j = (j + 1) & (x->cap_memo - 1);
    x->memo[j].hash = h;
    x->memo[j].key = key;
    x->memo[j].plan = plan;
    x->n_memo++;
    *out = plan;
    return 0;
}

/* The transfer of value type g from layout `from` to `to`: sums the target
 * does not take along are reduced (all_reduce, or a reduce_scatter onto a
 * dim the target tiles next along that axis; along an axis of size 1,
 * nothing), then the tiling changes. */
static int xfer_work_out(xfer_ctx *x, const ir_type *g, ir_layout from, const ir_layout *to, ir_xfer *out,
                         ap_error *err)
{
    const ir_mesh *m = &x->c->mesh;
    memset(out, 0, sizeof *out);
    out->type = g;
    out->from = from;
    out->to = *to;
    out->rs_axis = out->rs_dim = -1;
    int ar[IR_MAX_AXES], n_ar = 0;
    ir_red ar_red = IR_RED_NONE;
    for (int a = 0; a < m->n_axes; a++) {
        if (from.dim[a] != IR_AX_PARTIAL)
            continue;
        if (to->dim[a] == IR_AX_PARTIAL && to->red[a] == from.red[a])
            continue; /* the sum flows on */
        if (to->dim[a] == IR_AX_PARTIAL)
            return ap_error_set(err, AP_EINTERNAL, "pending sums of different kinds meet");
        if (m->sizes[a] == 1) {
            /* a sum over one device is its one summand: no all_reduce or
             * reduce_scatter over groups of one (XLA's AllReduceSimplifier
             * would drop it; the cost model charges nothing for one) */
            from.dim[a] = IR_AX_NONE;
            continue;
        }
        if (n_ar && from.red[a] != ar_red)
            return ap_error_set(err, AP_EUNSUPPORTED, "pending sums of different kinds on one value");
        ar[n_ar++] = a;
        ar_red = (ir_red)from.red[a];
    }
    /* reduce_scatter where the target tiles d along a right after what x has */
    int keep = 0;
    for (int k = 0; k < n_ar; k++) {
        int a = ar[k], d = to->dim[a];
        bool ok = false;
        if (d >= 0) {
            int fa[IR_MAX_AXES], ta[IR_MAX_AXES];
            int nf = layout_dim_axes(&from, d, fa), nt = layout_dim_axes(to, d, ta);
            ok = nt > nf && ta[nf] == a;
            for (int q = 0; ok && q < nf; q++)
                ok = fa[q] == ta[q];
        }
        if (ok && out->rs_axis < 0 && !x->no_scatter) { /* one scatter per value keeps the order simple */
            out->rs_axis = (int8_t)a;
            out->rs_dim = (int8_t)d;
            out->rs_red = from.red[a];
        } else {
            ar[keep++] = a;
        }
    }
    n_ar = keep;
    out->n_ar = (uint8_t)n_ar;
    out->ar_red = (uint8_t)ar_red;
    for (int k = 0; k < n_ar; k++) {
        out->ar_axes[k] = (uint8_t)ar[k];
        from.dim[ar[k]] = IR_AX_NONE;
    }
    if (out->rs_axis >= 0) {
        from.dim[out->rs_axis] = IR_AX_NONE;
        layout_push(&from, out->rs_axis, out->rs_dim);
    }
    /* the retiling */
    if (g->rank > IR_REDIST_MAX_RANK)
        return ap_error_set(err, AP_EUNSUPPORTED, "redistribution of a rank-%d value is not supported", g->rank);
    submesh sm;
    submesh_init(m, &from, &sm);
    ir_redist_type rf, rt;
    to_redist_type(x->c, &sm, g, &from, &rf);
    to_redist_type(x->c, &sm, g, to, &rt);
    if (ir_redist_type_equal(&rf, &rt))
        return 0;
    if (ir_type_numel(g) == 0) { /* nothing to move: an empty local value */
        out->empty = true;
        return 0;
    }
    /* the synthesis slices and gathers by sizes: a `?` has none (the
     * transfer would need a dynamic_slice whose sizes follow the value) */
    for (int d = 0; d < g->rank; d++)
        if (g->dims[d] == IR_DYN)
            return ap_error_set(err, AP_EUNSUPPORTED,
                                "its dim %d is dynamic (`?`), and a value of dynamic shape is never redistributed", d);
    return retile_plan(x, g, &from, to, &out->redist, err);
}

_Static_assert(sizeof(ir_layout) == 24, "a layout is three words");

static uint64_t xmemo_hash(const ir_type *g, const ir_layout *from, const ir_layout *to, bool no_scatter)
{
    uint64_t w[6];
    memcpy(w, from, sizeof *from);
    memcpy(w + 3, to, sizeof *to);
    uint64_t h = ((uint64_t)(uintptr_t)g ^ (uint64_t)no_scatter) * 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 6; i++) {
        h = (h ^ w[i]) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
    return h | 1;
}

static bool xmemo_grow(xfer_ctx *x)
{
    uint32_t cap = x->cap_xmemo ? x->cap_xmemo * 2 : 256;
    xmemo_ent *m = ap_calloc(cap, sizeof *m);
    if (!m)
        return false;
    for (uint32_t i = 0; i < x->cap_xmemo; i++) {
        if (!x->xmemo[i].hash)
            continue;
        uint32_t j = (uint32_t)x->xmemo[i].hash & (cap - 1);
        while (m[j].hash)
            j = (j + 1) & (cap - 1);
        m[j] = x->xmemo[i];
    }
    ap_free(x->xmemo);
    x->xmemo = m;
    x->cap_xmemo = cap;
    return true;
}

/* xfer_work_out's answer, from the memo when it was asked before (the
 * same bytes in, the same bytes out: it reads nothing else but the mesh
 * and the redistribution memo, whose plans stay until the plan is freed).
 * A refusal is not remembered. */
static int xfer_decide(xfer_ctx *x, const ir_type *g, ir_layout from, const ir_layout *to, ir_xfer *out,
                       ap_error *err)
{
    uint64_t h = xmemo_hash(g, &from, to, x->no_scatter);
    if (x->cap_xmemo) {
        for (uint32_t j = (uint32_t)h & (x->cap_xmemo - 1); x->xmemo[j].hash; j = (j + 1) & (x->cap_xmemo - 1)) {
            const xmemo_ent *m = &x->xmemo[j];
            if (m->hash == h && m->g == g && m->no_scatter == x->no_scatter && !memcmp(&m->from, &from, sizeof from) &&
                !memcmp(&m->to, to, sizeof *to)) {
                *out = m->x;
#ifndef NDEBUG
                /* debug builds: what it would work out again */
                ir_xfer again;
                ap_error e2;
                assert(xfer_work_out(x, g, from, to, &again, &e2) == 0 && !memcmp(&again, out, sizeof again));
#endif
                return 0;
            }
        }
    }
    int rc = xfer_work_out(x, g, from, to, out, err);
    if (rc < 0)
        return rc;
    if ((x->n_xmemo + 1) * 2 > x->cap_xmemo && !xmemo_grow(x))
        return 0; /* out of memory: the answer stands, unremembered */
    uint32_t j = (uint32_t)h & (x->cap_xmemo - 1);
    while (x->xmemo[j].hash)
        j = (j + 1) & (x->cap_xmemo - 1);
    xmemo_ent *m = &x->xmemo[j];
    m->hash = h;
    m->g = g;
    m->from = from;
    m->to = *to;
    m->no_scatter = x->no_scatter;
    m->x = *out;
    x->n_xmemo++;
    return 0;
}

/* ============================================================ the plan */

/* One use in lowering order. */
typedef struct use_ent {
    uint32_t op;          /* segment: op index, n_ops for the return */
    uint32_t slot : 31;   /* operand index, n_operands + capture index, or result index */
    uint32_t operand : 1; /* an operand of op (not a capture, not the return): the sync
                             reads its needed layout straight off op's nest without
                             loading op's operand count (a miss per use otherwise) */
} use_ent;

/* The plan of one value. */
typedef struct vplan {
    ir_mat *mats;
    uint32_t n_mats, cap_mats;
    uint32_t n_prod_uses; /* lowered ops taking the value as produced */
    int32_t prod_op;      /* the only such op when it is a direct operand use, else -1 */
    uint32_t prod_slot;
    uint8_t from_arg;     /* from_argument(c, v) + 1 once worked out, else 0: it depends on the
                             program only, and loads the defining ops (a miss each) */
} vplan;

struct ir_lplan {
    const ir_pctx *c;
    xfer_ctx x;
    /* static: uses of each value in lowering order (CSR) */
    uint32_t *u0;
    use_ent *uses;
    /* static: captured values per op (CSR): the context's cap0/cap_val */
    const uint32_t *cap0;
    const uint32_t *cap_val;
    /* slots: use_mat[slot0[k] + slot] */
    uint32_t *slot0;
    int32_t *use_mat;
    vplan *vp;
    ir_layout *ret_layout;
    /* the state followed: nests, argument layouts, identity ops by value */
    bool valid;
    uint8_t *snap_nlen;
    ir_loop *snap_nest;
    ir_layout *snap_arg;
    uint8_t *snap_vlen; /* per value: identity op nest length + 1, 0 none */
    ir_loop *snap_vnest;
    uint32_t *snap_vv, n_snap_vv; /* the values snap_vlen gives an identity op */
    /* what the last sync changed */
    uint32_t *ch_ops, n_ch_ops;
    bool ch_all;
    uint32_t *ch_vals, n_ch_vals;
    uint8_t *mark; /* per value: queued for redoing */
};

static void free_vplan(vplan *v)
{
    ap_free(v->mats);
    memset(v, 0, sizeof *v);
}

void ir_lplan_free(ir_lplan *pl)
{
    if (!pl)
        return;
    if (pl->vp)
        for (uint32_t v = 0; v < pl->c->n_vals; v++)
            free_vplan(&pl->vp[v]);
    xctx_free(&pl->x);
    ap_free(pl->u0);
    ap_free(pl->uses);
    ap_free(pl->slot0);
    ap_free(pl->use_mat);
    ap_free(pl->vp);
    ap_free(pl->ret_layout);
    ap_free(pl->snap_nlen);
    ap_free(pl->snap_nest);
    ap_free(pl->snap_arg);
    ap_free(pl->snap_vlen);
    ap_free(pl->snap_vnest);
    ap_free(pl->snap_vv);
    ap_free(pl->ch_ops);
    ap_free(pl->ch_vals);
    ap_free(pl->mark);
    ap_free(pl);
}

int ir_lplan_new(const ir_pctx *c, ir_lplan **out, ap_error *err)
{
    *out = NULL;
    ir_lplan *pl = ap_calloc(1, sizeof *pl);
    if (!pl)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    pl->c = c;
    int rc = xctx_init(&pl->x, c, err);
    if (rc < 0) {
        ir_lplan_free(pl);
        return rc;
    }
    pl->slot0 = ap_malloc(sizeof *pl->slot0 * (c->n_ops + 2));
    if (!pl->slot0)
        goto oom;
    /* captured values, each a use of its own: the lowering clones every op
     * holding regions with a cloner of its own, which resolves each value
     * the regions capture once, through that use (lower.c,
     * resolve_captured) */
    pl->cap0 = c->cap0;
    pl->cap_val = c->cap_val;
    /* slots */
    uint32_t s = 0;
    for (uint32_t k = 0; k < c->n_ops; k++) {
        pl->slot0[k] = s;
        s += c->ops[k]->n_operands + (pl->cap0[k + 1] - pl->cap0[k]);
    }
    pl->slot0[c->n_ops] = s;
    s += c->n_ret;
    pl->slot0[c->n_ops + 1] = s;
    pl->use_mat = ap_malloc(sizeof *pl->use_mat * (s + 1));
    if (pl->use_mat)
        for (uint32_t i = 0; i <= s; i++)
            pl->use_mat[i] = IR_LPLAN_DIRECT;
    /* uses per value in lowering order: counts, then fill */
    pl->u0 = ap_calloc(c->n_vals + 2, sizeof *pl->u0);
    pl->uses = ap_malloc(sizeof *pl->uses * (s + 1));
    pl->vp = ap_calloc(c->n_vals + 1, sizeof *pl->vp);
    pl->ret_layout = ap_malloc(sizeof *pl->ret_layout * (c->n_ret + 1));
    pl->mark = ap_calloc(c->n_vals + 1, 1);
    pl->ch_vals = ap_malloc(sizeof *pl->ch_vals * (c->n_vals + 1));
    pl->ch_ops = ap_malloc(sizeof *pl->ch_ops * (c->n_ops + 1));
    pl->snap_nlen = ap_calloc(c->n_ops + 1, 1);
    pl->snap_nest = ap_calloc((size_t)c->n_ops * nest_room(c) + 1, sizeof *pl->snap_nest);
    pl->snap_arg = ap_malloc(sizeof *pl->snap_arg * (c->n_args + 1));
    pl->snap_vlen = ap_calloc(c->n_vals + 1, 1);
    pl->snap_vv = ap_malloc(sizeof *pl->snap_vv * (c->n_vals + 1));
    pl->snap_vnest = ap_calloc((size_t)c->n_vals * nest_room(c) + 1, sizeof *pl->snap_vnest);
    if (!pl->use_mat || !pl->u0 || !pl->uses || !pl->vp || !pl->ret_layout || !pl->mark || !pl->ch_vals ||
        !pl->ch_ops || !pl->snap_nlen || !pl->snap_nest || !pl->snap_arg || !pl->snap_vlen || !pl->snap_vnest ||
        !pl->snap_vv)
        goto oom;
#define FOR_USES(...)                                                               \
    for (uint32_t k = 0; k < c->n_ops; k++) {                                        \
        uint32_t no = c->ops[k]->n_operands;                                         \
        for (uint32_t i = 0; i < no; i++) {                                          \
            uint32_t v = c->opd_val[c->opd0[k] + i], sl = i;                         \
            __VA_ARGS__                                                              \
        }                                                                            \
        for (uint32_t j = pl->cap0[k]; j < pl->cap0[k + 1]; j++) {                   \
            uint32_t v = pl->cap_val[j], sl = no + (j - pl->cap0[k]);                \
            __VA_ARGS__                                                              \
        }                                                                            \
    }                                                                                \
    for (uint32_t r = 0; r < c->n_ret; r++) {                                        \
        uint32_t k = c->n_ops, v = c->ret_val[r], sl = r;                            \
        __VA_ARGS__                                                                  \
    }
    FOR_USES({
        (void)k;
        (void)sl;
        pl->u0[v + 1]++;
    })
    for (uint32_t v = 0; v < c->n_vals; v++)
        pl->u0[v + 1] += pl->u0[v];
    uint32_t *fill = ap_calloc(c->n_vals + 1, sizeof *fill);
    if (!fill)
        goto oom;
    FOR_USES({ pl->uses[pl->u0[v] + fill[v]++] = (use_ent){k, sl, k < c->n_ops && sl < c->ops[k]->n_operands}; })
#undef FOR_USES
    ap_free(fill);
    *out = pl;
    return 0;
oom:
    ir_lplan_free(pl);
    return ap_error_set(err, AP_ENOMEM, "out of memory");
}

/* ------------------------------------------------------ one value's plan */

/* Devices sharing one tile of a value in layout lay: the larger, the more
 * of the value each device holds. */
static int64_t tile_count(const ir_pctx *c, const ir_layout *lay)
{
    int64_t n = 1;
    for (int a = 0; a < c->mesh.n_axes; a++)
        if (lay->dim[a] >= 0)
            n *= c->mesh.sizes[a];
    return n;
}

/* The latest mat of vp in layout lay usable by op (made for any op or for
 * that op), -1 none. */
typedef struct vbuild {
    uint32_t *mat_op;    /* per mat of the value being planned: the op it may serve */
    uint32_t *mat_scope; /* per mat: the region its first use is in; it serves uses there and nested in it */
    uint32_t cap;
} vbuild;

/* The region a use runs in: a loop's yield (carry operand 1) is in its
 * body; the return in the function. */
static uint32_t use_scope(const ir_pctx *c, uint32_t op, uint32_t slot)
{
    if (op >= c->n_ops)
        return 0;
    if (c->op_kind[op] == PK_CARRY && slot == 1)
        return c->groups[c->op_group[op]].scope_body;
    if (c->op_kind[op] == PK_MERGE) /* branch #slot's yield */
        return c->branches[c->groups[c->op_group[op]].br0 + slot].scope;
    return c->op_scope[op];
}

/* The latest mat of vp in layout lay usable by op in scope sc (made for
 * any op or for that op, in sc or a region around it), -1 none. */
static int32_t mat_find(const ir_pctx *c, const vplan *vp, const ir_layout *lay, uint32_t op, uint32_t sc,
                        const vbuild *vb)
{
    for (uint32_t m = vp->n_mats; m-- > 0;)
        if ((vb->mat_op[m] == ANY_OP || vb->mat_op[m] == op) && layout_equal(&vp->mats[m].x.to, lay) &&
            ir__scope_encloses(c, vb->mat_scope[m], sc))
            return (int32_t)m;
    return -1;
}

/* The mat a use resolves to after skipping transfers that insert nothing
 * (their sources are resolved as they are made: one step). */
static int32_t resolve_noop(const vplan *vp, int32_t m)
{
    while (m >= 0 && ir_xfer_is_noop(&vp->mats[m].x))
        m = vp->mats[m].src;
    return m;
}

static int mat_add(ir_lplan *pl, vplan *vp, vbuild *vb, const ir_type *g, const ir_layout *from,
                   const ir_layout *to, int32_t src, uint32_t op, uint32_t seg, uint32_t slot, ap_error *err)
{
    uint32_t sc = use_scope(pl->c, seg, slot);
    if (vp->n_mats == vp->cap_mats) {
        uint32_t cap = vp->cap_mats ? vp->cap_mats * 2 : 2;
        ir_mat *m = ap_realloc(vp->mats, sizeof *m * cap);
        if (!m)
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        vp->mats = m;
        vp->cap_mats = cap;
    }
    if (vp->n_mats >= vb->cap) {
        uint32_t cap = vb->cap ? vb->cap * 2 : 16;
        uint32_t *o = ap_realloc(vb->mat_op, sizeof *o * cap);
        if (o)
            vb->mat_op = o;
        uint32_t *q = o ? ap_realloc(vb->mat_scope, sizeof *q * cap) : NULL;
        if (!q)
            return ap_error_set(err, AP_ENOMEM, "out of memory");
        vb->mat_scope = q;
        vb->cap = cap;
    }
    ir_mat *m = &vp->mats[vp->n_mats];
    int rc = xfer_decide(&pl->x, g, *from, to, &m->x, err);
    if (rc < 0)
        return rc;
    m->src = resolve_noop(vp, src); /* a transfer that inserts nothing passes its source on */
    m->seg = seg;
    m->slot = slot;
    vb->mat_op[vp->n_mats] = op;
    vb->mat_scope[vp->n_mats] = sc;
    return (int)vp->n_mats++;
}

/* Which axes a transfer reduces, and in which stages: a bit per axis of
 * its all_reduce, then its reduce_scatter's axis.  A reduce_scatter alone
 * adds a group's summands in the order an all_reduce over that group does
 * (coll.c: reduce_group), so it reads as that all_reduce. */
static uint32_t reduction_of(const ir_xfer *x)
{
    if (!x->n_ar && x->rs_axis >= 0)
        return 1u << x->rs_axis;
    uint32_t sig = 0;
    for (int k = 0; k < x->n_ar; k++)
        sig |= 1u << x->ar_axes[k];
    return x->rs_axis >= 0 ? sig | (uint32_t)(x->rs_axis + 1) << 16 : sig;
}

/* Every copy of the value that reduces its pending sum adds the summands
 * in the same order: when two uses reduce it differently (one all_reduce
 * over a and b at once, another an all_reduce over b then a reduce_scatter
 * over a), the copies differ in their last bits, and a program that
 * compares a value with its own maximum (an argmax written as x == max(x),
 * max's gradient) finds no element equal: an MoE router sent its tokens to
 * expert 4 of 0-3.  Those copies are then all made by all_reduce (the
 * same collective, the same bits) and sliced locally.  Copies continuing
 * from another (through an identity op's copy, the summands redistributed
 * along other axes) count too: a summand keeps its place along the axes
 * of the sum, so the stages alone decide the order. */
static int same_reductions(ir_lplan *pl, vplan *vp, const ir_type *g, ap_error *err)
{
    uint32_t first = 0;
    bool mixed = false;
    for (uint32_t m = 0; m < vp->n_mats && !mixed; m++) {
        const ir_xfer *x = &vp->mats[m].x;
        if (!x->n_ar && x->rs_axis < 0)
            continue;
        uint32_t r = reduction_of(x);
        if (!first)
            first = r;
        mixed = r != first;
    }
    if (!mixed)
        return 0;
    pl->x.no_scatter = true;
    for (uint32_t m = 0; m < vp->n_mats; m++) {
        ir_mat *mt = &vp->mats[m];
        if (mt->x.rs_axis < 0)
            continue;
        ir_layout from = mt->x.from, to = mt->x.to;
        int rc = xfer_decide(&pl->x, g, from, &to, &mt->x, err);
        if (rc < 0) {
            pl->x.no_scatter = false;
            return rc;
        }
    }
    pl->x.no_scatter = false;
    return 0;
}

/* The layout returned value #r leaves in, given the copies made of it so
 * far: its layout with pending sums reduced, reusing a reduced copy that
 * keeps its tiling when there is one. */
static void return_layout(const ir_lplan *pl, const ir_partition *p, const vplan *vp, uint32_t r, ir_layout *out)
{
    const ir_pctx *c = pl->c;
    uint32_t v = c->ret_val[r];
    if (c->ret_alias_arg[r] >= 0) {
        *out = p->arg_layout[c->ret_alias_arg[r]];
        return;
    }
    ir_layout seen;
    ir__seen_layout(p, v, &seen);
    if (!ir_layout_has_partial(&seen)) {
        *out = seen;
        return;
    }
    for (uint32_t m = vp->n_mats; m-- > 0;) {
        const ir_layout *cl = &vp->mats[m].x.to;
        if (ir_layout_has_partial(cl))
            continue;
        bool ok = true;
        for (int a = 0; a < c->mesh.n_axes && ok; a++) {
            if (seen.dim[a] >= 0)
                ok = cl->dim[a] == seen.dim[a] && cl->pos[a] == seen.pos[a];
            else if (seen.dim[a] == IR_AX_NONE)
                ok = cl->dim[a] == IR_AX_NONE;
        }
        if (ok) {
            *out = *cl;
            return;
        }
    }
    for (int a = 0; a < c->mesh.n_axes; a++)
        if (seen.dim[a] == IR_AX_PARTIAL)
            seen.dim[a] = IR_AX_NONE;
    *out = seen;
}

/* The layout use (op, slot) of a value needs: an operand's, a return's
 * (op = n_ops), or a captured value's (whole, sums reduced). */
static void use_layout(const ir_lplan *pl, const ir_partition *p, const vplan *vp, uint32_t op, uint32_t slot,
                       ir_layout *want)
{
    const ir_pctx *c = pl->c;
    if (op == c->n_ops)
        return_layout(pl, p, vp, slot, want);
    else if (slot < c->opd0[op + 1] - c->opd0[op])
        ir__needed_layout(p, op, slot, want);
    else
        layout_init(want);
}

/* Whether identity op k is atomic along some axis (an `any` loop). */
static bool vop_is_atomic(const ir_partition *p, uint32_t k)
{
    uint32_t op = vop_id(p, k);
    const ir_loop *n = nest_of(p, op);
    for (int i = 0; i < p->nlen[op]; i++)
        if (n[i].entry == p->ctx->any_entry)
            return true;
    return false;
}

/* Whether v is an argument, or an argument cast to another element type
 * (mixed precision: the bf16 copy of an f32 parameter, converted shard by
 * shard), or either carried unchanged through a loop (micro-batches).  Its sharded source is held all along, so a gather of it is
 * made afresh for each op that needs more of it, as ZeRO-3 does: PyTorch's
 * FSDP casts and gathers a layer's shard before its forward and again
 * before its backward (reshard_after_forward), and JAX's remat gives the
 * backward its own convert and all_gather of the parameter (behind the
 * optimization barrier, so XLA cannot merge it with the forward's). */
static bool from_argument(const ir_pctx *c, uint32_t v)
{
    for (int depth = 0; depth < 4; depth++) {
        int32_t k = c->val_op[v];
        if (k < 0)
            return true;
        if (c->op_kind[k] == PK_CARRY) {
            /* a loop (micro-batches) carrying it through unchanged */
            if (c->opd0[k + 1] - c->opd0[k] != 2 || c->opd_val[c->opd0[k] + 1] != c->op_val0[k])
                return false;
            v = c->opd_val[c->opd0[k]];
            continue;
        }
        const ir_op *op = c->ops[k];
        if (c->op_kind[k] != PK_OP || op->opcode != IR_OP_CONVERT || c->opd0[k + 1] - c->opd0[k] != 1)
            return false;
        v = c->opd_val[c->opd0[k]];
    }
    return false;
}

/* err, which a transfer of value v for its use by op (c->n_ops: the
 * return) refused, with what and where: "the result of stablehlo.add at
 * 12:5 (tensor<?x4xf32>), as stablehlo.multiply at 14:5 needs it: ...".
 * Positions, not %N names: naming a result asks the printer, and this runs
 * for the search's scorer too. */
static int transfer_refused(const ir_pctx *c, uint32_t v, uint32_t op, int rc, ap_error *err)
{
    if (!err)
        return rc;
    char what[160], user[120], type[64] = "";
    ap_buf b;
    ap_buf_init(&b);
    ir_type_print(&b, val_type(c, v));
    if (!b.oom && b.len)
        snprintf(type, sizeof type, "%s", b.data);
    ap_buf_free(&b);
    const ir_op *def = c->val_op[v] >= 0 ? c->ops[c->val_op[v]] : NULL;
    const char *arg_name = c->val_op[v] < 0 ? ir_func_arg_name(c->func, v) : NULL;
    if (arg_name)
        snprintf(what, sizeof what, "argument %s (%s)", arg_name, type);
    else if (c->val_op[v] < 0)
        snprintf(what, sizeof what, "argument %%arg%u (%s)", v, type);
    else if (def && def->src_line)
        snprintf(what, sizeof what, "the result of %s at %u:%u (%s)", def->name, def->src_line, def->src_col, type);
    else
        snprintf(what, sizeof what, "a value (%s)", type);
    const ir_op *u = op < c->n_ops ? c->ops[op] : c->ret;
    if (u && u->src_line)
        snprintf(user, sizeof user, "%s at %u:%u", op < c->n_ops ? u->name : "the return", u->src_line, u->src_col);
    else
        snprintf(user, sizeof user, "%s", op < c->n_ops && u ? u->name : "the return");
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return ap_error_set(err, rc, "%s cannot be redistributed as %s needs it: %s", what, user, msg);
}

/* Plans every use of value v in state p. */
static int plan_value(ir_lplan *pl, const ir_partition *p, uint32_t v, vbuild *vb, ap_error *err)
{
    const ir_pctx *c = pl->c;
    vplan *vp = &pl->vp[v];
    vp->n_mats = 0;
    const ir_type *g = val_type(c, v);
    ir_layout prod, vneed;
    ir__produced_layout(p, v, &prod);
    bool has_vop = p->vop_of[v] >= 0;
    if (has_vop)
        ir__needed_layout(p, vop_id(p, (uint32_t)p->vop_of[v]), 0, &vneed);
    /* Uses go through the identity op's copy (vneed) when it makes one.  An
     * atomic identity op's copy is the value replicated along its axes: a
     * use that wants it sliced again along them (an expert-parallel layer's
     * tokens, atomic between the dispatch tiled by batch and the experts
     * tiled by expert) would get an all_gather and then a dynslice, which
     * PartIR:HLO fuses into one all_to_all.  So when no use wants the
     * replicated copy itself, each use is redistributed straight from the
     * value as produced: the same data, by the synthesis's cheapest
     * transfer (all_to_all there). */
    bool via_vop = has_vop && !layout_equal(&vneed, &prod);
    if (via_vop && vop_is_atomic(p, (uint32_t)p->vop_of[v])) {
        via_vop = false;
        for (uint32_t u = pl->u0[v]; u < pl->u0[v + 1] && !via_vop; u++) {
            ir_layout want;
            use_layout(pl, p, vp, pl->uses[u].op, pl->uses[u].slot, &want);
            via_vop = layout_equal(&want, &vneed);
        }
    }
    /* each use's mat (transfers that insert nothing pass their source on),
     * and who takes the value as produced */
    vp->n_prod_uses = 0;
    vp->prod_op = -1;
    uint32_t last_direct = UINT32_MAX; /* the last use taking it as produced */
    for (uint32_t u = pl->u0[v]; u < pl->u0[v + 1]; u++) {
        uint32_t op = pl->uses[u].op, slot = pl->uses[u].slot;
        int32_t *dst = &pl->use_mat[pl->slot0[op] + slot];
        ir_layout want;
        if (pl->uses[u].operand)
            ir__needed_layout(p, op, slot, &want); /* most uses: inline */
        else
            use_layout(pl, p, vp, op, slot, &want);
        if (op == c->n_ops)
            pl->ret_layout[slot] = want;
        int32_t m = IR_LPLAN_DIRECT;
        if (!layout_equal(&prod, &want)) {
            uint32_t sc = use_scope(c, op, slot);
            m = mat_find(c, vp, &want, op, sc, vb);
            if (m < 0) {
                ir_layout from = prod;
                int32_t src = -1;
                bool done = false;
                if (via_vop) {
                    /* through the value's identity op (atomic or tiling action) */
                    int32_t s = mat_find(c, vp, &vneed, op, sc, vb);
                    if (s < 0 && (s = mat_add(pl, vp, vb, g, &prod, &vneed, -1, ANY_OP, op, slot, err)) < 0)
                        return transfer_refused(c, v, op, s, err);
                    if (layout_equal(&vneed, &want)) {
                        m = s;
                        done = true;
                    } else {
                        from = vneed;
                        src = s;
                    }
                }
                if (!done) {
                    if (!vp->from_arg)
                        vp->from_arg = (uint8_t)(from_argument(c, v) + 1);
                    bool per_use = vp->from_arg == 2 && tile_count(c, &want) < tile_count(c, &from);
                    if ((m = mat_add(pl, vp, vb, g, &from, &want, src, per_use ? op : ANY_OP, op, slot, err)) < 0)
                        return transfer_refused(c, v, op, m, err);
                }
            }
            m = resolve_noop(vp, m);
        }
        *dst = m;
        if (m == IR_LPLAN_DIRECT) {
            vp->n_prod_uses++;
            last_direct = u;
        }
    }
    if (last_direct != UINT32_MAX) {
        const use_ent *u = &pl->uses[last_direct];
        vp->prod_op = u->operand ? (int32_t)u->op : -1;
        vp->prod_slot = u->slot;
    }
    int rc = same_reductions(pl, vp, g, err);
    if (rc < 0)
        return rc;
    for (uint32_t m = 0; m < vp->n_mats; m++) {
        const ir_mat *mt = &vp->mats[m];
        if (mt->src == -1 && xfer_uses_source(&mt->x)) {
            vp->n_prod_uses++;
            vp->prod_op = -1;
        }
    }
    if (vp->n_prod_uses != 1)
        vp->prod_op = -1;
    return 0;
}

/* --------------------------------------------------------------- sync */

static void mark_value(ir_lplan *pl, uint32_t v)
{
    if (!pl->mark[v]) {
        pl->mark[v] = 1;
        pl->ch_vals[pl->n_ch_vals++] = v;
    }
}

/* An op's nest changed: its operands' uses and its results' production. */
static void mark_op(ir_lplan *pl, uint32_t k)
{
    const ir_pctx *c = pl->c;
    for (uint32_t i = c->opd0[k]; i < c->opd0[k + 1]; i++)
        mark_value(pl, c->opd_val[i]);
    for (uint32_t v = c->op_val0[k]; v < c->op_val0[k + 1]; v++)
        mark_value(pl, v);
}

_Static_assert(sizeof(ir_loop) == 8, "a loop is one word: its axis, its specs, its entry");

/* Loops compared by what they mean (the padding is not). */
static inline bool loops_equal(const ir_loop *a, const ir_loop *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].axis != b[i].axis || a[i].entry != b[i].entry)
            return false;
    return true;
}

int ir_lplan_sync(ir_lplan *pl, const ir_partition *p, ap_error *err)
{
    const ir_pctx *c = pl->c;
    if (p->ctx != c)
        return ap_error_set(err, AP_EINVALID, "lowering plan: the state is of another function");
    bool full = !pl->valid;
    pl->valid = false;
    pl->n_ch_ops = pl->n_ch_vals = 0;
    pl->ch_all = full;
    if (full) {
        for (uint32_t v = 0; v < c->n_vals; v++)
            mark_value(pl, v);
        for (uint32_t k = 0; k < c->n_ops; k++)
            pl->ch_ops[pl->n_ch_ops++] = k;
    } else {
        /* the snapshot follows as each difference is found (after a
         * failure below the plan is invalid: the next sync is full) */
        /* in locals: mark_op's byte stores could alias them, and the
         * compiler would load them again for every op */
        const size_t room = nest_room(c);
        const uint32_t n_ops = c->n_ops;
        const uint8_t *nlen = p->nlen;
        uint8_t *snap_nlen = pl->snap_nlen;
        const ir_loop *nest = p->nest;
        ir_loop *snest = pl->snap_nest;
        for (uint32_t k = 0; k < n_ops; k++, nest += room, snest += room) {
            uint8_t n = nlen[k];
            if (n == snap_nlen[k]) {
                /* a loop as one word: its spec bytes are a function of its
                 * entry (ir_loop), so equal words are equal (axis, entry) */
                uint64_t diff = 0;
                for (int i = 0; i < n; i++) {
                    uint64_t a, b;
                    memcpy(&a, &nest[i], sizeof a);
                    memcpy(&b, &snest[i], sizeof b);
                    diff |= a ^ b;
                }
                if (!diff)
                    continue;
            }
            pl->ch_ops[pl->n_ch_ops++] = k;
            mark_op(pl, k);
            snap_nlen[k] = n;
            for (int i = 0; i < n; i++)
                snest[i] = nest[i];
        }
        for (uint32_t a = 0; a < c->n_args; a++)
            if (!layout_equal(&p->arg_layout[a], &pl->snap_arg[a]))
                mark_value(pl, a);
        /* a result tied to a donated argument leaves in that argument's layout */
        for (uint32_t r = 0; r < c->n_ret; r++) {
            int32_t a = c->ret_alias_arg[r];
            if (a >= 0 && !layout_equal(&p->arg_layout[a], &pl->snap_arg[a]))
                mark_value(pl, c->ret_val[r]);
        }
        /* identity ops, compared by value: over the values that had one
         * (most have none) and those that have one */
        for (uint32_t i = 0; i < pl->n_snap_vv; i++) {
            uint32_t v = pl->snap_vv[i];
            if (p->vop_of[v] < 0) {
                pl->mark[v] = 1;
                pl->snap_vlen[v] = 0;
            }
        }
        pl->n_snap_vv = 0;
        for (uint32_t k = 0; k < p->n_vops; k++) {
            uint32_t v = p->vops[k].val, op = vop_id(p, k);
            ir_loop *snap = &pl->snap_vnest[(size_t)v * nest_room(c)];
            if (pl->snap_vlen[v] != p->nlen[op] + 1 || !loops_equal(nest_of(p, op), snap, p->nlen[op])) {
                pl->mark[v] = 1;
                pl->snap_vlen[v] = (uint8_t)(p->nlen[op] + 1);
                memcpy(snap, nest_of(p, op), sizeof(ir_loop) * p->nlen[op]);
            }
            pl->snap_vv[pl->n_snap_vv++] = v;
        }
        /* the values marked, in value order, as a full rebuild would go:
         * eight marks at a time (most are clear) */
        uint32_t nch = 0;
        for (uint32_t v0 = 0; v0 < c->n_vals; v0 += 8) {
            uint32_t v1 = v0 + 8 < c->n_vals ? v0 + 8 : c->n_vals;
            if (v1 - v0 == 8) {
                uint64_t w;
                memcpy(&w, &pl->mark[v0], sizeof w);
                if (!w)
                    continue;
            }
            for (uint32_t v = v0; v < v1; v++)
                if (pl->mark[v])
                    pl->ch_vals[nch++] = v;
        }
        pl->n_ch_vals = nch;
    }
    vbuild vb = {0};
    int rc = 0;
    for (uint32_t i = 0; i < pl->n_ch_vals; i++) {
        uint32_t v = pl->ch_vals[i];
        pl->mark[v] = 0;
        if (rc == 0)
            rc = plan_value(pl, p, v, &vb, err);
    }
    ap_free(vb.mat_op);
    ap_free(vb.mat_scope);
    if (rc < 0)
        return rc;
    /* the snapshot of what the plan now follows (kept up as it went when
     * not full) */
    memcpy(pl->snap_arg, p->arg_layout, sizeof *pl->snap_arg * c->n_args);
    if (full) {
        for (uint32_t k = 0; k < c->n_ops; k++) {
            pl->snap_nlen[k] = p->nlen[k];
            memcpy(&pl->snap_nest[(size_t)k * nest_room(c)], nest_of(p, k), sizeof(ir_loop) * p->nlen[k]);
        }
        pl->n_snap_vv = 0;
        for (uint32_t v = 0; v < c->n_vals; v++) {
            if (p->vop_of[v] < 0) {
                pl->snap_vlen[v] = 0;
                continue;
            }
            uint32_t op = vop_id(p, (uint32_t)p->vop_of[v]);
            pl->snap_vv[pl->n_snap_vv++] = v;
            pl->snap_vlen[v] = (uint8_t)(p->nlen[op] + 1);
            memcpy(&pl->snap_vnest[(size_t)v * nest_room(c)], nest_of(p, op), sizeof(ir_loop) * p->nlen[op]);
        }
    }
    pl->valid = true;
    return 0;
}

const uint32_t *ir_lplan_changed_ops(const ir_lplan *pl, uint32_t *n, bool *all)
{
    *n = pl->n_ch_ops;
    if (all)
        *all = pl->ch_all;
    return pl->ch_ops;
}

const uint32_t *ir_lplan_changed_values(const ir_lplan *pl, uint32_t *n)
{
    *n = pl->n_ch_vals;
    return pl->ch_vals;
}

uint32_t ir_lplan_num_mats(const ir_lplan *pl, uint32_t v) { return pl->vp[v].n_mats; }
const ir_mat *ir_lplan_mats(const ir_lplan *pl, uint32_t v, uint32_t *n)
{
    *n = pl->vp[v].n_mats;
    return pl->vp[v].mats;
}
const int32_t *ir_lplan_uses(const ir_lplan *pl, uint32_t k) { return &pl->use_mat[pl->slot0[k]]; }
const ir_mat *ir_lplan_mat(const ir_lplan *pl, uint32_t v, uint32_t m) { return &pl->vp[v].mats[m]; }
int32_t ir_lplan_use(const ir_lplan *pl, uint32_t k, uint32_t slot) { return pl->use_mat[pl->slot0[k] + slot]; }
uint32_t ir_lplan_num_captured(const ir_lplan *pl, uint32_t k) { return pl->cap0[k + 1] - pl->cap0[k]; }
uint32_t ir_lplan_captured_value(const ir_lplan *pl, uint32_t k, uint32_t i) { return pl->cap_val[pl->cap0[k] + i]; }
const ir_layout *ir_lplan_result_layout(const ir_lplan *pl, uint32_t r) { return &pl->ret_layout[r]; }

uint32_t ir_lplan_produced_uses(const ir_lplan *pl, uint32_t v, int32_t *op, uint32_t *slot)
{
    const vplan *vp = &pl->vp[v];
    if (op)
        *op = vp->prod_op;
    if (slot)
        *slot = vp->prod_slot;
    return vp->n_prod_uses;
}
