/*
 * score.c - the fast scorer: the cost report of a partition state's SPMD
 * lowering, computed from the state without building the lowered program.
 *
 * It is the same model as cost_prepare + cost_evaluate on the output of
 * ir_lower, not a second one:
 *   - what the lowering inserts comes from the lowering plan (ir/partir,
 *     plan.c) that ir_lower itself emits: per use, the value as produced or
 *     its copy in the layout the user needs; per copy, the all_reduce /
 *     reduce_scatter and the synthesized redistribution steps;
 *   - each op's flops and bytes come from cost__op_cost (prepare.c), given
 *     the local types its loop nest implies and what fusion keeps on chip;
 *     each collective's from cost__coll_formula;
 *   - the peak is the live-range walk of walk_block over the lowered
 *     program's ops in order (the plan says where each copy is made), with
 *     the same aliasing and donation rules;
 *   - the report comes from cost_evaluate over a cost_program filled here.
 * test_score holds it equal to ir_lower + cost_estimate on random states of
 * the zoo's models.
 *
 * Incremental: the plan is synced with each new state, redoing only values
 * whose producer, users or identity op changed; the per-op and per-value
 * records are redone for what changed; the walk and the sums run over the
 * records (linear, no IR, no allocation in steady state).  Every record is
 * a function of the state alone, so the score does not depend on the order
 * in which states are scored.
 *
 * Programs the fast path does not cover (loops, conditionals, calls, ops of
 * other dialects holding regions, regions capturing outer values, programs
 * that already contain collectives) are refused with AP_EUNSUPPORTED: score
 * those through ir_lower + cost_estimate.
 */
#include "cost_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ records */

enum { CL_AR, CL_RS, CL_AG, CL_A2A, CL_PERM, CL_DS, CL_EMPTY };

/* One op a transfer inserts. */
typedef struct clop {
    uint8_t kind;
    uint8_t rank;        /* CL_DS: the value's rank (rank - 1 uses of the zero offset) */
    double bytes;        /* its result's bytes */
    cost_coll_item coll; /* collectives */
} clop;

/* Per value: its bytes as produced, and the ops of its copies. */
typedef struct val_rec {
    double bytes;
    clop *ops;
    uint32_t n_ops, cap_ops;
    uint32_t *mat_end; /* per mat: one past its last op in `ops` */
    uint32_t cap_mats;
} val_rec;

/* Per op: its item, fusion and aliasing; an iota along a tiled dim adds
 * the offset of the device's tile (lower.c, iota_offset). */
typedef struct op_rec {
    double flops, bytes, matmul;
    uint8_t prec;
    bool item;
    bool fused; /* its (produced) result stays on chip */
    bool alias; /* its results live in its operands' buffers */
    bool iota_off;
    double iota_elem, iota_bytes, iota_numel; /* element bytes, local bytes and elements of the iota */
    unsigned notes;
} op_rec;

/* What a handle of the walk is, for the peak breakdown. */
enum { H_ARG, H_RESULT, H_COPY, H_OTHER };

struct cost_scorer {
    const ir_pctx *c;
    ir_lplan *plan;
    cost_device dev;
    cost_mesh tiers;
    cost_options opts;
    int64_t ndev;
    uint32_t n_ops, n_vals, n_args, n_ret;
    const ir_op *ret_op;
    /* static: the function's structure in flat arrays */
    uint32_t *opd0, *opd_val;  /* per op: its operands' value ids at opd_val[opd0[k]..opd0[k+1]) */
    uint32_t *res0;            /* per op: value id of its first result (the rest follow) */
    uint32_t *nres;
    uint32_t *ret_val;
    uint32_t *user0, *user_op; /* per value: the top-level ops using it (CSR, duplicates kept) */
    bool *donated;             /* per argument */
    bool *is_ew;               /* per op: elementwise */
    /* records */
    op_rec *ops;
    val_rec *vals;
    bool valid;
    uint8_t *dirty;  /* per op: 0 clean, DIRTY_PLAN, DIRTY_NEST */
    bool *fb;        /* per operand (at opd0[k] + i): whether its record took it fused on chip */
    /* the program the evaluation runs over */
    cost_program prog;
    /* the walk */
    uint32_t n_h, cap_h;
    double *h_bytes;
    uint32_t *h_root;
    int32_t *h_last;
    int32_t *h_def; /* def step, -1: not a buffer of its own */
    uint32_t *h_what; /* kind << 28 | value id */
    uint32_t *prod_h; /* per value: handle as produced */
    uint32_t *mat_h;  /* per (value, mat): handle, at mat_base[v] + m */
    uint32_t *mat_base, cap_mat_h;
    uint32_t *cursor;
    const ir_mat **vm; /* per value: its mats in the plan (for this walk) */
    uint32_t *vn;
    int64_t *diff;
    size_t cap_diff;
    int32_t steps;
    int32_t peak_step;
    /* scratch for local types */
    ir_type *tbuf;
    const ir_type **tptr;
    int64_t *dbuf;
    bool *fbuf;
    uint32_t cap_t;
};

/* ============================================================== helpers */

static int oom(ap_error *err) { return ap_error_set(err, AP_ENOMEM, "out of memory in the cost scorer"); }

/* Bytes of a static tensor of `rank` dims with g's element type, the same
 * product cost__type_bytes forms. */
static double dims_bytes(const ir_type *g, int rank, const int64_t *dims)
{
    double n = 1;
    for (int i = 0; i < rank; i++)
        n *= (double)dims[i];
    return n * cost__elem_bytes(g);
}

static bool grow_types(cost_scorer *s, uint32_t n)
{
    if (n <= s->cap_t)
        return true;
    uint32_t cap = s->cap_t ? s->cap_t : 64;
    while (cap < n)
        cap *= 2;
    ir_type *t = ap_realloc(s->tbuf, sizeof *t * cap);
    if (t)
        s->tbuf = t;
    const ir_type **tp = ap_realloc(s->tptr, sizeof *tp * cap);
    if (tp)
        s->tptr = tp;
    int64_t *d = ap_realloc(s->dbuf, sizeof *d * IR_MAX_RANK * cap);
    if (d)
        s->dbuf = d;
    bool *f = ap_realloc(s->fbuf, sizeof *f * cap);
    if (f)
        s->fbuf = f;
    if (!t || !tp || !d || !f)
        return false;
    s->cap_t = cap;
    return true;
}

