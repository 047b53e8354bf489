/*
 * tmr.c - the tile-mapping registry: for every op of the partitioned
 * function, the set of entries (t1..tn) -> (s1..sk) instantiated from its
 * attributes (PartIR paper section 5.2.1).  An entry says: slicing the
 * operands as t1..tn (a dim, or nothing, or "take the pending partial sum")
 * gives results that are tiled on a dim, pending sums, or replicated.
 * Divisibility by an axis is checked when an entry is used, since it
 * depends on the axes already tiling a dim.
 */
#include "partir_int.h"

#include <math.h>
#include <stddef.h>

typedef struct tb {
    ir_pctx *c;
    ap_error *err;
    uint32_t cap_entries, cap_pool;
    bool oom;
} tb;

/* Appends one entry with n specs (operands then results). */
static void add_entry(tb *b, const int8_t *specs, uint32_t n, ir_red red)
{
    ir_pctx *c = b->c;
    if (b->oom)
        return;
    if (c->n_entries == b->cap_entries) {
        uint32_t cap = b->cap_entries ? b->cap_entries * 2 : 1024;
        tmr_entry *e = ap_realloc(c->entries, sizeof *e * cap);
        if (!e) {
            b->oom = true;
            return;
        }
        c->entries = e;
        b->cap_entries = cap;
    }
    if (c->n_pool + n > b->cap_pool) {
        uint32_t cap = b->cap_pool ? b->cap_pool * 2 : 4096;
        while (cap < c->n_pool + n)
            cap *= 2;
        int8_t *p = ap_realloc(c->pool, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        c->pool = p;
        b->cap_pool = cap;
    }
    memcpy(c->pool + c->n_pool, specs, n);
    tmr_entry *t = &c->entries[c->n_entries];
    memset(t, 0, sizeof *t);
    t->spec = c->n_pool;
    t->red = (uint8_t)red;
    c->n_entries++;
    c->n_pool += n;
}

/* ---------------------------------------------------------- recognizers */

/* Ranked tensors of the same dims (element types may differ). */
static bool ir_type_equal_dims(const ir_type *a, const ir_type *b)
{
    if (!a || !b || a->kind != IR_T_TENSOR || b->kind != IR_T_TENSOR || a->rank < 0 || a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

static int rank_of(const ir_value *v)
{
    const ir_type *t = v->type;
    return t && t->kind == IR_T_TENSOR ? t->rank : -1;
}

/* The scalar value of a splat constant (through broadcast_in_dim, reshape
 * and convert), as a double; false if v is not one. */
static bool splat_value(const ir_value *v, double *out)
{
    for (int hops = 0; hops < 8 && v && v->def; hops++) {
        const ir_op *d = v->def;
        if (d->opcode == IR_OP_CONSTANT) {
            ir_attr *a = ir_op_attr(d, "value");
            if (!a || a->kind != IR_A_DENSE || a->u.dense.text)
                return false;
            ir_elem e = (ir_elem)a->type->elem;
            int64_t n = ir_type_numel(a->type);
            if (n < 1)
                return false;
            double first = ir_elem_is_float(e) ? ir_dense_float_at(a, 0) : (double)ir_dense_int_at(a, 0);
            if (!a->u.dense.splat)
                for (int64_t i = 1; i < n && i < 4096; i++) {
                    double x = ir_elem_is_float(e) ? ir_dense_float_at(a, (size_t)i) : (double)ir_dense_int_at(a, (size_t)i);
                    if (x != first && !(isnan(x) && isnan(first)))
                        return false;
                }
            if (!a->u.dense.splat && n > 4096)
                return false;
            *out = first;
            return true;
        }
        if (d->opcode == IR_OP_BROADCAST_IN_DIM || d->opcode == IR_OP_RESHAPE || d->opcode == IR_OP_CONVERT)
            v = d->operands[0];
        else
            return false;
    }
    return false;
}

static bool is_zero(const ir_value *v)
{
    double x;
    return splat_value(v, &x) && x == 0.0;
}

/* Is init the identity of reduction r? */
static bool is_identity(const ir_value *init, ir_red r)
{
    double x;
    if (!splat_value(init, &x))
        return false;
    switch (r) {
    case IR_RED_ADD: return x == 0.0;
    case IR_RED_MUL: return x == 1.0;
    case IR_RED_MAX: return isinf(x) && x < 0; /* JAX uses -inf */
    case IR_RED_MIN: return isinf(x) && x > 0;
    case IR_RED_AND: return x != 0.0;
    case IR_RED_OR: return x == 0.0;
    default: return false;
    }
}

static ir_red red_of_opcode(ir_opcode op)
{
    switch (op) {
    case IR_OP_ADD: return IR_RED_ADD;
    case IR_OP_MULTIPLY: return IR_RED_MUL;
    case IR_OP_MAXIMUM: return IR_RED_MAX;
    case IR_OP_MINIMUM: return IR_RED_MIN;
    case IR_OP_AND: return IR_RED_AND;
    case IR_OP_OR: return IR_RED_OR;
    default: return IR_RED_NONE;
    }
}

static bool float_value(const ir_value *v)
{
    return v->type && v->type->kind == IR_T_TENSOR && ir_elem_is_float((ir_elem)v->type->elem);
}

/* ---------------------------------------------------------------- rules */

#define MAXS 64 /* operands + results of an op we give entries to */

typedef struct rule {
    tb *b;
    const ir_op *op;
    uint32_t n; /* n_operands + n_results */
    int8_t s[MAXS];
} rule;

static void r_reset(rule *r, int8_t operand_default, int8_t result_default)
{
    for (uint32_t i = 0; i < r->op->n_operands; i++)
        r->s[i] = operand_default;
    for (uint32_t j = 0; j < r->op->n_results; j++)
        r->s[r->op->n_operands + j] = result_default;
}

/* Whether partial results of v's type, each held in that type, combine
 * into the whole: not for a quantized (opaque) element type, where each
 * device's partial sum is rounded and saturated to the storage type on
 * its own, and the all_reduce adds zero points (StableHLO's quantized
 * dot_general: dequantize, dot, quantize).  Such a contraction or
 * reduction runs whole instead: its tiled operands gathered first. */
static bool sums_in_type(const ir_value *v)
{
    return v->type && v->type->kind == IR_T_TENSOR && v->type->elem != IR_E_OPAQUE;
}

/* Adds the rule's current specs as an entry, unless they make a pending
 * sum of, or take one as, a value that cannot hold one (sums_in_type). */
static void r_emit(rule *r, ir_red red)
{
    const ir_op *op = r->op;
    for (uint32_t i = 0; i < op->n_operands; i++)
        if (r->s[i] == SP_PARTIAL && !sums_in_type(op->operands[i]))
            return;
    for (uint32_t j = 0; j < op->n_results; j++)
        if (r->s[op->n_operands + j] == SP_SUM && !sums_in_type(&op->results[j]))
            return;
    add_entry(r->b, r->s, r->n, red);
}

static void r_result(rule *r, uint32_t j, int8_t a) { r->s[r->op->n_operands + j] = a; }

/* Elementwise: every operand of the result's rank sliced like the result. */
static void rule_elementwise(rule *r)
{
    const ir_op *op = r->op;
    int R = rank_of(&op->results[0]);
    for (int d = 0; d < R; d++) {
        for (uint32_t i = 0; i < op->n_operands; i++)
            r->s[i] = rank_of(op->operands[i]) == R ? (int8_t)d : SP_NONE;
        for (uint32_t j = 0; j < op->n_results; j++)
            r_result(r, j, (int8_t)d);
        r_emit(r, IR_RED_NONE);
    }
}

/* Pending sums through ops linear in the marked operands. */
static void rule_partial(rule *r, const int8_t *operand_specs)
{
    for (uint32_t i = 0; i < r->op->n_operands; i++)
        r->s[i] = operand_specs[i];
    for (uint32_t j = 0; j < r->op->n_results; j++)
        r_result(r, j, SP_SUM);
    r_emit(r, IR_RED_ADD);
}

static void rule_unary_partial(rule *r)
{
    int8_t p[1] = {SP_PARTIAL};
    rule_partial(r, p);
}

static void rule_transpose(rule *r)
{
    int64_t perm[IR_MAX_RANK];
    int n = ir_attr_int_list(ir_op_attr(r->op, "permutation"), perm, IR_MAX_RANK);
    for (int d = 0; d < n; d++) {
        r->s[0] = (int8_t)perm[d];
        r_result(r, 0, (int8_t)d);
        r_emit(r, IR_RED_NONE);
    }
    rule_unary_partial(r);
}

static void rule_broadcast(rule *r)
{
    const ir_op *op = r->op;
    int64_t dims[IR_MAX_RANK];
    int n = ir_attr_int_list(ir_op_attr(op, "broadcast_dimensions"), dims, IR_MAX_RANK);
    const ir_type *in = op->operands[0]->type, *out = op->results[0].type;
    if (n < 0 || !in || !out || in->kind != IR_T_TENSOR || out->kind != IR_T_TENSOR)
        return;
    for (int d = 0; d < out->rank; d++) {
        r->s[0] = SP_NONE;
        for (int i = 0; i < n && i < in->rank; i++)
            if (dims[i] == d && in->dims[i] == out->dims[d])
                r->s[0] = (int8_t)i;
        r_result(r, 0, (int8_t)d);
        r_emit(r, IR_RED_NONE);
    }
    rule_unary_partial(r);
}

/* Reshape: dims in groups of equal products; the major dims of a group
 * correspond (PartIR section 8: split or merged dims via their major part). */
static void rule_reshape(rule *r)
{
    const ir_type *in = r->op->operands[0]->type, *out = r->op->results[0].type;
    if (!ir_type_is_static(in) || !ir_type_is_static(out))
        return;
    int i = 0, j = 0;
    while (i < in->rank && j < out->rank) {
        /* size-1 dims carry no data: skip them */
        if (in->dims[i] == 1) {
            i++;
            continue;
        }
        if (out->dims[j] == 1) {
            j++;
            continue;
        }
        int gi = i, gj = j;
        int64_t pi = in->dims[i++], pj = out->dims[j++];
        while (pi != pj) {
            if (pi < pj) {
                if (i >= in->rank)
                    return;
                pi *= in->dims[i++];
            } else {
                if (j >= out->rank)
                    return;
                pj *= out->dims[j++];
            }
        }
        r->s[0] = (int8_t)gi;
        r_result(r, 0, (int8_t)gj);
        r_emit(r, IR_RED_NONE);
    }
    rule_unary_partial(r);
}

static void rule_dot(rule *r)
{
    const ir_op *op = r->op;
    ir_dot_dims d;
    if (ir_dot_dims_get(op, &d) < 0)
        return;
    int lr = rank_of(op->operands[0]), rr = rank_of(op->operands[1]);
    if (lr < 0 || rr < 0)
        return;
    bool lused[IR_MAX_RANK] = {0}, rused[IR_MAX_RANK] = {0};
    int out = 0;
    for (int k = 0; k < d.n_batch; k++) {
        lused[d.lhs_batch[k]] = rused[d.rhs_batch[k]] = true;
        r->s[0] = (int8_t)d.lhs_batch[k];
        r->s[1] = (int8_t)d.rhs_batch[k];
        r_result(r, 0, (int8_t)out++);
        r_emit(r, IR_RED_NONE);
    }
    for (int k = 0; k < d.n_contract; k++)
        lused[d.lhs_contract[k]] = rused[d.rhs_contract[k]] = true;
    for (int i = 0; i < lr; i++) {
        if (lused[i])
            continue;
        r->s[0] = (int8_t)i;
        r->s[1] = SP_NONE;
        r_result(r, 0, (int8_t)out++);
        r_emit(r, IR_RED_NONE);
    }
    for (int i = 0; i < rr; i++) {
        if (rused[i])
            continue;
        r->s[0] = SP_NONE;
        r->s[1] = (int8_t)i;
        r_result(r, 0, (int8_t)out++);
        r_emit(r, IR_RED_NONE);
    }
    for (int k = 0; k < d.n_contract; k++) {
        r->s[0] = (int8_t)d.lhs_contract[k];
        r->s[1] = (int8_t)d.rhs_contract[k];
        r_result(r, 0, SP_SUM);
        r_emit(r, IR_RED_ADD);
    }
    if (float_value(&op->results[0])) {
        int8_t a[2] = {SP_PARTIAL, SP_NONE}, b[2] = {SP_NONE, SP_PARTIAL};
        rule_partial(r, a);
        rule_partial(r, b);
    }
}

static void rule_convolution(rule *r)
{
    const ir_op *op = r->op;
    ir_conv_dims cd;
    if (ir_conv_dims_get(op, &cd) < 0 || op->n_operands != 2)
        return;
    ir_attr *fg = ir_op_attr(op, "feature_group_count"), *bg = ir_op_attr(op, "batch_group_count");
    int64_t fgc = fg && fg->kind == IR_A_INT ? fg->u.i : 1, bgc = bg && bg->kind == IR_A_INT ? bg->u.i : 1;
    if (bgc == 1) { /* batch */
        r->s[0] = (int8_t)cd.in_batch;
        r->s[1] = SP_NONE;
        r_result(r, 0, (int8_t)cd.out_batch);
        r_emit(r, IR_RED_NONE);
    }
    if (fgc == 1 && bgc == 1) {
        /* output features */
        r->s[0] = SP_NONE;
        r->s[1] = (int8_t)cd.kernel_out;
        r_result(r, 0, (int8_t)cd.out_feature);
        r_emit(r, IR_RED_NONE);
        /* input features sum */
        r->s[0] = (int8_t)cd.in_feature;
        r->s[1] = (int8_t)cd.kernel_in;
        r_result(r, 0, SP_SUM);
        r_emit(r, IR_RED_ADD);
        if (float_value(&op->results[0])) {
            int8_t a[2] = {SP_PARTIAL, SP_NONE}, b[2] = {SP_NONE, SP_PARTIAL};
            rule_partial(r, a);
            rule_partial(r, b);
        }
    }
}

static void rule_reduce(rule *r)
{
    const ir_op *op = r->op;
    uint32_t n = op->n_operands / 2;
    int64_t dims[IR_MAX_RANK];
    int nd = ir_attr_int_list(ir_op_attr(op, "dimensions"), dims, IR_MAX_RANK);
    int R = rank_of(op->operands[0]);
    if (nd < 0 || R < 0 || op->n_regions != 1)
        return;
    bool reduced[IR_MAX_RANK] = {0};
    for (int k = 0; k < nd; k++)
        if (dims[k] >= 0 && dims[k] < R)
            reduced[dims[k]] = true;
    int j = 0;
    for (int i = 0; i < R; i++) {
        if (reduced[i])
            continue;
        for (uint32_t k = 0; k < n; k++) {
            r->s[k] = (int8_t)i;
            r->s[n + k] = SP_NONE;
        }
        for (uint32_t k = 0; k < op->n_results; k++)
            r_result(r, k, (int8_t)j);
        r_emit(r, IR_RED_NONE);
        j++;
    }
    if (n != 1)
        return; /* variadic reductions (argmax) do not combine by one monoid */
    ir_red red = red_of_opcode(ir_region_reduction(&op->regions[0]));
    if (red == IR_RED_NONE || !is_identity(op->operands[1], red))
        return;
    for (int i = 0; i < R; i++) {
        if (!reduced[i])
            continue;
        r->s[0] = (int8_t)i;
        r->s[1] = SP_NONE;
        r_result(r, 0, SP_SUM);
        r_emit(r, red);
    }
    if (red == IR_RED_ADD && float_value(&op->results[0])) {
        int8_t p[2] = {SP_PARTIAL, SP_NONE};
        rule_partial(r, p);
    }
}

/* Dims an op leaves untouched (a full, unstrided range) tile through. */
static void rule_untouched(rule *r, const bool *untouched, int R, bool all_operands_same)
{
    const ir_op *op = r->op;
    for (int d = 0; d < R; d++) {
        if (!untouched[d])
            continue;
        for (uint32_t i = 0; i < op->n_operands; i++)
            r->s[i] = (i == 0 || (all_operands_same && rank_of(op->operands[i]) == R)) ? (int8_t)d : SP_NONE;
        for (uint32_t j = 0; j < op->n_results; j++)
            r_result(r, j, (int8_t)d);
        r_emit(r, IR_RED_NONE);
    }
}

static void rule_slice(rule *r)
{
    const ir_type *t = r->op->operands[0]->type;
    int64_t st[IR_MAX_RANK], li[IR_MAX_RANK], sr[IR_MAX_RANK];
    int R = rank_of(r->op->operands[0]);
    if (R < 0 || ir_attr_int_list(ir_op_attr(r->op, "start_indices"), st, IR_MAX_RANK) != R ||
        ir_attr_int_list(ir_op_attr(r->op, "limit_indices"), li, IR_MAX_RANK) != R ||
        ir_attr_int_list(ir_op_attr(r->op, "strides"), sr, IR_MAX_RANK) != R)
        return;
    bool u[IR_MAX_RANK];
    for (int d = 0; d < R; d++)
        u[d] = st[d] == 0 && li[d] == t->dims[d] && sr[d] == 1;
    rule_untouched(r, u, R, false);
}

static void rule_pad(rule *r)
{
    int64_t lo[IR_MAX_RANK], hi[IR_MAX_RANK], in[IR_MAX_RANK];
    int R = rank_of(r->op->operands[0]);
    if (R < 0 || ir_attr_int_list(ir_op_attr(r->op, "edge_padding_low"), lo, IR_MAX_RANK) != R ||
        ir_attr_int_list(ir_op_attr(r->op, "edge_padding_high"), hi, IR_MAX_RANK) != R ||
        ir_attr_int_list(ir_op_attr(r->op, "interior_padding"), in, IR_MAX_RANK) != R)
        return;
    bool u[IR_MAX_RANK];
    for (int d = 0; d < R; d++)
        u[d] = lo[d] == 0 && hi[d] == 0 && in[d] == 0;
    rule_untouched(r, u, R, false);
}

static void rule_dynamic_slice(rule *r)
{
    const ir_type *t = r->op->operands[0]->type;
    int64_t sz[IR_MAX_RANK];
    int R = rank_of(r->op->operands[0]);
    if (R < 0 || ir_attr_int_list(ir_op_attr(r->op, "slice_sizes"), sz, IR_MAX_RANK) != R)
        return;
    bool u[IR_MAX_RANK];
    for (int d = 0; d < R; d++)
        u[d] = sz[d] == t->dims[d];
    rule_untouched(r, u, R, false);
}

static void rule_dynamic_update_slice(rule *r)
{
    const ir_type *t = r->op->operands[0]->type, *up = r->op->operands[1]->type;
    int R = rank_of(r->op->operands[0]);
    if (R < 0 || rank_of(r->op->operands[1]) != R)
        return;
    for (int d = 0; d < R; d++) {
        if (up->dims[d] != t->dims[d])
            continue;
        for (uint32_t i = 0; i < r->op->n_operands; i++)
            r->s[i] = i < 2 ? (int8_t)d : SP_NONE;
        r_result(r, 0, (int8_t)d);
        r_emit(r, IR_RED_NONE);
    }
}

static void rule_concatenate(rule *r)
{
    ir_attr *a = ir_op_attr(r->op, "dimension");
    int R = rank_of(&r->op->results[0]);
    if (!a || a->kind != IR_A_INT || R < 0)
        return;
    bool u[IR_MAX_RANK];
    for (int d = 0; d < R; d++)
        u[d] = d != a->u.i;
    rule_untouched(r, u, R, true);
}

static void rule_reverse(rule *r)
{
    int64_t dims[IR_MAX_RANK];
    int n = ir_attr_int_list(ir_op_attr(r->op, "dimensions"), dims, IR_MAX_RANK);
    int R = rank_of(r->op->operands[0]);
    if (n < 0 || R < 0)
        return;
    bool u[IR_MAX_RANK];
    for (int d = 0; d < R; d++)
        u[d] = true;
    for (int k = 0; k < n; k++)
        if (dims[k] >= 0 && dims[k] < R)
            u[dims[k]] = false;
    rule_untouched(r, u, R, false);
}

static void rule_iota(rule *r)
{
    int R = rank_of(&r->op->results[0]);
    for (int d = 0; d < R; d++) {
        r_result(r, 0, (int8_t)d);
        r_emit(r, IR_RED_NONE);
    }
}

static void rule_sort(rule *r)
{
    ir_attr *a = ir_op_attr(r->op, "dimension");
    int R = rank_of(r->op->operands[0]);
    int64_t sd = a && a->kind == IR_A_INT ? a->u.i : R - 1;
    if (R < 0)
        return;
    if (sd < 0)
        sd += R;
    bool u[IR_MAX_RANK];
    for (int d = 0; d < R; d++)
        u[d] = d != sd;
    rule_untouched(r, u, R, true);
}

/* reduce_window / select_and_scatter: dims the window does not touch. */
static void rule_window(rule *r, uint32_t n_tiled_operands)
{
    const ir_op *op = r->op;
    int R = rank_of(op->operands[0]);
    int64_t win[IR_MAX_RANK], str[IR_MAX_RANK], bd[IR_MAX_RANK], wd[IR_MAX_RANK];
    if (R < 0 || ir_attr_int_list(ir_op_attr(op, "window_dimensions"), win, IR_MAX_RANK) != R)
        return;
    int ns = ir_attr_int_list(ir_op_attr(op, "window_strides"), str, IR_MAX_RANK);
    int nb = ir_attr_int_list(ir_op_attr(op, "base_dilations"), bd, IR_MAX_RANK);
    int nw = ir_attr_int_list(ir_op_attr(op, "window_dilations"), wd, IR_MAX_RANK);
    ir_attr *pad = ir_op_attr(op, "padding");
    for (int d = 0; d < R; d++) {
        bool ok = win[d] == 1 && (ns != R || str[d] == 1) && (nb != R || bd[d] == 1) && (nw != R || wd[d] == 1);
        if (ok && pad && pad->kind == IR_A_DENSE && !pad->u.dense.text && ir_type_numel(pad->type) == 2 * R)
            ok = ir_dense_int_at(pad, (size_t)(2 * d)) == 0 && ir_dense_int_at(pad, (size_t)(2 * d + 1)) == 0;
        if (!ok)
            continue;
        for (uint32_t i = 0; i < op->n_operands; i++)
            r->s[i] = i < n_tiled_operands ? (int8_t)d : SP_NONE;
        for (uint32_t j = 0; j < op->n_results; j++)
            r_result(r, j, (int8_t)d);
        r_emit(r, IR_RED_NONE);
    }
}

static bool list_has(const int64_t *v, int n, int64_t x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

static void rule_gather(rule *r)
{
    const ir_op *op = r->op;
    ir_gather_dims g;
    int64_t sizes[IR_MAX_RANK];
    int R = rank_of(&op->results[0]), OR = rank_of(op->operands[0]), IR = rank_of(op->operands[1]);
    if (ir_gather_dims_get(op, &g) < 0 || R < 0 || OR < 0 || IR < 0 || g.n_operand_batching ||
        ir_attr_int_list(ir_op_attr(op, "slice_sizes"), sizes, IR_MAX_RANK) != OR)
        return;
    /* result batch dims (not offset dims) follow the indices' dims in order,
     * skipping index_vector_dim */
    int idx_dim = 0;
    for (int d = 0; d < R; d++) {
        if (list_has(g.offset_dims, g.n_offset, d))
            continue;
        if (idx_dim == g.index_vector_dim)
            idx_dim++;
        if (idx_dim >= IR)
            return;
        r->s[0] = SP_NONE;
        r->s[1] = (int8_t)idx_dim;
        r_result(r, 0, (int8_t)d);
        r_emit(r, IR_RED_NONE);
        idx_dim++;
    }
    /* offset dims follow the operand dims that are not collapsed */
    int k = 0;
    for (int od = 0; od < OR && k < g.n_offset; od++) {
        if (list_has(g.collapsed_slice_dims, g.n_collapsed, od))
            continue;
        int rd = (int)g.offset_dims[k++];
        if (list_has(g.start_index_map, g.n_start_index_map, od) || sizes[od] != op->operands[0]->type->dims[od])
            continue; /* a window that moves or is partial in this dim */
        r->s[0] = (int8_t)od;
        r->s[1] = SP_NONE;
        r_result(r, 0, (int8_t)rd);
        r_emit(r, IR_RED_NONE);
    }
}

static void rule_scatter(rule *r)
{
    const ir_op *op = r->op;
    ir_scatter_dims s;
    if (op->n_operands != 3 || op->n_regions != 1 || ir_scatter_dims_get(op, &s) < 0 || s.n_input_batching)
        return;
    int OR = rank_of(op->operands[0]), IR = rank_of(op->operands[1]), UR = rank_of(op->operands[2]);
    if (OR < 0 || IR < 0 || UR < 0)
        return;
    /* update scatter dims (not window dims) follow the indices' dims */
    ir_red red = red_of_opcode(ir_region_reduction(&op->regions[0]));
    bool linear = red == IR_RED_ADD && is_zero(op->operands[0]);
    int idx_dim = 0;
    for (int u = 0; u < UR; u++) {
        if (list_has(s.update_window_dims, s.n_update_window, u))
            continue;
        if (idx_dim == s.index_vector_dim)
            idx_dim++;
        if (idx_dim >= IR)
            return;
        if (linear) { /* each slice of updates scatters into zeros: sum them */
            r->s[0] = SP_NONE;
            r->s[1] = (int8_t)idx_dim;
            r->s[2] = (int8_t)u;
            r_result(r, 0, SP_SUM);
            r_emit(r, IR_RED_ADD);
        }
        idx_dim++;
    }
    /* window dims of updates follow operand dims not scattered into */
    int k = 0;
    for (int od = 0; od < OR && k < s.n_update_window; od++) {
        if (list_has(s.inserted_window_dims, s.n_inserted_window, od))
            continue;
        int ud = (int)s.update_window_dims[k++];
        if (list_has(s.scatter_dims_to_operand_dims, s.n_scatter_to_operand, od) ||
            op->operands[2]->type->dims[ud] != op->operands[0]->type->dims[od])
            continue;
        r->s[0] = (int8_t)od;
        r->s[1] = SP_NONE;
        r->s[2] = (int8_t)ud;
        r_result(r, 0, (int8_t)od);
        r_emit(r, IR_RED_NONE);
    }
}

static void rule_batch_norm_inference(rule *r)
{
    ir_attr *f = ir_op_attr(r->op, "feature_index");
    int R = rank_of(r->op->operands[0]);
    if (!f || f->kind != IR_A_INT || R < 0)
        return;
    for (int d = 0; d < R; d++) {
        for (uint32_t i = 0; i < r->op->n_operands; i++)
            r->s[i] = i == 0 ? (int8_t)d : (d == f->u.i ? 0 : SP_NONE);
        r_result(r, 0, (int8_t)d);
        r_emit(r, IR_RED_NONE);
    }
}

/* Custom calls that annotate a value (shardings, device placement, marks
 * of frameworks) and pass it through unchanged. */
bool ir_custom_call_is_identity(const ir_op *op)
{
    static const char *const identity[] = {"tt.mark_argument", "Sharding", "annotate_device_placement",
                                           "xla.sdy.FuncResultSharding", "SPMDFullToShardShape", NULL};
    if (op->opcode != IR_OP_CUSTOM_CALL || op->n_operands != 1 || op->n_results != 1 ||
        !ir_type_equal(op->operands[0]->type, op->results[0].type))
        return false;
    ir_attr *t = ir_op_attr(op, "call_target_name");
    if (!t || t->kind != IR_A_STRING)
        return false;
    for (int i = 0; identity[i]; i++)
        if (!strcmp(t->u.str.s, identity[i]))
            return true;
    return false;
}

/* Shardy's ops that only state a value's sharding (sharding_constraint,
 * reshard): the identity on the value, as the custom_call @Sharding is. */
bool ir_sdy_is_identity(const ir_op *op)
{
    return op->opcode == IR_OP_UNKNOWN && op->n_operands == 1 && op->n_results == 1 &&
           ir_type_equal(op->operands[0]->type, op->results[0].type) &&
           (!strcmp(op->name, "sdy.sharding_constraint") || !strcmp(op->name, "sdy.reshard"));
}

/* cuDNN's fused attention (ir_fmha_get): a map over batch and heads, so
 * those tile (q, k, v, d_out and out [b, s, h, d] on dims 0 and 2, the
 * stats [b, h, s] and the BNTH results on 0 and 1; a key/value head goes
 * with its group of query heads, so heads tile only when the axis divides
 * the key/value heads too).  The sequence does not: every query row reads
 * every key.  Nothing is linear in one operand: no pending sums.  The empty
 * workspace is replicated. */
static void rule_fmha(rule *r)
{
    const ir_op *op = r->op;
    int kind = ir_fmha_kind(op);
    if ((kind == IR_FMHA_FWD && (op->n_operands != 3 || op->n_results != 3)) ||
        (kind == IR_FMHA_BWD && (op->n_operands != 6 || op->n_results != 4)))
        return;
    for (int axis = 0; axis < 2; axis++) {   /* 0: batch, 1: heads */
        int8_t btnh = axis ? 2 : 0, bnth = axis ? 1 : 0;
        for (uint32_t i = 0; i < op->n_operands; i++)
            r->s[i] = kind == IR_FMHA_BWD && i == 3 ? bnth : btnh; /* the stats are [b, h, s] */
        for (uint32_t j = 0; j + 1 < op->n_results; j++)
            r_result(r, j, bnth);
        r_result(r, op->n_results - 1, SP_ANY);
        r_emit(r, IR_RED_NONE);
    }
}

/* An identity (one operand of an optimization_barrier): tiles pass, and a
 * pending sum passes as one. */
static void rule_identity(tb *b, const ir_op *op)
{
    rule r = {.b = b, .op = op, .n = 2};
    if (rank_of(&op->results[0]) < 0)
        return;
    r_reset(&r, SP_NONE, SP_ANY);
    rule_elementwise(&r);
    if (float_value(&op->results[0]))
        rule_unary_partial(&r);
}

static void instantiate(tb *b, const ir_op *op)
{
    rule r = {.b = b, .op = op, .n = op->n_operands + op->n_results};
    if (r.n > MAXS || op->n_results == 0)
        return;
    for (uint32_t j = 0; j < op->n_results; j++)
        if (rank_of(&op->results[j]) < 0)
            return;
    r_reset(&r, SP_NONE, SP_ANY);
    ir_opcode opc = (ir_opcode)op->opcode;
    switch (opc) {
    case IR_OP_TRANSPOSE: rule_transpose(&r); return;
    case IR_OP_BROADCAST_IN_DIM: rule_broadcast(&r); return;
    case IR_OP_RESHAPE: rule_reshape(&r); return;
    case IR_OP_DOT:
    case IR_OP_DOT_GENERAL: rule_dot(&r); return;
    case IR_OP_CONVOLUTION: rule_convolution(&r); return;
    case IR_OP_REDUCE: rule_reduce(&r); return;
    case IR_OP_SLICE: rule_slice(&r); return;
    case IR_OP_PAD: rule_pad(&r); return;
    case IR_OP_DYNAMIC_SLICE: rule_dynamic_slice(&r); return;
    case IR_OP_DYNAMIC_UPDATE_SLICE: rule_dynamic_update_slice(&r); return;
    case IR_OP_CONCATENATE: rule_concatenate(&r); return;
    case IR_OP_REVERSE: rule_reverse(&r); return;
    case IR_OP_IOTA: rule_iota(&r); return;
    case IR_OP_SORT: rule_sort(&r); return;
    case IR_OP_REDUCE_WINDOW: rule_window(&r, op->n_operands / 2); return;
    case IR_OP_SELECT_AND_SCATTER: rule_window(&r, 2); return;
    case IR_OP_GATHER: rule_gather(&r); return;
    case IR_OP_SCATTER: rule_scatter(&r); return;
    case IR_OP_BATCH_NORM_INFERENCE: rule_batch_norm_inference(&r); return;
    case IR_OP_CUSTOM_CALL:
        if (ir_fmha_kind(op)) {
            rule_fmha(&r);
            return;
        }
        if (ir_custom_call_is_identity(op)) {
            rule_elementwise(&r);
            if (float_value(&op->results[0]))
                rule_unary_partial(&r);
        }
        return;
    case IR_OP_UNKNOWN:
        if (ir_sdy_is_identity(op)) {
            rule_elementwise(&r);
            if (float_value(&op->results[0]))
                rule_unary_partial(&r);
        }
        return;
    case IR_OP_BITCAST_CONVERT:
        if (ir_elem_bits((ir_elem)op->operands[0]->type->elem) == ir_elem_bits((ir_elem)op->results[0].type->elem) &&
            rank_of(op->operands[0]) == rank_of(&op->results[0]))
            rule_elementwise(&r);
        return;
    default:
        break;
    }
    if (!ir_op_info_get(opc)->elementwise)
        return; /* no entries: custom_call, while, case, unknown ops, constants, collectives */
    rule_elementwise(&r);
    if (!float_value(&op->results[0]))
        return;
    switch (opc) {
    case IR_OP_ADD:
    case IR_OP_SUBTRACT: {
        int8_t p[2] = {SP_PARTIAL, SP_PARTIAL};
        rule_partial(&r, p);
        break;
    }
    case IR_OP_NEGATE:
    case IR_OP_COPY:
        rule_unary_partial(&r);
        break;
    case IR_OP_CONVERT:
        if (float_value(op->operands[0]))
            rule_unary_partial(&r);
        break;
    case IR_OP_MULTIPLY: {
        int8_t a[2] = {SP_PARTIAL, SP_NONE}, c[2] = {SP_NONE, SP_PARTIAL};
        rule_partial(&r, a);
        rule_partial(&r, c);
        break;
    }
    case IR_OP_DIVIDE: {
        int8_t a[2] = {SP_PARTIAL, SP_NONE};
        rule_partial(&r, a);
        break;
    }
    default:
        break;
    }
}

/* Dims of carried value k (its body argument) that the body indexes by
 * the loop: a dynamic_slice or dynamic_update_slice taking less than the
 * whole dim.  Tiling one would split the loop's iterations over devices
 * (pipelining), which the loop's lowering cannot do. */
static uint32_t carry_layer_dims(const ir_pctx *c, uint32_t k)
{
    uint32_t v = c->op_val0[k], mask = 0; /* result 0: the body argument */
    const ir_type *t = val_type(c, v);
    for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++) {
        if (c->use_op[u] == USE_RETURN || c->use_idx[u] != 0)
            continue;
        const ir_op *op = c->ops[c->use_op[u]];
        int64_t sz[IR_MAX_RANK];
        if (op->opcode == IR_OP_DYNAMIC_SLICE) {
            if (ir_attr_int_list(ir_op_attr(op, "slice_sizes"), sz, IR_MAX_RANK) != t->rank)
                continue;
        } else if (op->opcode == IR_OP_DYNAMIC_UPDATE_SLICE && op->n_operands > 1 &&
                   rank_of(op->operands[1]) == t->rank) {
            memcpy(sz, op->operands[1]->type->dims, sizeof *sz * (size_t)t->rank);
        } else {
            continue;
        }
        for (int d = 0; d < t->rank && d < 32; d++)
            if (sz[d] != t->dims[d])
                mask |= 1u << d;
    }
    return mask;
}

/* A carried value: (init d, yield d) -> tile<d> for its block arguments
 * and the loop's result alike, except the dims the loop steps through.
 * No pending sums: they are reduced before they enter or cross an
 * iteration. */
static void rule_carry(tb *b, uint32_t k)
{
    ir_pctx *c = b->c;
    int R = rank_of(&c->ops[k]->results[0]);
    c->carry_layer[k] = carry_layer_dims(c, k);
    for (int d = 0; d < R; d++) {
        if (d < 32 && (c->carry_layer[k] >> d & 1))
            continue;
        int8_t s[5] = {(int8_t)d, (int8_t)d, (int8_t)d, (int8_t)d, (int8_t)d};
        add_entry(b, s, 5, IR_RED_NONE);
    }
}

/* Per value, the dims that are a loop's layer dim: those of carried values
 * the loop steps through, spread over elementwise ops between values of
 * one shape (an optimizer's update of a stacked weight from its stacked
 * gradient), so that `first_divisible` picks the same dim for a stacked
 * weight and for its optimizer state. */
static int loop_dims(ir_pctx *c)
{
    c->val_loopdims = ap_calloc(c->n_vals + 1, sizeof *c->val_loopdims);
    if (!c->val_loopdims)
        return AP_ENOMEM;
    bool any = false;
    for (uint32_t k = 0; k < c->n_ops; k++) {
        if (c->op_kind[k] != PK_CARRY || !c->carry_layer[k])
            continue;
        any = true;
        for (uint32_t i = c->opd0[k]; i < c->opd0[k + 1]; i++)
            c->val_loopdims[c->opd_val[i]] |= c->carry_layer[k];
        for (uint32_t v = c->op_val0[k]; v < c->op_val0[k + 1]; v++)
            c->val_loopdims[v] |= c->carry_layer[k];
    }
    for (int pass = 0; any && pass < 16; pass++) {
        bool changed = false;
        for (uint32_t k = 0; k < c->n_ops; k++) {
            const ir_op *op = c->ops[k];
            if (c->op_kind[k] != PK_OP || op->n_results != 1)
                continue;
            if (!ir_op_info_get((ir_opcode)op->opcode)->elementwise)
                continue;
            const ir_type *t = op->results[0].type;
            uint32_t m = c->val_loopdims[c->op_val0[k]];
            for (uint32_t i = c->opd0[k]; i < c->opd0[k + 1]; i++)
                if (ir_type_equal_dims(val_type(c, c->opd_val[i]), t))
                    m |= c->val_loopdims[c->opd_val[i]];
            if (!m)
                continue;
            for (uint32_t i = c->opd0[k]; i < c->opd0[k + 1]; i++)
                if (ir_type_equal_dims(val_type(c, c->opd_val[i]), t) && (c->val_loopdims[c->opd_val[i]] | m) != c->val_loopdims[c->opd_val[i]]) {
                    c->val_loopdims[c->opd_val[i]] |= m;
                    changed = true;
                }
            if ((c->val_loopdims[c->op_val0[k]] | m) != c->val_loopdims[c->op_val0[k]]) {
                c->val_loopdims[c->op_val0[k]] |= m;
                changed = true;
            }
        }
        if (!changed)
            break;
    }
    return 0;
}

/* A case's result: every branch yields it tiled alike, and so it leaves.
 * No pending sums: they are reduced before they leave a branch. */
static void rule_merge(tb *b, uint32_t k)
{
    const ir_op *op = b->c->ops[k];
    int R = rank_of(&op->results[0]);
    int8_t s[MAXS];
    if (op->n_operands + 1 > MAXS)
        return;
    for (int d = 0; d < R; d++) {
        for (uint32_t i = 0; i <= op->n_operands; i++)
            s[i] = (int8_t)d;
        add_entry(b, s, op->n_operands + 1, IR_RED_NONE);
    }
}

/* The specs where tmr_spec reads them (tmr_entry): each entry's in the
 * entry when they fit, the others' after the entries, in one block; the
 * pool is freed.  The pool's bytes an entry holds are not kept twice. */
static int lay_out_specs(ir_pctx *c, ap_error *err)
{
    size_t head = sizeof *c->entries * c->n_entries, big = 0;
    uint32_t e, n;
    for (e = 0; e < c->n_entries; e++) {
        n = (e + 1 < c->n_entries ? c->entries[e + 1].spec : c->n_pool) - c->entries[e].spec;
        if (n > TMR_INLINE)
            big += n;
    }
    if (head + big > UINT32_MAX)
        return ap_error_set(err, AP_ELIMIT, "the TMR is too large (%zu bytes)", head + big);
    tmr_entry *t = ap_realloc(c->entries, head + big + 1);
    if (!t)
        return ap_error_set(err, AP_ENOMEM, "out of memory building the TMR");
    c->entries = t;
    int8_t *tail = (int8_t *)t + head;
    for (e = 0, big = 0; e < c->n_entries; e++) {
        n = (e + 1 < c->n_entries ? t[e + 1].spec : c->n_pool) - t[e].spec;
        const int8_t *s = c->pool + t[e].spec;
        if (n > TMR_INLINE) {
            memcpy(tail + big, s, n);
            t[e].spec = (uint32_t)(head + big);
            big += n;
        } else {
            memcpy(t[e].s, s, n);
            t[e].spec = (uint32_t)((size_t)e * sizeof *t + offsetof(tmr_entry, s));
        }
    }
    ap_free(c->pool);
    c->pool = NULL;
    c->n_pool = 0;
    return 0;
}

/* c->entry_div: per entry of a context op, the gcd of the dims its specs
 * slice (operands) or tile (results), when every one is a static dim of a
 * ranked tensor and the gcd fits in 32 bits; else 0.  Propagation asks, for
 * each entry it tries, whether each such dim, divided by the sizes of the
 * op's loops tiling it, divides by one more axis: when this gcd divides by
 * the product of the axis and every loop's size, each dim does (the loops
 * tiling a dim are some of the op's loops), so the answer is yes without
 * reading the types.  Left at 0 (no shortcut) for a mesh with a size
 * below 1, or whose largest size to the power of one more than its axes
 * passes 2^64: that product (a loop per nest slot and the axis) is never 0
 * and never wraps.  False when out of memory. */
static bool entry_divisors(ir_pctx *c)
{
    c->entry_div = ap_calloc(c->n_entries + 1, sizeof *c->entry_div);
    if (!c->entry_div)
        return false;
    uint64_t big = 1, bound = 1;
    for (int a = 0; a < c->mesh.n_axes; a++) {
        if (c->mesh.sizes[a] < 1)
            return true;
        if ((uint64_t)c->mesh.sizes[a] > big)
            big = (uint64_t)c->mesh.sizes[a];
    }
    for (size_t k = 0; k <= nest_room(c); k++) {
        if (bound > UINT64_MAX / big)
            return true;
        bound *= big;
    }
    for (uint32_t op = 0; op < c->n_ops; op++) {
        uint32_t no = c->opd0[op + 1] - c->opd0[op], nr = c->op_val0[op + 1] - c->op_val0[op];
        for (uint32_t e = c->tmr0[op]; e < c->tmr0[op + 1]; e++) {
            const int8_t *s = c->pool + c->entries[e].spec;
            uint64_t g = 0;
            bool ok = true;
            for (uint32_t i = 0; i < no + nr && ok; i++) {
                if (s[i] < 0)
                    continue;
                const ir_type *t = i < no ? c->vtype[c->opd_val[c->opd0[op] + i]] : c->vtype[c->op_val0[op] + i - no];
                ok = t && t->kind == IR_T_TENSOR && s[i] < t->rank && t->dims[s[i]] >= 0;
                if (ok)
                    g = ap_gcd(g, (uint64_t)t->dims[s[i]]);
            }
            c->entry_div[e] = ok && g <= UINT32_MAX ? (uint32_t)g : 0;
        }
    }
    return true;
}

int ir__tmr_build(ir_pctx *c, ap_error *err)
{
    tb b = {.c = c, .err = err};
    c->tmr0 = ap_malloc(sizeof *c->tmr0 * (c->n_ops + 1));
    c->carry_layer = ap_calloc(c->n_ops + 1, sizeof *c->carry_layer);
    if (!c->tmr0 || !c->carry_layer)
        return ap_error_set(err, AP_ENOMEM, "out of memory building the TMR");
    for (uint32_t i = 0; i < c->n_ops; i++) {
        c->tmr0[i] = c->n_entries;
        if (c->op_kind[i] == PK_CARRY)
            rule_carry(&b, i);
        else if (c->op_kind[i] == PK_MERGE)
            rule_merge(&b, i);
        else if (c->op_kind[i] == PK_BARRIER)
            rule_identity(&b, c->ops[i]);
        else if (c->op_kind[i] == PK_OP)
            instantiate(&b, c->ops[i]);
    }
    c->tmr0[c->n_ops] = c->n_entries;
    if (loop_dims(c) < 0)
        return ap_error_set(err, AP_ENOMEM, "out of memory building the TMR");
    /* identity ops on values: (tile d) -> tile<d>; (partial) -> sum, one
     * entry per reduction so that a pending max stays a max (in that order:
     * ir__id_partial_entry); and the atomic entry (whole) -> any */
    uint32_t max_rank = 0;
    for (uint32_t v = 0; v < c->n_vals; v++) {
        int r = rank_of(c->vals[v]);
        if (r > (int)max_rank)
            max_rank = (uint32_t)r;
    }
    c->id_rank_max = max_rank;
    c->id0 = ap_malloc(sizeof *c->id0 * (max_rank + 2));
    if (!c->id0)
        return ap_error_set(err, AP_ENOMEM, "out of memory building the TMR");
    for (uint32_t r = 0; r <= max_rank; r++) {
        c->id0[r] = c->n_entries;
        for (uint32_t d = 0; d < r; d++) {
            int8_t s[2] = {(int8_t)d, (int8_t)d};
            add_entry(&b, s, 2, IR_RED_NONE);
        }
        int8_t p[2] = {SP_PARTIAL, SP_SUM};
        for (int red = IR_RED_ADD; red <= IR_RED_OR; red++)
            add_entry(&b, p, 2, (ir_red)red);
    }
    c->id0[max_rank + 1] = c->n_entries;
    c->any_entry = c->n_entries;
    int8_t any[2] = {SP_NONE, SP_ANY};
    add_entry(&b, any, 2, IR_RED_NONE);
    if (b.oom || !entry_divisors(c))
        return ap_error_set(err, AP_ENOMEM, "out of memory building the TMR");
    return lay_out_specs(c, err);
}
