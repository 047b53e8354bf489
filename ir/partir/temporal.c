/*
 * temporal.c - the PartIR:Core loop view as a runnable single-device
 * program (the paper's PartIR:Temporal): every loop is unrolled, its
 * iterations run one after another on slices of global values, tile loops
 * concatenate their iterations' results, sum loops add them.  Running this
 * program with the reference interpreter checks the partition state's
 * meaning independently of the SPMD lowering and its collectives.
 *
 * A value produced by sum loops is kept as its summands too, so that an
 * op taking it as a pending sum (a TMR entry with a partial operand) uses
 * the summand of its own iteration, exactly as the fused loops would.
 */
#include "partir_int.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_ITERS (1 << 16)

typedef struct tvalue {
    ir_value *whole;
    int n_partial;                /* axes the summands are indexed by */
    int partial_axes[IR_MAX_AXES];
    ir_value **pieces;            /* row-major over partial_axes */
} tvalue;

typedef struct temporal {
    const ir_partition *p;
    const ir_pctx *c;
    ir_module *nm;
    ir_block *nb;
    tvalue *vals;
    ap_error *err;
    int rc;
    const ir_loc *loc;
} temporal;

static bool tfail(temporal *t, int code, const char *msg)
{
    if (!t->rc)
        t->rc = ap_error_set(t->err, code, "%s", msg);
    return false;
}

static ir_op *temit(temporal *t, ir_opcode opc, uint32_t n, ir_value *const *opds, const ir_type *res)
{
    if (t->rc)
        return NULL;
    ir_op *op = ir_op_new(t->nm, opc, NULL, n, opds, res ? 1 : 0, res ? &res : NULL, 0);
    if (!op) {
        tfail(t, AP_ENOMEM, "out of memory");
        return NULL;
    }
    op->loc = t->loc;
    ir_block_append(t->nb, op);
    return op;
}

static bool tset(temporal *t, ir_op *op, const char *name, ir_attr *a)
{
    if (!op || !a || ir_op_set_attr(t->nm, op, name, a) < 0)
        return tfail(t, AP_ENOMEM, "out of memory");
    return true;
}

static const ir_type *dims_type(temporal *t, const ir_type *like, const int64_t *dims)
{
    return ir_type_tensor_ex(t->nm, (ir_elem)like->elem, like->text, like->rank, dims, like->encoding);
}

/* x[chunk k of n along dim d] */
static ir_value *slice_chunk(temporal *t, ir_value *x, int d, int64_t n, int64_t k)
{
    const ir_type *ty = x->type;
    int64_t start[IR_MAX_RANK], limit[IR_MAX_RANK], stride[IR_MAX_RANK], dims[IR_MAX_RANK];
    for (int i = 0; i < ty->rank; i++) {
        start[i] = 0;
        limit[i] = dims[i] = ty->dims[i];
        stride[i] = 1;
    }
    int64_t len = ty->dims[d] / n;
    start[d] = k * len;
    limit[d] = (k + 1) * len;
    dims[d] = len;
    ir_op *op = temit(t, IR_OP_SLICE, 1, &x, dims_type(t, ty, dims));
    if (!op || !tset(t, op, "start_indices", ir_attr_i64_array(t->nm, ty->rank, start)) ||
        !tset(t, op, "limit_indices", ir_attr_i64_array(t->nm, ty->rank, limit)) ||
        !tset(t, op, "strides", ir_attr_i64_array(t->nm, ty->rank, stride)))
        return NULL;
    return &op->results[0];
}

static ir_value *add2(temporal *t, ir_value *a, ir_value *b, ir_red red)
{
    ir_opcode opc = red == IR_RED_MAX ? IR_OP_MAXIMUM : red == IR_RED_MIN ? IR_OP_MINIMUM
                    : red == IR_RED_MUL ? IR_OP_MULTIPLY : red == IR_RED_AND ? IR_OP_AND
                    : red == IR_RED_OR ? IR_OP_OR : IR_OP_ADD;
    ir_value *ops[2] = {a, b};
    ir_op *op = temit(t, opc, 2, ops, a->type);
    return op ? &op->results[0] : NULL;
}

