/*
 * coll.c - the collectives of the SPMD interpreter across the simulated
 * devices of a run: all_reduce, all_gather, reduce_scatter, all_to_all,
 * collective_permute, collective_broadcast, collective_reduce.
 *
 * Devices run in lock step (eval.c evaluates each op on every device
 * before the next), so a collective finds every device's operand in its
 * slots.  Replica group semantics are described in interp.h.
 */
#include "interp_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ================================================================ groups */

typedef struct groups {
    int64_t n, size;   /* n groups of up to `size` devices */
    int64_t *ids;      /* n * size device ids, group by group */
    int64_t *len;      /* per group: its devices, the first len[i] of its row; NULL when all are `size` */
    int64_t *group_of; /* per frame device: its group */
    int64_t *pos_of;   /* per frame device: its position in the group */
} groups;

static void groups_free(groups *g)
{
    ap_free(g->ids);
    ap_free(g->len);
    ap_free(g->group_of);
    ap_free(g->pos_of);
    memset(g, 0, sizeof *g);
}

static int64_t group_len(const groups *g, int64_t gi) { return g->len ? g->len[gi] : g->size; }

/* stablehlo.collective_reduce: not in the op registry (ir_ops.h), read by
 * name. */
static bool is_collective_reduce(const ir_op *op)
{
    return op->opcode == IR_OP_UNKNOWN && !strcmp(op->name, "stablehlo.collective_reduce");
}

bool ir__ip_is_collective_reduce(const ir_op *op) { return is_collective_reduce(op); }

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

/* Whether op's channel_handle names a channel (handle > 0): the spec's
 * channel_id, which picks the mode of its replica groups. */
static bool channel_id_positive(const ir_op *op)
{
    ir_attr *ch = ir_op_attr(op, "channel_handle");
    ir_attr *h = ch && ch->kind == IR_A_DIALECT ? ir_dialect_param(ch, "handle") : NULL;
    return ch && (!h || h->kind != IR_A_INT || h->u.i > 0);
}

/* Inside interpreter.run_parallel over replicas (one partition) the ids are
 * replica ids, and a mode over partitions (all_to_all, collective_broadcast,
 * collective_reduce and collective_permute with a channel: the spec's
 * cross_partition, a group per replica of the partitions a partition group
 * names) has the one partition: its groups must be [[0]] (they cover every
 * partition once), which leaves each replica alone, and its pairs (0, 0),
 * each replica sending to itself. */
static bool replicas_by_partition(const ip_run *r, const ir_op *op)
{
    bool by_partition = op->opcode == IR_OP_ALL_TO_ALL || op->opcode == IR_OP_COLLECTIVE_BROADCAST ||
                        op->opcode == IR_OP_COLLECTIVE_PERMUTE || is_collective_reduce(op);
    return r->replicas && by_partition && channel_id_positive(op);
}

/* The spec's process groups over a grid of nr replicas of np partitions
 * (run_parallel over both; process (i, j) is frame device i * np + j): by
 * channel and use_global_device_ids, all_gather, all_reduce and
 * reduce_scatter take cross_replica, cross_replica_and_partition or
 * flattened_ids; all_to_all, collective_broadcast and collective_reduce
 * cross_replica or cross_partition.  Each listed group of the attribute
 * (its -1 padding dropped) makes the spec's groups in its order: a copy per
 * partition (per replica) of cross_replica (cross_partition), the group
 * over every partition, partition-major, for cross_replica_and_partition,
 * the ids read as i * np + j for flattened_ids.  Empty replica_groups are
 * refused here. */