/* The local type of global type g under layout lay, in scratch slot i. */
static bool local_type(cost_scorer *s, uint32_t i, const ir_type *g, const ir_layout *lay)
{
    if (!g || g->kind != IR_T_TENSOR || g->rank < 0) {
        s->tptr[i] = g;
        return true;
    }
    int64_t *dims = &s->dbuf[(size_t)i * IR_MAX_RANK];
    if (g->rank > IR_MAX_RANK)
        return false;
    /* ir_layout_local_dims, over the mesh's axes only */
    if (g->rank > 0)
        memcpy(dims, g->dims, sizeof *dims * (size_t)g->rank);
    for (int a = 0; a < s->tiers.naxes; a++) {
        int d = lay->dim[a];
        if (d < 0)
            continue;
        if (d >= g->rank || dims[d] < 0 || dims[d] % s->tiers.sizes[a] != 0)
            return false;
        dims[d] /= s->tiers.sizes[a];
    }
    s->tbuf[i] = *g;
    s->tbuf[i].dims = dims;
    s->tptr[i] = &s->tbuf[i];
    return true;
}

/* ====================================================== the per-op record */

static const ir_type *global_type(const cost_scorer *s, uint32_t v) { return ir_pctx_value(s->c, v)->type; }

/* Whether value v (produced by op k) stays on chip: op k can fuse, and the
 * only lowered op taking v as produced is an elementwise top-level op. */
static bool value_fused(const cost_scorer *s, uint32_t k, uint32_t v)
{
    const ir_op *op = ir_pctx_op(s->c, k);
    if (!(s->ops[k].iota_off || cost__fusable(op)))
        return false;
    int32_t user;
    if (ir_lplan_produced_uses(s->plan, v, &user, NULL) != 1 || user < 0)
        return false;
    return s->is_ew[user];
}

enum { DIRTY_PLAN = 1, DIRTY_NEST = 2 };

/* Whether operand i of op k arrives computed on chip by its producer,
 * fused into k. */
static bool operand_fused(const cost_scorer *s, uint32_t k, uint32_t i, uint32_t v)
{
    int32_t prod = ir_pctx_value_op(s->c, v);
    return prod >= 0 && ir_lplan_use(s->plan, k, i) == IR_LPLAN_DIRECT && s->ops[prod].fused;
}

/* Whether the record of op k, whose nest has not changed, is still what
 * op_record would make: all else it reads is the op's own nest (its local
 * types, an iota's offset) and, of the plan, which operands arrive fused
 * and whether its result fuses.  Most ops next to a value whose plan
 * changed pass this and are not redone. */
static bool record_current(const cost_scorer *s, uint32_t k)
{
    uint32_t o0 = s->opd0[k], no = s->opd0[k + 1] - o0;
    for (uint32_t i = 0; i < no; i++)
        if (operand_fused(s, k, i, s->opd_val[o0 + i]) != s->fb[o0 + i])
            return false;
    bool fused = s->nres[k] == 1 && value_fused(s, k, s->res0[k]);
    return fused == s->ops[k].fused;
}

static int op_record(cost_scorer *s, const ir_partition *p, uint32_t k, ap_error *err)
{
    const ir_op *op = ir_pctx_op(s->c, k);
    op_rec *r = &s->ops[k];
    uint32_t no = op->n_operands, nr = op->n_results;
    if (!grow_types(s, no + nr))
        return oom(err);
    for (uint32_t i = 0; i < no; i++) {
        ir_layout need;
        ir_partition_operand_layout(p, k, i, &need);
        uint32_t v = ir_pctx_operand_value(s->c, k, i);
        if (!local_type(s, i, global_type(s, v), &need))
            return ap_error_set(err, AP_EINTERNAL, "a tiled dim does not divide its axes");
        /* an operand computed on chip by its producer, fused into this op */
        s->fbuf[i] = operand_fused(s, k, i, v);
        s->fb[s->opd0[k] + i] = s->fbuf[i];
    }
    r->iota_off = false;
    for (uint32_t j = 0; j < nr; j++) {
        ir_layout rl;
        ir_partition_result_layout(p, k, j, &rl);
        uint32_t v = ir_pctx_result_value(s->c, k, j);
        const ir_type *g = global_type(s, v);
        if (!local_type(s, no + j, g, &rl))
            return ap_error_set(err, AP_EINTERNAL, "a tiled dim does not divide its axes");
        s->vals[v].bytes = cost__type_bytes(s->tptr[no + j], &r->notes);
        if (op->opcode == IR_OP_IOTA && j == 0) {
            ir_attr *d = ir_op_attr(op, "iota_dimension");
            int axes[IR_MAX_AXES];
            if (d && d->kind == IR_A_INT && ir_layout_dim_axes(&rl, (int)d->u.i, axes) > 0) {
                r->iota_off = true;
                r->iota_elem = cost__elem_bytes(g);
                r->iota_bytes = s->vals[v].bytes;
                r->iota_numel = cost__numel(s->tptr[no + j], &r->notes);
            }
        }
    }
    r->fused = nr == 1 && value_fused(s, k, ir_pctx_result_value(s->c, k, 0));
    /* no loop-carried stacks: the scorer refuses while loops */
    cost_opview view = {op, s->tptr, s->tptr + no, s->fbuf, r->iota_off ? false : r->fused, false};
    cost_prec prec = COST_PREC_VECTOR;
    r->flops = r->bytes = r->matmul = 0;
    r->item = !cost__free_op((ir_opcode)op->opcode) &&
              cost__op_cost(&view, &r->notes, &r->flops, &r->bytes, &prec, &r->matmul);
    r->prec = (uint8_t)prec;
    r->alias = nr && cost__is_alias_op(op, no ? s->tptr[0] : NULL, s->tptr[no]);
    return 0;
}

