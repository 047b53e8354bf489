/*
 * lower.c - SPMD lowering of a partition state (PartIR:HLO, paper section
 * 6): the device-local program with explicit collectives.
 *
 * Every op runs once per device on local shapes.  On every use whose
 * value's layout differs from the layout the op needs, pending sums the op
 * cannot take are reduced (all_reduce, or reduce_scatter when the need
 * tiles a dim along that axis), then the tiling is changed by a
 * redistribution synthesized as in the redistribution paper (ir/partir/redist.c):
 * all_gather, all_to_all, dynslice and at most one collective_permute.  One
 * redistribution per distinct (value, needed layout).  Arguments arrive and
 * results leave in their layouts; a result tied to a donated argument
 * (tf.aliasing_output) leaves in that argument's layout.  What goes where
 * is decided by the lowering plan (plan.c), which the cost model's fast
 * scorer reads too; this file builds the IR the plan describes.
 *
 * The output follows the SPMD contract other tools read: module attributes
 * mhlo.num_partitions and autopart.mesh ("batch=4,model=2"), and
 * autopart.layout on every argument and result (per dim, the axes tiling
 * it, major to minor).  Device ids are row-major over the mesh axes.  The
 * input's sdy.sharding / mhlo.sharding on arguments and results are not
 * kept: they describe the global values, and the types here are local.
 */
#include "partir_int.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct lower {
    const ir_partition *p;
    const ir_pctx *c;
    ir_module *nm;
    ir_block *nb;
    ir_lowered *out;
    ap_error *err;
    int rc;
    ir_lplan *plan;      /* what to insert where (plan.c) */
    uint32_t *mat_base;  /* per value id: its first entry in mat_val */
    ir_value **mat_val;  /* per materialization of the plan: its local value once emitted */
    ir_value **produced; /* per value id: its local value as produced */
    ir_value *pid;       /* partition id as a tensor<i32>, made on first use */
    ir_value *zero_i32;
    int64_t channel; /* the last channel handle given: above every one the input holds */
    const ir_loc *loc; /* of the op being lowered: given to what it needs */
    uint32_t line, col; /* its position in the text, given likewise */
    uint32_t cur_op;         /* the top-level op being lowered */
    int64_t drop_all_reduce; /* ir_lower_opts: the all_reduce left out, -1 none */
    int64_t n_all_reduce;    /* all_reduces met so far, dropped one included */
} lower;