static ir_value *concat(temporal *t, ir_value **items, int n, int d)
{
    if (n == 1)
        return items[0];
    int64_t dims[IR_MAX_RANK];
    const ir_type *ty = items[0]->type;
    for (int i = 0; i < ty->rank; i++)
        dims[i] = ty->dims[i];
    dims[d] = 0;
    for (int k = 0; k < n; k++)
        dims[d] += items[k]->type->dims[d];
    ir_op *op = temit(t, IR_OP_CONCATENATE, (uint32_t)n, items, dims_type(t, ty, dims));
    if (!op || !tset(t, op, "dimension", ir_attr_int(t->nm, d, ir_type_scalar(t->nm, IR_E_I64, NULL))))
        return NULL;
    return &op->results[0];
}

/* An `any` loop's iterations must all compute the same value: the view
 * keeps them all and passes them to `custom_call @autopart.iterations_agree`,
 * which stands for the first and which a checker (autopart check) evaluates
 * by comparing them. */
static ir_value *iterations_agree(temporal *t, ir_value **items, int n)
{
    if (n == 1)
        return items[0];
    ir_op *op = temit(t, IR_OP_CUSTOM_CALL, (uint32_t)n, items, items[0]->type);
    if (!op || !tset(t, op, "call_target_name", ir_attr_string(t->nm, IR_ITERATIONS_AGREE, strlen(IR_ITERATIONS_AGREE))))
        return NULL;
    return &op->results[0];
}

/* ---------------------------------------------------------------- ops */

typedef struct nest_info {
    int depth;
    int axes[IR_MAX_AXES];
    int64_t sizes[IR_MAX_AXES];
    uint32_t entries[IR_MAX_AXES];
    int64_t n_iters;
} nest_info;

/* The operand as one iteration of the nest sees it. */
static ir_value *operand_piece(temporal *t, uint32_t op, uint32_t i, uint32_t v, const nest_info *ni, const int64_t *idx)
{
    const ir_pctx *c = t->c;
    tvalue *tv = &t->vals[v];
    ir_value *x = tv->whole;
    /* levels that take the operand partial pick their summand */
    int taken[IR_MAX_AXES];
    int n_taken = 0;
    for (int l = 0; l < ni->depth; l++)
        if (tmr_spec(c, ni->entries[l])[i] == SP_PARTIAL)
            taken[n_taken++] = l;
    if (n_taken) {
        if (!tv->pieces)
            return tfail(t, AP_EINTERNAL, "an op takes a partial sum of a value that is not one"), NULL;
        /* sum the summands over the value's partial axes the op does not take */
        int64_t fixed[IR_MAX_AXES];
        for (int k = 0; k < tv->n_partial; k++)
            fixed[k] = -1;
        for (int q = 0; q < n_taken; q++) {
            int axis = ni->axes[taken[q]], k;
            for (k = 0; k < tv->n_partial && tv->partial_axes[k] != axis; k++)
                ;
            if (k == tv->n_partial)
                return tfail(t, AP_EINTERNAL, "a partial operand is not partial along the loop's axis"), NULL;
            fixed[k] = idx[taken[q]];
        }
        int64_t total = 1;
        for (int k = 0; k < tv->n_partial; k++)
            total *= c->mesh.sizes[tv->partial_axes[k]];
        x = NULL;
        for (int64_t flat = 0; flat < total; flat++) {
            int64_t rem = flat;
            bool match = true;
            for (int k = tv->n_partial - 1; k >= 0; k--) {
                int64_t sz = c->mesh.sizes[tv->partial_axes[k]], coord = rem % sz;
                rem /= sz;
                if (fixed[k] >= 0 && coord != fixed[k])
                    match = false;
            }
            if (!match)
                continue;
            x = x ? add2(t, x, tv->pieces[flat], IR_RED_ADD) : tv->pieces[flat];
            if (!x)
                return NULL;
        }
    }
    /* tile levels slice, outer first */
    for (int l = 0; l < ni->depth && x; l++) {
        int8_t s = tmr_spec(c, ni->entries[l])[i];
        if (s >= 0)
            x = slice_chunk(t, x, s, ni->sizes[l], idx[l]);
    }
    (void)op;
    return x;
}