/* ================================================== the per-value record */

static clop *clop_push(val_rec *vr)
{
    if (vr->n_ops == vr->cap_ops) {
        uint32_t cap = vr->cap_ops ? vr->cap_ops * 2 : 4;
        clop *o = ap_realloc(vr->ops, sizeof *o * cap);
        if (!o)
            return NULL;
        vr->ops = o;
        vr->cap_ops = cap;
    }
    clop *o = &vr->ops[vr->n_ops++];
    memset(o, 0, sizeof *o);
    return o;
}

/* The collective item of a group spanning `axes` (listed) on the mesh. */
static void coll_over_axes(const cost_scorer *s, cost_coll_item *it, ir_opcode opc, const int *axes, int n,
                           double in_bytes, double out_bytes)
{
    int64_t gs = 1;
    for (int i = 0; i < n; i++)
        gs *= s->tiers.sizes[axes[i]];
    it->group = gs;
    for (int i = 0; i < n; i++)
        if (s->tiers.sizes[axes[i]] > 1)
            it->axes |= (uint16_t)(1u << axes[i]);
    cost__coll_formula(it, opc, in_bytes, out_bytes);
    it->count = 1;
}

/* The collective item of an explicit group (the first row of `groups`). */
static void coll_over_group(const cost_scorer *s, cost_coll_item *it, ir_opcode opc, const int32_t *row, int64_t gs,
                            double in_bytes, double out_bytes)
{
    it->group = gs;
    for (int64_t i = 0; i < gs; i++)
        it->axes |= (uint16_t)cost__axes_between(&s->tiers, row[0], row[i]);
    cost__coll_formula(it, opc, in_bytes, out_bytes);
    it->count = 1;
}

/* The ops of value v's copies, as lower.c's emit_xfer makes them. */
static int val_record(cost_scorer *s, uint32_t v, ap_error *err)
{
    val_rec *vr = &s->vals[v];
    vr->n_ops = 0;
    uint32_t nm = ir_lplan_num_mats(s->plan, v);
    if (nm > vr->cap_mats) {
        uint32_t *e = ap_realloc(vr->mat_end, sizeof *e * nm);
        if (!e)
            return oom(err);
        vr->mat_end = e;
        vr->cap_mats = nm;
    }
    const ir_mesh *mesh = ir_pctx_mesh(s->c);
    for (uint32_t m = 0; m < nm; m++) {
        const ir_mat *mt = ir_lplan_mat(s->plan, v, m);
        const ir_xfer *x = &mt->x;
        const ir_type *g = x->type;
        if (ir_xfer_is_noop(x)) {
            vr->mat_end[m] = vr->n_ops;
            continue;
        }
        int64_t dims[IR_MAX_RANK];
        int rank = g->rank;
        if (!ir_layout_local_dims(&x->from, mesh, g, dims))
            return ap_error_set(err, AP_EINTERNAL, "a tiled dim does not divide its axes");
        double in = dims_bytes(g, rank, dims);
        clop *o;
        if (x->n_ar) {
            if (!(o = clop_push(vr)))
                return oom(err);
            int axes[IR_MAX_AXES];
            for (int i = 0; i < x->n_ar; i++)
                axes[i] = x->ar_axes[i];
            o->kind = CL_AR;
            o->bytes = in;
            coll_over_axes(s, &o->coll, IR_OP_ALL_REDUCE, axes, x->n_ar, in, in);
        }
        if (x->rs_axis >= 0) {
            if (!(o = clop_push(vr)))
                return oom(err);
            int axis = x->rs_axis;
            dims[x->rs_dim] /= mesh->sizes[axis];
            double out = dims_bytes(g, rank, dims);
            o->kind = CL_RS;
            o->bytes = out;
            coll_over_axes(s, &o->coll, IR_OP_REDUCE_SCATTER, &axis, 1, in, out);
            in = out;
        }
        if (x->empty) {
            if (!(o = clop_push(vr)))
                return oom(err);
            o->kind = CL_EMPTY;
            o->bytes = 0;
        } else if (x->redist) {
            const ir_redist_plan *pl = x->redist;
            for (int k = 0; k < pl->nsteps; k++) {
                const ir_redist_step *st = &pl->steps[k];
                if (!(o = clop_push(vr)))
                    return oom(err);
                switch (st->kind) {
                case IR_REDIST_ALL_GATHER:
                    dims[st->dim] *= st->group_size;
                    o->kind = CL_AG;
                    o->bytes = dims_bytes(g, rank, dims);
                    coll_over_group(s, &o->coll, IR_OP_ALL_GATHER, st->groups, st->group_size, in, o->bytes);
                    break;
                case IR_REDIST_ALL_TO_ALL:
                    dims[st->to_dim] /= st->group_size;
                    dims[st->dim] *= st->group_size;
                    o->kind = CL_A2A;
                    o->bytes = dims_bytes(g, rank, dims);
                    coll_over_group(s, &o->coll, IR_OP_ALL_TO_ALL, st->groups, st->group_size, in, o->bytes);
                    break;
                case IR_REDIST_DYNSLICE:
                    dims[st->dim] = st->type.dims[st->dim].local;
                    o->kind = CL_DS;
                    o->rank = (uint8_t)rank;
                    o->bytes = dims_bytes(g, rank, dims);
                    break;
                case IR_REDIST_COLLECTIVE_PERMUTE: {
                    o->kind = CL_PERM;
                    o->bytes = in;
                    int64_t span = 0;
                    for (int64_t i = 0; i < st->npairs; i++) {
                        int64_t a = st->pairs[2 * i], b = st->pairs[2 * i + 1];
                        o->coll.axes |= (uint16_t)cost__axes_between(&s->tiers, a, b);
                        span = a + 1 > span ? a + 1 : span;
                        span = b + 1 > span ? b + 1 : span;
                    }
                    o->coll.group = st->npairs > 0 ? span : 1;
                    cost__coll_formula(&o->coll, IR_OP_COLLECTIVE_PERMUTE, in, in);
                    if (st->npairs == 0)
                        o->coll.payload = o->coll.steps = 0;
                    o->coll.count = 1;
                    break;
                }
                }
                in = o->bytes;
            }
        }
        vr->mat_end[m] = vr->n_ops;
    }
    return 0;
}