static bool fail(lower *l, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail(lower *l, int code, const char *fmt, ...)
{
    if (l->rc == 0) {
        va_list ap;
        va_start(ap, fmt);
        ap_error_setv(l->err, code, fmt, ap);
        va_end(ap);
        l->rc = code;
    }
    return false;
}

static bool oom(lower *l) { return fail(l, AP_ENOMEM, "out of memory while lowering"); }

/* ------------------------------------------------------------- helpers */

static const ir_type *local_type(lower *l, const ir_type *g, const ir_layout *lay)
{
    if (!g || g->kind != IR_T_TENSOR || g->rank < 0)
        return ir__type_clone(l->nm, g);
    int64_t dims[IR_MAX_RANK];
    if (!ir_layout_local_dims(lay, &l->c->mesh, g, dims)) {
        fail(l, AP_EINTERNAL, "a tiled dim does not divide its axes");
        return NULL;
    }
    return ir_type_tensor_ex(l->nm, (ir_elem)g->elem, g->text, g->rank, dims, g->encoding);
}

static const ir_type *with_dims(lower *l, const ir_type *t, const int64_t *dims)
{
    return ir_type_tensor_ex(l->nm, (ir_elem)t->elem, t->text, t->rank, dims, t->encoding);
}

static ir_op *emit(lower *l, ir_opcode opc, uint32_t n_opd, ir_value *const *opds, const ir_type *res)
{
    if (l->rc)
        return NULL;
    ir_op *op = ir_op_new(l->nm, opc, NULL, n_opd, opds, res ? 1 : 0, res ? &res : NULL, 0);
    if (!op) {
        oom(l);
        return NULL;
    }
    op->loc = l->loc;
    op->src_line = l->line;
    op->src_col = l->col;
    ir_block_append(l->nb, op);
    return op;
}

static bool set_attr(lower *l, ir_op *op, const char *name, ir_attr *a)
{
    if (!op || !a || ir_op_set_attr(l->nm, op, name, a) < 0)
        return oom(l);
    return true;
}

static const ir_type *i64s(lower *l) { return ir_type_scalar(l->nm, IR_E_I64, NULL); }

/* Mesh coordinate of a device along an axis (row-major, last axis fastest). */
static int64_t coord(const ir_mesh *m, int64_t dev, int axis)
{
    int64_t stride = 1;
    for (int a = m->n_axes - 1; a > axis; a--)
        stride *= m->sizes[a];
    return (dev / stride) % m->sizes[axis];
}

/* Replica groups over the listed axes (in that order, major first): devices
 * equal in every other coordinate, ordered by their coordinates along the
 * axes.  Returns groups as a dense tensor<G x S x i64> attribute. */
static ir_attr *groups_over(lower *l, const int *axes, int n_axes, int64_t *group_size)
{
    const ir_mesh *m = &l->c->mesh;
    int64_t nd = ir_mesh_devices(m), gs = 1;
    for (int k = 0; k < n_axes; k++)
        gs *= m->sizes[axes[k]];
    int64_t ng = nd / gs;
    int64_t *v = ap_malloc(sizeof *v * (size_t)nd);
    if (!v) {
        oom(l);
        return NULL;
    }
    bool in_group[IR_MAX_AXES] = {0};
    for (int k = 0; k < n_axes; k++)
        in_group[axes[k]] = true;
    /* group index: row-major over the other axes; position: over the listed */
    for (int64_t dev = 0; dev < nd; dev++) {
        int64_t g = 0, pos = 0;
        for (int a = 0; a < m->n_axes; a++)
            if (!in_group[a])
                g = g * m->sizes[a] + coord(m, dev, a);
        for (int k = 0; k < n_axes; k++)
            pos = pos * m->sizes[axes[k]] + coord(m, dev, axes[k]);
        v[g * gs + pos] = dev;
    }
    int64_t dims[2] = {ng, gs};
    const ir_type *t = ir_type_tensor(l->nm, IR_E_I64, 2, dims);
    ir_attr *a = t ? ir_attr_dense_ints(l->nm, t, (size_t)nd, v) : NULL;
    ap_free(v);
    if (!a)
        oom(l);
    *group_size = gs;
    return a;
}

static ir_attr *groups_attr(lower *l, const int32_t *groups, int64_t ng, int64_t gs)
{
    int64_t n = ng * gs;
    int64_t *v = ap_malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) {
        oom(l);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = groups[i];
    int64_t dims[2] = {ng, gs};
    const ir_type *t = ir_type_tensor(l->nm, IR_E_I64, 2, dims);
    ir_attr *a = t ? ir_attr_dense_ints(l->nm, t, (size_t)n, v) : NULL;
    ap_free(v);
    if (!a)
        oom(l);
    return a;
}

static bool collective_attrs(lower *l, ir_op *op, ir_attr *groups)
{
    ir_named_attr kv[2] = {{ir_intern(l->nm, "handle", 6), ir_attr_int(l->nm, ++l->channel, NULL)},
                           {ir_intern(l->nm, "type", 4), ir_attr_int(l->nm, 1, NULL)}};
    if (!kv[0].name || !kv[0].value || !kv[1].name || !kv[1].value)
        return oom(l);
    return set_attr(l, op, "channel_handle", ir_attr_dialect_kv(l->nm, "stablehlo.channel_handle", 2, kv)) &&
           set_attr(l, op, "replica_groups", groups) && set_attr(l, op, "use_global_device_ids", ir_attr_unit(l->nm));
}

static ir_opcode red_opcode(ir_red r)
{
    switch (r) {
    case IR_RED_MUL: return IR_OP_MULTIPLY;
    case IR_RED_MAX: return IR_OP_MAXIMUM;
    case IR_RED_MIN: return IR_OP_MINIMUM;
    case IR_RED_AND: return IR_OP_AND;
    case IR_RED_OR: return IR_OP_OR;
    default: return IR_OP_ADD;
    }
}

/* The reduction body of all_reduce / reduce_scatter on scalars of elem. */
static bool reduction_region(lower *l, ir_op *op, ir_red red, const ir_type *t)
{
    const ir_type *s = ir_type_tensor_ex(l->nm, (ir_elem)t->elem, t->text, 0, NULL, NULL);
    const ir_type *args[2] = {s, s};
    ir_block *b = s ? ir_block_new(l->nm, &op->regions[0], 2, args) : NULL;
    if (!b)
        return oom(l);
    ir_value *ab[2] = {&b->args[0], &b->args[1]};
    ir_op *body = ir_op_new(l->nm, red_opcode(red), NULL, 2, ab, 1, &s, 0);
    ir_value *r = body ? &body->results[0] : NULL;
    ir_op *ret = body ? ir_op_new(l->nm, IR_OP_RETURN, NULL, 1, &r, 0, NULL, 0) : NULL;
    if (!ret)
        return oom(l);
    body->loc = ret->loc = l->loc;
    body->src_line = ret->src_line = l->line;
    body->src_col = ret->src_col = l->col;
    ir_block_append(b, body);
    ir_block_append(b, ret);
    return true;
}

static int64_t local_bytes(const ir_value *v)
{
    int64_t b = ir_type_bytes(v->type);
    return b < 0 ? 0 : b;
}

static void count(lower *l, ir_coll_kind k, int64_t bytes)
{
    l->out->count[k]++;
    l->out->bytes[k] += (uint64_t)bytes;
}

/* ---------------------------------------------------------- collectives */

static ir_value *all_reduce(lower *l, ir_value *x, const int *axes, int n, ir_red red)
{
    if (l->n_all_reduce++ == l->drop_all_reduce)
        return x; /* a deliberately broken lowering (tests of `check`) */
    int64_t gs;
    ir_attr *g = groups_over(l, axes, n, &gs);
    if (!g)
        return NULL;
    ir_op *op = ir_op_new(l->nm, IR_OP_ALL_REDUCE, NULL, 1, &x, 1, &x->type, 1);
    if (!op) {
        oom(l);
        return NULL;
    }
    op->loc = l->loc;
    op->src_line = l->line;
    op->src_col = l->col;
    if (!reduction_region(l, op, red, x->type) || !collective_attrs(l, op, g))
        return NULL;
    ir_block_append(l->nb, op);
    count(l, IR_COLL_ALL_REDUCE, local_bytes(x));
    return &op->results[0];
}

static ir_value *reduce_scatter(lower *l, ir_value *x, int dim, int axis, ir_red red)
{
    int64_t gs;
    ir_attr *g = groups_over(l, &axis, 1, &gs);
    if (!g)
        return NULL;
    int64_t dims[IR_MAX_RANK];
    memcpy(dims, x->type->dims, sizeof *dims * (size_t)x->type->rank);
    dims[dim] /= gs;
    const ir_type *t = with_dims(l, x->type, dims);
    ir_op *op = t ? ir_op_new(l->nm, IR_OP_REDUCE_SCATTER, NULL, 1, &x, 1, &t, 1) : NULL;
    if (!op) {
        oom(l);
        return NULL;
    }
    op->loc = l->loc;
    op->src_line = l->line;
    op->src_col = l->col;
    if (!reduction_region(l, op, red, x->type) || !collective_attrs(l, op, g) ||
        !set_attr(l, op, "scatter_dimension", ir_attr_int(l->nm, dim, i64s(l))))
        return NULL;
    ir_block_append(l->nb, op);
    count(l, IR_COLL_REDUCE_SCATTER, local_bytes(x));
    return &op->results[0];
}

static ir_value *all_gather(lower *l, ir_value *x, int dim, ir_attr *groups, int64_t gs)
{
    int64_t dims[IR_MAX_RANK];
    memcpy(dims, x->type->dims, sizeof *dims * (size_t)x->type->rank);
    dims[dim] *= gs;
    ir_op *op = emit(l, IR_OP_ALL_GATHER, 1, &x, with_dims(l, x->type, dims));
    if (!op || !collective_attrs(l, op, groups) || !set_attr(l, op, "all_gather_dim", ir_attr_int(l->nm, dim, i64s(l))))
        return NULL;
    count(l, IR_COLL_ALL_GATHER, local_bytes(&op->results[0]));
    return &op->results[0];
}

static ir_value *all_to_all(lower *l, ir_value *x, int split, int concat, ir_attr *groups, int64_t gs)
{
    int64_t dims[IR_MAX_RANK];
    memcpy(dims, x->type->dims, sizeof *dims * (size_t)x->type->rank);
    dims[split] /= gs;
    dims[concat] *= gs;
    ir_op *op = emit(l, IR_OP_ALL_TO_ALL, 1, &x, with_dims(l, x->type, dims));
    if (!op || !collective_attrs(l, op, groups) ||
        !set_attr(l, op, "split_dimension", ir_attr_int(l->nm, split, i64s(l))) ||
        !set_attr(l, op, "concat_dimension", ir_attr_int(l->nm, concat, i64s(l))) ||
        !set_attr(l, op, "split_count", ir_attr_int(l->nm, gs, i64s(l))))
        return NULL;
    count(l, IR_COLL_ALL_TO_ALL, local_bytes(x));
    return &op->results[0];
}

static ir_value *collective_permute(lower *l, ir_value *x, const int32_t *pairs, int64_t np)
{
    int64_t *v = ap_malloc(sizeof *v * (size_t)(2 * np + 1));
    if (!v) {
        oom(l);
        return NULL;
    }
    /* every device is a target (identity pairs too): StableHLO zeroes the
     * devices nobody sends to */
    int64_t n = np;
    for (int64_t i = 0; i < 2 * np; i++)
        v[i] = pairs[i];
    int64_t dims[2] = {n, 2};
    const ir_type *t = ir_type_tensor(l->nm, IR_E_I64, 2, dims);
    ir_attr *a = t ? ir_attr_dense_ints(l->nm, t, (size_t)(2 * n), v) : NULL;
    ap_free(v);
    ir_op *op = a ? emit(l, IR_OP_COLLECTIVE_PERMUTE, 1, &x, x->type) : NULL;
    if (!op)
        return NULL;
    ir_named_attr kv[2] = {{ir_intern(l->nm, "handle", 6), ir_attr_int(l->nm, ++l->channel, NULL)},
                           {ir_intern(l->nm, "type", 4), ir_attr_int(l->nm, 1, NULL)}};
    if (!set_attr(l, op, "channel_handle", ir_attr_dialect_kv(l->nm, "stablehlo.channel_handle", 2, kv)) ||
        !set_attr(l, op, "source_target_pairs", a))
        return NULL;
    count(l, IR_COLL_PERMUTE, local_bytes(x));
    return &op->results[0];
}

/* ------------------------------------------------------------ dynslice */

/* The device id as a scalar tensor<i32>, made once per function. */
static ir_value *partition_id(lower *l)
{
    if (l->pid)
        return l->pid;
    const ir_type *u32 = ir_type_tensor(l->nm, IR_E_UI32, 0, NULL), *i32 = ir_type_tensor(l->nm, IR_E_I32, 0, NULL);
    ir_op *pid = emit(l, IR_OP_PARTITION_ID, 0, NULL, u32);
    if (!pid)
        return NULL;
    ir_value *r = &pid->results[0];
    ir_op *cv = emit(l, IR_OP_CONVERT, 1, &r, i32);
    if (!cv)
        return NULL;
    l->pid = &cv->results[0];
    int64_t zero = 0;
    ir_op *z = emit(l, IR_OP_CONSTANT, 0, NULL, i32);
    if (!z || !set_attr(l, z, "value", ir_attr_dense_ints(l->nm, i32, 1, &zero)))
        return NULL;
    l->zero_i32 = &z->results[0];
    return l->pid;
}

/* table[device] as a scalar tensor<i32> of this device. */
static ir_value *per_device(lower *l, const int64_t *table)
{
    int64_t nd = ir_mesh_devices(&l->c->mesh);
    ir_value *pid = partition_id(l);
    if (!pid)
        return NULL;
    const ir_type *tt = ir_type_tensor(l->nm, IR_E_I32, 1, &nd);
    ir_op *c = emit(l, IR_OP_CONSTANT, 0, NULL, tt);
    if (!c || !set_attr(l, c, "value", ir_attr_dense_ints(l->nm, tt, (size_t)nd, table)))
        return NULL;
    int64_t one = 1;
    ir_value *ops[2] = {&c->results[0], pid};
    ir_op *ds = emit(l, IR_OP_DYNAMIC_SLICE, 2, ops, ir_type_tensor(l->nm, IR_E_I32, 1, &one));
    if (!ds || !set_attr(l, ds, "slice_sizes", ir_attr_i64_array(l->nm, 1, &one)))
        return NULL;
    ir_value *r = &ds->results[0];
    ir_op *rs = emit(l, IR_OP_RESHAPE, 1, &r, ir_type_tensor(l->nm, IR_E_I32, 0, NULL));
    return rs ? &rs->results[0] : NULL;
}

/* Each device keeps its piece of dim: offsets per device in `table`. */
static ir_value *dynslice(lower *l, ir_value *x, int dim, int64_t new_size, const int64_t *table)
{
    ir_value *off = per_device(l, table);
    if (!off)
        return NULL;
    const ir_type *t = x->type;
    ir_value *ops[IR_MAX_RANK + 1];
    ops[0] = x;
    for (int d = 0; d < t->rank; d++)
        ops[d + 1] = d == dim ? off : l->zero_i32;
    int64_t dims[IR_MAX_RANK];
    memcpy(dims, t->dims, sizeof *dims * (size_t)t->rank);
    dims[dim] = new_size;
    ir_op *op = emit(l, IR_OP_DYNAMIC_SLICE, (uint32_t)t->rank + 1, ops, with_dims(l, t, dims));
    if (!op || !set_attr(l, op, "slice_sizes", ir_attr_i64_array(l->nm, t->rank, dims)))
        return NULL;
    l->out->n_dynslice++;
    return &op->results[0];
}

/* ------------------------------------------------------- redistribution */

/* Emits the retiling steps of a synthesized redistribution plan on x.  The
 * plan's device ids are over the whole mesh (plan.c repeats a plan made
 * over a sub-mesh along the axes a pending sum flows on). */
static ir_value *emit_redist(lower *l, ir_value *x, const ir_redist_plan *plan)
{
    int64_t nd = ir_mesh_devices(&l->c->mesh);
    int64_t *table = ap_malloc(sizeof *table * (size_t)nd);
    if (!table) {
        oom(l);
        return NULL;
    }
    for (int s = 0; s < plan->nsteps && x; s++) {
        const ir_redist_step *st = &plan->steps[s];
        switch (st->kind) {
        case IR_REDIST_ALL_GATHER:
            x = all_gather(l, x, st->dim, groups_attr(l, st->groups, st->ngroups, st->group_size), st->group_size);
            break;
        case IR_REDIST_ALL_TO_ALL:
            x = all_to_all(l, x, st->to_dim, st->dim, groups_attr(l, st->groups, st->ngroups, st->group_size),
                           st->group_size);
            break;
        case IR_REDIST_DYNSLICE: {
            int64_t size = st->type.dims[st->dim].local;
            for (int64_t gi = 0; gi < st->ngroups; gi++)
                for (int64_t k = 0; k < st->group_size; k++)
                    table[st->groups[gi * st->group_size + k]] = k * size;
            x = dynslice(l, x, st->dim, size, table);
            break;
        }
        case IR_REDIST_COLLECTIVE_PERMUTE:
            x = collective_permute(l, x, st->pairs, st->npairs);
            break;
        }
    }
    ap_free(table);
    return x;
}

/* Emits a transfer the plan decided (plan.c): pending sums first, then
 * the tiling. */
static ir_value *emit_xfer(lower *l, ir_value *x, const ir_xfer *xf)
{
    if (xf->n_ar) {
        int axes[IR_MAX_AXES];
        for (int k = 0; k < xf->n_ar; k++)
            axes[k] = xf->ar_axes[k];
        x = all_reduce(l, x, axes, xf->n_ar, (ir_red)xf->ar_red);
    }
    if (x && xf->rs_axis >= 0)
        x = reduce_scatter(l, x, xf->rs_dim, xf->rs_axis, (ir_red)xf->rs_red);
    if (!x)
        return NULL;
    if (xf->empty) { /* nothing to move: an empty local value */
        const ir_type *g = xf->type;
        int64_t dims[IR_MAX_RANK];
        if (!ir_layout_local_dims(&xf->to, &l->c->mesh, g, dims)) {
            fail(l, AP_EINTERNAL, "a tiled dim does not divide its axes");
            return NULL;
        }
        const ir_type *lt = ir_type_tensor(l->nm, (ir_elem)g->elem, g->rank, dims);
        ir_op *c = lt ? emit(l, IR_OP_CONSTANT, 0, NULL, lt) : NULL;
        if (!c || !set_attr(l, c, "value", ir_attr_dense_ints(l->nm, lt, 0, NULL))) {
            oom(l);
            return NULL;
        }
        return &c->results[0];
    }
    return xf->redist ? emit_redist(l, x, xf->redist) : x;
}

/* Value v as materialization m of the plan (IR_LPLAN_DIRECT: as produced),
 * emitted at its first use and shared by the later ones. */
static ir_value *emit_mat(lower *l, uint32_t v, int32_t m)
{
    if (m < 0) {
        if (!l->produced[v])
            fail(l, AP_EINTERNAL, "value used before it is lowered");
        return l->produced[v];
    }
    ir_value **slot = &l->mat_val[l->mat_base[v] + (uint32_t)m];
    if (*slot)
        return *slot;
    const ir_mat *mt = ir_lplan_mat(l->plan, v, (uint32_t)m);
    ir_value *x = emit_mat(l, v, mt->src);
    if (x)
        x = emit_xfer(l, x, &mt->x);
    *slot = x;
    return x;
}

/* What use `slot` of the op being lowered receives of value v. */
static ir_value *materialize(lower *l, uint32_t v, uint32_t slot)
{
    return emit_mat(l, v, ir_lplan_use(l->plan, l->cur_op, slot));
}

/* -------------------------------------------------------------- ops */

/* Tile index and offset of each device along dim d of a layout. */
static void tile_offsets(const ir_mesh *m, const ir_layout *lay, int d, int64_t local, int64_t *table)
{
    int axes[IR_MAX_AXES];
    int n = layout_dim_axes(lay, d, axes);
    int64_t nd = ir_mesh_devices(m);
    for (int64_t dev = 0; dev < nd; dev++) {
        int64_t idx = 0;
        for (int k = 0; k < n; k++)
            idx = idx * m->sizes[axes[k]] + coord(m, dev, axes[k]);
        table[dev] = idx * local;
    }
}

/* iota tiled along its own dim counts from the device's offset. */
static ir_value *iota_offset(lower *l, ir_value *x, const ir_layout *lay, int d)
{
    int64_t nd = ir_mesh_devices(&l->c->mesh);
    int64_t *table = ap_malloc(sizeof *table * (size_t)nd);
    if (!table) {
        oom(l);
        return NULL;
    }
    tile_offsets(&l->c->mesh, lay, d, x->type->dims[d], table);
    ir_value *off = per_device(l, table);
    ap_free(table);
    if (!off)
        return NULL;
    const ir_type *t = x->type, *s = ir_type_tensor_ex(l->nm, (ir_elem)t->elem, t->text, 0, NULL, NULL);
    ir_op *cv = emit(l, IR_OP_CONVERT, 1, &off, s);
    ir_value *cvr = cv ? &cv->results[0] : NULL;
    ir_op *bc = cv ? emit(l, IR_OP_BROADCAST_IN_DIM, 1, &cvr, t) : NULL;
    if (!bc || !set_attr(l, bc, "broadcast_dimensions", ir_attr_i64_array(l->nm, 0, NULL)))
        return NULL;
    ir_value *ops[2] = {x, &bc->results[0]};
    ir_op *add = emit(l, IR_OP_ADD, 2, ops, t);
    return add ? &add->results[0] : NULL;
}

/* Attributes that name sizes of dims an op runs on in pieces: slice limits
 * and slice sizes of dims tiled in the first operand become the local
 * sizes.  Returns false when out of memory. */
bool ir__localize_attrs(ir_module *m, ir_op *op, const ir_layout *in0)
{
    const ir_type *t = op->operands[0]->type;
    int64_t v[IR_MAX_RANK];
    const char *name = NULL;
    switch ((ir_opcode)op->opcode) {
    case IR_OP_SLICE: name = "limit_indices"; break;
    case IR_OP_DYNAMIC_SLICE: name = "slice_sizes"; break;
    case IR_OP_GATHER: name = "slice_sizes"; break;
    default: return true;
    }
    ir_attr *a = ir_op_attr(op, name);
    int n = ir_attr_int_list(a, v, IR_MAX_RANK);
    if (n != t->rank)
        return true;
    bool changed = false;
    for (int d = 0; d < n; d++) {
        int axes[IR_MAX_AXES];
        if (layout_dim_axes(in0, d, axes) > 0 && v[d] != t->dims[d]) {
            v[d] = t->dims[d];
            changed = true;
        }
    }
    if (!changed)
        return true;
    ir_attr *na;
    if (a->kind == IR_A_DENSE_ARRAY) {
        na = ir_attr_i64_array(m, n, v);
    } else {
        int64_t len = n;
        const ir_type *tt = a->type ? ir__type_clone(m, a->type) : ir_type_tensor(m, IR_E_I64, 1, &len);
        na = tt ? ir_attr_dense_ints(m, tt, (size_t)n, v) : NULL;
    }
    return na && ir_op_set_attr(m, op, name, na) == 0;
}

static ir_value *resolve_captured(void *ctx, const ir_value *v)
{
    lower *l = ctx;
    uint32_t id = ir__value_id(l->c, v);
    if (id == VAL_NONE)
        return NULL;
    /* the plan numbers the values the op's regions capture after its
     * operands, each a use that takes the value whole */
    uint32_t n = ir_lplan_num_captured(l->plan, l->cur_op), no = l->c->ops[l->cur_op]->n_operands;
    for (uint32_t i = 0; i < n; i++)
        if (ir_lplan_captured_value(l->plan, l->cur_op, i) == id)
            return materialize(l, id, no + i);
    fail(l, AP_EINTERNAL, "a value captured by '%s' that the lowering plan did not see", l->c->ops[l->cur_op]->name);
    return NULL;
}

/* An op that only states a global value's sharding (Shardy's
 * sharding_constraint and reshard, XLA's custom_call @Sharding): the
 * identity on a device.  The device-local program leaves it out: beside
 * local types its global sharding would be read (by Shardy or XLA's SPMD
 * partitioner) as a layout still to apply, the shard partitioned again. */
static bool states_a_sharding(const ir_op *op)
{
    if (op->n_operands != 1 || op->n_results != 1 || !ir_type_equal(op->operands[0]->type, op->results[0].type))
        return false;
    if (op->opcode == IR_OP_CUSTOM_CALL) /* an identity's target is a string */
        return ir_custom_call_is_identity(op) && !strcmp(ir_op_attr(op, "call_target_name")->u.str.s, "Sharding");
    return ir_sdy_is_identity(op);
}

static bool lower_op(lower *l, uint32_t k, ir_cloner *cl)
{
    const ir_pctx *c = l->c;
    const ir_partition *p = l->p;
    ir_op *src = c->ops[k];
    l->cur_op = k;
    l->loc = ir__loc_clone(l->nm, src->loc);
    l->line = src->src_line, l->col = src->src_col;
    ir_value *opds_small[16], **opds = opds_small;
    const ir_type *types_small[16], **types = types_small;
    bool ok = false;
    if ((src->n_operands > 16 && !(opds = ap_malloc(sizeof *opds * src->n_operands))) ||
        (src->n_results > 16 && !(types = ap_malloc(sizeof *types * src->n_results)))) {
        oom(l);
        goto out;
    }
    ir_layout need0;
    layout_init(&need0);
    for (uint32_t i = 0; i < src->n_operands; i++) {
        ir_layout need;
        ir__needed_layout(p, k, i, &need);
        if (i == 0)
            need0 = need;
        opds[i] = materialize(l, c->opd_val[c->opd0[k] + i], i);
        if (!opds[i])
            goto out;
    }
    ir_layout res_lay[16];
    for (uint32_t j = 0; j < src->n_results; j++) {
        ir_layout rl;
        ir__result_layout(p, k, j, &rl);
        if (j < 16)
            res_lay[j] = rl;
        if (!(types[j] = local_type(l, src->results[j].type, &rl)))
            goto out;
    }
    /* the operand, in the layout the op needs, is its result when that is
     * the result's layout too (propagation treats the op as element-wise) */
    if (states_a_sharding(src) && ir_layout_equal(&need0, &res_lay[0]) &&
        ir_type_equal(opds[0]->type, types[0])) {
        l->produced[c->op_val0[k]] = opds[0];
        ok = true;
        goto out;
    }
    /* The program's own partition_id: the program as written runs on one
     * device, where it is 0 (as for its collectives over one device,
     * keep_program_collectives).  Copied, it would read each device's id
     * in the SPMD module: another program.  It becomes replica_id, which
     * is 0 on every device of the module (one replica) and which the cost
     * model counts as it counts partition_id (free, not fused), so the
     * fast scorer, which sees the program's op, agrees with the estimate
     * of the lowered module (a constant fuses into its users). */
    if (src->opcode == IR_OP_PARTITION_ID && src->n_operands == 0 && src->n_results == 1) {
        ir_op *z = emit(l, IR_OP_REPLICA_ID, 0, NULL, types[0]);
        if (!z)
            goto out;
        l->produced[c->op_val0[k]] = &z->results[0];
        ok = true;
        goto out;
    }
    /* The values a region captures from the function (a case branch using
     * a value computed before it) are made whole before the op by
     * resolve_captured: the ops inside a region run on global shapes (the
     * region op is not partitioned, or, like a reduce, runs its body on
     * elements), so they need them replicated, pending sums reduced.  A
     * cloner of its own, so that the local pieces the earlier ops' clones
     * left in the shared map are never taken for them. */
    ir_cloner rcl;
    if (src->n_regions) {
        ir__cloner_init(&rcl, l->nm);
        rcl.resolve = resolve_captured;
        rcl.resolve_ctx = l;
        cl = &rcl;
    }
    ir_op *op = ir__clone_op(cl, src, opds, types);
    bool cl_oom = cl->oom;
    if (src->n_regions)
        ir__cloner_free(&rcl);
    if (!op) {
        if (cl_oom)
            oom(l);
        else if (!l->rc)
            fail(l, AP_EINTERNAL, "cannot copy '%s' at %u:%u", src->name, src->src_line, src->src_col);
        goto out;
    }
    if (l->rc)
        goto out;
    ir_block_append(l->nb, op);
    if (src->n_operands && !ir__localize_attrs(l->nm, op, &need0)) {
        oom(l);
        goto out;
    }
    for (uint32_t j = 0; j < src->n_results; j++) {
        ir_value *r = &op->results[j];
        if (op->opcode == IR_OP_IOTA && j < 16) {
            ir_attr *dim = ir_op_attr(op, "iota_dimension");
            int axes[IR_MAX_AXES];
            if (dim && dim->kind == IR_A_INT && layout_dim_axes(&res_lay[j], (int)dim->u.i, axes) > 0)
                r = iota_offset(l, r, &res_lay[j], (int)dim->u.i);
            if (!r)
                goto out;
        }
        l->produced[c->op_val0[k] + j] = r;
    }
    ok = true;
out:
    if (opds != opds_small)
        ap_free(opds);
    if (types != types_small)
        ap_free(types);
    return ok && !l->rc;
}

/* ----------------------------------------------------------- loops */

static void lower_range(lower *l, uint32_t from, uint32_t to, ir_cloner *cl);

/* Lowering into a region of its own: the partition id made outside is
 * visible inside, but one made inside must not be reused after it. */
typedef struct region_save {
    ir_block *nb;
    ir_value *pid, *zero_i32;
} region_save;

static void enter_region(lower *l, ir_block *b, region_save *s)
{
    *s = (region_save){l->nb, l->pid, l->zero_i32};
    l->nb = b;
}

static void leave_region(lower *l, const region_save *s)
{
    l->nb = s->nb;
    l->pid = s->pid;
    l->zero_i32 = s->zero_i32;
}

/* A flattened while (group g): the values entering in their carried
 * layouts, the condition and the body on local shapes with the
 * collectives the plan puts there, the yielded values redistributed to
 * the carried layouts before the next iteration.  HLO's while over a
 * tuple comes out as the variadic while it means. */
static void lower_while(lower *l, const pgroup *g, ir_cloner *cl)
{
    const ir_pctx *c = l->c;
    uint32_t n = g->n;
    ir_value **ins = ap_malloc(sizeof *ins * (n + 1));
    const ir_type **ts = ap_malloc(sizeof *ts * (n + 1));
    if (!ins || !ts) {
        oom(l);
        goto out;
    }
    const ir_loc *wloc = ir__loc_clone(l->nm, g->src->loc);
    for (uint32_t i = 0; i < n && !l->rc; i++) {
        uint32_t k = g->carry0 + i;
        ir_layout rl;
        l->cur_op = k;
        l->loc = wloc;
        l->line = g->src->src_line, l->col = g->src->src_col;
        ins[i] = materialize(l, c->opd_val[c->opd0[k]], 0);
        ir__result_layout(l->p, k, 0, &rl);
        ts[i] = local_type(l, val_type(c, c->op_val0[k]), &rl);
        if (ins[i] && ts[i] && ins[i]->type != ts[i])
            fail(l, AP_EINTERNAL, "carried value #%u of the while at %u:%u enters as %s, not in its carried layout", i,
                 g->src->src_line, g->src->src_col, "another type");
    }
    if (l->rc)
        goto out;
    ir_op *w = ir_op_new(l->nm, IR_OP_WHILE, NULL, n, ins, n, ts, 2);
    ir_block *cb = w ? ir_block_new(l->nm, &w->regions[0], n, ts) : NULL;
    ir_block *bb = cb ? ir_block_new(l->nm, &w->regions[1], n, ts) : NULL;
    if (!bb) {
        oom(l);
        goto out;
    }
    w->loc = wloc;
    w->src_line = g->src->src_line; /* the report names the loop where it is written */
    w->src_col = g->src->src_col;
    ir_block_append(l->nb, w);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = c->op_val0[g->carry0 + i];
        l->produced[v] = &bb->args[i];
        l->produced[v + 1] = &cb->args[i];
        l->produced[v + 2] = &w->results[i];
    }
    region_save rs;
    /* the condition: its predicate whole on every device */
    enter_region(l, cb, &rs);
    lower_range(l, g->cond0, g->cond_end - 1, cl);
    if (!l->rc) {
        uint32_t k = g->cond_end - 1;
        l->cur_op = k;
        l->loc = ir__loc_clone(l->nm, c->ops[k]->loc);
        l->line = c->ops[k]->src_line, l->col = c->ops[k]->src_col;
        ir_value *pred = materialize(l, c->opd_val[c->opd0[k]], 0);
        if (pred)
            emit(l, IR_OP_RETURN, 1, &pred, NULL);
    }
    leave_region(l, &rs);
    /* the body, then what it yields in the carried layouts */
    enter_region(l, bb, &rs);
    lower_range(l, g->body0, g->body_end, cl);
    for (uint32_t i = 0; i < n && !l->rc; i++) {
        uint32_t k = g->carry0 + i;
        l->cur_op = k;
        l->loc = wloc;
        l->line = g->src->src_line, l->col = g->src->src_col;
        ins[i] = materialize(l, c->opd_val[c->opd0[k] + 1], 1);
        if (ins[i] && ins[i]->type != ts[i])
            fail(l, AP_EINTERNAL, "carried value #%u of the while at %u:%u is yielded in another layout", i,
                 g->src->src_line, g->src->src_col);
    }
    if (!l->rc)
        emit(l, IR_OP_RETURN, n, ins, NULL);
    leave_region(l, &rs);
out:
    ap_free(ins);
    ap_free(ts);
}