/* Stacks the iterations' results over tile levels for one choice of the
 * sum levels' indices (idx holds them), from level l inwards. */
static ir_value *stack(temporal *t, uint32_t res_index, uint32_t stride, const nest_info *ni, ir_value **res, int l,
                       int64_t *idx)
{
    if (l == ni->depth) {
        int64_t flat = 0;
        for (int k = 0; k < ni->depth; k++)
            flat = flat * ni->sizes[k] + idx[k];
        return res[flat * stride];
    }
    int8_t s = tmr_spec(t->c, ni->entries[l])[res_index];
    if (s < 0 && s != SP_ANY) /* a sum: the index is chosen by the caller */
        return stack(t, res_index, stride, ni, res, l + 1, idx);
    ir_value *items[64];
    int64_t n = ni->sizes[l];
    if (n > 64)
        return tfail(t, AP_EUNSUPPORTED, "axes above 64 devices are not supported by the temporal view"), NULL;
    for (int64_t k = 0; k < n; k++) {
        idx[l] = k;
        if (!(items[k] = stack(t, res_index, stride, ni, res, l + 1, idx)))
            return NULL;
    }
    idx[l] = 0;
    if (s == SP_ANY)
        return iterations_agree(t, items, (int)n);
    return concat(t, items, (int)n, s);
}

static ir_value *resolve_whole(void *ctx, const ir_value *v)
{
    temporal *t = ctx;
    uint32_t id = ir__value_id(t->c, v);
    return id == VAL_NONE ? NULL : t->vals[id].whole;
}