/* =============================================================== the walk */

static bool grow_handles(cost_scorer *s, uint32_t n)
{
    if (n <= s->cap_h)
        return true;
    uint32_t cap = s->cap_h ? s->cap_h : 4096;
    while (cap < n)
        cap *= 2;
    double *b = ap_realloc(s->h_bytes, sizeof *b * cap);
    if (b)
        s->h_bytes = b;
    uint32_t *r = ap_realloc(s->h_root, sizeof *r * cap);
    if (r)
        s->h_root = r;
    int32_t *l = ap_realloc(s->h_last, sizeof *l * cap);
    if (l)
        s->h_last = l;
    int32_t *d = ap_realloc(s->h_def, sizeof *d * cap);
    if (d)
        s->h_def = d;
    uint32_t *w = ap_realloc(s->h_what, sizeof *w * cap);
    if (w)
        s->h_what = w;
    if (!b || !r || !l || !d || !w)
        return false;
    s->cap_h = cap;
    return true;
}

typedef struct walk {
    cost_scorer *s;
    bool ok;
    bool pid; /* the partition id ops are emitted */
    uint32_t pid_h, zero_h;
    uint32_t n_per_device;
} walk;

static inline void use(walk *w, uint32_t h) { w->s->h_last[w->s->h_root[h]] = w->s->steps; }

/* A new value of `bytes` defined at the current step; alias_of: the handle
 * whose buffer it lives in, or UINT32_MAX. */
static uint32_t def(walk *w, double bytes, uint32_t alias_of, uint32_t what)
{
    cost_scorer *s = w->s;
    if (s->n_h == s->cap_h && !grow_handles(s, s->n_h + 1)) {
        w->ok = false;
        return 0;
    }
    uint32_t h = s->n_h++;
    s->h_bytes[h] = bytes;
    s->h_last[h] = s->steps;
    s->h_what[h] = what;
    if (alias_of != UINT32_MAX) {
        s->h_root[h] = s->h_root[alias_of];
        s->h_def[h] = -1;
    } else {
        s->h_root[h] = h;
        s->h_def[h] = bytes > 0 ? s->steps : -1;
    }
    return h;
}

static inline void step(walk *w) { w->s->steps++; }

#define WHAT(kind, v) ((uint32_t)(kind) << 28 | (v))

/* partition_id, its convert to i32 and a constant 0, made once at the
 * first per-device value (lower.c, partition_id). */
static void pid_setup(walk *w)
{
    if (w->pid)
        return;
    w->pid = true;
    uint32_t id = def(w, 4, UINT32_MAX, WHAT(H_OTHER, 0)); /* partition_id: tensor<ui32> */
    step(w);
    use(w, id);
    w->pid_h = def(w, 4, UINT32_MAX, WHAT(H_OTHER, 0)); /* convert to tensor<i32> */
    step(w);
    w->zero_h = def(w, 4, UINT32_MAX, WHAT(H_OTHER, 0)); /* constant 0 : tensor<i32> */
    step(w);
}

/* A device's entry of a per-device table (lower.c, per_device): the
 * table, a dynamic_slice of it by partition id, a bitcast reshape to a
 * scalar.  Returns the scalar's handle. */
static uint32_t per_device(walk *w)
{
    pid_setup(w);
    w->n_per_device++;
    uint32_t table = def(w, 4.0 * (double)w->s->ndev, UINT32_MAX, WHAT(H_OTHER, 0));
    step(w);
    use(w, table);
    use(w, w->pid_h);
    uint32_t ds = def(w, 4, UINT32_MAX, WHAT(H_OTHER, 0));
    step(w);
    use(w, ds);
    uint32_t r = def(w, 4, ds, WHAT(H_OTHER, 0));
    step(w);
    return r;
}

/* Emits value v's copy m (and the copy it continues from, if not yet). */
static uint32_t emit_mat(walk *w, uint32_t v, int32_t m)
{
    cost_scorer *s = w->s;
    if (m < 0)
        return s->prod_h[v];
    uint32_t *slot = &s->mat_h[s->mat_base[v] + (uint32_t)m];
    if (*slot != UINT32_MAX)
        return *slot;
    const ir_mat *mt = &s->vm[v][m];
    uint32_t x = emit_mat(w, v, mt->src);
    const val_rec *vr = &s->vals[v];
    uint32_t from = m ? vr->mat_end[m - 1] : 0;
    for (uint32_t i = from; i < vr->mat_end[m]; i++) {
        const clop *o = &vr->ops[i];
        switch (o->kind) {
        case CL_EMPTY:
            x = def(w, 0, UINT32_MAX, WHAT(H_COPY, v));
            step(w);
            break;
        case CL_DS: {
            uint32_t off = per_device(w);
            use(w, x);
            use(w, off);
            if (o->rank > 1)
                use(w, w->zero_h);
            x = def(w, o->bytes, UINT32_MAX, WHAT(H_COPY, v));
            step(w);
            break;
        }
        default:
            use(w, x);
            x = def(w, o->bytes, UINT32_MAX, WHAT(H_COPY, v));
            step(w);
            break;
        }
    }
    *slot = x;
    return x;
}

/* Emits the copies value v first needs at (seg, slot). */
static void emit_due(walk *w, uint32_t v, uint32_t seg, uint32_t slot)
{
    cost_scorer *s = w->s;
    uint32_t nm = s->vn[v];
    while (s->cursor[v] < nm) {
        const ir_mat *mt = &s->vm[v][s->cursor[v]];
        if (mt->seg != seg || mt->slot != slot)
            break;
        if (!ir_xfer_is_noop(&mt->x))
            emit_mat(w, v, (int32_t)s->cursor[v]);
        s->cursor[v]++;
    }
}