/* A flattened case (or if): the index whole, each branch on local shapes,
 * each result yielded by every branch in the result's layout (pending sums
 * reduced before they leave a branch). */
static void lower_case(lower *l, const pgroup *g, ir_cloner *cl)
{
    const ir_pctx *c = l->c;
    uint32_t n = g->n;
    ir_value **ys = ap_malloc(sizeof *ys * (n + 1));
    const ir_type **ts = ap_malloc(sizeof *ts * (n + 1));
    if (!ys || !ts) {
        oom(l);
        goto out;
    }
    const ir_loc *cloc = ir__loc_clone(l->nm, g->src->loc);
    l->cur_op = g->carry0;
    l->loc = cloc;
    l->line = g->src->src_line, l->col = g->src->src_col;
    ir_value *idx = materialize(l, c->opd_val[c->opd0[g->carry0]], 0);
    for (uint32_t j = 0; j < n && !l->rc; j++) {
        ir_layout rl;
        ir__result_layout(l->p, g->merge0 + j, 0, &rl);
        ts[j] = local_type(l, val_type(c, c->op_val0[g->merge0 + j]), &rl);
    }
    if (!idx || l->rc)
        goto out;
    ir_op *cs = ir_op_new(l->nm, (ir_opcode)g->src->opcode, NULL, 1, &idx, n, ts, g->n_br);
    if (!cs) {
        oom(l);
        goto out;
    }
    cs->loc = cloc;
    cs->src_line = g->src->src_line;
    cs->src_col = g->src->src_col;
    ir_block_append(l->nb, cs);
    for (uint32_t r = 0; r < g->n_br && !l->rc; r++) {
        const pbranch *br = &c->branches[g->br0 + r];
        ir_block *bb = ir_block_new(l->nm, &cs->regions[r], 0, NULL);
        if (!bb) {
            oom(l);
            break;
        }
        region_save rs;
        enter_region(l, bb, &rs);
        lower_range(l, br->begin, br->end, cl);
        for (uint32_t j = 0; j < n && !l->rc; j++) {
            uint32_t k = g->merge0 + j;
            l->cur_op = k;
            l->loc = cloc;
            l->line = g->src->src_line, l->col = g->src->src_col;
            ys[j] = materialize(l, c->opd_val[c->opd0[k] + r], r);
            if (ys[j] && ys[j]->type != ts[j])
                fail(l, AP_EINTERNAL, "result #%u of the case at %u:%u leaves branch #%u in another layout", j,
                     g->src->src_line, g->src->src_col, r);
        }
        if (!l->rc)
            emit(l, IR_OP_RETURN, n, ys, NULL);
        leave_region(l, &rs);
    }
    for (uint32_t j = 0; j < n; j++)
        l->produced[c->op_val0[g->merge0 + j]] = &cs->results[j];
out:
    ap_free(ys);
    ap_free(ts);
}