static int grid_groups(ip_run *r, ip_frame *fr, const ir_op *op, const ir_attr *a, groups *g)
{
    int64_t np = r->grid_np, nr = fr->n_dev / np;
    int64_t ng = a ? a->type->dims[0] : 0, gs = a ? a->type->dims[1] : 0;
    bool channel = channel_id_positive(op), global = ir__ip_flag(op, "use_global_device_ids");
    bool three = op->opcode == IR_OP_ALL_GATHER || op->opcode == IR_OP_ALL_REDUCE || op->opcode == IR_OP_REDUCE_SCATTER;
    enum { CROSS_REPLICA, CROSS_PARTITION, CROSS_BOTH, FLATTENED } mode;
    if (ng * gs == 0)
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                              "empty replica_groups over replicas of several partitions are not supported");
    if (global && (!three || !channel))
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "use_global_device_ids needs a channel (and all_gather, "
                                                      "all_reduce or reduce_scatter)");
    mode = !channel ? CROSS_REPLICA : !three ? CROSS_PARTITION : global ? FLATTENED : CROSS_BOTH;
    int64_t limit = mode == CROSS_PARTITION ? np : mode == FLATTENED ? nr * np : nr;
    int64_t copies = mode == CROSS_REPLICA ? np : mode == CROSS_PARTITION ? nr : 1;
    int64_t per = mode == CROSS_BOTH ? np : 1; /* devices per listed id */
    g->n = ng * copies;
    g->size = gs * per;
    g->ids = ap_malloc(sizeof *g->ids * (size_t)(g->n * g->size));
    g->len = ap_malloc(sizeof *g->len * (size_t)g->n);
    if (!g->ids || !g->len)
        return ir__ip_fail_op(r, op, -1, AP_ENOMEM, "out of memory");
    bool ragged_ok = op->opcode == IR_OP_ALL_REDUCE || is_collective_reduce(op), ragged = false;
    for (int64_t li = 0; li < ng; li++) {
        int64_t row[64], k = 0;
        if (gs > 64)
            return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "groups of more than 64 ids are not supported here");
        for (int64_t m = 0; m < gs; m++) {
            int64_t id = ir_dense_int_at(a, (size_t)(li * gs + m));
            if (id == -1)
                continue;
            if (id < 0 || id >= limit)
                return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                      "replica group names %s %" PRId64 ", which does not exist (%" PRId64 ")",
                                      mode == CROSS_PARTITION ? "partition" : mode == FLATTENED ? "process" : "replica",
                                      id, limit);
            row[k++] = id;
        }
        ragged = ragged || k < gs;
        for (int64_t c = 0; c < copies; c++) {
            int64_t gi = li * copies + c, *out = g->ids + gi * g->size, n = 0;
            for (int64_t p = 0; p < per; p++)
                for (int64_t m = 0; m < k; m++) {
                    int64_t id = row[m];
                    out[n++] = mode == CROSS_REPLICA     ? id * np + c
                               : mode == CROSS_PARTITION ? c * np + id
                               : mode == CROSS_BOTH      ? id * np + p
                                                         : id;
                }
            g->len[gi] = n;
            for (int64_t m = n; m < g->size; m++)
                out[m] = -1;
        }
    }
    if (ragged && !ragged_ok)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                              "replica_groups pads a group with -1 (groups of different sizes), which only "
                              "all_reduce and collective_reduce allow");
    return 0;
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
    bool by_partition_only = op->opcode == IR_OP_COLLECTIVE_BROADCAST || is_collective_reduce(op);
    if (r->grid_np) {
        g->group_of = ap_malloc(sizeof *g->group_of * (size_t)nd);
        g->pos_of = ap_malloc(sizeof *g->pos_of * (size_t)nd);
        if (!g->group_of || !g->pos_of)
            goto oom;
        int rc = grid_groups(r, fr, op, a, g);
        if (rc < 0) {
            groups_free(g);
            return rc;
        }
        goto members;
    }
    bool alone = replicas_by_partition(r, op);
    if (alone && (ng * gs != 1 || ir_dense_int_at(a, 0) != 0))
        return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                              "a collective across partitions (a channel) in a run over replicas of one partition "
                              "needs replica_groups [[0]], the one partition");
    bool channel = channel_id_positive(op), global = ir__ip_flag(op, "use_global_device_ids");
    /* collective_broadcast and collective_reduce have the spec's two modes
     * only: cross_replica (no channel) and cross_partition, where the ids
     * are partitions as written ([[0]] is partition 0 alone) */
    if (by_partition_only && channel && !r->replicas && ng * gs == 0)
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                              "empty replica_groups with a channel (cross_partition) is not supported");
    g->group_of = ap_malloc(sizeof *g->group_of * (size_t)nd);
    g->pos_of = ap_malloc(sizeof *g->pos_of * (size_t)nd);
    if (!g->group_of || !g->pos_of)
        goto oom;
    /* empty groups are all replicas, [[0]] with one replica */
    bool single = ng * gs == 0 || (ng == 1 && gs == 1 && ir_dense_int_at(a, 0) == 0);
    if (r->replicas || (by_partition_only && channel))
        single = ng * gs == 0; /* the devices are the replicas (or partitions): [[0]] is one of them */
    /* one device, or every replica across partitions: one group of all;
     * cross_partition with one partition, or cross_replica with one
     * replica: every device alone */
    bool one_group = !alone && ((ng * gs == 0 && nd == 1) || (single && nd > 1 && (channel || r->replicas) && !global));
    bool each_alone = alone || (!one_group && single && nd > 1 && !channel && !global);
    if (one_group || each_alone) {
        g->n = each_alone ? nd : 1;
        g->size = each_alone ? 1 : nd;
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
        /* groups of different sizes are padded with -1 (the dense form of
         * the spec's list of groups; StableHLO's verifier allows it where
         * groups need not be one size: all_reduce, collective_reduce):
         * each group is its other ids, in order */
        bool ragged_ok = op->opcode == IR_OP_ALL_REDUCE || is_collective_reduce(op), ragged = false;
        for (int64_t gi = 0; gi < ng; gi++) {
            int64_t k = 0, *row = g->ids + gi * gs;
            for (int64_t m = 0; m < gs; m++)
                if (row[m] != -1)
                    row[k++] = row[m];
            for (int64_t m = k; m < gs; m++)
                row[m] = -1;
            ragged = ragged || k < gs;
        }
        if (ragged && !ragged_ok) {
            groups_free(g);
            return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                  "replica_groups pads a group with -1 (groups of different sizes), which only "
                                  "all_reduce and collective_reduce allow");
        }
        if (ragged) {
            if (!(g->len = ap_malloc(sizeof *g->len * (size_t)ng)))
                goto oom;
            for (int64_t gi = 0; gi < ng; gi++) {
                int64_t k = 0;
                while (k < gs && g->ids[gi * gs + k] != -1)
                    k++;
                g->len[gi] = k;
            }
        }
    }