static int run_walk(cost_scorer *s, walk *w, ap_error *err)
{
    memset(w, 0, sizeof *w);
    w->s = s;
    w->ok = true;
    s->n_h = 0;
    s->steps = 0;
    /* handles of copies, numbered per value */
    uint32_t total = 0;
    for (uint32_t v = 0; v < s->n_vals; v++) {
        s->mat_base[v] = total;
        s->vm[v] = ir_lplan_mats(s->plan, v, &s->vn[v]);
        total += s->vn[v];
        s->cursor[v] = 0;
    }
    if (total > s->cap_mat_h) {
        uint32_t *m = ap_realloc(s->mat_h, sizeof *m * (total + 1));
        if (!m)
            return oom(err);
        s->mat_h = m;
        s->cap_mat_h = total;
    }
    if (total)
        memset(s->mat_h, 0xff, sizeof *s->mat_h * total);
    if (!grow_handles(s, s->n_vals + total + 64))
        return oom(err);
    for (uint32_t a = 0; a < s->n_args; a++) {
        uint32_t h = s->n_h++;
        s->h_bytes[h] = s->vals[a].bytes;
        s->h_root[h] = h;
        s->h_last[h] = -1;
        s->h_def[h] = -1;
        s->h_what[h] = WHAT(H_ARG, a);
        s->prod_h[a] = h;
    }
    for (uint32_t k = 0; k < s->n_ops && w->ok; k++) {
        const op_rec *r = &s->ops[k];
        const uint32_t *opv = &s->opd_val[s->opd0[k]];
        uint32_t no = s->opd0[k + 1] - s->opd0[k], nr = s->nres[k];
        const int32_t *uses = ir_lplan_uses(s->plan, k);
        for (uint32_t i = 0; i < no; i++)
            if (s->vn[opv[i]])
                emit_due(w, opv[i], k, i);
        uint32_t first_opd = UINT32_MAX, opd_i[64];
        for (uint32_t i = 0; i < no; i++) {
            uint32_t h = emit_mat(w, opv[i], uses[i]);
            use(w, h);
            if (i == 0)
                first_opd = h;
            if (i < 64)
                opd_i[i] = h;
        }
        bool same_n = no == nr;
        for (uint32_t j = 0; j < nr; j++) {
            uint32_t v = s->res0[k] + j;
            uint32_t src = UINT32_MAX;
            if (r->alias && no > 0)
                src = same_n && j < 64 ? opd_i[j] : first_opd;
            s->prod_h[v] = def(w, s->vals[v].bytes, src, WHAT(H_RESULT, v));
        }
        step(w);
        if (r->iota_off) {
            uint32_t v = s->res0[k], iota = s->prod_h[v];
            uint32_t off = per_device(w);
            use(w, off);
            uint32_t cv = def(w, r->iota_elem, UINT32_MAX, WHAT(H_OTHER, 0));
            step(w);
            use(w, cv);
            uint32_t bc = def(w, r->iota_bytes, UINT32_MAX, WHAT(H_OTHER, 0));
            step(w);
            use(w, iota);
            use(w, bc);
            s->prod_h[v] = def(w, r->iota_bytes, UINT32_MAX, WHAT(H_RESULT, v));
            step(w);
        }
    }
    /* the return */
    const int32_t *ruses = ir_lplan_uses(s->plan, s->n_ops);
    for (uint32_t r = 0; r < s->n_ret && w->ok; r++)
        if (s->vn[s->ret_val[r]])
            emit_due(w, s->ret_val[r], s->n_ops, r);
    for (uint32_t r = 0; r < s->n_ret && w->ok; r++)
        use(w, emit_mat(w, s->ret_val[r], ruses[r]));
    step(w);
    if (!w->ok)
        return oom(err);
    return 0;
}

/* The peak of the walk: values from their step to their last use,
 * arguments all along (donated ones until their last use). */
static int walk_peak(cost_scorer *s, int64_t *peak, ap_error *err)
{
    size_t k = (size_t)s->steps;
    if (k + 1 > s->cap_diff) {
        size_t cap = s->cap_diff ? s->cap_diff : 4096;
        while (cap < k + 1)
            cap *= 2;
        int64_t *d = ap_realloc(s->diff, sizeof *d * cap);
        if (!d)
            return oom(err);
        s->diff = d;
        s->cap_diff = cap;
    }
    memset(s->diff, 0, sizeof *s->diff * (k + 1));
    for (uint32_t h = 0; h < s->n_h; h++) {
        int32_t at = s->h_def[h];
        if (at < 0)
            continue;
        int32_t end = s->h_last[h] > at ? s->h_last[h] : at;
        int64_t b = cost__clamp_bytes(s->h_bytes[h]);
        s->diff[at] += b;
        s->diff[end + 1] -= b;
    }
    if (k > 0)
        for (uint32_t a = 0; a < s->n_args; a++) {
            int64_t b = cost__clamp_bytes(s->h_bytes[a]);
            int32_t end = (int32_t)k - 1;
            if (s->donated[a] && s->h_last[a] < end)
                end = s->h_last[a] > 0 ? s->h_last[a] : 0;
            s->diff[0] += b;
            s->diff[end + 1] -= b;
        }
    int64_t live = 0, best = 0;
    s->peak_step = 0;
    for (size_t i = 0; i < k; i++) {
        live += s->diff[i];
        if (live > best) {
            best = live;
            s->peak_step = (int32_t)i;
        }
    }
    *peak = best;
    return 0;
}

/* ========================================================== the program */

static bool item_push(cost_scorer *s, const ir_op *op, double flops, double bytes, uint8_t prec)
{
    return cost__push_item(&s->prog, op, flops, bytes, prec);
}

static bool coll_push(cost_scorer *s, const cost_coll_item *it, const ir_op *op)
{
    cost_coll_item named = *it;
    named.op = op;
    return cost__push_coll(&s->prog, &named);
}

