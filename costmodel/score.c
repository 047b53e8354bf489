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
 *     the local types its loop nest implies; each collective's from
 *     cost__coll_formula;
 *   - the scorer builds the graph (graph.c) the lowered program's block
 *     gives cost_prepare, node for node in the lowered order (the plan says
 *     where each copy is made), and runs it: fusion, kernels, buffer
 *     sharing, donation, the order and the peak are graph.c's, once;
 *   - the report comes from cost_evaluate over a cost_program filled here.
 * test_score holds it equal to ir_lower + cost_estimate on random states of
 * the zoo's models.
 *
 * Incremental: the plan is synced with each new state, redoing only values
 * whose producer, users or identity op changed; the per-op and per-value
 * records are redone for what changed; the graph and its run go over the
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
    uint64_t dims;       /* its result's dims (cost__dims_hash) */
    cost_coll_item coll; /* collectives */
} clop;

/* Per value: the ops of its copies (32 bytes: a changed value's record
 * is one cache line; its bytes as produced are an argument's, args, or
 * in its op's record, cvr). */
typedef struct val_rec {
    clop *ops;
    uint32_t n_ops, cap_ops;
    uint32_t *mat_end; /* per mat: one past its last op in `ops` */
    uint32_t cap_mats;
} val_rec;

/* Per op: its cost as a kernel and its fusion class, what the graph's
 * build reads of every op (48 bytes: it streams through the current ones,
 * crec); an iota along a tiled dim adds the offset of the device's tile
 * (lower.c, iota_offset), from a record of its own (op_iota). */
typedef struct op_rec {
    double flops, matmul, write;
    double mm_m, mm_n; /* a matmul's M and N */
    unsigned notes;
    uint16_t flags;  /* CG_* */
    uint8_t prec;
    bool iota_off;
} op_rec;

typedef struct op_iota {
    double elem, bytes, numel; /* element bytes, local bytes and elements of the iota */
    uint64_t dims;
    bool bitcast; /* the offset's broadcast only adds unit dims */
} op_iota;

/* A value's local bytes and dims hash: an op's result as its current
 * record has it (cost_scorer.cvr), an argument as it arrives (args). */
typedef struct val_cur {
    double bytes;
    uint64_t dims;
} val_cur;

/* Per value, what the build reads of its copies, together: the walk
 * looks at it for every operand of an op some copy is due at. */
typedef struct val_walk {
    const ir_mat *vm;  /* its mats in the plan (redone with its record) */
    uint32_t vn;       /* how many */
    uint32_t cursor;   /* the build: its first mat not yet emitted where due */
    uint32_t mat_base; /* the build: its mats' graph values are at mat_h[mat_base + m] */
    uint32_t mv_pos;   /* its index in mv_list, UINT32_MAX when not listed */
} val_walk;

/* What a value of the graph is, for the peak breakdown (cost_peak_value). */
enum { H_ARG = COST_PEAK_ARGUMENT, H_RESULT = COST_PEAK_RESULT, H_COPY = COST_PEAK_COPY, H_OTHER = COST_PEAK_OTHER };

struct cost_scorer {
    const ir_pctx *c;
    ir_lplan *plan;
    cost_device dev;
    cost_mesh tiers;
    cost_options opts;
    int64_t ndev;
    int64_t replanned;   /* ops the plan followed again, over every score (cost_scorer_replanned) */
    uint32_t n_ops, n_vals, n_args, n_ret;
    const ir_op *ret_op;
    /* static: the function's structure in flat arrays */
    uint32_t *opd0, *opd_val;  /* per op: its operands' value ids at opd_val[opd0[k]..opd0[k+1]) */
    uint32_t *res0;            /* per op: value id of its first result (the rest follow) */
    uint32_t *nres;
    uint32_t *span;            /* per op: the ops its node stands for (an optimization barrier's identity
                                  ops are one node, at the first; 1 otherwise) */
    const ir_op **op_of;       /* per op: the op */
    uint32_t *ret_val;
    int32_t *alias_out;        /* per argument: the output it is donated to (tf.aliasing_output), -1 */
    bool *donor;               /* per argument: jax.buffer_donor without an output named */
    uint8_t *in_hint;          /* per argument: CG_IN_* its name gives */
    const char **arg_name;
    /* records */
    val_rec *vals;
    val_cur *args;             /* per argument: its bytes and dims hash as it arrives (local) */
    bool valid;
    /* the program the evaluation runs over */
    cost_program prog;
    /* the graph the lowered program gives (graph.c) */
    cost_graph g;
    uint32_t *prod_h;  /* per value: graph value as produced */
    uint32_t *mat_h;   /* per (value, mat): graph value, at vw[v].mat_base + m */
    uint32_t cap_mat_h;
    val_walk *vw;      /* per value: its mats and the walk's place in them */
    uint32_t *mv_list, n_mv; /* the values that have mats (vn > 0), in no order: the build's pass
                                over them is over these, not every value */
    uint64_t *due;     /* per op (and the return, n_ops): a bit, some copy is due at one of its operands */
    uint64_t *dmask;   /* per op: which operands (DUE_BIT), read where its due bit is set; the build
                          sets them and clears each as its walk passes it */
    uint32_t *hbuf;    /* the graph values an op or the return reads (max_opd) */
    uint32_t max_opd;
    unsigned op_notes; /* the notes of every op's record (build_graph) */
    /* the per-op records (op_record_memo): SLOTS per op, the current one
     * (cur) and those of nests the op had before; each with its nest's
     * words (mlen 0xff: empty), the record, the reads of its operands and
     * its results' bytes and dims */
    uint32_t room;                    /* words of a nest: the mesh's axes */
    uint8_t *cur;                     /* per op: the slot of its current record */
    uint8_t *mlen, *mnext;            /* per (op, slot) at k * SLOTS + slot; per op: the slot to take next */
    uint64_t *mkey;                   /* per (op, slot): room words */
    op_rec *mrec;                     /* per (op, slot) */
    /* copies of each op's current record (slot cur[k]) where the graph's
     * build streams through them: the slots of the ops it walks are in no
     * order, and it reads all of them (op_record_memo keeps these) */
    op_rec *crec;                     /* per op: mrec at (k, cur[k]) */
    double *crd;                      /* per operand (opd0[k] + i): mrd of op k's current slot */
    val_cur *cvr;                     /* per result value: mvb and mvd of its op's current slot */
    uint32_t *iota_of;                /* per op: an iota's index into miota, UINT32_MAX */
    op_iota *miota;                   /* per (iota, slot) at iota_of[k] * SLOTS + slot */
    double *mrd;                      /* per slot's operands: at slot * n_opd + opd0[k] + i, the bytes op k reads of operand i */
    double *mvb;                      /* per slot's results: at slot * n_vals + value, bytes as produced (local) */
    uint64_t *mvd;                    /* the same, their dims hash */
    uint32_t n_opd;
    /* scratch for local types */
    ir_type *tbuf;
    const ir_type **tptr;
    int64_t *dbuf;
    uint32_t cap_t;
};

