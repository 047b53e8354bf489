/*
 * spmd.c - the SPMD interpreter: collectives across the simulated
 * devices of a run (all_reduce, all_gather, reduce_scatter, all_to_all,
 * collective_permute, collective_broadcast), splitting global arguments
 * into per-device tiles by their autopart.layout, and reassembling global
 * results with a check that replicated copies agree bit for bit.
 *
 * Devices run in lock step (eval.c evaluates each op on every device
 * before the next), so a collective finds every device's operand in its
 * slots.  Replica group semantics are described in ir_interp.h.
 */
#include "interp_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ================================================================ groups */

typedef struct groups {
    int64_t n, size;   /* n groups of `size` devices */
    int64_t *ids;      /* n * size device ids, group by group */
    int64_t *group_of; /* per frame device: its group */
    int64_t *pos_of;   /* per frame device: its position in the group */
} groups;

static void groups_free(groups *g)
{
    ap_free(g->ids);
    ap_free(g->group_of);
    ap_free(g->pos_of);
    memset(g, 0, sizeof *g);
}

/* Frame index of partition id `id`, -1 if no device of the frame has it. */
static int64_t frame_dev(const ip_frame *fr, int64_t id)
{
    if (id >= 0 && id < fr->n_dev && fr->dev_ids[id] == id)
        return id;
    for (uint32_t d = 0; d < fr->n_dev; d++)
        if (fr->dev_ids[d] == id)
            return d;
    return -1;
}

static int groups_get(ip_run *r, ip_frame *fr, const ir_op *op, groups *g)
{
    memset(g, 0, sizeof *g);
    int64_t nd = fr->n_dev;
    ir_attr *a = ir_op_attr(op, "replica_groups");
    if (a && (a->kind != IR_A_DENSE || a->u.dense.text || !a->type || !ir_elem_is_int((ir_elem)a->type->elem) ||
              a->type->rank != 2))
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "replica_groups must be a dense integer tensor<GxS>");
    int64_t ng = a ? a->type->dims[0] : 0, gs = a ? a->type->dims[1] : 0;
    bool channel = ir_op_attr(op, "channel_handle") != NULL, global = ir__ip_flag(op, "use_global_device_ids");
    g->group_of = ap_malloc(sizeof *g->group_of * (size_t)nd);
    g->pos_of = ap_malloc(sizeof *g->pos_of * (size_t)nd);
    if (!g->group_of || !g->pos_of)
        goto oom;
    bool single = ng == 1 && gs == 1 && ir_dense_int_at(a, 0) == 0;
    if (ng * gs == 0 || (single && nd > 1 && channel && !global)) {
        /* empty groups, or [[0]] across partitions: one group of all */
        g->n = 1;
        g->size = nd;
        if (!(g->ids = ap_malloc(sizeof *g->ids * (size_t)nd)))
            goto oom;
        for (int64_t d = 0; d < nd; d++)
            g->ids[d] = fr->dev_ids[d];
    } else if (single && nd > 1 && !channel && !global) {
        /* cross_replica with one replica: every device alone */
        g->n = nd;
        g->size = 1;
        if (!(g->ids = ap_malloc(sizeof *g->ids * (size_t)nd)))
            goto oom;
        for (int64_t d = 0; d < nd; d++)
            g->ids[d] = fr->dev_ids[d];
    } else {
        g->n = ng;
        g->size = gs;
        if (!(g->ids = ap_malloc(sizeof *g->ids * (size_t)(ng * gs))))
            goto oom;
        for (int64_t i = 0; i < ng * gs; i++)
            g->ids[i] = ir_dense_int_at(a, (size_t)i);
    }
    for (int64_t d = 0; d < nd; d++)
        g->group_of[d] = -1;
    for (int64_t i = 0; i < g->n * g->size; i++) {
        int64_t d = frame_dev(fr, g->ids[i]);
        if (d < 0 || g->group_of[d] >= 0) {
            int64_t id = g->ids[i];
            groups_free(g);
            return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                  d < 0 ? "replica group names device %" PRId64 ", which does not exist"
                                        : "device %" PRId64 " is in more than one replica group",
                                  id);
        }
        g->group_of[d] = i / g->size;
        g->pos_of[d] = i % g->size;
    }
    for (int64_t d = 0; d < nd; d++)
        if (g->group_of[d] < 0) {
            int64_t id = fr->dev_ids[d];
            groups_free(g);
            return ir__ip_fail_op(r, op, -1, AP_EINVALID, "device %" PRId64 " is in no replica group", id);
        }
    return 0;
oom:
    groups_free(g);
    return ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
}

/* ============================================================== helpers */