/* Items and collectives of the whole program: the ops', and those of the
 * copies (named after the op of their first use). */
static int assemble(cost_scorer *s, uint32_t n_per_device, ap_error *err)
{
    const ir_pctx *c = s->c;
    cost_program *p = &s->prog;
    p->n_items = p->n_colls = 0;
    p->flops_total = p->bytes_total = p->matmul_flops = 0;
    p->notes = 0;
    bool ok = true;
    for (uint32_t k = 0; k < s->n_ops && ok; k++) {
        const op_rec *r = &s->ops[k];
        p->notes |= r->notes;
        if (!r->item && !r->iota_off)
            continue;
        const ir_op *op = ir_pctx_op(c, k);
        if (r->item) {
            p->matmul_flops += r->matmul;
            ok = item_push(s, op, r->flops, r->bytes, r->prec);
        }
        if (r->iota_off) {
            double e = r->iota_elem, L = r->iota_bytes;
            ok = ok && item_push(s, op, 0, 8, COST_PREC_VECTOR)      /* the table's entry */
                 && item_push(s, op, 1, 4 + e, COST_PREC_VECTOR)       /* convert to the element type */
                 && item_push(s, op, 0, e, COST_PREC_VECTOR)           /* broadcast, fused into the add */
                 && item_push(s, op, r->iota_numel, L + (r->fused ? 0 : L), COST_PREC_VECTOR); /* the add */
        }
    }
    for (uint32_t v = 0; v < s->n_vals && ok; v++) {
        if (!s->vn[v])
            continue;
        const val_rec *vr = &s->vals[v];
        for (uint32_t m = 0; m < s->vn[v]; m++) {
            uint32_t seg = s->vm[v][m].seg;
            const ir_op *op = seg < s->n_ops ? ir_pctx_op(c, seg) : s->ret_op;
            for (uint32_t q = m ? vr->mat_end[m - 1] : 0; q < vr->mat_end[m] && ok; q++) {
                const clop *o = &vr->ops[q];
                if (o->kind == CL_DS)
                    /* the table's entry (a dynamic_slice of 1xi32), then the slice */
                    ok = item_push(s, op, 0, 8, COST_PREC_VECTOR) && item_push(s, op, 0, 2 * o->bytes, COST_PREC_VECTOR);
                else if (o->kind != CL_EMPTY)
                    ok = coll_push(s, &o->coll, op);
            }
        }
    }
    /* partition_id's convert to i32 */
    if (ok && n_per_device)
        ok = item_push(s, s->n_ops ? ir_pctx_op(c, 0) : s->ret_op, 1, 8, COST_PREC_VECTOR);
    return ok ? 0 : oom(err);
}

/* ============================================================== public */

void cost_scorer_free(cost_scorer *s)
{
    if (!s)
        return;
    ir_lplan_free(s->plan);
    if (s->vals)
        for (uint32_t v = 0; v < s->n_vals; v++) {
            ap_free(s->vals[v].ops);
            ap_free(s->vals[v].mat_end);
        }
    ap_free(s->vals);
    ap_free(s->ops);
    ap_free(s->opd0);
    ap_free(s->opd_val);
    ap_free(s->res0);
    ap_free(s->nres);
    ap_free(s->ret_val);
    ap_free(s->vm);
    ap_free(s->vn);
    ap_free(s->user0);
    ap_free(s->user_op);
    ap_free(s->donated);
    ap_free(s->is_ew);
    ap_free(s->dirty);
    ap_free(s->fb);
    ap_free(s->prog.flops);
    ap_free(s->prog.bytes);
    ap_free(s->prog.prec);
    ap_free(s->prog.ops);
    ap_free(s->prog.colls);
    ap_free(s->h_bytes);
    ap_free(s->h_root);
    ap_free(s->h_last);
    ap_free(s->h_def);
    ap_free(s->h_what);
    ap_free(s->prod_h);
    ap_free(s->mat_h);
    ap_free(s->mat_base);
    ap_free(s->cursor);
    ap_free(s->diff);
    ap_free(s->tbuf);
    ap_free(s->tptr);
    ap_free(s->dbuf);
    ap_free(s->fbuf);
    ap_free(s);
}

/* Why the fast path cannot cost op k, or NULL. */
static const char *unsupported(const ir_lplan *plan, const ir_op *op, uint32_t k)
{
    switch (op->opcode) {
    case IR_OP_WHILE:
    case IR_OP_IF:
    case IR_OP_CASE:
        return "loops and conditionals";
    case IR_OP_FUNC_CALL:
    case IR_OP_COMPOSITE:
        return "calls";
    case IR_OP_ALL_GATHER:
    case IR_OP_ALL_REDUCE:
    case IR_OP_REDUCE_SCATTER:
    case IR_OP_ALL_TO_ALL:
    case IR_OP_COLLECTIVE_PERMUTE:
    case IR_OP_COLLECTIVE_BROADCAST:
        return "collectives in the program itself";
    case IR_OP_UNKNOWN:
        if (op->n_regions)
            return "ops of other dialects holding regions";
        break;
    default:
        break;
    }
    if (ir_lplan_num_captured(plan, k))
        return "regions using values from outside them";
    return NULL;
}