/* ============================================================== helpers */

static int oom(ap_error *err) { return ap_error_set(err, AP_ENOMEM, "out of memory in the cost scorer"); }

/* Bytes of a tensor of `rank` dims with g's element type, the same product
 * cost__type_bytes forms: 0 when a dim is dynamic (its -1 made the bytes
 * negative). */
static double dims_bytes(const ir_type *g, int rank, const int64_t *dims)
{
    double n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i] < 0 ? 0 : (double)dims[i];
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
    if (!t || !tp || !d)
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

static const ir_type *global_type(const cost_scorer *s, uint32_t v) { return ir_pctx_value_type(s->c, v); }

/* The records' slots (op_record_memo). */
#define MEMO 4
#define SLOTS (MEMO + 1)
#define REC(s, k, slot) (&(s)->mrec[(size_t)(k) * SLOTS + (slot)])
#define READS(s, k, slot) (&(s)->mrd[(size_t)(slot) * (s)->n_opd + (s)->opd0[k]])
#define RBYTES(s, v, slot) ((s)->mvb[(size_t)(slot) * (s)->n_vals + (v)])
#define RDIMS(s, v, slot) ((s)->mvd[(size_t)(slot) * (s)->n_vals + (v)])

/* Op k's record into its slot `slot`: its local types, its cost as a
 * kernel of its own, its fusion class, its results' local bytes; a
 * function of its loop nest. */
static int op_record(cost_scorer *s, const ir_partition *p, uint32_t k, uint32_t slot, ap_error *err)
{
    const ir_op *op = ir_pctx_op(s->c, k);
    op_rec *r = REC(s, k, slot);
    uint32_t no = op->n_operands, nr = op->n_results;
    if (!grow_types(s, no + nr))
        return oom(err);
    for (uint32_t i = 0; i < no; i++) {
        ir_layout need;
        ir_partition_operand_layout(p, k, i, &need);
        uint32_t v = ir_pctx_operand_value(s->c, k, i);
        if (!local_type(s, i, global_type(s, v), &need))
            return ap_error_set(err, AP_EINTERNAL, "a tiled dim does not divide its axes");
    }
    r->iota_off = false;
    r->notes = 0;
    for (uint32_t j = 0; j < nr; j++) {
        ir_layout rl;
        ir_partition_result_layout(p, k, j, &rl);
        uint32_t v = ir_pctx_result_value(s->c, k, j);
        const ir_type *g = global_type(s, v);
        if (!local_type(s, no + j, g, &rl))
            return ap_error_set(err, AP_EINTERNAL, "a tiled dim does not divide its axes");
        RBYTES(s, v, slot) = cost__type_bytes(s->tptr[no + j], &r->notes);
        RDIMS(s, v, slot) = cost__dims_hash(s->tptr[no + j]);
        if (op->opcode == IR_OP_IOTA && j == 0) {
            ir_attr *d = ir_op_attr(op, "iota_dimension");
            int axes[IR_MAX_AXES];
            if (d && d->kind == IR_A_INT && ir_layout_dim_axes(&rl, (int)d->u.i, axes) > 0) {
                const ir_type *lt = s->tptr[no + j];
                op_iota *io = &s->miota[(size_t)s->iota_of[k] * SLOTS + slot];
                r->iota_off = true;
                io->elem = cost__elem_bytes(g);
                io->bytes = RBYTES(s, v, slot);
                io->numel = cost__numel(lt, &r->notes);
                io->dims = RDIMS(s, v, slot);
                /* the offset's broadcast of a scalar is a bitcast when every dim is 1 */
                io->bitcast = true;
                for (int q = 0; q < lt->rank; q++)
                    io->bitcast &= lt->dims[q] == 1;
            }
        }
    }
    const ir_type *t0 = no ? s->tptr[0] : NULL, *r0 = nr ? s->tptr[no] : NULL;
    r->flags = cost__node_flags(op, t0, r0);
    double *reads = READS(s, k, slot);
    cost_opcost oc = {0, 0, 0, COST_PREC_VECTOR, reads, 0, 0};
    bool costed = false;
    if (!(r->flags & CG_ALIAS) && !cost__free_op((ir_opcode)op->opcode)) {
        /* no loop-carried stacks: the scorer refuses while loops */
        cost_opview view = {op, s->tptr, s->tptr + no, false};
        costed = cost__op_cost(&view, &r->notes, &oc);
    }
    if (!costed) {
        oc.flops = oc.matmul = oc.write = 0;
        for (uint32_t i = 0; i < no; i++)
            reads[i] = 0;
    }
    r->flops = oc.flops;
    r->matmul = oc.matmul;
    r->write = oc.write;
    r->mm_m = costed ? oc.mm_m : 0;
    r->mm_n = costed ? oc.mm_n : 0;
    r->prec = (uint8_t)oc.prec;
    return 0;
}

/* Op k's record for its nest in p, from the records of the nests op k had
 * before when one matches (an op's record is a function of its nest: its
 * operand and result layouts come from the nest alone), else made anew in
 * a slot of its own, the others kept.  A search moves between sibling
 * states: most ops an action changed go back to a nest they had.  A match
 * only moves the op's current slot (nothing is copied); a new record takes
 * the current slot when that holds none, else the other slots in turn. */
static inline bool same_words(const uint64_t *a, const uint64_t *b, int n)
{
    for (int i = 0; i < n; i++) /* nests are short: a loop, not memcmp */
        if (a[i] != b[i])
            return false;
    return true;
}

/* Slot `slot` becomes op k's current record, copied where the build reads it. */
static void take_slot(cost_scorer *s, uint32_t k, uint32_t slot)
{
    s->cur[k] = (uint8_t)slot;
    s->crec[k] = *REC(s, k, slot);
    uint32_t o0 = s->opd0[k], no = s->opd0[k + 1] - o0;
    memcpy(&s->crd[o0], READS(s, k, slot), sizeof *s->crd * no);
    for (uint32_t j = 0, v = s->res0[k]; j < s->nres[k]; j++, v++)
        s->cvr[v] = (val_cur){RBYTES(s, v, slot), RDIMS(s, v, slot)};
}