/* Copies n slices along `dim` from src (starting at s0) to dst (at d0);
 * the tensors agree on every other dim. */
static void copy_along(ir_tensor *dst, int64_t d0, const ir_tensor *src, int64_t s0, int64_t n, int dim)
{
    int64_t outer = 1, inner = (int64_t)ip_eb((ir_elem)src->elem);
    for (int d = 0; d < dim; d++)
        outer *= src->dims[d];
    for (int d = dim + 1; d < src->rank; d++)
        inner *= src->dims[d];
    for (int64_t o = 0; o < outer; o++)
        memcpy(dst->data + (size_t)((o * dst->dims[dim] + d0) * inner),
               src->data + (size_t)((o * src->dims[dim] + s0) * inner), (size_t)(n * inner));
}

/* Whether a and b agree on every dim but `dim`, where b is `num`/`den`
 * times a. */
static bool scaled_dims(const ir_tensor *a, const ir_tensor *b, int dim, int64_t num, int64_t den)
{
    if (a->kind != IR_TENSOR_ARRAY || b->kind != IR_TENSOR_ARRAY || a->rank != b->rank || a->elem != b->elem ||
        dim < 0 || dim >= a->rank)
        return false;
    for (int d = 0; d < a->rank; d++) {
        if (d == dim ? a->dims[d] * num != b->dims[d] * den : a->dims[d] != b->dims[d])
            return false;
    }
    return true;
}

static int new_result(ip_run *r, ip_frame *fr, const ir_op *op, uint32_t d, uint32_t i, ir_tensor **out)
{
    ap_error e2;
    int rc = ir__tensor_alloc_type(op->results[i].type, r->opts.max_elems, out, &e2);
    if (rc < 0)
        return ir__ip_fail_op(r, op, fr->dev_ids[d], rc, "%s", e2.msg);
    if ((*out)->kind != IR_TENSOR_ARRAY)
        return ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE, "result %u must be a tensor", i);
    return 0;
}

static int64_t attr_int(const ir_op *op, const char *name, int64_t dflt)
{
    ir_attr *a = ir_op_attr(op, name);
    return a && a->kind == IR_A_INT ? a->u.i : dflt;
}

/* Folds the operands of a group member by member, in group order, with
 * the op's reduction region; stores the reduced value in *out. */
static int reduce_group(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, int64_t gi, uint32_t k,
                        const ir_tensor *const *ops, uint32_t n_ops, ir_tensor **out)
{
    int64_t first = frame_dev(fr, g->ids[gi * g->size]);
    const ir_tensor *x0 = ops[(size_t)first * n_ops + k];
    ap_error e2;
    int rc = ir_tensor_clone(x0, out, &e2);
    if (rc < 0)
        return ir__ip_fail_op(r, op, -1, rc, "%s", e2.msg);
    if (x0->kind != IR_TENSOR_ARRAY)
        return ir__ip_fail_op(r, op, -1, AP_ETYPE, "operands must be tensors");
    if (g->size == 1 || x0->numel == 0)
        return 0;
    ip_ctx c = {r, fr, (uint32_t)first, op};
    ip_reducer rd;
    ir_elem e = (ir_elem)x0->elem;
    if (op->n_regions != 1)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs a reduction region");
    if ((rc = ir__ip_reducer_init(&rd, &c, &op->regions[0], 1, &e, NULL)) < 0)
        return rc;
    size_t eb = ip_eb(e);
    for (int64_t m = 1; m < g->size && rc == 0; m++) {
        const ir_tensor *xm = ops[(size_t)frame_dev(fr, g->ids[gi * g->size + m]) * n_ops + k];
        if (!ir__tensor_same_type(xm, x0)) {
            rc = ir__ip_fail_op(r, op, -1, AP_ETYPE, "devices of one group hold operands of different types");
            break;
        }
        for (int64_t i = 0; i < x0->numel && rc == 0; i++) {
            uint8_t *acc = (*out)->data + (size_t)i * eb;
            const uint8_t *v = xm->data + (size_t)i * eb;
            rc = ir__ip_reduce_step(&rd, &acc, &v);
        }
    }
    ir__ip_reducer_free(&rd);
    return rc;
}

/* ========================================================== collectives */

