/*
 * partition.c - the PartIR:Core partition state and its actions: tile and
 * atomic (docs/partir-semantics.md); propagate is in propagate.c, the
 * context the state refers to in context.c.
 *
 * The state is data, not rewritten IR: each top-level op of the function
 * has a loop nest, an ordered list of (axis, TMR entry); each argument has
 * a value tiling; tiling and atomic actions on other values add identity
 * ops ("virtual ops") whose nests slice or replicate the value for its
 * users.  An action records what it touched (ops, axis): the next
 * propagate starts from there.
 */
#include "partir_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *ir_red_name(ir_red r)
{
    static const char *names[] = {"none", "add", "mul", "max", "min", "and", "or"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

/* =============================================================== layouts */

void ir_layout_init(ir_layout *l) { layout_init(l); }

bool ir_layout_equal(const ir_layout *a, const ir_layout *b) { return layout_equal(a, b); }

int ir_layout_dim_axes(const ir_layout *l, int d, int *axes) { return layout_dim_axes(l, d, axes); }

void ir_layout_push(ir_layout *l, int axis, int d) { layout_push(l, axis, d); }

bool ir_layout_has_partial(const ir_layout *l)
{
    for (int a = 0; a < IR_MAX_AXES; a++)
        if (l->dim[a] == IR_AX_PARTIAL)
            return true;
    return false;
}

bool ir_layout_local_dims(const ir_layout *l, const ir_mesh *mesh, const ir_type *t, int64_t *out)
{
    if (!t || t->kind != IR_T_TENSOR || t->rank < 0)
        return false;
    for (int d = 0; d < t->rank; d++)
        out[d] = t->dims[d];
    for (int a = 0; a < mesh->n_axes; a++) {
        int d = l->dim[a];
        if (d < 0)
            continue;
        if (d >= t->rank || out[d] < 0 || out[d] % mesh->sizes[a] != 0)
            return false;
        out[d] /= mesh->sizes[a];
    }
    return true;
}

void ir_layout_format(const ir_layout *l, const ir_mesh *mesh, int rank, ap_buf *b)
{
    int axes[IR_MAX_AXES];
    ap_buf_putc(b, '[');
    for (int d = 0; d < rank; d++) {
        if (d)
            ap_buf_puts(b, ", ");
        ap_buf_putc(b, '{');
        int n = layout_dim_axes(l, d, axes);
        for (int k = 0; k < n; k++)
            ap_buf_printf(b, k ? ",%s" : "%s", mesh->names[axes[k]]);
        ap_buf_putc(b, '}');
    }
    ap_buf_putc(b, ']');
    bool first = true;
    for (int a = 0; a < mesh->n_axes; a++)
        if (l->dim[a] == IR_AX_PARTIAL) {
            ap_buf_printf(b, first ? " sum{%s" : ",%s", mesh->names[a]);
            first = false;
        }
    if (!first)
        ap_buf_putc(b, '}');
}

void ir_layout_pspec(const ir_layout *l, const ir_mesh *mesh, int rank, ap_buf *b)
{
    int axes[IR_MAX_AXES];
    ap_buf_puts(b, "P(");
    for (int d = 0; d < rank; d++) {
        if (d)
            ap_buf_puts(b, ", ");
        int n = layout_dim_axes(l, d, axes);
        if (n == 0) {
            ap_buf_puts(b, "None");
        } else if (n == 1) {
            ap_buf_printf(b, "'%s'", mesh->names[axes[0]]);
        } else {
            ap_buf_putc(b, '(');
            for (int k = 0; k < n; k++)
                ap_buf_printf(b, k ? ", '%s'" : "'%s'", mesh->names[axes[k]]);
            ap_buf_putc(b, ')');
        }
    }
    if (rank == 1)
        ap_buf_putc(b, ',');
    ap_buf_putc(b, ')');
}

/* ================================================================= state */

static bool ensure_ops(ir_partition *p, uint32_t n)
{
    if (n <= p->cap_ops)
        return true;
    uint32_t cap = p->cap_ops ? p->cap_ops : 16;
    while (cap < n)
        cap *= 2;
    uint8_t *nl = ap_realloc(p->nlen, cap);
    if (!nl)
        return false;
    p->nlen = nl;
    ir_loop *ne = ap_realloc(p->nest, sizeof *ne * nest_room(p->ctx) * cap);
    if (!ne)
        return false;
    p->nest = ne;
    uint8_t *pd = ap_realloc(p->pending, cap);
    if (!pd)
        return false;
    p->pending = pd;
    uint8_t *in = ap_realloc(p->inert, cap);
    if (!in)
        return false;
    p->inert = in;
    memset(p->nlen + p->cap_ops, 0, cap - p->cap_ops);
    memset(p->pending + p->cap_ops, 0, cap - p->cap_ops);
    memset(p->inert + p->cap_ops, 0, cap - p->cap_ops);
    p->cap_ops = cap;
    return true;
}

/* A state of ctx with its arrays allocated, room for n ops (at least the
 * context's and 16 identity ops), the per-op bytes zero and the
 * arguments' layouts and the values' identity ops not set: what
 * ir_partition_new fills as a fresh state and ir_partition_clone copies
 * over (a search clones every state it keeps, so it writes them once).
 * The caller frees *out; NULL when out of memory. */
static ir_partition *partition_alloc(const ir_pctx *ctx, uint32_t n)
{
    ir_partition *p = ap_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->ctx = ctx;
    p->arg_layout = ap_malloc(sizeof *p->arg_layout * (ctx->n_args + 1));
    p->vop_of = ap_malloc(sizeof *p->vop_of * (ctx->n_vals + 1));
    if (!p->arg_layout || !p->vop_of || !ensure_ops(p, n > ctx->n_ops + 16 ? n : ctx->n_ops + 16)) {
        ir_partition_free(p);
        return NULL;
    }
    return p;
}

int ir_partition_new(const ir_pctx *ctx, ir_partition **out, ap_error *err)
{
    ir_partition *p = partition_alloc(ctx, 0);
    *out = NULL;
    if (!p)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    for (uint32_t a = 0; a < ctx->n_args; a++)
        layout_init(&p->arg_layout[a]);
    /* nothing is tiled or looped over yet: every op is inert along every
     * axis (propagate.c) */
    memset(p->inert, (int)((1u << ctx->mesh.n_axes) - 1), ctx->n_ops);
    for (uint32_t v = 0; v < ctx->n_vals; v++)
        p->vop_of[v] = -1;
    *out = p;
    return 0;
}

void ir_partition_free(ir_partition *p)
{
    if (!p)
        return;
    ap_free(p->nlen);
    ap_free(p->nest);
    ap_free(p->pending);
    ap_free(p->inert);
    ap_free(p->arg_layout);
    ap_free(p->vop_of);
    ap_free(p->vops);
    ap_free(p->blocked);
    ap_free(p->log);
    ap_free(p);
}

int ir_partition_clone(const ir_partition *src, ir_partition **out, ap_error *err)
{
    uint32_t n = src->ctx->n_ops + src->n_vops;
    ir_partition *p = partition_alloc(src->ctx, n);
    *out = NULL;
    if (!p)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    memcpy(p->nlen, src->nlen, n);
    memcpy(p->pending, src->pending, n);
    memcpy(p->inert, src->inert, n);
    memcpy(p->nest, src->nest, sizeof *p->nest * nest_room(src->ctx) * n);
    memcpy(p->arg_layout, src->arg_layout, sizeof *p->arg_layout * src->ctx->n_args);
    memcpy(p->vop_of, src->vop_of, sizeof *p->vop_of * src->ctx->n_vals);
    if (src->n_vops) {
        p->vops = ap_malloc(sizeof *p->vops * src->n_vops);
        if (!p->vops)
            goto oom;
        memcpy(p->vops, src->vops, sizeof *p->vops * src->n_vops);
    }
    p->n_vops = src->n_vops;
    memcpy(p->axis_seq, src->axis_seq, sizeof p->axis_seq);
    p->n_axis_seq = src->n_axis_seq;
    p->quiet = src->quiet;
    p->hash = src->hash;
    if (src->n_log) {
        p->log = ap_malloc(sizeof *p->log * src->n_log);
        if (!p->log)
            goto oom;
        memcpy(p->log, src->log, sizeof *p->log * src->n_log);
        p->n_log = p->cap_log = src->n_log;
    }
    if (src->n_blocked) {
        p->blocked = ap_malloc(sizeof *p->blocked * src->n_blocked);
        if (!p->blocked)
            goto oom;
        memcpy(p->blocked, src->blocked, sizeof *p->blocked * src->n_blocked);
        p->n_blocked = p->cap_blocked = src->n_blocked;
    }
    *out = p;
    return 0;
oom:
    ir_partition_free(p);
    return ap_error_set(err, AP_ENOMEM, "out of memory");
}

/* Grows *v (of elements of `size` bytes, capacity *cap) to hold n. */
static bool reserve(void **v, uint32_t *cap, uint32_t n, size_t size)
{
    if (n <= *cap)
        return true;
    void *nv = ap_realloc(*v, size * n);
    if (!nv)
        return false;
    *v = nv;
    *cap = n;
    return true;
}

int ir_partition_copy(ir_partition *dst, const ir_partition *src, ap_error *err)
{
    if (dst == src)
        return 0;
    if (dst->ctx != src->ctx)
        return ap_error_set(err, AP_EINVALID, "copying a partition state of another function");
    const ir_pctx *c = src->ctx;
    uint32_t n = c->n_ops + src->n_vops, had = c->n_ops + dst->n_vops;
    if (!ensure_ops(dst, n))
        goto oom;
    /* vops: exactly as many as src (get_vop grows them one at a time) */
    if (src->n_vops != dst->n_vops) {
        vop *nv = ap_realloc(dst->vops, sizeof *nv * (src->n_vops + 1));
        if (!nv)
            goto oom;
        dst->vops = nv;
    }
    uint32_t cap_log = dst->cap_log, cap_blocked = dst->cap_blocked;
    if (!reserve((void **)&dst->log, &cap_log, src->n_log, sizeof *dst->log) ||
        !reserve((void **)&dst->blocked, &cap_blocked, src->n_blocked, sizeof *dst->blocked))
        goto oom;
    dst->cap_log = cap_log;
    dst->cap_blocked = cap_blocked;
    memcpy(dst->nlen, src->nlen, n);
    memcpy(dst->pending, src->pending, n);
    memcpy(dst->inert, src->inert, n);
    memcpy(dst->nest, src->nest, sizeof *dst->nest * nest_room(c) * n);
    if (had > n) {
        /* ops past src's: as a fresh state has them */
        memset(dst->nlen + n, 0, had - n);
        memset(dst->pending + n, 0, had - n);
        memset(dst->inert + n, 0, had - n);
    }
    memcpy(dst->arg_layout, src->arg_layout, sizeof *dst->arg_layout * c->n_args);
    memcpy(dst->vop_of, src->vop_of, sizeof *dst->vop_of * c->n_vals);
    if (src->n_vops)
        memcpy(dst->vops, src->vops, sizeof *dst->vops * src->n_vops);
    dst->n_vops = src->n_vops;
    memcpy(dst->axis_seq, src->axis_seq, sizeof dst->axis_seq);
    dst->n_axis_seq = src->n_axis_seq;
    dst->quiet = src->quiet;
    dst->hash = src->hash;
    if (src->n_log)
        memcpy(dst->log, src->log, sizeof *dst->log * src->n_log);
    dst->n_log = src->n_log;
    if (src->n_blocked)
        memcpy(dst->blocked, src->blocked, sizeof *dst->blocked * src->n_blocked);
    dst->n_blocked = src->n_blocked;
    return 0;
oom:
    return ap_error_set(err, AP_ENOMEM, "out of memory");
}

const ir_pctx *ir_partition_ctx(const ir_partition *p) { return p->ctx; }

/* ---------------------------------------------------------- layouts */

void ir_partition_value_layout(const ir_partition *p, const ir_value *v, ir_layout *out)
{
    uint32_t id = ir__value_id(p->ctx, v);
    if (id == VAL_NONE)
        layout_init(out);
    else
        ir__seen_layout(p, id, out);
}

int ir_partition_op_nest(const ir_partition *p, uint32_t op, int *axes, char *kinds, int *dims)
{
    const ir_loop *n = nest_of(p, op);
    uint32_t no = op_n_operands(p, op);
    for (int k = 0; k < p->nlen[op]; k++) {
        int8_t s = op_n_results(p, op) ? tmr_spec(p->ctx, n[k].entry)[no] : SP_ANY;
        axes[k] = n[k].axis;
        kinds[k] = s >= 0 ? 't' : s == SP_SUM ? 's' : 'a';
        dims[k] = s >= 0 ? s : -1;
    }
    return p->nlen[op];
}

/* ------------------------------------------------------------- log */

void ir__log_action(ir_partition *p, char kind, uint32_t val, int dim, int axis)
{
    if (p->n_log == p->cap_log) {
        uint32_t cap = p->cap_log ? p->cap_log * 2 : 32;
        action_rec *v = ap_realloc(p->log, sizeof *v * cap);
        if (!v)
            return;
        p->log = v;
        p->cap_log = cap;
    }
    p->log[p->n_log++] = (action_rec){kind, val, dim, axis};
}

/* ============================================================== actions */

/* An action along axis changed how value v is seen: its producer, identity
 * op and users need another look at the next propagate, which takes the
 * axis in the order the actions named it. */
static void touch_value(ir_partition *p, uint32_t v, int axis)
{
    const ir_pctx *c = p->ctx;
    bool listed = false;
    for (int k = 0; k < p->n_axis_seq; k++)
        listed |= p->axis_seq[k] == axis;
    if (!listed && p->n_axis_seq < IR_MAX_AXES)
        p->axis_seq[p->n_axis_seq++] = (uint8_t)axis;
    if (c->val_op[v] >= 0)
        p->pending[c->val_op[v]] = 1;
    if (p->vop_of[v] >= 0)
        p->pending[vop_id(p, (uint32_t)p->vop_of[v])] = 1;
    for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++)
        if (c->use_op[u] != USE_RETURN)
            p->pending[c->use_op[u]] = 1;
}

/* The op index of op, or of the nearest op around it that the context
 * knows (an op holding it in a region it runs whole); a flattened while or
 * a get_tuple_element seen through counts as the op after it.
 * UINT32_MAX for the return or an op outside the function. */
static uint32_t top_level_index(const ir_pctx *c, const ir_op *op)
{
    const ir_block *body = ir_func_entry(c->func);
    while (op) {
        uint32_t k;
        if (ir__map_get(&c->op_index, op, &k))
            return k;
        if (op->parent == body)
            return UINT32_MAX;
        op = op->parent && op->parent->parent ? op->parent->parent->parent : NULL;
    }
    return UINT32_MAX;
}

/* Whether op lies in one of anc's regions, at any depth. */
static bool inside(const ir_op *op, const ir_op *anc)
{
    for (const ir_op *o = op; o && o->parent && o->parent->parent; o = o->parent->parent->parent)
        if (o->parent->parent->parent == anc)
            return true;
    return false;
}

/* N in the printed name %N of op k's results, as `autopart parse` prints
 * them and the schedule parser reads them (through the printer,
 * ir__printed_value).  The printer numbers the ops inside regions it shows
 * and not those it elides (a reduce's `applies` body), so N lies between
 * the count of the context's ops with results before k and the count of
 * results printed before k at most; a binary search asks the printer.
 * Costs a few prints of the function: for messages and schedule text
 * only. */
static uint32_t printed_number_of(const ir_pctx *c, uint32_t k, const ir_op *target)
{
    uint32_t lo = 0, hi = c->printed_max[k];
    for (uint32_t j = 0; j < k; j++)
        lo += c->op_kind[j] == PK_OP && c->ops[j]->n_results > 0;
    if (lo > hi)
        lo = hi;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const ir_value *v = ir__printed_value(c->func, mid, 0);
        uint32_t owner = v && v->def ? top_level_index(c, v->def) : UINT32_MAX;
        if (owner != UINT32_MAX && owner < k)
            lo = mid + 1;
        else if (owner == k && v->def == target)
            return mid;
        else if (owner == k && !inside(v->def, target))
            lo = mid + 1; /* seen through just before op k (a tuple, a get_tuple_element): the
                             context maps it to the op that follows it */
        else
            hi = mid; /* numbered after op k: inside its regions, or later */
    }
    return lo;
}