int cost_scorer_new(const ir_pctx *ctx, const cost_device *dev, const cost_mesh *mesh, const cost_options *opts,
                    cost_scorer **out, ap_error *err)
{
    *out = NULL;
    cost_scorer *s = ap_calloc(1, sizeof *s);
    if (!s)
        return oom(err);
    int rc;
    s->c = ctx;
    s->dev = *dev;
    if (opts)
        s->opts = *opts;
    s->n_ops = ir_pctx_num_ops(ctx);
    s->n_vals = ir_pctx_num_values(ctx);
    s->n_args = ir_pctx_num_args(ctx);
    s->n_ret = ir_pctx_num_returns(ctx);
    s->ret_op = ir_func_return(ir_pctx_func(ctx));
    /* the mesh as the lowered program's autopart.mesh gives it */
    ap_buf mb;
    ap_buf_init(&mb);
    ir_mesh_format(ir_pctx_mesh(ctx), &mb);
    rc = cost_mesh_parse(mb.data ? mb.data : "", &s->prog.mesh, err);
    ap_buf_free(&mb);
    if (rc < 0)
        goto fail;
    s->ndev = ir_mesh_devices(ir_pctx_mesh(ctx));
    s->prog.num_partitions = s->ndev;
    if (mesh) {
        s->tiers = *mesh;
    } else {
        s->tiers = s->prog.mesh;
        cost_mesh_default_tiers(&s->tiers, dev);
    }
    /* the evaluation checks the device and tiers; fail early the same way */
    cost_report scratch;
    if ((rc = cost_evaluate(&s->prog, dev, &s->tiers, opts, &scratch, err)) < 0)
        goto fail;
    if ((rc = ir_lplan_new(ctx, &s->plan, err)) < 0)
        goto fail;
    for (uint32_t k = 0; k < s->n_ops; k++) {
        const char *why = unsupported(s->plan, ir_pctx_op(ctx, k), k);
        if (why) {
            const ir_op *op = ir_pctx_op(ctx, k);
            rc = ap_error_set(err, AP_EUNSUPPORTED, "the fast scorer does not cover %s ('%s' at %u:%u)", why,
                              op->name, op->src_line, op->src_col);
            goto fail;
        }
    }
    s->ops = ap_calloc(s->n_ops + 1, sizeof *s->ops);
    s->vals = ap_calloc(s->n_vals + 1, sizeof *s->vals);
    s->dirty = ap_calloc(s->n_ops + 1, 1);
    s->is_ew = ap_calloc(s->n_ops + 1, sizeof *s->is_ew);
    s->donated = ap_calloc(s->n_args + 1, sizeof *s->donated);
    s->user0 = ap_calloc(s->n_vals + 2, sizeof *s->user0);
    s->prod_h = ap_malloc(sizeof *s->prod_h * (s->n_vals + 1));
    s->mat_base = ap_malloc(sizeof *s->mat_base * (s->n_vals + 1));
    s->cursor = ap_malloc(sizeof *s->cursor * (s->n_vals + 1));
    s->vm = ap_calloc(s->n_vals + 1, sizeof *s->vm);
    s->vn = ap_calloc(s->n_vals + 1, sizeof *s->vn);
    s->opd0 = ap_malloc(sizeof *s->opd0 * (s->n_ops + 2));
    s->res0 = ap_malloc(sizeof *s->res0 * (s->n_ops + 1));
    s->nres = ap_malloc(sizeof *s->nres * (s->n_ops + 1));
    s->ret_val = ap_malloc(sizeof *s->ret_val * (s->n_ret + 1));
    if (!s->vm || !s->vn || !s->opd0 || !s->res0 || !s->nres || !s->ret_val || !s->ops || !s->vals || !s->dirty || !s->is_ew || !s->donated || !s->user0 || !s->prod_h || !s->mat_base ||
        !s->cursor) {
        rc = oom(err);
        goto fail;
    }
    const ir_op *func = ir_pctx_func(ctx);
    for (uint32_t a = 0; a < s->n_args; a++)
        s->donated[a] = ir_func_arg_attr(func, a, "tf.aliasing_output") || ir_func_arg_attr(func, a, "jax.buffer_donor");
    uint32_t n_uses = 0;
    for (uint32_t k = 0; k < s->n_ops; k++) {
        const ir_op *op = ir_pctx_op(ctx, k);
        s->is_ew[k] = cost__is_elementwise((ir_opcode)op->opcode);
        for (uint32_t i = 0; i < op->n_operands; i++)
            s->user0[ir_pctx_operand_value(ctx, k, i) + 1]++;
        n_uses += op->n_operands;
    }
    for (uint32_t v = 0; v < s->n_vals; v++)
        s->user0[v + 1] += s->user0[v];
    s->user_op = ap_malloc(sizeof *s->user_op * (n_uses + 1));
    s->opd_val = ap_malloc(sizeof *s->opd_val * (n_uses + 1));
    if (!s->opd_val) {
        rc = oom(err);
        goto fail;
    }
    n_uses = 0;
    for (uint32_t k = 0; k < s->n_ops; k++) {
        const ir_op *op = ir_pctx_op(ctx, k);
        s->opd0[k] = n_uses;
        for (uint32_t i = 0; i < op->n_operands; i++)
            s->opd_val[n_uses++] = ir_pctx_operand_value(ctx, k, i);
        s->nres[k] = op->n_results;
        s->res0[k] = op->n_results ? ir_pctx_result_value(ctx, k, 0) : 0;
    }
    s->opd0[s->n_ops] = n_uses;
    s->fb = ap_calloc(n_uses + 1, sizeof *s->fb);
    if (!s->fb) {
        rc = oom(err);
        goto fail;
    }
    for (uint32_t r = 0; r < s->n_ret; r++)
        s->ret_val[r] = ir_pctx_return_value(ctx, r);
    uint32_t *fill = ap_calloc(s->n_vals + 1, sizeof *fill);
    if (!s->user_op || !fill) {
        ap_free(fill);
        rc = oom(err);
        goto fail;
    }
    for (uint32_t k = 0; k < s->n_ops; k++) {
        const ir_op *op = ir_pctx_op(ctx, k);
        for (uint32_t i = 0; i < op->n_operands; i++) {
            uint32_t v = ir_pctx_operand_value(ctx, k, i);
            s->user_op[s->user0[v] + fill[v]++] = k;
        }
    }
    ap_free(fill);
    *out = s;
    return 0;
fail:
    cost_scorer_free(s);
    return rc;
}