static int coll_all_reduce(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, const ir_tensor *const *ops,
                           ir_tensor **res)
{
    uint32_t n = op->n_operands;
    if (op->n_results != n)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs one result per operand");
    for (int64_t gi = 0; gi < g->n; gi++)
        for (uint32_t k = 0; k < n; k++) {
            ir_tensor *sum;
            int rc = reduce_group(r, fr, op, g, gi, k, ops, n, &sum);
            if (rc < 0) {
                ir_tensor_free(sum);
                return rc;
            }
            /* every member gets the same bits */
            for (int64_t m = 0; m < g->size && rc == 0; m++) {
                int64_t d = frame_dev(fr, g->ids[gi * g->size + m]);
                ap_error e2;
                if ((rc = ir_tensor_clone(sum, &res[(size_t)d * n + k], &e2)) < 0)
                    rc = ir__ip_fail_op(r, op, -1, rc, "%s", e2.msg);
            }
            ir_tensor_free(sum);
            if (rc < 0)
                return rc;
        }
    return 0;
}

static int coll_reduce_scatter(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, const ir_tensor *const *ops,
                               ir_tensor **res)
{
    uint32_t n = op->n_operands;
    int64_t dim = attr_int(op, "scatter_dimension", -1);
    if (op->n_results != n)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs one result per operand");
    for (int64_t gi = 0; gi < g->n; gi++)
        for (uint32_t k = 0; k < n; k++) {
            ir_tensor *sum;
            int rc = reduce_group(r, fr, op, g, gi, k, ops, n, &sum);
            if (rc < 0) {
                ir_tensor_free(sum);
                return rc;
            }
            int64_t chunk = dim >= 0 && dim < sum->rank ? sum->dims[dim] / g->size : 0;
            if (dim < 0 || dim >= sum->rank || sum->dims[dim] % g->size)
                rc = ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                    "scatter_dimension %" PRId64
                                    " is out of range or does not divide by the group size %" PRId64,
                                    dim, g->size);
            for (int64_t m = 0; m < g->size && rc == 0; m++) {
                uint32_t d = (uint32_t)frame_dev(fr, g->ids[gi * g->size + m]);
                ir_tensor **dst = &res[(size_t)d * n + k];
                if ((rc = new_result(r, fr, op, d, k, dst)) < 0)
                    break;
                if (!scaled_dims(*dst, sum, (int)dim, g->size, 1)) {
                    rc = ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE,
                                        "result %u is not the operand split %" PRId64 " ways", k, g->size);
                    break;
                }
                /* the member at position m gets chunk m */
                copy_along(*dst, 0, sum, m * chunk, chunk, (int)dim);
            }
            ir_tensor_free(sum);
            if (rc < 0)
                return rc;
        }
    return 0;
}

static int coll_all_gather(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, const ir_tensor *const *ops,
                           ir_tensor **res)
{
    uint32_t n = op->n_operands;
    int64_t dim = attr_int(op, "all_gather_dim", -1);
    if (op->n_results != n)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs one result per operand");
    for (uint32_t d = 0; d < fr->n_dev; d++)
        for (uint32_t k = 0; k < n; k++) {
            ir_tensor **dst = &res[(size_t)d * n + k];
            int rc = new_result(r, fr, op, d, k, dst);
            if (rc < 0)
                return rc;
            int64_t gi = g->group_of[d], off = 0;
            for (int64_t m = 0; m < g->size; m++) {
                const ir_tensor *x = ops[(size_t)frame_dev(fr, g->ids[gi * g->size + m]) * n + k];
                if (!scaled_dims(x, *dst, (int)dim, g->size, 1))
                    return ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE,
                                          "result %u is not %" PRId64 " operands concatenated along dim %" PRId64, k,
                                          g->size, dim);
                /* concatenation in replica-group order */
                copy_along(*dst, off, x, 0, x->dims[dim], (int)dim);
                off += x->dims[dim];
            }
        }
    return 0;
}