static uint32_t printed_number(const ir_pctx *c, uint32_t k) { return printed_number_of(c, k, c->ops[k]); }

/* A value as schedules name it: an argument by its location name or
 * %argN, a result as `autopart parse` prints it (%N, or %N#k for one of
 * several), which the schedule parser reads back.  A loop's carried value
 * is named by the loop's result when it has one of its own (a variadic
 * while), else described. */
static void value_name(const ir_partition *p, uint32_t v, char *buf, size_t n)
{
    const ir_pctx *c = p->ctx;
    const char *loc = c->val_op[v] < 0 ? ir_func_arg_name(c->func, v) : NULL;
    if (loc) {
        snprintf(buf, n, "%s", loc);
    } else if (c->val_op[v] < 0) {
        snprintf(buf, n, "%%arg%u", v);
    } else if (c->op_kind[c->val_op[v]] == PK_MERGE || c->op_kind[c->val_op[v]] == PK_BARRIER) {
        uint32_t op = (uint32_t)c->val_op[v];
        const pgroup *g = &c->groups[c->op_group[op]];
        uint32_t j = op - (g->is_barrier ? g->carry0 : g->merge0), number = printed_number_of(c, g->carry0, g->src);
        if (g->n > 1)
            snprintf(buf, n, "%%%u#%u", number, j);
        else
            snprintf(buf, n, "%%%u", number);
    } else if (c->op_kind[c->val_op[v]] == PK_CARRY) {
        uint32_t op = (uint32_t)c->val_op[v], role = v - c->op_val0[op];
        const pgroup *g = &c->groups[c->op_group[op]];
        uint32_t i = op - g->carry0;
        static const char *const roles[] = {"in the body", "in the condition", "after the loop"};
        if (!g->tuple_form && role == 2) {
            uint32_t number = printed_number_of(c, g->carry0, g->src);
            if (ir__printed_value(c->func, number, i) == &g->src->results[i]) {
                if (g->n > 1)
                    snprintf(buf, n, "%%%u#%u", number, i);
                else
                    snprintf(buf, n, "%%%u", number);
                return;
            }
        }
        snprintf(buf, n, "carried value #%u of the while at %u:%u (%s)", i, g->src->src_line, g->src->src_col,
                 roles[role < 3 ? role : 0]);
    } else {
        uint32_t op = (uint32_t)c->val_op[v], number = printed_number(c, op);
        if (c->ops[op]->n_results > 1)
            snprintf(buf, n, "%%%u#%u", number, v - c->op_val0[op]);
        else
            snprintf(buf, n, "%%%u", number);
    }
}