/* An optimization_barrier: each operand in its identity op's layout, one
 * barrier over them all, as written. */
static void lower_barrier(lower *l, const pgroup *g)
{
    const ir_pctx *c = l->c;
    uint32_t n = g->n;
    ir_value **xs = ap_malloc(sizeof *xs * (n + 1));
    const ir_type **ts = ap_malloc(sizeof *ts * (n + 1));
    if (!xs || !ts) {
        oom(l);
        goto out;
    }
    const ir_loc *loc = ir__loc_clone(l->nm, g->src->loc);
    for (uint32_t i = 0; i < n && !l->rc; i++) {
        uint32_t k = g->carry0 + i;
        ir_layout rl;
        l->cur_op = k;
        l->loc = loc;
        l->line = g->src->src_line, l->col = g->src->src_col;
        xs[i] = materialize(l, c->opd_val[c->opd0[k]], 0);
        ir__result_layout(l->p, k, 0, &rl);
        ts[i] = local_type(l, val_type(c, c->op_val0[k]), &rl);
    }
    if (l->rc)
        goto out;
    ir_op *op = ir_op_new(l->nm, IR_OP_OPTIMIZATION_BARRIER, NULL, n, xs, n, ts, 0);
    if (!op) {
        oom(l);
        goto out;
    }
    op->loc = loc;
    op->src_line = g->src->src_line;
    op->src_col = g->src->src_col;
    ir_block_append(l->nb, op);
    for (uint32_t i = 0; i < n; i++)
        l->produced[c->op_val0[g->carry0 + i]] = &op->results[i];
out:
    ap_free(xs);
    ap_free(ts);
}