static int coll_all_to_all(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, const ir_tensor *const *ops,
                           ir_tensor **res)
{
    uint32_t n = op->n_operands;
    int64_t sd = attr_int(op, "split_dimension", -1), cd = attr_int(op, "concat_dimension", -1);
    int64_t sc = attr_int(op, "split_count", -1);
    if (op->n_results != n)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs one result per operand");
    if (sc != g->size)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "split_count %" PRId64 " differs from the group size %" PRId64,
                              sc, g->size);
    for (uint32_t d = 0; d < fr->n_dev; d++)
        for (uint32_t k = 0; k < n; k++) {
            ir_tensor **dst = &res[(size_t)d * n + k];
            int rc = new_result(r, fr, op, d, k, dst);
            if (rc < 0)
                return rc;
            int64_t gi = g->group_of[d], me = g->pos_of[d];
            for (int64_t m = 0; m < g->size; m++) {
                const ir_tensor *x = ops[(size_t)frame_dev(fr, g->ids[gi * g->size + m]) * n + k];
                if (x->kind != IR_TENSOR_ARRAY || sd < 0 || sd >= x->rank || cd < 0 || cd >= x->rank ||
                    x->dims[sd] % sc || x->rank != (*dst)->rank || x->elem != (*dst)->elem)
                    return ir__ip_fail_op(r, op, -1, AP_EINVALID, "split/concat dims do not fit the operand");
                int64_t chunk = x->dims[sd] / sc;
                for (int dd = 0; dd < x->rank; dd++) {
                    int64_t want = x->dims[dd];
                    if (dd == sd)
                        want /= sc;
                    if (dd == cd)
                        want *= sc;
                    if ((*dst)->dims[dd] != want)
                        return ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE, "result %u has the wrong shape", k);
                }
                /* member m's chunk `me` lands at position m along concat */
                int64_t box[IR_MAX_RANK], xs[IR_MAX_RANK], ys[IR_MAX_RANK], xb = 0, yb = 0;
                memcpy(box, x->dims, sizeof *box * (size_t)x->rank);
                box[sd] = chunk;
                ip_strides(x->rank, x->dims, xs);
                ip_strides((*dst)->rank, (*dst)->dims, ys);
                xb = me * chunk * xs[sd];
                yb = m * box[cd] * ys[cd];
                int64_t bi[IR_MAX_RANK] = {0};
                size_t eb = ip_eb((ir_elem)x->elem);
                bool empty = false;
                for (int dd = 0; dd < x->rank; dd++)
                    empty = empty || box[dd] == 0;
                if (empty)
                    continue;
                do {
                    int64_t xo = xb, yo = yb;
                    for (int dd = 0; dd < x->rank; dd++) {
                        xo += bi[dd] * xs[dd];
                        yo += bi[dd] * ys[dd];
                    }
                    memcpy((*dst)->data + (size_t)yo * eb, x->data + (size_t)xo * eb, eb);
                } while (ip_next(x->rank, box, bi));
            }
        }
    return 0;
}

static int coll_permute(ip_run *r, ip_frame *fr, const ir_op *op, const ir_tensor *const *ops, ir_tensor **res)
{
    ir_attr *a = ir_op_attr(op, "source_target_pairs");
    if (!a || a->kind != IR_A_DENSE || a->u.dense.text || !a->type || a->type->rank != 2 ||
        (a->type->dims[0] > 0 && a->type->dims[1] != 2))
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "source_target_pairs must be a dense tensor<Px2>");
    if (op->n_operands != 1 || op->n_results != 1)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs one operand and one result");
    int64_t np = a->type->dims[0];
    uint32_t nd = fr->n_dev;
    int64_t *src_of = ap_malloc(sizeof *src_of * nd);
    bool *sent = ap_calloc(nd, 1);
    int rc = 0;
    if (!src_of || !sent) {
        rc = ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t d = 0; d < nd; d++)
        src_of[d] = -1;
    for (int64_t p = 0; p < np; p++) {
        int64_t s = ir_dense_int_at(a, (size_t)(2 * p)), t = ir_dense_int_at(a, (size_t)(2 * p + 1));
        int64_t ds = frame_dev(fr, s), dt = frame_dev(fr, t);
        if (ds < 0 || dt < 0) {
            rc = ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                "pair (%" PRId64 ", %" PRId64 ") names a device that does not exist", s, t);
            goto done;
        }
        if (src_of[dt] >= 0 || sent[ds]) {
            rc = ir__ip_fail_op(r, op, -1, AP_EINVALID, "device %" PRId64 " %s more than once", src_of[dt] >= 0 ? t : s,
                                src_of[dt] >= 0 ? "receives" : "sends");
            goto done;
        }
        src_of[dt] = ds;
        sent[ds] = true;
    }
    for (uint32_t d = 0; d < nd; d++) {
        ir_tensor **dst = &res[d];
        /* a device nobody sends to gets zeros (the spec) */
        if ((rc = new_result(r, fr, op, d, 0, dst)) < 0)
            goto done;
        if (src_of[d] >= 0) {
            const ir_tensor *x = ops[src_of[d]];
            if (!ir__tensor_same_type(x, *dst)) {
                rc = ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE, "operand and result types differ");
                goto done;
            }
            if (x->nbytes)
                memcpy((*dst)->data, x->data, x->nbytes);
        }
    }
done:
    ap_free(src_of);
    ap_free(sent);
    return rc;
}

/* The first device of each group sends its operand to the whole group. */
static int coll_broadcast(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, const ir_tensor *const *ops,
                          ir_tensor **res)
{
    if (op->n_operands != 1 || op->n_results != 1)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs one operand and one result");
    for (uint32_t d = 0; d < fr->n_dev; d++) {
        const ir_tensor *x = ops[frame_dev(fr, g->ids[g->group_of[d] * g->size])];
        int rc = new_result(r, fr, op, d, 0, &res[d]);
        if (rc < 0)
            return rc;
        if (!ir__tensor_same_type(x, res[d]))
            return ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE, "operand and result types differ");
        if (x->nbytes)
            memcpy(res[d]->data, x->data, x->nbytes);
    }
    return 0;
}