members:
    for (int64_t d = 0; d < nd; d++)
        g->group_of[d] = -1;
    for (int64_t gi = 0; gi < g->n; gi++)
        for (int64_t m = 0; m < group_len(g, gi); m++) {
            int64_t id = g->ids[gi * g->size + m], d = frame_dev(fr, id);
            if (d < 0 || g->group_of[d] >= 0) {
                groups_free(g);
                return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                      d < 0 ? "replica group names device %" PRId64 ", which does not exist"
                                            : "device %" PRId64 " is in more than one replica group",
                                      id);
            }
            g->group_of[d] = gi;
            g->pos_of[d] = m;
        }
    /* collective_broadcast and collective_reduce give a device in no group
     * zeros (the spec); every other collective needs each device in a group */
    for (int64_t d = 0; d < nd && !by_partition_only; d++)
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
    int rc = ir__tensor_alloc_type_w(op->results[i].type, r->opts.max_elems, r->opts.f64, out, &e2);
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
 * the op's reduction region; stores the reduced value in *out.  The group
 * has at least one device. */
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
    if (group_len(g, gi) == 1 || x0->numel == 0)
        return 0;
    ip_ctx c = {r, fr, (uint32_t)first, op};
    ip_reducer rd;
    ir_elem e = (ir_elem)x0->elem;
    if (op->n_regions != 1)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID, "needs a reduction region");
    if ((rc = ir__ip_reducer_init(&rd, &c, &op->regions[0], 1, &e, NULL)) < 0)
        return rc;
    size_t eb = ip_eb(e);
    for (int64_t m = 1; m < group_len(g, gi) && rc == 0; m++) {
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
        for (uint32_t k = 0; k < n && group_len(g, gi) > 0; k++) {
            ir_tensor *sum;
            int rc = reduce_group(r, fr, op, g, gi, k, ops, n, &sum);
            if (rc < 0) {
                ir_tensor_free(sum);
                return rc;
            }
            /* every member gets the same bits */
            for (int64_t m = 0; m < group_len(g, gi) && rc == 0; m++) {
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
    /* without a channel the pairs are replica ids (cross_replica), and
     * there is one replica: (0, 0) sends each device's operand to itself
     * (inside run_parallel over replicas the devices are the replicas, and
     * there a channel's pairs name the one partition the same way) */
    bool cross_replica = nd > 1 && !channel_id_positive(op) && !r->replicas && !r->grid_np,
         one_partition = replicas_by_partition(r, op);
    /* over replicas of several partitions (the spec's process grid): pairs
     * of replicas within each partition (cross_replica), or of partitions
     * within each replica with a channel (cross_partition) */
    int64_t gnp = r->grid_np, gnr = gnp ? nd / gnp : 0;
    bool grid_by_partition = gnp && channel_id_positive(op);
    for (int64_t p = 0; p < np && gnp; p++) {
        int64_t s = ir_dense_int_at(a, (size_t)(2 * p)), t = ir_dense_int_at(a, (size_t)(2 * p + 1));
        int64_t lim = grid_by_partition ? gnp : gnr, copies = grid_by_partition ? gnr : gnp;
        if (s < 0 || s >= lim || t < 0 || t >= lim) {
            rc = ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                "pair (%" PRId64 ", %" PRId64 ") names a %s that does not exist (%" PRId64 ")", s, t,
                                grid_by_partition ? "partition" : "replica", lim);
            goto done;
        }
        for (int64_t c = 0; c < copies; c++) {
            int64_t ds = grid_by_partition ? c * gnp + s : s * gnp + c;
            int64_t dt = grid_by_partition ? c * gnp + t : t * gnp + c;
            if (src_of[dt] >= 0 || sent[ds]) {
                rc = ir__ip_fail_op(r, op, -1, AP_EINVALID, "%s %" PRId64 " %s more than once",
                                    grid_by_partition ? "partition" : "replica", src_of[dt] >= 0 ? t : s,
                                    src_of[dt] >= 0 ? "receives" : "sends");
                goto done;
            }
            src_of[dt] = ds;
            sent[ds] = true;
        }
    }
    for (int64_t p = 0; p < np && !gnp; p++) {
        int64_t s = ir_dense_int_at(a, (size_t)(2 * p)), t = ir_dense_int_at(a, (size_t)(2 * p + 1));
        if (cross_replica || one_partition) {
            if (s != 0 || t != 0) {
                rc = ir__ip_fail_op(r, op, -1, AP_EINVALID,
                                    "pair (%" PRId64 ", %" PRId64 ") names a %s that does not exist (one %s)", s, t,
                                    one_partition ? "partition" : "replica", one_partition ? "partition" : "replica");
                goto done;
            }
            for (uint32_t d = 0; d < nd; d++)
                src_of[d] = d;
            continue;
        }
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

/* The root of a group for data operand j of collective_broadcast and
 * collective_reduce: its first device, or with has_dynamic_root the device
 * at the position the last operand's element j gives (the spec:
 * process_groups[i, operands[N][j]]).  Every device of the group holds that
 * operand; devices that name different positions are refused rather than
 * read one way (the spec does not say whose operand counts).  Stores the
 * frame index of the root in *root. */
static int group_root(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, int64_t gi, uint32_t j,
                      const ir_tensor *const *ops, uint32_t n_in, bool dyn, int64_t *root)
{
    int64_t pos = 0;
    for (int64_t m = 0; dyn && m < group_len(g, gi); m++) {
        int64_t d = frame_dev(fr, g->ids[gi * g->size + m]);
        const ir_tensor *rt = ops[(size_t)d * n_in + n_in - 1];
        if (rt->kind != IR_TENSOR_ARRAY || ir__ip_class((ir_elem)rt->elem) == IP_F ||
            ir__ip_class((ir_elem)rt->elem) == IP_C || rt->rank != 1 || rt->dims[0] != n_in - 1)
            return ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE,
                                  "with has_dynamic_root the last operand must be a tensor<%uxi32> of roots", n_in - 1);
        int64_t p = ir_tensor_get_i64(rt, j);
        if (m > 0 && p != pos)
            return ir__ip_fail_op(r, op, fr->dev_ids[d], AP_EUNSUPPORTED,
                                  "devices of one group name different roots (%" PRId64 " and %" PRId64
                                  ") for operand %u",
                                  pos, p, j);
        pos = p;
    }
    if (pos < 0 || pos >= group_len(g, gi))
        return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                              "root %" PRId64 " of operand %u is outside its group of %" PRId64 " devices", pos, j,
                              group_len(g, gi));
    *root = frame_dev(fr, g->ids[gi * g->size + pos]);
    return 0;
}

/* The operands and results of collective_broadcast and collective_reduce:
 * data operands, with has_dynamic_root a last operand of roots, and one
 * result per data operand. */
static int data_operands(ip_run *r, const ir_op *op, bool dyn, uint32_t *n_data)
{
    uint32_t nd = op->n_operands - (dyn && op->n_operands > 0 ? 1 : 0);
    if (nd < 1 || op->n_results != nd)
        return ir__ip_fail_op(r, op, -1, AP_EINVALID,
                              "needs data operands%s and one result per data operand",
                              dyn ? " and a last operand of roots (has_dynamic_root)" : "");
    *n_data = nd;
    return 0;
}

/* collective_broadcast: each data operand of a group's root (its first
 * device, or the one has_dynamic_root names) goes to the whole group; a
 * device in no group gets zeros. */
static int coll_broadcast(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, const ir_tensor *const *ops,
                          ir_tensor **res)
{
    bool dyn = ir__ip_flag(op, "has_dynamic_root");
    uint32_t n_in = op->n_operands, n_data;
    int rc = data_operands(r, op, dyn, &n_data);
    if (rc < 0)
        return rc;
    for (uint32_t d = 0; d < fr->n_dev; d++)
        for (uint32_t j = 0; j < n_data; j++) {
            ir_tensor **dst = &res[(size_t)d * n_data + j];
            if ((rc = new_result(r, fr, op, d, j, dst)) < 0)
                return rc;
            int64_t gi = g->group_of[d], root;
            if (gi < 0)
                continue;
            if ((rc = group_root(r, fr, op, g, gi, j, ops, n_in, dyn, &root)) < 0)
                return rc;
            const ir_tensor *x = ops[(size_t)root * n_in + j];
            if (!ir__tensor_same_type(x, *dst))
                return ir__ip_fail_op(r, op, fr->dev_ids[d], AP_ETYPE, "operand %u and result %u types differ", j, j);
            if (x->nbytes)
                memcpy((*dst)->data, x->data, x->nbytes);
        }
    return 0;
}

/* collective_reduce (the spec's examples and the reference interpreter;
 * its semantics paragraph repeats collective_broadcast's): each data
 * operand is folded over a group, in group order, with the reduction
 * region; the group's root (its first device, or the one has_dynamic_root
 * names) gets the value, every other device zeros.  use_global_device_ids,
 * which the spec does not give the op, is refused. */
static int coll_reduce(ip_run *r, ip_frame *fr, const ir_op *op, const groups *g, const ir_tensor *const *ops,
                       ir_tensor **res)
{
    bool dyn = ir__ip_flag(op, "has_dynamic_root");
    uint32_t n_in = op->n_operands, n_data;
    int rc = data_operands(r, op, dyn, &n_data);
    if (rc < 0)
        return rc;
    if (ir__ip_flag(op, "use_global_device_ids"))
        return ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED,
                              "use_global_device_ids is not supported (the spec gives collective_reduce "
                              "cross_replica and cross_partition groups only)");
    for (uint32_t d = 0; d < fr->n_dev; d++)
        for (uint32_t j = 0; j < n_data; j++)
            if ((rc = new_result(r, fr, op, d, j, &res[(size_t)d * n_data + j])) < 0)
                return rc;
    for (int64_t gi = 0; gi < g->n; gi++)
        for (uint32_t j = 0; j < n_data && group_len(g, gi) > 0; j++) {
            int64_t root;
            if ((rc = group_root(r, fr, op, g, gi, j, ops, n_in, dyn, &root)) < 0)
                return rc;
            ir_tensor *sum = NULL;
            if ((rc = reduce_group(r, fr, op, g, gi, j, ops, n_in, &sum)) < 0) {
                ir_tensor_free(sum);
                return rc;
            }
            ir_tensor_free(res[(size_t)root * n_data + j]);
            res[(size_t)root * n_data + j] = sum;
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
    if (is_collective_reduce(op)) {
        rc = coll_reduce(r, fr, op, &g, ops, res);
        goto results;
    }
    switch ((ir_opcode)op->opcode) {
    case IR_OP_ALL_REDUCE: rc = coll_all_reduce(r, fr, op, &g, ops, res); break;
    case IR_OP_REDUCE_SCATTER: rc = coll_reduce_scatter(r, fr, op, &g, ops, res); break;
    case IR_OP_ALL_GATHER: rc = coll_all_gather(r, fr, op, &g, ops, res); break;
    case IR_OP_ALL_TO_ALL: rc = coll_all_to_all(r, fr, op, &g, ops, res); break;
    case IR_OP_COLLECTIVE_PERMUTE: rc = coll_permute(r, fr, op, ops, res); break;
    case IR_OP_COLLECTIVE_BROADCAST: rc = coll_broadcast(r, fr, op, &g, ops, res); break;
    default: rc = ir__ip_fail_op(r, op, -1, AP_EUNSUPPORTED, "unknown collective"); break;
    }
results:
    if (rc < 0)
        goto done;
    for (uint32_t d = 0; d < nd; d++)
        for (uint32_t i = 0; i < n_out; i++) {
            ir_tensor **t = &res[(size_t)d * n_out + i];
            if (!*t || !ir__tensor_has_type_w(*t, op->results[i].type, r->opts.f64)) {
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