static void lower_range(lower *l, uint32_t from, uint32_t to, ir_cloner *cl)
{
    const ir_pctx *c = l->c;
    for (uint32_t k = from; k < to && !l->rc;) {
        if (c->op_kind[k] == PK_BARRIER) {
            const pgroup *g = &c->groups[c->op_group[k]];
            lower_barrier(l, g);
            k = g->body_end;
            continue;
        }
        if (c->op_kind[k] == PK_CARRY) {
            const pgroup *g = &c->groups[c->op_group[k]];
            lower_while(l, g, cl);
            k = g->body_end;
            continue;
        }
        if (c->op_kind[k] == PK_CASEIDX) {
            const pgroup *g = &c->groups[c->op_group[k]];
            lower_case(l, g, cl);
            k = g->body_end;
            continue;
        }
        if (c->op_kind[k] != PK_OP) {
            fail(l, AP_EINTERNAL, "SPMD lowering: a loop's condition outside its loop");
            return;
        }
        lower_op(l, k, cl);
        k++;
    }
}

/* ------------------------------------------------------ layout attribute */

static ir_attr *layout_attr(lower *l, const ir_layout *lay, int rank)
{
    ir_attr *dims[IR_MAX_RANK];
    int axes[IR_MAX_AXES];
    if (rank < 0) /* an unranked tensor<*x...>: kept whole, no dimensions */
        rank = 0;
    for (int d = 0; d < rank; d++) {
        ir_attr *names[IR_MAX_AXES];
        int n = layout_dim_axes(lay, d, axes);
        for (int k = 0; k < n; k++) {
            const char *s = l->c->mesh.names[axes[k]];
            if (!(names[k] = ir_attr_string(l->nm, s, strlen(s))))
                return NULL;
        }
        if (!(dims[d] = ir_attr_array(l->nm, n, names)))
            return NULL;
    }
    return ir_attr_array(l->nm, rank, dims);
}