int ir__ip_collective(ip_run *r, ip_frame *fr, const ir_op *op)
{
    uint32_t n_in = op->n_operands, n_out = op->n_results, nd = fr->n_dev;
    const ir_tensor **ops = ap_calloc((size_t)nd * (n_in ? n_in : 1), sizeof *ops);
    ir_tensor **res = ap_calloc((size_t)nd * (n_out ? n_out : 1), sizeof *res);
    groups g = {0};
    int rc = 0;
    if (!ops || !res) {
        rc = ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t d = 0; d < nd; d++)
        for (uint32_t i = 0; i < n_in; i++)
            if (!(ops[(size_t)d * n_in + i] = ir__ip_slot(r, fr, d, op, op->operands[i]))) {
                rc = AP_EINVALID;
                goto done;
            }
    if (op->opcode != IR_OP_COLLECTIVE_PERMUTE && (rc = groups_get(r, fr, op, &g)) < 0)
        goto done;
    switch ((ir_opcode)op->opcode) {
    case IR_OP_ALL_REDUCE: rc = coll_all_reduce(r, fr, op, &g, ops, res); break;
    case IR_OP_REDUCE_SCATTER: rc = coll_reduce_scatter(r, fr, op, &g, ops, res); break;
    case IR_OP_ALL_GATHER: rc = coll_all_gather(r, fr, op, &g, ops, res); break;
    case IR_OP_ALL_TO_ALL: rc = coll_all_to_all(r, fr, op, &g, ops, res); break;
    case IR_OP_COLLECTIVE_PERMUTE: rc = coll_permute(r, fr, op, ops, res); break;
    case IR_OP_COLLECTIVE_BROADCAST: rc = coll_broadcast(r, fr, op, &g, ops, res); break;
    default: rc = ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "unknown collective"); break;
    }
    if (rc < 0)
        goto done;
    for (uint32_t d = 0; d < nd; d++)
        for (uint32_t i = 0; i < n_out; i++) {
            ir_tensor **t = &res[(size_t)d * n_out + i];
            if (!*t || !ir_tensor_has_type(*t, op->results[i].type)) {
                rc = ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE, "result %u does not have the op's result type", i);
                goto done;
            }
            ir__ip_slot_set(fr, d, &op->results[i], *t);
            *t = NULL;
        }
done:
    if (res)
        for (size_t k = 0; k < (size_t)nd * n_out; k++)
            ir_tensor_free(res[k]);
    ap_free(res);
    ap_free(ops);
    groups_free(&g);
    return rc;
}

/* ============================================================== layouts */

/* Per dim of the global tensor, the mesh axes tiling it, major to minor. */
typedef struct tiling {
    int rank;
    int n[IR_MAX_RANK];
    int axes[IR_MAX_RANK][IR_MAX_AXES];
} tiling;

static int tiling_parse(const ir_attr *a, const ir_mesh *mesh, int rank, tiling *t, ap_error *err)
{
    memset(t, 0, sizeof *t);
    t->rank = rank;
    if (!a)
        return 0;
    if (a->kind != IR_A_ARRAY || a->u.arr.n != rank)
        return ap_error_set(err, AP_EINVALID, "autopart.layout must be an array of %d arrays of axis names", rank);
    bool used[IR_MAX_AXES] = {false};
    for (int d = 0; d < rank; d++) {
        const ir_attr *l = a->u.arr.items[d];
        if (l->kind != IR_A_ARRAY || l->u.arr.n > IR_MAX_AXES)
            return ap_error_set(err, AP_EINVALID, "autopart.layout entry %d must be an array of axis names", d);
        for (int k = 0; k < l->u.arr.n; k++) {
            const ir_attr *s = l->u.arr.items[k];
            if (s->kind != IR_A_STRING)
                return ap_error_set(err, AP_EINVALID, "autopart.layout entry %d must hold strings", d);
            int ax = ir_mesh_axis(mesh, s->u.str.s, s->u.str.len);
            if (ax < 0)
                return ap_error_set(err, AP_EINVALID, "autopart.layout names axis '%s', which the mesh does not have",
                                    s->u.str.s);
            if (used[ax])
                return ap_error_set(err, AP_EINVALID, "autopart.layout uses axis '%s' twice", s->u.str.s);
            used[ax] = true;
            t->axes[d][t->n[d]++] = ax;
        }
    }
    return 0;
}