static bool temporal_op(temporal *t, uint32_t k, ir_cloner *cl)
{
    const ir_pctx *c = t->c;
    const ir_partition *p = t->p;
    ir_op *src = c->ops[k];
    t->loc = ir__loc_clone(t->nm, src->loc);
    nest_info ni = {.depth = p->nlen[k], .n_iters = 1};
    const ir_loop *nest = nest_of(p, k);
    for (int l = 0; l < ni.depth; l++) {
        ni.axes[l] = nest[l].axis;
        ni.sizes[l] = c->mesh.sizes[nest[l].axis];
        ni.entries[l] = nest[l].entry;
        ni.n_iters *= ni.sizes[l];
    }
    if (ni.n_iters > MAX_ITERS)
        return tfail(t, AP_ELIMIT, "too many loop iterations to unroll");
    uint32_t no = src->n_operands, nr = src->n_results;
    ir_value **res = ap_calloc((size_t)(ni.n_iters * (nr ? nr : 1)), sizeof *res);
    ir_value **opds = ap_calloc(no + 1, sizeof *opds);
    const ir_type **types = ap_calloc(nr + 1, sizeof *types);
    ir_layout need0, *rl = ap_calloc(nr + 1, sizeof *rl);
    bool ok = false;
    if (!res || !opds || !types || !rl) {
        tfail(t, AP_ENOMEM, "out of memory");
        goto out;
    }
    ir__needed_layout(p, k, 0, &need0);
    for (uint32_t j = 0; j < nr; j++)
        ir__result_layout(p, k, j, &rl[j]);
    for (int64_t it = 0; it < ni.n_iters; it++) {
        int64_t idx[IR_MAX_AXES], rem = it;
        for (int l = ni.depth - 1; l >= 0; l--) {
            idx[l] = rem % ni.sizes[l];
            rem /= ni.sizes[l];
        }
        for (uint32_t i = 0; i < no; i++)
            if (!(opds[i] = operand_piece(t, k, i, c->opd_val[c->opd0[k] + i], &ni, idx)))
                goto out;
        if (ir_sdy_is_identity(src)) {
            /* Shardy's sharding_constraint and reshard state a global
             * value's sharding and compute nothing.  Printed in their own
             * syntax, the global type is written in their text, so a copy
             * taking a tile printed a program that did not re-parse.  As in
             * the SPMD lowering (states_a_sharding), the view leaves them
             * out: each iteration's result is its operand's piece. */
            res[it * nr] = opds[0];
            continue;
        }
        for (uint32_t j = 0; j < nr; j++) {
            int64_t dims[IR_MAX_RANK];
            const ir_type *g = src->results[j].type;
            if (!g || g->kind != IR_T_TENSOR || g->rank < 0) {
                /* tuples, tokens, unranked: no TMR entry tiles them */
                types[j] = ir__type_clone(t->nm, g);
                continue;
            }
            if (!ir_layout_local_dims(&rl[j], &c->mesh, g, dims)) {
                tfail(t, AP_EINTERNAL, "a tiled dim does not divide");
                goto out;
            }
            types[j] = ir_type_tensor_ex(t->nm, (ir_elem)g->elem, g->text, g->rank, dims, g->encoding);
        }
        /* a region's captured values are the whole values (resolve_whole),
         * never the last iteration's piece an earlier op's clone left in
         * the shared map */
        ir_cloner rcl, *use = cl;
        if (src->n_regions) {
            ir__cloner_init(&rcl, t->nm);
            rcl.resolve = resolve_whole;
            rcl.resolve_ctx = t;
            use = &rcl;
        }
        ir_op *op = ir__clone_op(use, src, opds, types);
        bool cl_oom = use->oom;
        if (src->n_regions)
            ir__cloner_free(&rcl);
        if (!op) {
            tfail(t, cl_oom ? AP_ENOMEM : AP_EINTERNAL, "cannot copy an op into the temporal view");
            goto out;
        }
        ir_block_append(t->nb, op);
        if (no && !ir__localize_attrs(t->nm, op, &need0)) {
            tfail(t, AP_ENOMEM, "out of memory");
            goto out;
        }
        for (uint32_t j = 0; j < nr; j++) {
            ir_value *r = &op->results[j];
            ir_attr *dim = op->opcode == IR_OP_IOTA ? ir_op_attr(op, "iota_dimension") : NULL;
            if (dim && dim->kind == IR_A_INT) {
                /* iota counts from where this iteration's tile starts */
                int64_t start = 0, len = r->type->dims[dim->u.i];
                for (int l = 0; l < ni.depth; l++)
                    if (tmr_spec(c, ni.entries[l])[no + j] == dim->u.i)
                        start = start * ni.sizes[l] + idx[l];
                if (start) {
                    const ir_type *st = ir_type_tensor_ex(t->nm, (ir_elem)r->type->elem, r->type->text, 0, NULL, NULL);
                    int64_t v = start * len;
                    ir_op *cst = temit(t, IR_OP_CONSTANT, 0, NULL, st);
                    ir_attr *val = NULL;
                    bool cplx = ir_elem_is_complex((ir_elem)st->elem);
                    if (cst && (cplx || ir_elem_is_float((ir_elem)st->elem))) {
                        /* a complex start is (start, 0): it was written as an
                         * integer's bytes, read back as a tiny real part */
                        uint8_t raw[16] = {0};
                        ir__float_store(cplx ? (st->elem == IR_E_C64 ? IR_E_F32 : IR_E_F64) : (ir_elem)st->elem, raw,
                                        (double)v);
                        ir_attr key = {.kind = IR_A_DENSE, .type = st};
                        key.u.dense.nbytes = (size_t)ir_elem_bytes((ir_elem)st->elem);
                        key.u.dense.data = raw;
                        val = ir__attr_intern(t->nm, &key, false);
                    } else if (cst) {
                        val = ir_attr_dense_ints(t->nm, st, 1, &v);
                    }
                    if (!cst || !tset(t, cst, "value", val))
                        goto out;
                    ir_value *cv = &cst->results[0];
                    ir_op *bc = temit(t, IR_OP_BROADCAST_IN_DIM, 1, &cv, r->type);
                    if (!bc || !tset(t, bc, "broadcast_dimensions", ir_attr_i64_array(t->nm, 0, NULL)) ||
                        !(r = add2(t, r, &bc->results[0], IR_RED_ADD)))
                        goto out;
                }
            }
            res[it * nr + j] = r;
        }
    }
    /* combine: tiles stacked, sums added (keeping the summands) */
    for (uint32_t j = 0; j < nr; j++) {
        uint32_t v = c->op_val0[k] + j;
        tvalue *tv = &t->vals[v];
        int sum_levels[IR_MAX_AXES], n_sum = 0;
        ir_red red = IR_RED_ADD;
        for (int l = 0; l < ni.depth; l++)
            if (tmr_spec(c, ni.entries[l])[no + j] == SP_SUM) {
                sum_levels[n_sum++] = l;
                red = (ir_red)c->entries[ni.entries[l]].red;
            }
        /* pieces are indexed by the partial axes in mesh order */
        int order[IR_MAX_AXES];
        for (int q = 0; q < n_sum; q++)
            order[q] = sum_levels[q];
        for (int a = 0; a < n_sum; a++) /* sort sum levels by axis */
            for (int b = a + 1; b < n_sum; b++)
                if (ni.axes[order[b]] < ni.axes[order[a]]) {
                    int x = order[a];
                    order[a] = order[b];
                    order[b] = x;
                }
        int64_t n_pieces = 1;
        for (int q = 0; q < n_sum; q++)
            n_pieces *= ni.sizes[order[q]];
        ir_value **pieces = n_sum ? ap_arena_zalloc(&t->nm->arena, sizeof *pieces * (size_t)n_pieces) : NULL;
        if (n_sum && !pieces) {
            tfail(t, AP_ENOMEM, "out of memory");
            goto out;
        }
        ir_value *whole = NULL;
        for (int64_t pc = 0; pc < n_pieces; pc++) {
            int64_t idx[IR_MAX_AXES] = {0}, rem = pc;
            for (int q = n_sum - 1; q >= 0; q--) {
                idx[order[q]] = rem % ni.sizes[order[q]];
                rem /= ni.sizes[order[q]];
            }
            ir_value *s = stack(t, no + j, nr, &ni, res + j, 0, idx);
            if (!s)
                goto out;
            if (pieces)
                pieces[pc] = s;
            whole = whole ? add2(t, whole, s, red) : s;
            if (!whole)
                goto out;
        }
        tv->whole = whole;
        tv->n_partial = n_sum;
        for (int q = 0; q < n_sum; q++)
            tv->partial_axes[q] = ni.axes[order[q]];
        tv->pieces = pieces;
    }
    ok = true;
out:
    ap_free(res);
    ap_free(rl);
    ap_free(opds);
    ap_free(types);
    return ok && !t->rc;
}