/* Refuses action `what` on value v: "tile %5: <why>".  The name is made
 * here only, and not at all without `err` (a caller trying actions that may
 * be refused, as a search does, passes NULL), since naming a result asks
 * the printer. */
static int refuse(const ir_partition *p, const char *what, uint32_t v, ap_error *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int refuse(const ir_partition *p, const char *what, uint32_t v, ap_error *err, const char *fmt, ...)
{
    if (!err)
        return AP_EINVALID;
    char name[160], why[300];
    value_name(p, v, name, sizeof name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ap_error_set(err, AP_EINVALID, "%s %s: %s", what, name, why);
}

/* The identity op of value v, made on first use: its nest reproduces how
 * v is produced so that users see v unchanged until loops are added. */
static int get_vop(ir_partition *p, uint32_t v, ap_error *err)
{
    if (p->vop_of[v] >= 0)
        return p->vop_of[v];
    const ir_pctx *c = p->ctx;
    if (!ensure_ops(p, c->n_ops + p->n_vops + 1))
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    vop *nv = ap_realloc(p->vops, sizeof *nv * (p->n_vops + 1));
    if (!nv)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    p->vops = nv;
    uint32_t k = p->n_vops++;
    const ir_type *t = val_type(c, v);
    p->vops[k].val = v;
    p->vops[k].rank = t && t->kind == IR_T_TENSOR && t->rank > 0 ? (uint32_t)t->rank : 0;
    uint32_t op = vop_id(p, k);
    p->nlen[op] = 0;
    p->inert[op] = 0;
    p->vop_of[v] = (int32_t)k;
    p->hash += state_hash_term(HASH_VOP, v, 0, 0);
    if (c->val_op[v] >= 0) {
        ir_layout l;
        ir__produced_layout(p, v, &l);
        uint32_t lo, hi;
        op_entries(p, op, &lo, &hi);
        int axes[IR_MAX_AXES];
        for (int d = 0; d < (int)p->vops[k].rank; d++) {
            int na = layout_dim_axes(&l, d, axes);
            for (int q = 0; q < na; q++)
                ir__push_loop(p, op, axes[q], lo + (uint32_t)d);
        }
        uint32_t r = p->vops[k].rank > c->id_rank_max ? c->id_rank_max : p->vops[k].rank;
        for (int a = 0; a < c->mesh.n_axes; a++)
            if (l.dim[a] == IR_AX_PARTIAL)
                ir__push_loop(p, op, a, ir__id_partial_entry(c, r, (ir_red)l.red[a]));
    } else {
        /* an argument's identity op passes its tiling through */
        uint32_t lo, hi;
        op_entries(p, op, &lo, &hi);
        int axes[IR_MAX_AXES];
        for (int d = 0; d < (int)p->vops[k].rank; d++) {
            int na = layout_dim_axes(&p->arg_layout[v], d, axes);
            for (int q = 0; q < na; q++)
                ir__push_loop(p, op, axes[q], lo + (uint32_t)d);
        }
    }
    return (int)k;
}

int ir_first_divisible_dim(const ir_partition *p, const ir_value *val, int axis)
{
    /* ir__loop_dim_op: partir_int.h */
    uint32_t v = ir__value_id(p->ctx, val);
    if (v == VAL_NONE)
        return -1;
    const ir_type *t = val_type(p->ctx, v);
    ir_layout l;
    ir__seen_layout(p, v, &l);
    if (!t || t->kind != IR_T_TENSOR || l.dim[axis] != IR_AX_NONE)
        return -1;
    for (int d = 0; d < t->rank; d++) {
        int64_t local = local_dim(p->ctx, t, &l, d);
        /* never the dim a loop steps through (a stacked weight's layers) */
        if (local > 0 && local % p->ctx->mesh.sizes[axis] == 0 && !(d < 32 && (p->ctx->val_loopdims[v] >> d & 1)))
            return d;
    }
    return -1;
}

int ir_tile(ir_partition *p, const ir_value *val, int dim, int axis, ap_error *err)
{
    const ir_pctx *c = p->ctx;
    uint32_t v = ir__value_id(c, val);
    if (v == VAL_NONE)
        return ap_error_set(err, AP_EINVALID, "tile: the value is not in @%s", ir_func_name(c->func));
    if (axis < 0 || axis >= c->mesh.n_axes)
        return refuse(p, "tile", v, err, "no mesh axis #%d", axis);
    const ir_type *t = val_type(c, v);
    if (!t || t->kind != IR_T_TENSOR || t->rank < 0)
        return refuse(p, "tile", v, err, "only ranked tensors can be tiled");
    if (dim < 0 || dim >= t->rank)
        return refuse(p, "tile", v, err, "dim %d is out of range for a rank-%d tensor", dim, t->rank);
    if (t->dims[dim] < 0)
        return refuse(p, "tile", v, err, "dim %d is dynamic ('?') and cannot be partitioned", dim);
    ir_layout l;
    ir__seen_layout(p, v, &l);
    const char *an = c->mesh.names[axis];
    if (l.dim[axis] >= 0)
        return refuse(p, "tile", v, err, "axis '%s' already tiles dim %d", an, l.dim[axis]);
    if (l.dim[axis] == IR_AX_PARTIAL)
        return refuse(p, "tile", v, err, "it is a pending %s along axis '%s'",
                      l.red[axis] == IR_RED_ADD ? "sum" : ir_red_name((ir_red)l.red[axis]), an);
    if (p->vop_of[v] >= 0) {
        uint32_t op = vop_id(p, (uint32_t)p->vop_of[v]);
        int at = nest_find(p, op, axis);
        if (at >= 0 && nest_of(p, op)[at].entry == c->any_entry)
            return refuse(p, "tile", v, err, "it is atomic along axis '%s'", an);
    }
    int32_t loop_op = ir__loop_dim_op(c, v, dim);
    if (loop_op >= 0) {
        const pgroup *g = &c->groups[c->op_group[loop_op]];
        return refuse(p, "tile", v, err,
                      "dim %d is the dim the while loop at %u:%u steps through one slice per iteration (carried value "
                      "#%u); tiling it would pipeline the loop, which is not supported",
                      dim, g->src->src_line, g->src->src_col, (unsigned)loop_op - g->carry0);
    }
    int64_t local = local_dim(c, t, &l, dim);
    if (local % c->mesh.sizes[axis] != 0)
        return refuse(p, "tile", v, err, "dim %d (local size %lld) is not divisible by axis '%s' of size %lld", dim,
                      (long long)local, an, (long long)c->mesh.sizes[axis]);
    if (c->val_op[v] < 0 && p->vop_of[v] < 0) {
        ir__arg_layout_push(p, v, axis, dim);
    } else {
        int k = get_vop(p, v, err);
        if (k < 0)
            return k;
        uint32_t op = vop_id(p, (uint32_t)k);
        uint32_t lo, hi;
        op_entries(p, op, &lo, &hi);
        if (c->val_op[v] < 0) /* an atomic argument: tile the argument itself */
            ir__arg_layout_push(p, v, axis, dim);
        if (!ir__push_loop(p, op, axis, lo + (uint32_t)dim))
            return refuse(p, "tile", v, err, "too many axes");
    }
    touch_value(p, v, axis);
    ir__log_action(p, 't', v, dim, axis);
    return 0;
}

int ir_atomic(ir_partition *p, const ir_value *val, int axis, ap_error *err)
{
    const ir_pctx *c = p->ctx;
    uint32_t v = ir__value_id(c, val);
    if (v == VAL_NONE)
        return ap_error_set(err, AP_EINVALID, "atomic: the value is not in @%s", ir_func_name(c->func));
    if (axis < 0 || axis >= c->mesh.n_axes)
        return refuse(p, "atomic", v, err, "no mesh axis #%d", axis);
    /* Actions never undo earlier decisions: a value that users see tiled
     * along the axis, or as a pending sum along it, cannot become
     * replicated along it (that would drop the tiling, or leave users that
     * take the pieces or the summands without them). */
    ir_layout l;
    ir__seen_layout(p, v, &l);
    const char *an = c->mesh.names[axis];
    if (l.dim[axis] >= 0)
        return refuse(p, "atomic", v, err, "it is already tiled along axis '%s' (dim %d); an action cannot undo that",
                      an, l.dim[axis]);
    if (l.dim[axis] == IR_AX_PARTIAL)
        return refuse(p, "atomic", v, err, "it is a pending %s along axis '%s'; an action cannot undo that",
                      l.red[axis] == IR_RED_ADD ? "sum" : ir_red_name((ir_red)l.red[axis]), an);
    int k = get_vop(p, v, err);
    if (k < 0)
        return k;
    uint32_t op = vop_id(p, (uint32_t)k);
    if (nest_find(p, op, axis) >= 0)
        return 0; /* already atomic along the axis (nothing else loops over it) */
    if (!ir__push_loop(p, op, axis, c->any_entry))
        return refuse(p, "atomic", v, err, "too many axes");
    touch_value(p, v, axis);
    ir__log_action(p, 'a', v, -1, axis);
    return 0;
}

/* The schedule as applied: tile/atomic actions and propagates. */
void ir_partition_schedule(const ir_partition *p, ap_buf *b)
{
    const ir_pctx *c = p->ctx;
    bool *dup = p->n_log ? ir_schedule_shared_arg_names(c->func) : NULL;
    for (uint32_t i = 0; i < p->n_log; i++) {
        const action_rec *r = &p->log[i];
        char name[160];
        if (r->kind == 'p') {
            ap_buf_puts(b, "propagate\n");
            continue;
        }
        const char *loc = c->val_op[r->val] < 0 ? ir_func_arg_name(c->func, r->val) : NULL;
        if (loc && (!dup || dup[r->val])) /* a name that is not this argument's alone */
            snprintf(name, sizeof name, "%%arg%u", r->val);
        else if (loc && strpbrk(loc, " \t;#"))
            snprintf(name, sizeof name, "\"%s\"", loc);
        else
            value_name(p, r->val, name, sizeof name);
        if (r->kind == 't')
            ap_buf_printf(b, "tile %s %d %s\n", name, r->dim, c->mesh.names[r->axis]);
        else
            ap_buf_printf(b, "atomic %s %s\n", name, c->mesh.names[r->axis]);
    }
    ap_free(dup);
}