/* Tiles along dim d, and the tile a device holds. */
static int64_t tiling_count(const tiling *t, const ir_mesh *mesh, int d)
{
    int64_t n = 1;
    for (int k = 0; k < t->n[d]; k++)
        n *= mesh->sizes[t->axes[d][k]];
    return n;
}

static int64_t tiling_index(const tiling *t, const ir_mesh *mesh, int d, int64_t dev)
{
    int64_t coord[IR_MAX_AXES], rest = dev;
    for (int a = mesh->n_axes - 1; a >= 0; a--) {
        coord[a] = rest % mesh->sizes[a];
        rest /= mesh->sizes[a];
    }
    int64_t idx = 0;
    for (int k = 0; k < t->n[d]; k++)
        idx = idx * mesh->sizes[t->axes[d][k]] + coord[t->axes[d][k]];
    return idx;
}

/* Copies the box of extent `ext` at `s0` in src to `d0` in dst. */
static void copy_box(ir_tensor *dst, const int64_t *d0, const ir_tensor *src, const int64_t *s0, const int64_t *ext)
{
    int r = src->rank;
    for (int d = 0; d < r; d++)
        if (ext[d] == 0)
            return;
    int64_t ds[IR_MAX_RANK], ss[IR_MAX_RANK], bi[IR_MAX_RANK] = {0};
    ip_strides(r, dst->dims, ds);
    ip_strides(r, src->dims, ss);
    size_t eb = ip_eb((ir_elem)src->elem);
    do {
        int64_t doff = 0, soff = 0;
        for (int d = 0; d < r; d++) {
            doff += (d0[d] + bi[d]) * ds[d];
            soff += (s0[d] + bi[d]) * ss[d];
        }
        memcpy(dst->data + (size_t)doff * eb, src->data + (size_t)soff * eb, eb);
    } while (ip_next(r, ext, bi));
}

static int shard(const ir_tensor *global, const tiling *t, const ir_mesh *mesh, int64_t dev, ir_tensor **out,
                 ap_error *err)
{
    *out = NULL;
    if (global->kind != IR_TENSOR_ARRAY) {
        for (int d = 0; d < t->rank; d++)
            if (t->n[d])
                return ap_error_set(err, AP_EINVALID, "only arrays can be split");
        return ir_tensor_clone(global, out, err);
    }
    int64_t local[IR_MAX_RANK], start[IR_MAX_RANK];
    for (int d = 0; d < global->rank; d++) {
        int64_t n = tiling_count(t, mesh, d);
        if (global->dims[d] % n)
            return ap_error_set(err, AP_EINVALID, "dim %d of size %" PRId64 " does not split into %" PRId64 " tiles", d,
                                global->dims[d], n);
        local[d] = global->dims[d] / n;
        start[d] = tiling_index(t, mesh, d, dev) * local[d];
    }
    int rc = ir_tensor_new((ir_elem)global->elem, global->rank, local, out, err);
    if (rc < 0)
        return rc;
    int64_t zero[IR_MAX_RANK] = {0};
    copy_box(*out, zero, global, start, local);
    return 0;
}

int ir_tensor_shard(const ir_tensor *global, const ir_attr *layout, const ir_mesh *mesh, int64_t device,
                    ir_tensor **out, ap_error *err)
{
    *out = NULL;
    if (device < 0 || device >= ir_mesh_devices(mesh))
        return ap_error_set(err, AP_EINVALID, "device %" PRId64 " is not on the mesh", device);
    tiling t;
    int rc = tiling_parse(layout, mesh, global->kind == IR_TENSOR_ARRAY ? global->rank : 0, &t, err);
    return rc < 0 ? rc : shard(global, &t, mesh, device, out, err);
}

int ir_spmd_mesh(const ir_module *m, ir_mesh *out, ap_error *err)
{
    ir_attr *ms = ir_op_attr(m->top, "autopart.mesh");
    if (!ms || ms->kind != IR_A_STRING)
        return ap_error_set(err, AP_EINVALID, "the module has no autopart.mesh string attribute (not an SPMD module)");
    int rc = ir_mesh_parse(ms->u.str.s, out, err);
    if (rc < 0)
        return rc;
    ir_attr *np = ir_op_attr(m->top, "mhlo.num_partitions");
    if (np && (np->kind != IR_A_INT || np->u.i != ir_mesh_devices(out)))
        return ap_error_set(err, AP_EINVALID,
                            "mhlo.num_partitions is not the %" PRId64 " devices of autopart.mesh \"%s\"",
                            ir_mesh_devices(out), ms->u.str.s);
    return 0;
}