/* The highest channel handle an op of r (nested regions too) holds, or
 * `top` if higher: the lowering's own collectives number their channels
 * above it, as XLA requires a channel id to name one collective (and a
 * send/recv pair) in the module. */
static int64_t max_channel(const ir_region *r, int64_t top)
{
    for (const ir_block *b = r->first; b; b = b->next)
        for (const ir_op *op = b->first; op; op = op->next) {
            for (uint32_t i = 0; i < op->n_regions; i++)
                top = max_channel(&op->regions[i], top);
            ir_attr *ch = ir_op_attr(op, "channel_handle");
            ir_attr *h = ch && ch->kind == IR_A_DIALECT ? ir_dialect_param(ch, "handle") : NULL;
            if (h && h->kind == IR_A_INT && h->u.i > top)
                top = h->u.i;
        }
    return top;
}

/* Whether op has the unit (or true) attribute `name`. */
static bool op_flag(const ir_op *op, const char *name)
{
    ir_attr *a = ir_op_attr(op, name);
    return a && (a->kind != IR_A_BOOL || a->u.b);
}

/* A collective the program itself holds, with a channel and no global ids
 * (cross_replica_and_partition) and replica_groups empty or [[0]], means
 * "every partition": one device in the program as written, all nd of the
 * SPMD module.  Its groups become each device alone, in flattened ids, so
 * that it still does what it did (cross_replica ones, without a channel,
 * already mean each partition alone with one replica).  So do its groups
 * [[0]] in global ids (flattened_ids: device 0 alone, which would leave
 * every other device in no group), and the pairs [[0, 0]] of its
 * collective_permute with a channel (device 0 to itself: every other
 * device would receive zeros) become each device to itself.  The collectives the lowering emits have
 * groups or pairs over all nd devices (nd > 1 here) and are left as they
 * are. */