static void temporal_range(temporal *t, uint32_t from, uint32_t to, ir_cloner *cl);

/* A flattened while: in the loop view every value is whole, so the loop
 * carries the whole values and its ops' loops unroll inside the body. */
static void temporal_while(temporal *t, const pgroup *g, ir_cloner *cl)
{
    const ir_pctx *c = t->c;
    uint32_t n = g->n;
    ir_value **ins = ap_malloc(sizeof *ins * (n + 1));
    const ir_type **ts = ap_malloc(sizeof *ts * (n + 1));
    ir_op *w = NULL;
    if (!ins || !ts) {
        tfail(t, AP_ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = g->carry0 + i;
        ins[i] = t->vals[c->opd_val[c->opd0[k]]].whole;
        ts[i] = ins[i] ? ins[i]->type : NULL;
        if (!ins[i]) {
            tfail(t, AP_EINTERNAL, "a loop's carried value is used before it is made");
            goto out;
        }
    }
    w = ir_op_new(t->nm, IR_OP_WHILE, NULL, n, ins, n, ts, 2);
    ir_block *cb = w ? ir_block_new(t->nm, &w->regions[0], n, ts) : NULL;
    ir_block *bb = cb ? ir_block_new(t->nm, &w->regions[1], n, ts) : NULL;
    if (!bb) {
        tfail(t, AP_ENOMEM, "out of memory");
        goto out;
    }
    w->loc = ir__loc_clone(t->nm, g->src->loc);
    ir_block_append(t->nb, w);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = c->op_val0[g->carry0 + i];
        t->vals[v].whole = &bb->args[i];
        t->vals[v + 1].whole = &cb->args[i];
        t->vals[v + 2].whole = &w->results[i];
    }
    ir_block *outer = t->nb;
    t->nb = cb;
    temporal_range(t, g->cond0, g->cond_end - 1, cl);
    if (!t->rc) {
        uint32_t k = g->cond_end - 1;
        ir_value *pred = t->vals[c->opd_val[c->opd0[k]]].whole;
        t->loc = NULL;
        temit(t, IR_OP_RETURN, 1, &pred, NULL);
    }
    t->nb = bb;
    temporal_range(t, g->body0, g->body_end, cl);
    if (!t->rc) {
        for (uint32_t i = 0; i < n; i++)
            ins[i] = t->vals[c->opd_val[c->opd0[g->carry0 + i] + 1]].whole;
        t->loc = NULL;
        temit(t, IR_OP_RETURN, n, ins, NULL);
    }
    t->nb = outer;
out:
    ap_free(ins);
    ap_free(ts);
}