/* Devices of an SPMD module: mhlo.num_partitions, else the mesh's. */
static int module_devices(const ir_module *m, int64_t *n, ap_error *err)
{
    ir_attr *np = ir_op_attr(m->top, "mhlo.num_partitions");
    if (np && np->kind == IR_A_INT && np->u.i >= 1) {
        *n = np->u.i;
        return 0;
    }
    ir_mesh mesh;
    int rc = ir_spmd_mesh(m, &mesh, err);
    if (rc < 0)
        return rc;
    *n = ir_mesh_devices(&mesh);
    return 0;
}

/* ================================================================= runs */

static int run_devices(const ir_module *m, const ir_op *func, uint32_t nd, const ir_tensor *const *args,
                       uint32_t n_args, ir_tensor ***res, uint32_t *n_res, const ir_interp_opts *opts, ap_error *err)
{
    *res = NULL;
    *n_res = 0;
    ip_run r;
    ir__ip_run_init(&r, m, opts, err);
    r.spmd = true;
    int64_t *ids = ap_malloc(sizeof *ids * nd);
    int rc;
    if (!ids) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t d = 0; d < nd; d++)
        ids[d] = d;
    if ((rc = ir__ip_check_args(&r, func, nd, args, n_args)) < 0)
        goto done;
    if ((rc = ir__ip_call(&r, func, nd, ids, 0, false, args, res, NULL)) < 0)
        goto done;
    *n_res = ir_func_entry(func)->last->n_operands;
done:
    ap_free(ids);
    ir__ip_run_free(&r);
    return rc;
}

int ir_spmd_run_local(const ir_module *m, const ir_op *func, uint32_t n_devices, const ir_tensor *const *args,
                      uint32_t n_args, ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts,
                      ap_error *err)
{
    *results = NULL;
    *n_results = 0;
    int64_t nd;
    int rc = module_devices(m, &nd, err);
    if (rc < 0)
        return rc;
    if (nd != (int64_t)n_devices)
        return ap_error_set(err, AP_EINVALID, "the module runs on %" PRId64 " devices, %u given", nd, n_devices);
    return run_devices(m, func, n_devices, args, n_args, results, n_results, opts, err);
}