static void keep_program_collectives(lower *l, ir_region *r, int64_t nd)
{
    for (ir_block *b = r->first; b && !l->rc; b = b->next)
        for (ir_op *op = b->first; op && !l->rc; op = op->next) {
            for (uint32_t i = 0; i < op->n_regions; i++)
                keep_program_collectives(l, &op->regions[i], nd);
            if (op->opcode == IR_OP_COLLECTIVE_PERMUTE) {
                ir_attr *pr = ir_op_attr(op, "source_target_pairs");
                if (!ir_op_attr(op, "channel_handle") || !pr || pr->kind != IR_A_DENSE || pr->u.dense.text || !pr->type || pr->type->rank != 2 ||
                    pr->type->dims[0] != 1 || pr->type->dims[1] != 2 || ir_dense_int_at(pr, 0) != 0 ||
                    ir_dense_int_at(pr, 1) != 0)
                    continue;
                int64_t *v = ap_malloc(sizeof *v * (size_t)(2 * nd)), dims[2] = {nd, 2};
                if (!v) {
                    oom(l);
                    return;
                }
                for (int64_t d = 0; d < nd; d++)
                    v[2 * d] = v[2 * d + 1] = d;
                const ir_type *t = ir_type_tensor(l->nm, IR_E_I64, 2, dims);
                ir_attr *np = t ? ir_attr_dense_ints(l->nm, t, (size_t)(2 * nd), v) : NULL;
                ap_free(v);
                if (!set_attr(l, op, "source_target_pairs", np))
                    return;
                continue;
            }
            if (op->opcode != IR_OP_ALL_REDUCE && op->opcode != IR_OP_ALL_GATHER &&
                op->opcode != IR_OP_REDUCE_SCATTER && op->opcode != IR_OP_ALL_TO_ALL &&
                op->opcode != IR_OP_COLLECTIVE_BROADCAST)
                continue;
            ir_attr *g = ir_op_attr(op, "replica_groups");
            bool global = op_flag(op, "use_global_device_ids");
            if (!ir_op_attr(op, "channel_handle") || !g || g->kind != IR_A_DENSE || g->u.dense.text || !g->type ||
                g->type->rank != 2)
                continue;
            int64_t n = g->type->dims[0] * g->type->dims[1];
            if (n > 1 || (n == 1 && ir_dense_int_at(g, 0) != 0) || (n == 0 && global))
                continue;
            int32_t *alone = ap_malloc(sizeof *alone * (size_t)nd);
            if (!alone) {
                oom(l);
                return;
            }
            for (int64_t d = 0; d < nd; d++)
                alone[d] = (int32_t)d;
            ir_attr *ng = groups_attr(l, alone, nd, 1);
            ap_free(alone);
            if (!ng || !set_attr(l, op, "replica_groups", ng) ||
                !set_attr(l, op, "use_global_device_ids", ir_attr_unit(l->nm)))
                return;
        }
}

/* An argument/result attribute the device-local program must not carry:
 * our own layout (replaced), and the input's sharding annotations, which
 * describe the global value before partitioning; beside local types a
 * reader (Shardy, XLA's SPMD partitioner, a tool of ours) would take them
 * as a layout still to apply and partition the shard again, and they can
 * contradict autopart.layout. */
static bool dropped_attr(const char *name)
{
    return !strcmp(name, "autopart.layout") || !strcmp(name, "sdy.sharding") || !strcmp(name, "mhlo.sharding");
}

/* A copy of an argument/result attribute dict with autopart.layout added
 * and the global sharding annotations left out (dropped_attr). */
static ir_attr *with_layout(lower *l, const ir_attr *dict, const ir_layout *lay, int rank)
{
    ir_named_attr items[64];
    int n = 0;
    if (dict && dict->kind == IR_A_DICT)
        for (int i = 0; i < dict->u.dict.n && n < 63; i++) {
            if (dropped_attr(dict->u.dict.items[i].name))
                continue;
            items[n].name = ir_intern(l->nm, dict->u.dict.items[i].name, strlen(dict->u.dict.items[i].name));
            items[n].value = ir__attr_clone(l->nm, dict->u.dict.items[i].value);
            if (!items[n].name || !items[n].value)
                return NULL;
            n++;
        }
    items[n].name = ir_intern(l->nm, "autopart.layout", 15);
    items[n].value = layout_attr(l, lay, rank);
    if (!items[n].name || !items[n].value)
        return NULL;
    return ir_attr_dict(l->nm, n + 1, items);
}

static const ir_attr *attr_at(const ir_attr *arr, uint32_t i)
{
    return arr && arr->kind == IR_A_ARRAY && i < (uint32_t)arr->u.arr.n ? arr->u.arr.items[i] : NULL;
}

/* ================================================================ driver */

const char *ir_coll_name(ir_coll_kind k)
{
    static const char *names[] = {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "collective_permute"};
    return (unsigned)k < IR_COLL__COUNT ? names[k] : "?";
}

void ir_lowered_free(ir_lowered *lw)
{
    if (!lw)
        return;
    ir_module_free(lw->module);
    memset(lw, 0, sizeof *lw);
}

int ir_lower(const ir_partition *p, ir_lowered *out, ap_error *err)
{
    return ir_lower_ex(p, NULL, out, err);
}