/* A flattened case: whole values in and out of every branch. */
static void temporal_case(temporal *t, const pgroup *g, ir_cloner *cl)
{
    const ir_pctx *c = t->c;
    uint32_t n = g->n;
    ir_value **ys = ap_malloc(sizeof *ys * (n + 1));
    const ir_type **ts = ap_malloc(sizeof *ts * (n + 1));
    ir_value *idx = t->vals[c->opd_val[c->opd0[g->carry0]]].whole;
    ir_op *cs = NULL;
    if (!ys || !ts || !idx) {
        tfail(t, ys && ts ? AP_EINTERNAL : AP_ENOMEM, ys && ts ? "a case's index is used before it is made" : "out of memory");
        goto out;
    }
    for (uint32_t j = 0; j < n; j++)
        ts[j] = ir__type_clone(t->nm, val_type(c, c->op_val0[g->merge0 + j]));
    cs = ir_op_new(t->nm, (ir_opcode)g->src->opcode, NULL, 1, &idx, n, ts, g->n_br);
    if (!cs) {
        tfail(t, AP_ENOMEM, "out of memory");
        goto out;
    }
    cs->loc = ir__loc_clone(t->nm, g->src->loc);
    ir_block_append(t->nb, cs);
    ir_block *outer = t->nb;
    for (uint32_t r = 0; r < g->n_br && !t->rc; r++) {
        const pbranch *br = &c->branches[g->br0 + r];
        ir_block *bb = ir_block_new(t->nm, &cs->regions[r], 0, NULL);
        if (!bb) {
            tfail(t, AP_ENOMEM, "out of memory");
            break;
        }
        t->nb = bb;
        temporal_range(t, br->begin, br->end, cl);
        if (!t->rc) {
            for (uint32_t j = 0; j < n; j++)
                ys[j] = t->vals[c->opd_val[c->opd0[g->merge0 + j] + r]].whole;
            t->loc = NULL;
            temit(t, IR_OP_RETURN, n, ys, NULL);
        }
        t->nb = outer;
    }
    for (uint32_t j = 0; j < n; j++)
        t->vals[c->op_val0[g->merge0 + j]].whole = &cs->results[j];
out:
    ap_free(ys);
    ap_free(ts);
}