/* Global index of element i of a device's tile, for messages. */
static void global_index_str(const ir_tensor *local, const int64_t *start, int64_t i, char *buf, size_t size)
{
    int64_t idx[IR_MAX_RANK], rest = i;
    for (int d = local->rank - 1; d >= 0; d--) {
        idx[d] = local->dims[d] ? rest % local->dims[d] : 0;
        rest = local->dims[d] ? rest / local->dims[d] : 0;
    }
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < local->rank && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, d ? ", " : "", start[d] + idx[d]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

static void elem_str(const ir_tensor *t, int64_t i, char *buf, size_t size)
{
    ap_buf b;
    ap_buf_init(&b);
    ir_tensor tmp = *t;
    int64_t one = 1;
    tmp.rank = 1;
    tmp.dims = &one;
    tmp.numel = 1;
    tmp.data = t->data + (size_t)i * ip_eb((ir_elem)t->elem);
    tmp.nbytes = ip_eb((ir_elem)t->elem);
    ir_tensor_print(&b, &tmp, 0);
    /* "tensor<1xf32> [v]": keep v */
    const char *s = b.data ? strchr(b.data, '[') : NULL;
    snprintf(buf, size, "%.*s", s ? (int)strlen(s) - 2 : 1, s ? s + 1 : "?");
    ap_buf_free(&b);
}

/* Reassembles result j from every device's tile; replicated copies must
 * be identical. */
static int assemble(const ir_op *func, uint32_t j, const ir_mesh *mesh, const tiling *t, ir_tensor *const *loc,
                    uint32_t n_res, uint32_t nd, ir_tensor **out, ap_error *err)
{
    *out = NULL;
    const ir_tensor *l0 = loc[j];
    if (l0->kind != IR_TENSOR_ARRAY) {
        for (uint32_t d = 1; d < nd; d++)
            if (!ir__tensor_same_type(loc[(size_t)d * n_res + j], l0))
                return ap_error_set(err, AP_ECONFLICT, "result %u of @%s differs in type between devices", j,
                                    ir_func_name(func));
        return ir_tensor_clone(l0, out, err);
    }
    int64_t gdims[IR_MAX_RANK];
    for (int d = 0; d < l0->rank; d++)
        gdims[d] = l0->dims[d] * tiling_count(t, mesh, d);
    int rc = ir_tensor_new((ir_elem)l0->elem, l0->rank, gdims, out, err);
    if (rc < 0)
        return rc;
    /* the first device holding each tile writes it; the others compare */
    int64_t *first = ap_malloc(sizeof *first * nd);
    if (!first) {
        ir_tensor_free(*out);
        *out = NULL;
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    for (uint32_t d = 0; d < nd; d++) {
        const ir_tensor *ld = loc[(size_t)d * n_res + j];
        int64_t start[IR_MAX_RANK];
        for (int k = 0; k < l0->rank; k++)
            start[k] = tiling_index(t, mesh, k, d) * l0->dims[k];
        first[d] = d;
        for (uint32_t e = 0; e < d; e++) {
            bool same_tile = first[e] == e;
            for (int k = 0; k < l0->rank && same_tile; k++)
                same_tile = tiling_index(t, mesh, k, e) == tiling_index(t, mesh, k, d);
            if (same_tile) {
                first[d] = e;
                break;
            }
        }
        if (first[d] == d) {
            copy_box(*out, start, ld, (int64_t[IR_MAX_RANK]){0}, l0->dims);
            continue;
        }
        const ir_tensor *lf = loc[(size_t)first[d] * n_res + j];
        if (ld->nbytes == 0 || memcmp(lf->data, ld->data, ld->nbytes) == 0)
            continue;
        size_t eb = ip_eb((ir_elem)ld->elem);
        int64_t i = 0;
        while (memcmp(lf->data + (size_t)i * eb, ld->data + (size_t)i * eb, eb) == 0)
            i++;
        char where[200], va[64], vb[64];
        global_index_str(ld, start, i, where, sizeof where);
        elem_str(lf, i, va, sizeof va);
        elem_str(ld, i, vb, sizeof vb);
        rc = ap_error_set(err, AP_ECONFLICT,
                          "result %u of @%s: devices %" PRId64
                          " and %u hold replicated copies of one tile but differ at "
                          "global index %s: %s vs %s (a broken partitioning)",
                          j, ir_func_name(func), first[d], d, where, va, vb);
        break;
    }
    ap_free(first);
    if (rc < 0) {
        ir_tensor_free(*out);
        *out = NULL;
    }
    return rc;
}

int ir_spmd_run(const ir_module *m, const ir_op *func, const ir_tensor *const *global_args, uint32_t n_args,
                ir_tensor ***results, uint32_t *n_results, const ir_interp_opts *opts, ap_error *err)
{
    *results = NULL;
    *n_results = 0;
    ir_mesh mesh;
    int rc = ir_spmd_mesh(m, &mesh, err);
    if (rc < 0)
        return rc;
    if (!func || func->opcode != IR_OP_FUNC)
        return ap_error_set(err, AP_EINVALID, "not a func.func");
    if (n_args != ir_func_num_args(func))
        return ap_error_set(err, AP_EINVALID, "@%s takes %u arguments, %u given", ir_func_name(func),
                            ir_func_num_args(func), n_args);
    uint32_t nd = (uint32_t)ir_mesh_devices(&mesh), n_res = 0;
    ir_tensor **local = ap_calloc((size_t)nd * (n_args ? n_args : 1), sizeof *local);
    ir_tensor **lres = NULL, **gres = NULL;
    if (!local)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n_args; i++) {
        tiling t;
        const ir_tensor *g = global_args[i];
        if ((rc = tiling_parse(ir_func_arg_attr(func, i, "autopart.layout"), &mesh,
                               g->kind == IR_TENSOR_ARRAY ? g->rank : 0, &t, err)) < 0)
            goto fail_arg;
        for (uint32_t d = 0; d < nd; d++)
            if ((rc = shard(g, &t, &mesh, d, &local[(size_t)d * n_args + i], err)) < 0)
                goto fail_arg;
        continue;
    fail_arg : {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        rc = ap_error_set(err, rc, "argument %u of @%s: %s", i, ir_func_name(func), msg);
        goto done;
    }
    }
    if ((rc = run_devices(m, func, nd, (const ir_tensor *const *)local, n_args, &lres, &n_res, opts, err)) < 0)
        goto done;
    if (!(gres = ap_calloc(n_res ? n_res : 1, sizeof *gres))) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t j = 0; j < n_res; j++) {
        tiling t;
        const ir_tensor *l0 = lres[j];
        if ((rc = tiling_parse(ir_func_result_attr(func, j, "autopart.layout"), &mesh,
                               l0->kind == IR_TENSOR_ARRAY ? l0->rank : 0, &t, err)) < 0 ||
            (rc = assemble(func, j, &mesh, &t, lres, n_res, nd, &gres[j], err)) < 0)
            goto done;
    }
    *results = gres;
    *n_results = n_res;
    gres = NULL;
done:
    ir_tensors_free(local, nd * n_args);
    ir_tensors_free(lres, nd * n_res);
    ir_tensors_free(gres, n_res);
    return rc;
}