int ir_lower_ex(const ir_partition *p, const ir_lower_opts *opts, ir_lowered *out, ap_error *err)
{
    const ir_pctx *c = p->ctx;
    lower l = {.p = p, .c = c, .out = out, .err = err, .drop_all_reduce = opts ? opts->drop_all_reduce : -1};
    /* every function: a kept callee is copied as written, with its channels */
    l.channel = max_channel(&c->m->top->regions[0], 0);
    ir_cloner cl;
    memset(out, 0, sizeof *out);
    ir__cloner_init(&cl, NULL);
    int rc = ir_lplan_new(c, &l.plan, err);
    if (rc == 0 && (rc = ir_lplan_sync(l.plan, p, err)) < 0)
        ir_lplan_free(l.plan);
    if (rc < 0)
        return rc;
    l.nm = ir_module_new(c->m->filename);
    l.produced = ap_calloc(c->n_vals + 1, sizeof *l.produced);
    l.mat_base = ap_malloc(sizeof *l.mat_base * (c->n_vals + 1));
    /* opaque ops print as written: the aliases and resources they name too */
    if (!l.nm || !l.produced || !l.mat_base || ir_module_copy_text(l.nm, c->m) < 0) {
        oom(&l);
        goto done;
    }
    uint32_t n_mats = 0;
    for (uint32_t v = 0; v < c->n_vals; v++) {
        l.mat_base[v] = n_mats;
        n_mats += ir_lplan_num_mats(l.plan, v);
    }
    l.mat_base[c->n_vals] = n_mats;
    if (!(l.mat_val = ap_calloc(n_mats + 1, sizeof *l.mat_val))) {
        oom(&l);
        goto done;
    }
    ir_module *nm = l.nm;
    cl.dst = nm;
    cl.resolve = resolve_captured;
    cl.resolve_ctx = &l;
    /* module attributes: the SPMD contract */
    ir_attr *mname = ir_op_attr(c->m->top, "sym_name");
    ap_buf mb;
    ap_buf_init(&mb);
    ir_mesh_format(&c->mesh, &mb);
    const ir_type *i32s = ir_type_scalar(nm, IR_E_I32, NULL);
    if ((mname && !set_attr(&l, nm->top, "sym_name", ir__attr_clone(nm, mname))) ||
        !set_attr(&l, nm->top, "mhlo.num_partitions", ir_attr_int(nm, ir_mesh_devices(&c->mesh), i32s)) ||
        !set_attr(&l, nm->top, "mhlo.num_replicas", ir_attr_int(nm, 1, i32s)) ||
        !set_attr(&l, nm->top, "autopart.mesh", ir_attr_string(nm, mb.data ? mb.data : "", mb.len))) {
        ap_buf_free(&mb);
        goto done;
    }
    ap_buf_free(&mb);
    /* the function: arguments in their tilings */
    const ir_type *ft = ir_func_type(c->func);
    int n_out = ft->n_elems - ft->n_inputs;
    const ir_type **arg_t = ap_malloc(sizeof *arg_t * (c->n_args + 1));
    const ir_type **res_t = ap_malloc(sizeof *res_t * ((size_t)n_out + 1));
    ir_layout *res_l = ap_malloc(sizeof *res_l * ((size_t)n_out + 1));
    ir_attr **aa = ap_calloc(c->n_args + 1, sizeof *aa), **ra = ap_calloc((size_t)n_out + 1, sizeof *ra);
    if (!arg_t || !res_t || !res_l || !aa || !ra) {
        oom(&l);
        goto fn_done;
    }
    for (uint32_t a = 0; a < c->n_args; a++) {
        if (!(arg_t[a] = local_type(&l, ft->elems[a], &p->arg_layout[a])))
            goto fn_done;
        aa[a] = with_layout(&l, attr_at(ir_op_attr(c->func, "arg_attrs"), a), &p->arg_layout[a],
                            ft->elems[a]->kind == IR_T_TENSOR ? ft->elems[a]->rank : 0);
        if (!aa[a]) {
            oom(&l);
            goto fn_done;
        }
    }
    ir_op *nf = ir_op_new(nm, IR_OP_FUNC, NULL, 0, NULL, 0, NULL, 1);
    ir_block *nb = nf ? ir_block_new(nm, &nf->regions[0], c->n_args, arg_t) : NULL;
    if (!nb) {
        oom(&l);
        goto fn_done;
    }
    l.nb = nb;
    nf->loc = ir__loc_clone(nm, c->func->loc);
    /* the symbols the function refers to (sdy.mesh, util.global) come
     * first, as written */
    if (!ir__clone_module_decls(nm, c->m)) {
        oom(&l);
        goto fn_done;
    }
    ir_block_append(ir_module_body(nm), nf);
    ir_block *ob = ir_func_entry(c->func);
    for (uint32_t a = 0; a < c->n_args; a++) {
        nb->args[a].loc = ir__loc_clone(nm, ob->args[a].loc);
        l.produced[a] = &nb->args[a];
    }
    /* the ops, in order */
    lower_range(&l, 0, c->n_ops, &cl);
    if (l.rc)
        goto fn_done;
    /* the return */
    ir_value **rets = ap_malloc(sizeof *rets * (c->n_ret + 1));
    if (!rets) {
        oom(&l);
        goto fn_done;
    }
    l.loc = ir__loc_clone(nm, c->ret->loc);
    l.line = c->ret->src_line, l.col = c->ret->src_col;
    l.cur_op = c->n_ops; /* the return is one user */
    for (uint32_t r = 0; r < c->n_ret && !l.rc; r++) {
        /* what a result needs (a pending sum reduced) is reported where the
         * value is made, rather than at the one return of them all */
        int32_t prod = c->val_op[c->ret_val[r]];
        const ir_op *at = prod >= 0 && (uint32_t)prod < c->n_ops && c->ops[prod] ? c->ops[prod] : c->ret;
        l.line = at->src_line, l.col = at->src_col;
        res_l[r] = *ir_lplan_result_layout(l.plan, r);
        rets[r] = materialize(&l, c->ret_val[r], r);
        if (rets[r])
            res_t[r] = rets[r]->type;
    }
    if (!l.rc) {
        ir_op *ret = emit(&l, IR_OP_FUNC_RETURN, c->n_ret, rets, NULL);
        (void)ret;
        for (int r = 0; r < n_out && !l.rc; r++) {
            const ir_type *g = ft->elems[ft->n_inputs + r];
            ra[r] = with_layout(&l, attr_at(ir_op_attr(c->func, "res_attrs"), (uint32_t)r), &res_l[r],
                                g->kind == IR_T_TENSOR ? g->rank : 0);
            if (!ra[r])
                oom(&l);
        }
    }
    ap_free(rets);
    if (!l.rc) {
        const char *fname = ir_func_name(c->func);
        const ir_type *nft = ir_type_function(nm, (int)c->n_args, arg_t, n_out, res_t);
        /* the partitioned function is the SPMD program's entry: a private
         * one (`--func` of a callee) would leave the module no entry,
         * which XLA cannot run and check could not find */
        ir_attr *vis = ir_op_attr(c->func, "sym_visibility");
        if (vis && vis->kind == IR_A_STRING && vis->u.str.len == 7 && memcmp(vis->u.str.s, "private", 7) == 0)
            vis = NULL;
        if (!nft || !set_attr(&l, nf, "sym_name", ir_attr_string(nm, fname, strlen(fname))) ||
            !set_attr(&l, nf, "function_type", ir_attr_type(nm, nft)) ||
            (vis && !set_attr(&l, nf, "sym_visibility", ir__attr_clone(nm, vis))) ||
            (c->n_args && !set_attr(&l, nf, "arg_attrs", ir_attr_array(nm, (int)c->n_args, aa))) ||
            (n_out && !set_attr(&l, nf, "res_attrs", ir_attr_array(nm, n_out, ra))))
            goto fn_done;
        ir_func_renumber(nf, NULL, NULL);
        if (ir_mesh_devices(&c->mesh) > 1)
            keep_program_collectives(&l, &nf->regions[0], ir_mesh_devices(&c->mesh));
        /* a call the inliner left (its callee has several blocks, or no
         * body) is opaque: its operands arrive whole, and the callee runs
         * as written */
        if (!ir__clone_callees(nm, c->m, &nf->regions[0]))
            oom(&l);
        /* a program that does not type-check is a bug here, never an
         * answer to hand out */
        ap_error verr;
        if (!l.rc && ir_verify(nm, &verr) < 0)
            fail(&l, AP_EINTERNAL, "the SPMD program does not verify (a bug in the lowering): %s", verr.msg);
    }
fn_done:
    ap_free(arg_t);
    ap_free(res_t);
    ap_free(res_l);
    ap_free(aa);
    ap_free(ra);
done:
    ir__cloner_free(&cl);
    ap_free(l.produced);
    ap_free(l.mat_base);
    ap_free(l.mat_val);
    ir_lplan_free(l.plan);
    if (l.rc) {
        ir_module_free(l.nm);
        memset(out, 0, sizeof *out);
        return l.rc;
    }
    out->module = l.nm;
    return 0;
}