static int op_record_memo(cost_scorer *s, const ir_partition *p, uint32_t k, ap_error *err)
{
    uint64_t key[IR_MAX_AXES];
    int len = ir_partition_nest_words(p, k, key);
    size_t m0 = (size_t)k * SLOTS;
    uint32_t c = s->cur[k];
    if (s->mlen[m0 + c] == len && same_words(&s->mkey[(m0 + c) * s->room], key, len))
        return 0;
    for (uint32_t slot = 0; slot < SLOTS; slot++)
        if (slot != c && s->mlen[m0 + slot] == len && same_words(&s->mkey[(m0 + slot) * s->room], key, len)) {
            take_slot(s, k, slot);
            return 0;
        }
    uint32_t slot = c;
    if (s->mlen[m0 + c] != 0xff) {
        slot = s->mnext[k] == c ? (c + 1) % SLOTS : s->mnext[k];
        s->mnext[k] = (uint8_t)((slot + 1) % SLOTS);
    }
    s->cur[k] = (uint8_t)slot;
    s->mlen[m0 + slot] = 0xff;
    int rc = op_record(s, p, k, slot, err);
    if (rc < 0)
        return rc;
    s->mlen[m0 + slot] = (uint8_t)len;
    memcpy(&s->mkey[(m0 + slot) * s->room], key, sizeof *key * (size_t)len);
    take_slot(s, k, slot);
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
            o->dims = cost__dims_hash_of(rank, dims);
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
            o->dims = cost__dims_hash_of(rank, dims);
            coll_over_axes(s, &o->coll, IR_OP_REDUCE_SCATTER, &axis, 1, in, out);
            in = out;
        }
        if (x->empty) {
            if (!(o = clop_push(vr)))
                return oom(err);
            o->kind = CL_EMPTY;
            o->bytes = 0;
            int64_t td[IR_MAX_RANK];
            o->dims = ir_layout_local_dims(&x->to, mesh, g, td) ? cost__dims_hash_of(rank, td) : 0;
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
                    o->dims = cost__dims_hash_of(rank, dims);
                    coll_over_group(s, &o->coll, IR_OP_ALL_GATHER, st->groups, st->group_size, in, o->bytes);
                    break;
                case IR_REDIST_ALL_TO_ALL:
                    dims[st->to_dim] /= st->group_size;
                    dims[st->dim] *= st->group_size;
                    o->kind = CL_A2A;
                    o->bytes = dims_bytes(g, rank, dims);
                    o->dims = cost__dims_hash_of(rank, dims);
                    coll_over_group(s, &o->coll, IR_OP_ALL_TO_ALL, st->groups, st->group_size, in, o->bytes);
                    break;
                case IR_REDIST_DYNSLICE:
                    dims[st->dim] = st->type.dims[st->dim].local;
                    o->kind = CL_DS;
                    o->rank = (uint8_t)rank;
                    o->bytes = dims_bytes(g, rank, dims);
                    o->dims = cost__dims_hash_of(rank, dims);
                    break;
                case IR_REDIST_COLLECTIVE_PERMUTE: {
                    o->kind = CL_PERM;
                    o->bytes = in;
                    o->dims = cost__dims_hash_of(rank, dims);
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

/* Value v's mats, from the plan (with its record), and whether mv_list
 * lists it. */
static void take_mats(cost_scorer *s, uint32_t v)
{
    val_walk *vw = &s->vw[v];
    vw->vm = ir_lplan_mats(s->plan, v, &vw->vn);
    bool listed = vw->mv_pos != UINT32_MAX;
    if (vw->vn && !listed) {
        vw->mv_pos = s->n_mv;
        s->mv_list[s->n_mv++] = v;
    } else if (!vw->vn && listed) {
        uint32_t i = vw->mv_pos, last = s->mv_list[--s->n_mv];
        s->mv_list[i] = last;
        s->vw[last].mv_pos = i;
        vw->mv_pos = UINT32_MAX;
    }
}

/* ============================================================== the graph */

/* Building the graph ir_lower's program gives, node for node. */
typedef struct walk {
    cost_scorer *s;
    cost_graph *g;
    const ir_op *at; /* the op being lowered: names what is made for it */
    bool pid;        /* the partition id ops are emitted */
    uint32_t pid_v, zero_v;
} walk;

#define WHAT(kind, v) ((uint32_t)(kind) << 28 | (v))
/* Operand i's bit in a due mask: operands from 63 on share the last. */
#define DUE_BIT(i) (1ull << ((i) < 63 ? (i) : 63))
#define DUE(s, k) ((s)->due[(k) / 64] >> (k) % 64 & 1)

static inline void node(walk *w, uint16_t flags) { cost__graph_node(w->g, w->at, flags, COST_PREC_VECTOR); }
static inline uint32_t result(walk *w, double bytes, uint64_t dims, uint32_t what)
{
    return cost__graph_result(w->g, bytes, CG_NONE, dims, what);
}

/* partition_id, its convert to i32 and a constant 0, made once at the
 * first per-device value (lower.c, partition_id). */
static void pid_setup(walk *w)
{
    if (w->pid)
        return;
    w->pid = true;
    node(w, cost__node_flags_of(IR_OP_PARTITION_ID)); /* tensor<ui32> */
    uint32_t id = result(w, 4, 0, WHAT(H_OTHER, 0));
    node(w, cost__node_flags_of(IR_OP_CONVERT)); /* to tensor<i32>: one flop, 4 bytes each way */
    w->g->nodes[w->g->n_nodes - 1].flops = 1;
    w->g->nodes[w->g->n_nodes - 1].write = 4;
    cost__graph_edge(w->g, id, 4);
    w->pid_v = result(w, 4, 0, WHAT(H_OTHER, 0));
    node(w, cost__node_flags_of(IR_OP_CONSTANT));
    w->zero_v = result(w, 4, 0, WHAT(H_OTHER, 0));
}

/* A device's entry of a per-device table (lower.c, per_device): the
 * table, a dynamic_slice of it by partition id, a bitcast reshape to a
 * scalar.  Returns the scalar. */
static uint32_t per_device(walk *w)
{
    pid_setup(w);
    int64_t nd = w->s->ndev, one = 1;
    node(w, cost__node_flags_of(IR_OP_CONSTANT));
    uint32_t table = result(w, 4.0 * (double)nd, cost__dims_hash_of(1, &nd), WHAT(H_OTHER, 0));
    node(w, cost__node_flags_of(IR_OP_DYNAMIC_SLICE));
    w->g->nodes[w->g->n_nodes - 1].write = 4;
    cost__graph_edge(w->g, table, 4);
    cost__graph_edge(w->g, w->pid_v, 0);
    uint32_t ds = result(w, 4, cost__dims_hash_of(1, &one), WHAT(H_OTHER, 0));
    node(w, CG_ALIAS);
    cost__graph_edge(w->g, ds, 0);
    return cost__graph_result(w->g, 4, ds, 0, WHAT(H_OTHER, 0));
}

/* Emits value v's copy m (and the copy it continues from, if not yet). */
static uint32_t emit_copy(walk *w, uint32_t v, int32_t m);

static inline uint32_t emit_mat(walk *w, uint32_t v, int32_t m)
{
    return m < 0 ? w->s->prod_h[v] : emit_copy(w, v, m);
}

static uint32_t emit_copy(walk *w, uint32_t v, int32_t m)
{
    cost_scorer *s = w->s;
    uint32_t *slot = &s->mat_h[s->vw[v].mat_base + (uint32_t)m];
    if (*slot != CG_NONE)
        return *slot;
    const ir_mat *mt = &s->vw[v].vm[m];
    uint32_t x = emit_mat(w, v, mt->src);
    const val_rec *vr = &s->vals[v];
    uint32_t from = m ? vr->mat_end[m - 1] : 0;
    for (uint32_t i = from; i < vr->mat_end[m]; i++) {
        const clop *o = &vr->ops[i];
        double in = w->g->v_bytes[x];
        switch (o->kind) {
        case CL_EMPTY:
            node(w, cost__node_flags_of(IR_OP_CONSTANT));
            x = result(w, 0, o->dims, WHAT(H_COPY, v));
            break;
        case CL_DS: {
            uint32_t off = per_device(w);
            node(w, cost__node_flags_of(IR_OP_DYNAMIC_SLICE));
            w->g->nodes[w->g->n_nodes - 1].write = o->bytes;
            cost__graph_edge(w->g, x, o->bytes);
            /* the offsets: the device's on the sliced dim, 0 on the others
             * (the edges of dims other than the first come in dim order) */
            cost__graph_edge(w->g, off, 0);
            for (int d = 1; d < o->rank; d++)
                cost__graph_edge(w->g, w->zero_v, 0);
            x = result(w, o->bytes, o->dims, WHAT(H_COPY, v));
            break;
        }
        default: {
            static const ir_opcode opc[] = {[CL_AR] = IR_OP_ALL_REDUCE, [CL_RS] = IR_OP_REDUCE_SCATTER,
                                            [CL_AG] = IR_OP_ALL_GATHER, [CL_A2A] = IR_OP_ALL_TO_ALL,
                                            [CL_PERM] = IR_OP_COLLECTIVE_PERMUTE};
            node(w, cost__node_flags_of(opc[o->kind]));
            cost__graph_coll(w->g, &o->coll);
            cost__graph_edge(w->g, x, in);
            x = result(w, o->bytes, o->dims, WHAT(H_COPY, v));
            break;
        }
        }
    }
    *slot = x;
    return x;
}

/* Emits the copies value v first needs at (seg, slot). */
static void emit_due_from(walk *w, uint32_t v, uint32_t seg, uint32_t slot);

static inline void emit_due(walk *w, uint32_t v, uint32_t seg, uint32_t slot)
{
    /* called where the due mask says some copy is due; the value's next
     * copy in the walk's order is the one that is */
    const val_walk *vw = &w->s->vw[v];
    uint32_t c = vw->cursor;
    if (c < vw->vn && vw->vm[c].seg == seg && vw->vm[c].slot == slot)
        emit_due_from(w, v, seg, slot);
}

static void emit_due_from(walk *w, uint32_t v, uint32_t seg, uint32_t slot)
{
    cost_scorer *s = w->s;
    val_walk *vw = &s->vw[v];
    uint32_t nm = vw->vn;
    while (vw->cursor < nm) {
        const ir_mat *mt = &vw->vm[vw->cursor];
        if (mt->seg != seg || mt->slot != slot)
            break;
        if (!ir_xfer_is_noop(&mt->x))
            emit_mat(w, v, (int32_t)vw->cursor);
        vw->cursor++;
    }
}

/* The layout value v is returned in (slot r of the return). */
static void ret_layout(const cost_scorer *s, const ir_partition *p, uint32_t v, int32_t m, ir_layout *out)
{
    if (m < 0)
        ir_partition_produced_layout(p, v, out);
    else
        *out = s->vw[v].vm[m].x.to;
}

/* jax.buffer_donor arguments take the first output of their local type
 * not taken (prepare.c's donation). */
static void donors(cost_scorer *s, const ir_partition *p, const int32_t *ruses)
{
    if (!s->donor)
        return;
    bool taken_small[64], *taken = s->n_ret <= 64 ? taken_small : ap_calloc(s->n_ret, sizeof *taken);
    if (!taken)
        return;
    memset(taken, 0, sizeof *taken * (s->n_ret <= 64 ? 64 : 0));
    for (uint32_t a = 0; a < s->n_args; a++)
        if (s->alias_out[a] >= 0 && (uint32_t)s->alias_out[a] < s->n_ret)
            taken[s->alias_out[a]] = true;
    for (uint32_t a = 0; a < s->n_args; a++) {
        if (!s->donor[a])
            continue;
        ir_layout al;
        ir_partition_produced_layout(p, a, &al);
        const ir_type *ag = global_type(s, a);
        if (!grow_types(s, 2) || !local_type(s, 0, ag, &al))
            continue;
        for (uint32_t r = 0; r < s->n_ret; r++) {
            uint32_t v = s->ret_val[r];
            const ir_type *rg = global_type(s, v);
            if (taken[r] || !rg || rg->kind != IR_T_TENSOR || !ag || ag->kind != IR_T_TENSOR || rg->elem != ag->elem ||
                rg->rank != ag->rank)
                continue;
            ir_layout rl;
            ret_layout(s, p, v, ruses[r], &rl);
            if (!local_type(s, 1, rg, &rl) || !ir_type_equal(s->tptr[0], s->tptr[1]))
                continue;
            cost__graph_out_alias(&s->g, r, s->prod_h[a]);
            taken[r] = true;
            break;
        }
    }
    if (taken != taken_small)
        ap_free(taken);
}

/* Op k's node (with the identity ops after it that a barrier's node
 * stands for) the general way: a barrier, an alias, copies due at its
 * operands, an iota's offset.  The ops with none of these (most) are
 * written by build_graph's loop itself, which this keeps lean: inlined
 * there, this code kept the loop's locals on the stack. */
static __attribute__((noinline)) void build_op(walk *w, uint32_t k, const int32_t *use_all, unsigned *notes)
{
    cost_scorer *s = w->s;
    cost_graph *g = w->g;
    const uint32_t *spans = s->span, *opd0 = s->opd0, *nres = s->nres, *res0 = s->res0, *opd_val = s->opd_val;
    uint32_t *h = s->hbuf, *prod_h = s->prod_h;
    uint64_t *dmask = s->dmask;
    const op_rec *crec = s->crec;
    const double *crd = s->crd;
    const val_cur *cvr = s->cvr;
    uint32_t span = spans[k], o0 = opd0[k], no = opd0[k + span] - o0, nr = nres[k];
    const op_rec *r = &crec[k];
    const double *rd = &crd[o0];
    const uint32_t *opv = &opd_val[o0];
    const int32_t *uses = &use_all[o0];
    /* the copies due at its operands (at each identity op of a
     * barrier in turn), then what it reads of each */
    if (span == 1) {
        if (DUE(s, k)) {
            uint64_t dm = dmask[k];
            dmask[k] = 0;
            for (uint32_t i = 0; i < no; i++)
                if (dm & DUE_BIT(i))
                    emit_due(w, opv[i], k, i);
        }
        for (uint32_t i = 0; i < no; i++)
            h[i] = uses[i] < 0 ? prod_h[opv[i]] : emit_copy(w, opv[i], uses[i]);
    } else {
        /* the reads of each identity op (its operands follow the first's) */
        for (uint32_t q = 0, i0 = 0; q < span; q++) {
            uint32_t n = s->opd0[k + q + 1] - s->opd0[k + q];
            uint64_t dm = DUE(s, k + q) ? dmask[k + q] : 0;
            if (dm)
                dmask[k + q] = 0;
            for (uint32_t i = 0; i < n && dm; i++)
                if (dm & DUE_BIT(i))
                    emit_due(w, opv[i0 + i], k + q, i);
            for (uint32_t i = 0; i < n; i++)
                h[i0 + i] = emit_mat(w, opv[i0 + i], uses[i0 + i]);
            i0 += n;
            if (q > 0) {
                nr += s->nres[k + q];
                *notes |= crec[k + q].notes;
            }
        }
    }
    bool alias = (r->flags & CG_ALIAS) && no > 0;
    cost_gnode *nd = cost__graph_node(g, w->at, r->flags, r->prec);
    if (nd) {
        nd->flops = r->flops;
        nd->matmul = r->matmul;
        nd->write = r->write;
        nd->mm_m = r->mm_m;
        nd->mm_n = r->mm_n;
    }
    cost__graph_edges(g, h, rd, no);
    for (uint32_t q = 0, j = 0; q < span; q++)
        for (uint32_t jj = 0, v = res0[k + q]; jj < nres[k + q]; jj++, j++, v++) {
            uint32_t src = alias ? h[no == nr ? j : 0] : CG_NONE;
            prod_h[v] = cost__graph_result(g, cvr[v].bytes, src, cvr[v].dims, WHAT(H_RESULT, v));
        }
    if (r->iota_off) {
        /* + the device's offset: (lower.c, iota_offset) */
        uint32_t v = s->res0[k], iota = s->prod_h[v];
        const op_iota *io = &s->miota[(size_t)s->iota_of[k] * SLOTS + s->cur[k]];
        double e = io->elem, L = io->bytes;
        uint32_t off = per_device(w);
        node(w, cost__node_flags_of(IR_OP_CONVERT));
        s->g.nodes[s->g.n_nodes - 1].flops = 1;
        s->g.nodes[s->g.n_nodes - 1].write = e;
        cost__graph_edge(&s->g, off, 4);
        uint32_t cv = result(w, e, 0, WHAT(H_OTHER, 0)), bc;
        if (io->bitcast) {
            node(w, CG_ALIAS);
            cost__graph_edge(&s->g, cv, 0);
            bc = cost__graph_result(&s->g, L, cv, io->dims, WHAT(H_OTHER, 0));
        } else {
            node(w, cost__node_flags_of(IR_OP_BROADCAST_IN_DIM));
            s->g.nodes[s->g.n_nodes - 1].write = L;
            cost__graph_edge(&s->g, cv, e);
            bc = result(w, L, io->dims, WHAT(H_OTHER, 0));
        }
        node(w, cost__node_flags_of(IR_OP_ADD));
        s->g.nodes[s->g.n_nodes - 1].flops = io->numel;
        s->g.nodes[s->g.n_nodes - 1].write = L;
        cost__graph_edge(&s->g, iota, L);
        cost__graph_edge(&s->g, bc, L);
        s->prod_h[v] = result(w, L, io->dims, WHAT(H_RESULT, v));
    }
}

/* Room in g for one more node, `no` more edges and `nr` more values
 * (false, g->oom set, when out of memory). */
static inline bool plain_room(cost_graph *g, uint32_t no, uint32_t nr)
{
    return (g->n_nodes < g->cap_nodes || cost__graph_grow_nodes(g)) &&
           (g->cap_edges - g->n_edges >= no || cost__graph_grow_edges(g, no)) &&
           (g->cap_vals - g->n_vals >= nr || cost__graph_grow_vals(g, nr));
}

static int build_graph(cost_scorer *s, const ir_partition *p, ap_error *err)
{
    walk w;
    memset(&w, 0, sizeof w);
    w.s = s;
    w.g = &s->g;
    cost__graph_reset(&s->g);
    s->g.eager = s->opts.framework == COST_FW_EAGER;
    s->g.every_order = s->opts.every_order;
    s->g.peak_enough = s->opts.peak_enough;
    s->g.outs_held = true; /* the partitioned program's entry block */
    /* graph values of copies, numbered per value; the operands a copy is
     * due at (the walk looks at no other operand's value for copies: most
     * operands of an op a copy is due at have none due) */
    uint64_t *due = s->due, *dmask = s->dmask;
    memset(due, 0, sizeof *due * (s->n_ops / 64 + 1));
    uint32_t total = 0;
    for (uint32_t i = 0; i < s->n_mv; i++) {
        val_walk *vw = &s->vw[s->mv_list[i]];
        uint32_t n = vw->vn;
        vw->mat_base = total;
        total += n;
        vw->cursor = 0;
        for (uint32_t m = 0; m < n; m++) {
            uint32_t seg = vw->vm[m].seg;
            due[seg / 64] |= 1ull << seg % 64;
            dmask[seg] |= DUE_BIT(vw->vm[m].slot);
        }
    }
    if (total > s->cap_mat_h) {
        uint32_t *m = ap_realloc(s->mat_h, sizeof *m * (total + 1));
        if (!m) {
            memset(dmask, 0, sizeof *dmask * (s->n_ops + 1));
            return oom(err);
        }
        s->mat_h = m;
        s->cap_mat_h = total;
    }
    if (total)
        memset(s->mat_h, 0xff, sizeof *s->mat_h * total);
    for (uint32_t a = 0; a < s->n_args; a++)
        s->prod_h[a] = cost__graph_input(&s->g, s->args[a].bytes, CG_IN_COUNTED | s->in_hint[a], s->args[a].dims,
                                         WHAT(H_ARG, a), s->arg_name[a]);
    /* the plan's uses are per operand, in operand order (no op captures) */
    const int32_t *use_all = ir_lplan_uses(s->plan, 0);
    /* the scorer's arrays in locals: the graph's stores (pointers among
     * them) would otherwise make the compiler load them again per op */
    const uint32_t *spans = s->span, *opd0 = s->opd0, *nres = s->nres, *res0 = s->res0, *opd_val = s->opd_val;
    const ir_op **op_of = s->op_of;
    uint32_t *h = s->hbuf, *prod_h = s->prod_h, n_ops = s->n_ops;
    const op_rec *crec = s->crec;
    const double *crd = s->crd;
    const val_cur *cvr = s->cvr;
    cost_graph *g = &s->g;
    unsigned notes = 0;
    for (uint32_t k = 0; k < n_ops;) {
        uint32_t span = spans[k];
        const op_rec *r = &crec[k];
        notes |= r->notes;
        if (span != 1 || (r->flags & (CG_ALIAS | CG_BARRIER)) || r->iota_off || DUE(s, k)) {
            w.at = op_of[k];
            build_op(&w, k, use_all, &notes);
            k += span;
            continue;
        }
        /* most ops: one node, its edges, results of its own, written at
         * once: what cost__graph_node, cost__graph_edges and
         * cost__graph_result write for them, with one look for room and
         * the graph's arrays in locals (through g, each store made the
         * compiler load g's fields again) */
        uint32_t o0 = opd0[k], no = opd0[k + 1] - o0, nr = nres[k];
        const double *rd = &crd[o0];
        const uint32_t *opv = &opd_val[o0];
        const int32_t *uses = &use_all[o0];
        w.at = op_of[k];
        for (uint32_t i = 0; i < no; i++)
            h[i] = uses[i] < 0 ? prod_h[opv[i]] : emit_copy(&w, opv[i], uses[i]);
        if (!plain_room(g, no, nr)) {
            k++; /* g->oom: the build fails below */
            continue;
        }
        uint32_t n = g->n_nodes, e0 = g->n_edges, e = e0, gv = g->n_vals;
        uint32_t *e_val = g->e_val;
        double *e_read = g->e_read;
        uint8_t *e_feeds = g->e_feeds;
        for (uint32_t i = 0; i < no; i++) {
            uint32_t v = h[i];
            if (v >= gv) /* CG_NONE: no edge (cost__graph_edges) */
                continue;
            e_val[e] = v;
            e_read[e] = rd[i] > 0 ? rd[i] : 0;
            e_feeds[e] = 0;
            e++;
        }
        /* field by field on a zeroed node (the padding too: the memo
         * compares nodes as bytes); a compound literal was built on the
         * stack and copied, ~42 instructions a node */
        cost_gnode *nd = &g->nodes[n];
        memset(nd, 0, sizeof *nd);
        nd->op = w.at;
        nd->opd0 = e0;
        nd->nopd = e - e0;
        nd->res0 = gv;
        nd->nres = nr;
        nd->flops = r->flops;
        nd->matmul = r->matmul;
        nd->mm_m = r->mm_m;
        nd->mm_n = r->mm_n;
        nd->write = r->write;
        nd->coll = -1;
        nd->peak = -1;
        nd->flags = r->flags;
        nd->prec = r->prec;
        uint32_t v0 = res0[k];
        const val_cur *vc = &cvr[v0];
        double *v_bytes = g->v_bytes;
        uint32_t *v_def = g->v_def, *v_root = g->v_root, *v_what = g->v_what, *v_gate = g->v_gate;
        uint64_t *v_dims = g->v_dims;
        uint8_t *v_in = g->v_in;
        const char **v_name = g->v_name;
        for (uint32_t j = 0; j < nr; j++) {
            uint32_t v = gv + j;
            v_bytes[v] = vc[j].bytes > 0 ? vc[j].bytes : 0;
            v_def[v] = n;
            v_root[v] = v;
            v_what[v] = WHAT(H_RESULT, v0 + j);
            v_dims[v] = vc[j].dims;
            v_in[v] = 0;
            v_name[v] = NULL;
            v_gate[v] = CG_NONE;
            prod_h[v0 + j] = v;
        }
        g->n_nodes = n + 1;
        g->n_edges = e;
        g->n_vals = gv + nr;
        k++;
    }
    /* the return */
    const int32_t *ruses = ir_lplan_uses(s->plan, s->n_ops);
    w.at = s->ret_op;
    uint64_t dm = DUE(s, s->n_ops) ? dmask[s->n_ops] : 0;
    if (dm)
        dmask[s->n_ops] = 0;
    for (uint32_t r = 0; r < s->n_ret && dm; r++)
        if (dm & DUE_BIT(r))
            emit_due(&w, s->ret_val[r], s->n_ops, r);
    for (uint32_t r = 0; r < s->n_ret; r++)
        h[r] = emit_mat(&w, s->ret_val[r], ruses[r]);
    cost__graph_node(&s->g, s->ret_op, cost__node_flags_of(IR_OP_FUNC_RETURN), COST_PREC_VECTOR);
    for (uint32_t r = 0; r < s->n_ret; r++)
        cost__graph_edge(&s->g, h[r], 0);
    for (uint32_t a = 0; a < s->n_args; a++)
        if (s->alias_out[a] >= 0 && (uint32_t)s->alias_out[a] < s->n_ret)
            cost__graph_out_alias(&s->g, (uint32_t)s->alias_out[a], s->prod_h[a]);
    donors(s, p, ruses);
    s->op_notes = notes;
    return s->g.oom ? oom(err) : 0;
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
    ap_free(s->args);
    ap_free(s->opd0);
    ap_free(s->opd_val);
    ap_free(s->res0);
    ap_free(s->nres);
    ap_free(s->span);
    ap_free(s->op_of);
    ap_free(s->ret_val);
    ap_free(s->alias_out);
    ap_free(s->donor);
    ap_free(s->in_hint);
    ap_free(s->arg_name);
    ap_free(s->vw);
    ap_free(s->mv_list);
    ap_free(s->due);
    ap_free(s->dmask);
    ap_free(s->hbuf);
    cost__program_free_arrays(&s->prog);
    cost__graph_free(&s->g);
    ap_free(s->prod_h);
    ap_free(s->mat_h);
    ap_free(s->tbuf);
    ap_free(s->tptr);
    ap_free(s->dbuf);
    ap_free(s->cur);
    ap_free(s->mlen);
    ap_free(s->mnext);
    ap_free(s->mkey);
    ap_free(s->mrec);
    ap_free(s->crec);
    ap_free(s->crd);
    ap_free(s->cvr);
    ap_free(s->iota_of);
    ap_free(s->miota);
    ap_free(s->mrd);
    ap_free(s->mvb);
    ap_free(s->mvd);
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
    case IR_OP_TUPLE:
    case IR_OP_GET_TUPLE_ELEMENT:
        return "tuples";
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
    for (uint32_t j = 0; j < op->n_results; j++)
        if (op->results[j].type && op->results[j].type->kind == IR_T_TUPLE)
            return "tuples";
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
    s->prog.framework = s->opts.framework;
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
    s->vals = ap_calloc(s->n_vals + 1, sizeof *s->vals);
    s->args = ap_calloc(s->n_args + 1, sizeof *s->args);
    s->alias_out = ap_malloc(sizeof *s->alias_out * (s->n_args + 1));
    s->in_hint = ap_calloc(s->n_args + 1, sizeof *s->in_hint);
    s->arg_name = ap_calloc(s->n_args + 1, sizeof *s->arg_name);
    s->prod_h = ap_malloc(sizeof *s->prod_h * (s->n_vals + 1));
    s->vw = ap_calloc(s->n_vals + 1, sizeof *s->vw);
    s->mv_list = ap_malloc(sizeof *s->mv_list * (s->n_vals + 1));
    s->opd0 = ap_malloc(sizeof *s->opd0 * (s->n_ops + 2));
    s->res0 = ap_malloc(sizeof *s->res0 * (s->n_ops + 1));
    s->nres = ap_malloc(sizeof *s->nres * (s->n_ops + 1));
    s->span = ap_malloc(sizeof *s->span * (s->n_ops + 1));
    s->op_of = ap_malloc(sizeof *s->op_of * (s->n_ops + 1));
    s->ret_val = ap_malloc(sizeof *s->ret_val * (s->n_ret + 1));
    if (!s->vw || !s->opd0 || !s->res0 || !s->nres || !s->span || !s->op_of || !s->ret_val || !s->vals || !s->args ||
        !s->alias_out || !s->in_hint || !s->arg_name || !s->prod_h || !s->mv_list) {
        rc = oom(err);
        goto fail;
    }
    for (uint32_t v = 0; v <= s->n_vals; v++)
        s->vw[v].mv_pos = UINT32_MAX;
    const ir_op *func = ir_pctx_func(ctx);
    const ir_block *body = ir_func_entry(func);
    for (uint32_t a = 0; a < s->n_args; a++) {
        ir_attr *al = ir_func_arg_attr(func, a, "tf.aliasing_output");
        s->alias_out[a] = al && al->kind == IR_A_INT && al->u.i >= 0 && al->u.i < INT32_MAX ? (int32_t)al->u.i : -1;
        if (s->alias_out[a] < 0 && ir_func_arg_attr(func, a, "jax.buffer_donor")) {
            if (!s->donor && !(s->donor = ap_calloc(s->n_args + 1, sizeof *s->donor))) {
                rc = oom(err);
                goto fail;
            }
            s->donor[a] = true;
        }
        const ir_value *arg = body && a < body->n_args ? &body->args[a] : NULL;
        s->arg_name[a] = arg && arg->loc ? ir_loc_name(arg->loc) : NULL;
        s->in_hint[a] = cost__name_hint(s->arg_name[a]);
    }
    uint32_t n_uses = 0;
    for (uint32_t k = 0; k < s->n_ops; k++)
        n_uses += ir_pctx_op(ctx, k)->n_operands;
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
        s->op_of[k] = op;
        /* one node per op, but an optimization_barrier's identity ops
         * (one per operand in the context) as the one barrier the
         * lowering writes: its readers wait for every operand */
        uint32_t first = k, span = ir_pctx_barrier(ctx, k, &first);
        s->span[k] = span == 0 || first != k ? 1 : span;
    }
    s->opd0[s->n_ops] = n_uses;
    s->max_opd = s->n_ret;
    for (uint32_t k = 0; k < s->n_ops; k++)
        if (s->opd0[k + s->span[k]] - s->opd0[k] > s->max_opd)
            s->max_opd = s->opd0[k + s->span[k]] - s->opd0[k];
    s->hbuf = ap_malloc(sizeof *s->hbuf * (s->max_opd + 1));
    s->due = ap_calloc(s->n_ops / 64 + 1, sizeof *s->due);
    s->dmask = ap_calloc(s->n_ops + 1, sizeof *s->dmask);
    if (!s->hbuf || !s->due || !s->dmask) {
        rc = oom(err);
        goto fail;
    }
    for (uint32_t k = 0; k < s->n_ops; k++)
        if (ir_lplan_uses(s->plan, k) != ir_lplan_uses(s->plan, 0) + s->opd0[k]) {
            rc = ap_error_set(err, AP_EINTERNAL, "cost scorer: the lowering plan's uses are not in operand order");
            goto fail;
        }
    for (uint32_t r = 0; r < s->n_ret; r++)
        s->ret_val[r] = ir_pctx_return_value(ctx, r);
    /* the records' memo: empty */
    int na = ir_pctx_mesh(ctx)->n_axes;
    s->room = na > 0 ? (uint32_t)na : 1;
    s->n_opd = n_uses;
    size_t slots = (size_t)s->n_ops * SLOTS;
    s->cur = ap_calloc(s->n_ops + 1, 1);
    s->mlen = ap_malloc(slots + 1);
    s->mnext = ap_calloc(s->n_ops + 1, 1);
    s->mkey = ap_calloc(slots * s->room + 1, sizeof *s->mkey);
    s->mrec = ap_calloc(slots + 1, sizeof *s->mrec);
    s->crec = ap_calloc(s->n_ops + 1, sizeof *s->crec);
    s->crd = ap_calloc((size_t)n_uses + 1, sizeof *s->crd);
    s->cvr = ap_calloc((size_t)s->n_vals + 1, sizeof *s->cvr);
    s->iota_of = ap_malloc(sizeof *s->iota_of * (s->n_ops + 1));
    uint32_t n_iota = 0;
    for (uint32_t k = 0; s->iota_of && k < s->n_ops; k++)
        s->iota_of[k] = ir_pctx_op(ctx, k)->opcode == IR_OP_IOTA ? n_iota++ : UINT32_MAX;
    s->miota = ap_calloc((size_t)n_iota * SLOTS + 1, sizeof *s->miota);
    s->mrd = ap_calloc((size_t)SLOTS * n_uses + 1, sizeof *s->mrd);
    s->mvb = ap_calloc((size_t)SLOTS * s->n_vals + 1, sizeof *s->mvb);
    s->mvd = ap_calloc((size_t)SLOTS * s->n_vals + 1, sizeof *s->mvd);
    if (!s->cur || !s->mlen || !s->mnext || !s->mkey || !s->mrec || !s->crec || !s->crd || !s->cvr || !s->iota_of || !s->miota || !s->mrd || !s->mvb || !s->mvd) {
        rc = oom(err);
        goto fail;
    }
    memset(s->mlen, 0xff, slots + 1);
    /* a search scores many states that lower to one program: the graph
     * runs of the last few are remembered (graph.c, the memo); by
     * default as many as 64 MB of graphs hold, 4 to 32 (T32: ~19 of 3.3
     * MB; at 600 episodes a search ran 1,067 graph runs remembering 4,
     * 954 remembering 16, 896 remembering 32) */
    s->g.memo = s->opts.memo < 0 ? 0 : s->opts.memo == 0 ? 32 : s->opts.memo > 255 ? 255 : (uint8_t)s->opts.memo;
    s->g.memo_bytes = s->opts.memo == 0 ? (size_t)64 << 20 : 0;
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
    s->replanned += n_ch_ops;
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
            s->args[v].bytes = cost__type_bytes(s->tptr[0], &notes);
            s->args[v].dims = cost__dims_hash(s->tptr[0]);
        }
        if ((rc = val_record(s, v, err)) < 0)
            return rc;
        take_mats(s, v);
    }
    if (!was_valid) {
        /* after a failure the records may lag behind the plan: redo all */
        for (uint32_t v = 0; v < s->n_vals; v++) {
            if ((rc = val_record(s, v, err)) < 0)
                return rc;
            take_mats(s, v);
        }
        for (uint32_t a = 0; a < s->n_args; a++) {
            ir_layout l;
            ir_partition_produced_layout(p, a, &l);
            unsigned notes = 0;
            if (!grow_types(s, 1))
                return oom(err);
            if (!local_type(s, 0, global_type(s, a), &l))
                return ap_error_set(err, AP_EINTERNAL, "a tiled dim does not divide its axes");
            s->args[a].bytes = cost__type_bytes(s->tptr[0], &notes);
            s->args[a].dims = cost__dims_hash(s->tptr[0]);
        }
    }
    /* ops whose nests changed (an op's record reads nothing else) */
    if (all) {
        for (uint32_t k = 0; k < s->n_ops; k++)
            if ((rc = op_record_memo(s, p, k, err)) < 0)
                return rc;
    } else {
        for (uint32_t i = 0; i < n_ch_ops; i++)
            if ((rc = op_record_memo(s, p, ch_ops[i], err)) < 0)
                return rc;
    }
    if ((rc = build_graph(s, p, err)) < 0)
        return rc;
    cost_program *pg = &s->prog;
    cost__program_clear(pg);
    pg->notes |= s->op_notes;
    int64_t peak = 0;
    if (s->opts.peak_only)
        memset(&pg->peak, 0, sizeof pg->peak);
    if ((rc = cost__graph_run(&s->g, pg, 1.0, s->opts.peak_only ? NULL : &pg->peak, &peak, err)) < 0)
        return rc;
    pg->peak_memory = peak;
    pg->argument_bytes = 0;
    for (uint32_t a = 0; a < s->n_args; a++)
        pg->argument_bytes += cost__clamp_bytes(s->args[a].bytes);
    if ((rc = cost_evaluate(pg, &s->dev, &s->tiers, &s->opts, out, err)) < 0)
        return rc;
    s->valid = true;
    return 0;
}

int64_t cost_scorer_reused(const cost_scorer *s) { return cost__graph_memo_hits(&s->g); }

int64_t cost_scorer_replanned(const cost_scorer *s) { return s->replanned; }

int cost_scorer_share(cost_scorer *s, cost_scorer *with, ap_error *err)
{
    if (s->c != with->c)
        return ap_error_set(err, AP_EINVALID, "cost scorer: sharing with a scorer of another function");
    if (!cost__graph_share_memo(&s->g, &with->g))
        return oom(err);
    return 0;
}

int cost_scorer_peak_values(const cost_scorer *s, cost_peak_value *out, int n, int64_t *other_bytes)
{
    if (!s->valid)
        return 0;
    const cost_peak_info *pk = &s->prog.peak;
    int count = 0;
    int64_t listed = 0;
    for (int i = 0; i < pk->n_values && count < n; i++) {
        out[count].bytes = pk->values[i].bytes;
        out[count].value = pk->values[i].what & 0x0fffffffu;
        out[count].kind = (int)(pk->values[i].what >> 28);
        listed += out[count].bytes;
        count++;
    }
    if (other_bytes)
        *other_bytes = s->prog.peak_memory > listed ? s->prog.peak_memory - listed : 0;
    return count;
}