int cost_scorer_score(cost_scorer *s, const ir_partition *p, cost_report *out, ap_error *err)
{
    const ir_pctx *c = s->c;
    if (ir_partition_ctx(p) != c)
        return ap_error_set(err, AP_EINVALID, "cost scorer: the state is of another function");
    bool was_valid = s->valid;
    s->valid = false;
    int rc = ir_lplan_sync(s->plan, p, err);
    if (rc < 0)
        return rc;
    uint32_t n_ch_ops, n_ch_vals;
    bool all;
    const uint32_t *ch_ops = ir_lplan_changed_ops(s->plan, &n_ch_ops, &all);
    const uint32_t *ch_vals = ir_lplan_changed_values(s->plan, &n_ch_vals);
    if (!was_valid)
        all = true;
    /* arguments: their bytes as they arrive */
    for (uint32_t i = 0; i < n_ch_vals; i++) {
        uint32_t v = ch_vals[i];
        if (v < s->n_args) {
            ir_layout l;
            ir_partition_produced_layout(p, v, &l);
            const ir_type *g = global_type(s, v);
            unsigned notes = 0;
            if (!grow_types(s, 1))
                return oom(err);
            if (!local_type(s, 0, g, &l))
                return ap_error_set(err, AP_EINTERNAL, "a tiled dim does not divide its axes");
            s->vals[v].bytes = cost__type_bytes(s->tptr[0], &notes);
        }
        if ((rc = val_record(s, v, err)) < 0)
            return rc;
    }
    if (!was_valid) {
        /* after a failure the records may lag behind the plan: redo all */
        for (uint32_t v = 0; v < s->n_vals; v++)
            if ((rc = val_record(s, v, err)) < 0)
                return rc;
        for (uint32_t a = 0; a < s->n_args; a++) {
            ir_layout l;
            ir_partition_produced_layout(p, a, &l);
            unsigned notes = 0;
            if (!grow_types(s, 1))
                return oom(err);
            if (!local_type(s, 0, global_type(s, a), &l))
                return ap_error_set(err, AP_EINTERNAL, "a tiled dim does not divide its axes");
            s->vals[a].bytes = cost__type_bytes(s->tptr[0], &notes);
        }
    }
    /* ops to redo: nests changed, and the producers and users of values
     * whose plan changed (fusion and what each operand receives).  Fusion
     * of an operand's producer is read by its user, so producers first:
     * program order does it. */
    if (all) {
        for (uint32_t k = 0; k < s->n_ops; k++)
            if ((rc = op_record(s, p, k, err)) < 0)
                return rc;
    } else {
        for (uint32_t i = 0; i < n_ch_ops; i++)
            s->dirty[ch_ops[i]] = DIRTY_NEST;
        for (uint32_t i = 0; i < n_ch_vals; i++) {
            uint32_t v = ch_vals[i];
            int32_t prod = ir_pctx_value_op(c, v);
            if (prod >= 0)
                s->dirty[prod] |= DIRTY_PLAN;
            for (uint32_t u = s->user0[v]; u < s->user0[v + 1]; u++)
                s->dirty[s->user_op[u]] |= DIRTY_PLAN;
        }
        /* in program order: a producer whose fusion changes changes what
         * its users (later ops) read */
        for (uint32_t k = 0; k < s->n_ops; k++) {
            if (!s->dirty[k])
                continue;
            bool nest = s->dirty[k] & DIRTY_NEST;
            s->dirty[k] = 0;
            if (rc < 0 || (!nest && record_current(s, k)))
                continue;
            bool fused = s->ops[k].fused;
            rc = op_record(s, p, k, err);
            if (rc == 0 && fused != s->ops[k].fused)
                for (uint32_t j = 0; j < s->nres[k]; j++) {
                    uint32_t v = s->res0[k] + j;
                    for (uint32_t u = s->user0[v]; u < s->user0[v + 1]; u++)
                        s->dirty[s->user_op[u]] |= DIRTY_PLAN;
                }
        }
        if (rc < 0)
            return rc;
    }
    walk w;
    int64_t peak = 0;
    if ((rc = run_walk(s, &w, err)) < 0 || (rc = walk_peak(s, &peak, err)) < 0 ||
        (rc = assemble(s, w.n_per_device, err)) < 0)
        return rc;
    cost_program *pg = &s->prog;
    pg->peak_memory = peak;
    pg->argument_bytes = 0;
    for (uint32_t a = 0; a < s->n_args; a++)
        pg->argument_bytes += cost__clamp_bytes(s->vals[a].bytes);
    if ((rc = cost_evaluate(pg, &s->dev, &s->tiers, &s->opts, out, err)) < 0)
        return rc;
    s->valid = true;
    return 0;
}

static int cmp_peak(const void *a, const void *b)
{
    const cost_peak_value *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->value < y->value ? -1 : x->value > y->value;
}

int cost_scorer_peak_values(const cost_scorer *s, cost_peak_value *out, int n, int64_t *other_bytes)
{
    if (!s->valid)
        return 0;
    int count = 0;
    int64_t rest = 0;
    int32_t at = s->peak_step, k = s->steps;
    /* collect into out (largest kept), everything else into rest */
    for (uint32_t h = 0; h < s->n_h; h++) {
        int32_t from, to;
        if (h < s->n_args) {
            from = 0;
            to = k - 1;
            if (s->donated[h] && s->h_last[h] < to)
                to = s->h_last[h] > 0 ? s->h_last[h] : 0;
        } else {
            from = s->h_def[h];
            if (from < 0)
                continue;
            to = s->h_last[h] > from ? s->h_last[h] : from;
        }
        if (at < from || at > to)
            continue;
        cost_peak_value e = {cost__clamp_bytes(s->h_bytes[h]), s->h_what[h] & 0x0fffffffu, (int)(s->h_what[h] >> 28)};
        if (count < n) {
            out[count++] = e;
            qsort(out, (size_t)count, sizeof *out, cmp_peak);
        } else if (n > 0 && cmp_peak(&e, &out[n - 1]) < 0) {
            rest += out[n - 1].bytes;
            out[n - 1] = e;
            qsort(out, (size_t)count, sizeof *out, cmp_peak);
        } else {
            rest += e.bytes;
        }
    }
    if (other_bytes)
        *other_bytes = rest;
    return count;
}