static void temporal_range(temporal *t, uint32_t from, uint32_t to, ir_cloner *cl)
{
    const ir_pctx *c = t->c;
    for (uint32_t k = from; k < to && !t->rc;) {
        if (c->op_kind[k] == PK_CARRY) {
            const pgroup *g = &c->groups[c->op_group[k]];
            temporal_while(t, g, cl);
            k = g->body_end;
            continue;
        }
        if (c->op_kind[k] == PK_CASEIDX) {
            const pgroup *g = &c->groups[c->op_group[k]];
            temporal_case(t, g, cl);
            k = g->body_end;
            continue;
        }
        temporal_op(t, k, cl);
        k++;
    }
}

int ir_temporal(const ir_partition *p, ir_module **out, ap_error *err)
{
    const ir_pctx *c = p->ctx;
    temporal t = {.p = p, .c = c, .err = err};
    ir_cloner cl;
    *out = NULL;
    ir__cloner_init(&cl, NULL);
    t.nm = ir_module_new(c->m->filename);
    t.vals = ap_calloc(c->n_vals + 1, sizeof *t.vals);
    if (!t.nm || !t.vals || ir_module_copy_text(t.nm, c->m) < 0) {
        tfail(&t, AP_ENOMEM, "out of memory");
        goto done;
    }
    cl.dst = t.nm;
    cl.resolve = resolve_whole;
    cl.resolve_ctx = &t;
    const ir_type *ft = ir_func_type(c->func);
    ir_op *nf = ir_op_new(t.nm, IR_OP_FUNC, NULL, 0, NULL, 0, NULL, 1);
    const ir_type **at = ap_malloc(sizeof *at * (c->n_args + 1));
    if (!nf || !at) {
        ap_free(at);
        tfail(&t, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t a = 0; a < c->n_args; a++)
        at[a] = ir__type_clone(t.nm, ft->elems[a]);
    t.nb = ir_block_new(t.nm, &nf->regions[0], c->n_args, at);
    const ir_type *nft = ir__type_clone(t.nm, ft);
    ap_free(at);
    if (!t.nb || !nft || ir_op_set_attr(t.nm, nf, "sym_name", ir_attr_string(t.nm, "main", 4)) < 0 ||
        ir_op_set_attr(t.nm, nf, "function_type", ir_attr_type(t.nm, nft)) < 0) {
        tfail(&t, AP_ENOMEM, "out of memory");
        goto done;
    }
    /* the symbols the function refers to (sdy.mesh, util.global), as written */
    if (!ir__clone_module_decls(t.nm, c->m)) {
        tfail(&t, AP_ENOMEM, "out of memory");
        goto done;
    }
    ir_block_append(ir_module_body(t.nm), nf);
    for (uint32_t a = 0; a < c->n_args; a++)
        t.vals[a].whole = &t.nb->args[a];
    temporal_range(&t, 0, c->n_ops, &cl);
    if (!t.rc) {
        ir_value **rets = ap_malloc(sizeof *rets * (c->n_ret + 1));
        if (!rets) {
            tfail(&t, AP_ENOMEM, "out of memory");
            goto done;
        }
        for (uint32_t r = 0; r < c->n_ret; r++)
            rets[r] = t.vals[c->ret_val[r]].whole;
        t.loc = NULL;
        temit(&t, IR_OP_FUNC_RETURN, c->n_ret, rets, NULL);
        ap_free(rets);
        ir_func_renumber(nf, NULL, NULL);
        /* calls the inliner left run as written (see ir__clone_callees) */
        if (!t.rc && !ir__clone_callees(t.nm, c->m, &nf->regions[0]))
            tfail(&t, AP_ENOMEM, "out of memory");
    }
done:
    ir__cloner_free(&cl);
    ap_free(t.vals);
    if (t.rc) {
        ir_module_free(t.nm);
        return t.rc;
    }
    *out = t.nm;
    return 0;
}
