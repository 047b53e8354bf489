/*
 * propagate.c - PartIR's propagate: loops added to ops, one axis at a
 * time, to a fixpoint (docs/partir-semantics.md).
 *
 * Ops are visited in program order through a priority queue so long
 * forward and backward chains cost one visit per change.  The axes go in
 * the order the actions since the last propagate named them, and a value
 * tiled [a, b] on a dim counts as tiled along a, then (once a loop over a
 * slices it) along b: tiling a dim along several axes before one propagate
 * gives the state that propagating after each tiling gives.  What blocks
 * propagation is recorded with its reason (ir_partition_blocked) unless
 * the state is quiet.
 */
#include "partir_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXS_OPD 64 /* operands an op may have to be partitioned */
#define SHARD_MARK 0xff /* in a propagate round's marks: shard_args_by_uses (propagate_axis marks its axis's turn) */

/* The layout operand i of op sees: through the value's identity op, except
 * for that identity op itself. */
static void operand_layout(const ir_partition *p, uint32_t op, uint32_t i, ir_layout *out)
{
    uint32_t v = operand_val(p, op, i);
    if (is_vop(p, op))
        ir__produced_layout(p, v, out);
    else
        ir__seen_layout(p, v, out);
}

/* ------------------------------------------------------------- blocked */

static void record_blocked(ir_partition *p, ir_block_kind kind, uint32_t op, int axis, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void record_blocked(ir_partition *p, ir_block_kind kind, uint32_t op, int axis, const char *fmt, ...)
{
    ir_blocked *b = NULL;
    for (uint32_t i = p->n_blocked; i-- > 0;)
        if (p->blocked[i].op == op && p->blocked[i].axis == axis) {
            b = &p->blocked[i];
            break;
        }
    if (!b) {
        if (p->n_blocked == p->cap_blocked) {
            uint32_t cap = p->cap_blocked ? p->cap_blocked * 2 : 32;
            ir_blocked *v = ap_realloc(p->blocked, sizeof *v * cap);
            if (!v)
                return; /* diagnostics are best effort */
            p->blocked = v;
            p->cap_blocked = cap;
        }
        b = &p->blocked[p->n_blocked++];
    }
    b->kind = kind;
    b->op = op;
    b->axis = axis;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why, sizeof b->why, fmt, ap);
    va_end(ap);
}

void ir_partition_set_diagnostics(ir_partition *p, bool on) { p->quiet = !on; }

const ir_blocked *ir_partition_blocked(const ir_partition *p, uint32_t *n)
{
    *n = p->n_blocked;
    return p->blocked;
}

/* ========================================================== propagation */

/* What a visit to an op reads again and again (its operands, every TMR
 * entry it tries, each operand's and result's tiling): the operands'
 * values, the results' types, and per loop of its nest the loop's axis,
 * that axis's size and the entry's specs. */
typedef struct opinfo {
    uint32_t no, nr;
    const uint32_t *opd;          /* operand values */
    const ir_type *const *rtype;  /* result types */
    int len;
    uint8_t axis[IR_MAX_AXES];
    int64_t size[IR_MAX_AXES];
    const int8_t *spec[IR_MAX_AXES];
    uint64_t prod; /* the product of size[] (c->entry_div's mesh bound keeps it small) */
} opinfo;

static void opinfo_init(const ir_partition *p, uint32_t op, opinfo *o)
{
    const ir_pctx *c = p->ctx;
    o->no = op_n_operands(p, op);
    o->nr = op_n_results(p, op);
    if (is_vop(p, op)) {
        o->opd = &p->vops[op - c->n_ops].val;
        o->rtype = &c->vtype[*o->opd]; /* the identity op's result is its operand's value */
    } else {
        o->opd = &c->opd_val[c->opd0[op]];
        o->rtype = &c->vtype[c->op_val0[op]];
    }
    const ir_loop *nest = nest_of(p, op);
    o->len = p->nlen[op];
    o->prod = 1;
    for (int k = 0; k < o->len; k++) {
        o->axis[k] = nest[k].axis;
        o->size[k] = c->mesh.sizes[nest[k].axis];
        o->spec[k] = tmr_spec(c, nest[k].entry);
        o->prod *= (uint64_t)o->size[k];
    }
}

/* Can entry e be added to op's nest as a loop over axis: every dim it
 * slices or tiles divides by the axis size after the axes already there? */
static bool entry_divisible(const ir_partition *p, const opinfo *o, uint32_t e, int axis, ir_block_kind *why, int *bad)
{
    const ir_pctx *c = p->ctx;
    int64_t n = c->mesh.sizes[axis];
    /* every dim divides by the axis and all the op's loops together:
     * yes, without the types (c->entry_div; an identity op's entries have
     * no shortcut) */
    uint32_t g = c->entry_div[e];
    if (g && g % (o->prod * (uint64_t)n) == 0)
        return true;
    const int8_t *s = tmr_spec(c, e);
    uint32_t no = o->no, nr = o->nr;
    /* local_dim of the needed (result) layout, read off the nest without
     * building the layout: the loops whose entry tiles slot i's dim s[i]
     * (this runs for every entry of every op propagation visits) */
    for (uint32_t i = 0; i < no + nr; i++) {
        if (s[i] < 0)
            continue;
        const ir_type *t = i < no ? val_type(c, o->opd[i]) : o->rtype[i - no];
        int64_t local = -1;
        if (t && t->kind == IR_T_TENSOR && s[i] < t->rank && t->dims[s[i]] >= 0) {
            local = t->dims[s[i]];
            for (int k = 0; k < o->len; k++)
                if (o->spec[k][i] == s[i])
                    local /= o->size[k];
        }
        if (local < 0) {
            *why = IR_BLK_DYNAMIC;
            *bad = s[i];
            return false;
        }
        if (local % n != 0) {
            *why = IR_BLK_INDIVISIBLE;
            *bad = s[i];
            return false;
        }
    }
    return true;
}

/* Deep tiling, one step or several: do the axes `la` (nl of them, major
 * to minor) that tile a dim one way start with the `ns` axes `sa` that
 * tile it the other, then `axis`, then possibly more (minor) axes?
 * A value tiled [a, b] on a dim is "tiled along a" for an op that slices
 * nothing of it yet, and "along b" for one that slices it along a: the same
 * answers as when the value was tiled along a, propagated, then along b
 * (docs/partir-semantics.md).  The axes after `axis` only mean that the
 * op takes a larger piece until they propagate too. */
static bool axes_follow(const int *la, int nl, const int *sa, int ns, int axis)
{
    if (nl < ns + 1 || la[ns] != axis)
        return false;
    for (int k = 0; k < ns; k++)
        if (la[k] != sa[k])
            return false;
    return true;
}

/* The axes tiling dim d (>= 0) of slot `slot` of op (an operand as op
 * needs it, a result as op produces it), major to minor: what
 * layout_dim_axes reads off nest_layout(p, op, slot), without building
 * the layout (nest_layout gives each loop that tiles d the place after
 * those before it in the nest). */
static int nest_dim_axes(const ir_partition *p, uint32_t op, uint32_t slot, int d, int *axes)
{
    const ir_loop *nest = nest_of(p, op);
    int n = 0;
    for (int k = 0; k < p->nlen[op]; k++)
        if (loop_spec(p->ctx, &nest[k], slot) == d)
            axes[n++] = nest[k].axis;
    return n;
}

/* nest_dim_axes of the op o describes. */
static int own_dim_axes(const opinfo *o, uint32_t slot, int d, int *axes)
{
    int n = 0;
    for (int k = 0; k < o->len; k++)
        if (o->spec[k][slot] == d)
            axes[n++] = o->axis[k];
    return n;
}

enum { ST_NONE, ST_TILED, ST_PARTIAL, ST_MISMATCH };

typedef struct opd_status {
    uint8_t st;
    int8_t dim;
    uint8_t red;
} opd_status;

/* How operand i of op arrives along axis (op has no loop over it), read
 * off the one loop over axis of the op that makes what op sees (through
 * the value's identity op, except for that identity op itself: as
 * operand_layout) without building a layout: most operands an op's visit
 * looks at are whole along the axis, and this answers that in a few
 * loads.  For a tiled dim: whether the axes tiling it as it comes follow
 * those op slices it along (axes_follow). */
static opd_status status_of(const ir_partition *p, const opinfo *o, uint32_t op, uint32_t i, int axis)
{
    const ir_pctx *c = p->ctx;
    opd_status r = {ST_NONE, -1, 0};
    uint32_t v = o->opd[i], src, slot;
    int la[IR_MAX_AXES], sa[IR_MAX_AXES], nl, d;
    if (!is_vop(p, op) && p->vop_of[v] >= 0) {
        src = vop_id(p, (uint32_t)p->vop_of[v]);
        slot = 1; /* the identity op's result */
    } else if (c->val_op[v] < 0) {
        const ir_layout *al = &p->arg_layout[v];
        d = al->dim[axis];
        if (d == IR_AX_NONE)
            return r;
        if (d == IR_AX_PARTIAL) {
            r.st = ST_PARTIAL;
            r.red = al->red[axis];
            return r;
        }
        nl = layout_dim_axes(al, d, la);
        goto tiled;
    } else {
        src = (uint32_t)c->val_op[v];
        slot = c->opd0[src + 1] - c->opd0[src] + (v - c->op_val0[src]); /* op_n_operands of a real op */
    }
    int at = nest_find(p, src, axis);
    if (at < 0)
        return r;
    const ir_loop *l = &nest_of(p, src)[at];
    uint32_t e = l->entry;
    int8_t s = loop_spec(c, l, slot);
    if (s == SP_SUM) {
        r.st = ST_PARTIAL;
        r.red = c->entries[e].red;
        return r;
    }
    if (s < 0)
        return r;
    d = s;
    nl = nest_dim_axes(p, src, slot, d, la);
tiled:
    r.dim = (int8_t)d;
    r.st = axes_follow(la, nl, sa, own_dim_axes(o, i, d, sa), axis) ? ST_TILED : ST_MISMATCH;
    return r;
}

/* Does value v (partial) feed only op? Then its sum may flow through op
 * without another use needing a second reduction of it.  Another use
 * reducing it would add the summands in another order than op's users
 * see them (sum(0.3 * x_i) against 0.3 * sum(x_i)): x == max(x) then
 * holds nowhere.  A region of an op run whole that reads v is such a use
 * (it needs v whole), though use0 does not list it. */
static bool single_consumer(const ir_partition *p, uint32_t v, uint32_t op)
{
    const ir_pctx *c = p->ctx;
    if (is_vop(p, op))
        return true;
    if (c->val_captured[v])
        return false;
    for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++)
        if (c->use_op[u] != op)
            return false;
    return true;
}

typedef struct fwd_result {
    int n_full, n_inf;
    uint32_t full, inf; /* the entry when unique */
    bool any_status;
    bool none_along; /* every operand arrives whole along the axis (ST_NONE; not known: false) */
} fwd_result;

/* Why carried value `op` (a PK_CARRY) takes no loop over axis: which
 * carried value, and what its entry and its yield disagree on. */
static void carry_blocked(ir_partition *p, uint32_t op, int axis, const opd_status *st)
{
    const ir_pctx *c = p->ctx;
    const pgroup *g = &c->groups[c->op_group[op]];
    uint32_t i = op - g->carry0;
    const char *an = c->mesh.names[axis];
    unsigned line = g->src->src_line, col = g->src->src_col;
    for (int k = 0; k < 2; k++)
        if (st[k].st == ST_TILED && st[k].dim < 32 && (c->carry_layer[op] >> st[k].dim & 1)) {
            record_blocked(p, IR_BLK_NO_RULE, op, axis,
                           "carried value #%u of the while at %u:%u: dim %d (along '%s') is the dim the loop steps "
                           "through one slice per iteration; tiling it would pipeline the loop, which is not supported",
                           i, line, col, st[k].dim, an);
            return;
        }
    if (st[0].st == ST_PARTIAL || st[1].st == ST_PARTIAL) {
        record_blocked(p, IR_BLK_CONFLICT, op, axis,
                       "carried value #%u of the while at %u:%u %s a pending sum over '%s': it is reduced first", i, line,
                       col, st[0].st == ST_PARTIAL ? "enters as" : "is yielded as", an);
        return;
    }
    if (st[0].st == ST_TILED && st[1].st == ST_TILED && st[0].dim != st[1].dim) {
        record_blocked(p, IR_BLK_CONFLICT, op, axis,
                       "carried value #%u of the while at %u:%u enters tiled on dim %d along '%s' but the body yields it "
                       "tiled on dim %d: a carried value has one layout on entry, in the body and on exit",
                       i, line, col, st[0].dim, an, st[1].dim);
        return;
    }
    record_blocked(p, IR_BLK_CONFLICT, op, axis,
                   "carried value #%u of the while at %u:%u: its entry (%s) and the body's yield (%s) along '%s' give no "
                   "one layout",
                   i, line, col, st[0].st == ST_TILED ? "tiled" : st[0].st == ST_MISMATCH ? "tiled otherwise" : "whole",
                   st[1].st == ST_TILED ? "tiled" : st[1].st == ST_MISMATCH ? "tiled otherwise" : "whole", an);
}

static void forward_analyze(ir_partition *p, const opinfo *o, uint32_t op, int axis, fwd_result *res, bool record)
{
    const ir_pctx *c = p->ctx;
    uint32_t no = o->no;
    opd_status st[MAXS_OPD];
    memset(res, 0, sizeof *res);
    if (no > MAXS_OPD)
        return;
    bool tiled = false, partial = false, other = false;
    for (uint32_t i = 0; i < no; i++) {
        st[i] = status_of(p, o, op, i, axis);
        tiled |= st[i].st == ST_TILED;
        partial |= st[i].st == ST_PARTIAL;
        other |= st[i].st != ST_NONE;
    }
    res->none_along = !other;
    if (!tiled && !partial)
        return;
    res->any_status = true;
    uint32_t lo, hi;
    op_entries(p, op, &lo, &hi);
    int first_bad_dim = -1;
    ir_block_kind bad_kind = IR_BLK_CONFLICT;
    bool any_agree = false;
    for (uint32_t e = lo; e < hi; e++) {
        const int8_t *s = tmr_spec(c, e);
        bool ok = true, needs_inference = false;
        for (uint32_t i = 0; i < no && ok; i++) {
            switch (st[i].st) {
            case ST_TILED:
                ok = s[i] == st[i].dim;
                break;
            case ST_PARTIAL:
                if (s[i] == SP_PARTIAL)
                    ok = c->entries[e].red == st[i].red && single_consumer(p, o->opd[i], op);
                else
                    ok = tiled && s[i] != SP_PARTIAL; /* reduced (or scattered) for this op */
                break;
            case ST_MISMATCH:
                ok = s[i] == SP_NONE;
                break;
            default:
                if (s[i] >= 0)
                    needs_inference = true;
                else if (s[i] == SP_PARTIAL)
                    ok = false;
                break;
            }
        }
        if (!ok)
            continue;
        /* an entry that only flows partials needs every partial operand */
        if (!tiled) {
            bool uses_partial = false;
            for (uint32_t i = 0; i < no; i++)
                uses_partial |= s[i] == SP_PARTIAL;
            if (!uses_partial || needs_inference)
                continue;
        }
        any_agree = true;
        ir_block_kind why;
        int bad;
        if (!entry_divisible(p, o, e, axis, &why, &bad)) {
            bad_kind = why;
            first_bad_dim = bad;
            continue;
        }
        if (needs_inference) {
            res->n_inf++;
            res->inf = e;
        } else {
            res->n_full++;
            res->full = e;
        }
    }
    if (!record || res->n_full == 1 || (res->n_full == 0 && res->n_inf == 1))
        return;
    const char *axis_name = c->mesh.names[axis];
    if (op < c->n_ops && c->op_kind[op] == PK_CARRY) {
        carry_blocked(p, op, axis, st);
        return;
    }
    if (res->n_full > 1 || res->n_inf > 1)
        record_blocked(p, IR_BLK_CONFLICT, op, axis, "%d TMR entries match the operands tiled along '%s'",
                       res->n_full > 1 ? res->n_full : res->n_inf, axis_name);
    else if (first_bad_dim >= 0)
        record_blocked(p, bad_kind, op, axis,
                       bad_kind == IR_BLK_DYNAMIC ? "dim %d is dynamic" : "dim %d is not divisible by '%s'", first_bad_dim,
                       axis_name);
    else if (hi == lo)
        record_blocked(p, IR_BLK_NO_RULE, op, axis, "no TMR entries for this op");
    else if (!any_agree && tiled)
        record_blocked(p, IR_BLK_CONFLICT, op, axis, "operands tiled along '%s' match no single TMR entry", axis_name);
}

/* An op that already loops over the axis cannot take an operand's new
 * tiling along it (this is what gives earlier tactics priority): say so. */
static void diagnose_axis_used(ir_partition *p, uint32_t op, int axis)
{
    uint32_t no = op_n_operands(p, op);
    for (uint32_t i = 0; i < no; i++) {
        ir_layout seen, need;
        operand_layout(p, op, i, &seen);
        if (seen.dim[axis] < 0)
            continue;
        ir__needed_layout(p, op, i, &need);
        if (need.dim[axis] == seen.dim[axis] && need.pos[axis] == seen.pos[axis])
            continue;
        const ir_pctx *c = p->ctx;
        if (op < c->n_ops && c->op_kind[op] == PK_CARRY) {
            const pgroup *g = &c->groups[c->op_group[op]];
            record_blocked(p, IR_BLK_AXIS_USED, op, axis,
                           "carried value #%u of the while at %u:%u is tiled on dim %d along '%s' but %s it tiled on "
                           "dim %d: a carried value has one layout on entry, in the body and on exit, so %s is "
                           "redistributed",
                           op - g->carry0, g->src->src_line, g->src->src_col, need.dim[axis], c->mesh.names[axis],
                           i == 0 ? "enters" : "the body yields", seen.dim[axis],
                           i == 0 ? "the value entering" : "the yield, every iteration,");
            return;
        }
        record_blocked(p, IR_BLK_AXIS_USED, op, axis,
                       "the op already has a loop over '%s'; operand #%u arrives tiled on dim %d along it",
                       p->ctx->mesh.names[axis], i, seen.dim[axis]);
        return;
    }
}

/* Which dim the consumers of value v (slot `slot` of its producer op)
 * slice it along axis, through the value's identity op when there is one:
 * -1 none, -2 they disagree; *sliced set when one loops over axis taking
 * a slice of v (whether or not what it slices follows). */
static int consumers_slice(const ir_partition *p, const opinfo *o, uint32_t v, int axis, uint32_t slot, bool *sliced)
{
    const ir_pctx *c = p->ctx;
    int want = -1;
    uint32_t cons_inline[1];
    const uint32_t *cons;
    uint32_t ncons, idx_vop = 0;
    if (p->vop_of[v] >= 0) {
        cons_inline[0] = vop_id(p, (uint32_t)p->vop_of[v]);
        cons = cons_inline;
        ncons = 1;
    } else {
        cons = c->use_op + c->use0[v];
        ncons = c->use0[v + 1] - c->use0[v];
    }
    for (uint32_t k = 0; k < ncons; k++) {
        uint32_t u = cons[k];
        if (u == USE_RETURN)
            continue;
        uint32_t i = p->vop_of[v] >= 0 ? idx_vop : c->use_idx[c->use0[v] + k];
        int at = nest_find(p, u, axis);
        if (at < 0)
            continue;
        int8_t s = loop_spec(c, &nest_of(p, u)[at], i);
        if (s < 0)
            continue;
        *sliced = true;
        /* the consumer must slice exactly what is produced, plus the axis */
        int la[IR_MAX_AXES], sa[IR_MAX_AXES];
        int nl = nest_dim_axes(p, u, i, s, la);
        if (!axes_follow(la, nl, sa, own_dim_axes(o, slot, s, sa), axis))
            continue;
        if (want >= 0 && want != s)
            return -2;
        want = s;
    }
    return want;
}

/* Backward: the op's result is sliced along axis by its consumers.
 * *sliced: as consumers_slice's, for the results it looked at. */
static bool backward(ir_partition *p, const opinfo *o, uint32_t op, int axis, bool record, uint32_t *entry, bool *sliced)
{
    const ir_pctx *c = p->ctx;
    uint32_t no = o->no, nr = o->nr;
    /* (op has no loop over axis: no result is tiled or summed along it) */
    for (uint32_t j = 0; j < nr; j++) {
        uint32_t v = is_vop(p, op) ? VAL_NONE : c->op_val0[op] + j;
        int want;
        if (is_vop(p, op)) {
            /* the identity op's users are the value's users */
            uint32_t val = p->vops[op - c->n_ops].val;
            int w = -1;
            for (uint32_t u = c->use0[val]; u < c->use0[val + 1]; u++) {
                uint32_t user = c->use_op[u];
                if (user == USE_RETURN)
                    continue;
                int at = nest_find(p, user, axis);
                if (at < 0)
                    continue;
                uint32_t i = c->use_idx[u];
                int8_t s = loop_spec(c, &nest_of(p, user)[at], i);
                if (s < 0)
                    continue;
                *sliced = true;
                int la[IR_MAX_AXES], sa[IR_MAX_AXES];
                int nl = nest_dim_axes(p, user, i, s, la);
                if (!axes_follow(la, nl, sa, own_dim_axes(o, no + j, s, sa), axis))
                    continue;
                if (w >= 0 && w != s) {
                    w = -2;
                    break;
                }
                w = s;
            }
            want = w;
        } else {
            /* nothing slices a scalar: skip the scan of its users (a
             * constant feeding thousands of ops is looked at often) */
            const ir_type *t = val_type(c, v);
            if (!t || t->kind != IR_T_TENSOR || t->rank <= 0)
                continue;
            want = consumers_slice(p, o, v, axis, no + j, sliced);
        }
        if (want == -1)
            continue;
        if (want == -2) {
            if (record)
                record_blocked(p, IR_BLK_CONFLICT, op, axis, "users slice result #%u on different dims along '%s'", j,
                               c->mesh.names[axis]);
            return false;
        }
        uint32_t lo, hi, n = 0, found = 0;
        op_entries(p, op, &lo, &hi);
        ir_block_kind why = IR_BLK_NO_RULE;
        int bad = -1;
        for (uint32_t e = lo; e < hi; e++) {
            if (tmr_spec(c, e)[no + j] != want)
                continue;
            if (!entry_divisible(p, o, e, axis, &why, &bad))
                continue;
            n++;
            found = e;
        }
        if (n == 1) {
            *entry = found;
            return true;
        }
        if (record) {
            if (n > 1)
                record_blocked(p, IR_BLK_CONFLICT, op, axis, "%u TMR entries give result #%u tile<%d>", n, j, want);
            else if (bad >= 0)
                record_blocked(p, why, op, axis, why == IR_BLK_DYNAMIC ? "dim %d is dynamic" : "dim %d is not divisible by '%s'",
                               bad, c->mesh.names[axis]);
            else
                record_blocked(p, IR_BLK_NO_RULE, op, axis, "no TMR entry gives result #%u tile<%d>", j, want);
        }
        return false;
    }
    return false;
}

/* ---------------------------------------------------- the work queue */

/*
 * Ops wait in program order: an argument's identity op first, then each op
 * followed by the identity ops of its results, ties by op id.  The queue
 * is two bitsets, each with a summary bit per non-empty word: the
 * context's ops by id (their order), and the identity ops (a few dozen
 * among thousands of ops) by their place in that order, sorted once per
 * propagate (it adds no identity ops).  An identity op comes before op r
 * exactly when its value's producer comes before r (an argument's: before
 * every op), so a pop takes the lower of the two first ones.  A push sets
 * two bits, a pop finds the lowest in a few words, and making the queue
 * reads nothing per op.  It pops what a binary heap keyed on (position,
 * id) pops, without the heap's log n moves per op.
 */
typedef struct wbits {
    uint64_t *bits, *sum; /* queued places; per word of bits, whether it is non-empty */
    uint32_t n_sum;
    uint32_t low; /* no word of sum below it is non-empty: a lookup starts there */
} wbits;

typedef struct workq {
    wbits ops, ids;   /* the context's ops by id; the identity ops by place */
    uint32_t n_ops;   /* the context's */
    uint32_t n_ids;   /* identity ops */
    uint32_t *place;  /* per identity op (op - n_ops) its place */
    uint32_t *id_at;  /* per place its identity op (an op id) */
    uint32_t *after;  /* per place the producer of its value + 1 (0: an argument) */
    uint32_t n, n_queued_ids; /* queued: all, identity ops */
} workq;

static void wbits_free(wbits *b)
{
    ap_free(b->bits);
    ap_free(b->sum);
}

/* An empty set of places 0..n-1; false when out of memory (wbits_free
 * frees what it made). */
static bool wbits_init(wbits *b, uint32_t n)
{
    uint32_t nw = n / 64 + 1;
    b->n_sum = nw / 64 + 1;
    b->low = b->n_sum;
    b->bits = ap_calloc(nw, sizeof *b->bits);
    b->sum = ap_calloc(b->n_sum, sizeof *b->sum);
    return b->bits && b->sum;
}

static inline void wbits_set(wbits *b, uint32_t r)
{
    uint32_t w = r / 64;
    b->bits[w] |= 1ull << (r % 64);
    b->sum[w / 64] |= 1ull << (w % 64);
    if (w / 64 < b->low)
        b->low = w / 64;
}

static inline bool wbits_has(const wbits *b, uint32_t r) { return b->bits[r / 64] >> (r % 64) & 1; }

/* The lowest place set (one is). */
static inline uint32_t wbits_first(wbits *b)
{
    uint32_t s = b->low;
    while (!b->sum[s])
        s++;
    b->low = s;
    uint32_t w = s * 64 + (uint32_t)__builtin_ctzll(b->sum[s]);
    return w * 64 + (uint32_t)__builtin_ctzll(b->bits[w]);
}

static inline void wbits_clear(wbits *b, uint32_t r)
{
    uint32_t w = r / 64;
    b->bits[w] &= ~(1ull << (r % 64));
    if (!b->bits[w])
        b->sum[w / 64] &= ~(1ull << (w % 64));
}

static void wq_free(workq *q)
{
    wbits_free(&q->ops);
    wbits_free(&q->ids);
    ap_free(q->place);
    ap_free(q->id_at);
    ap_free(q->after);
}

/* qsort's order of wq_init's keys (no two are equal). */
static int by_after(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* An empty queue of p's ops in program order; false when out of memory. */
static bool wq_init(const ir_partition *p, workq *q)
{
    const ir_pctx *c = p->ctx;
    uint32_t k, m = p->n_vops;
    memset(q, 0, sizeof *q);
    q->n_ops = c->n_ops;
    q->n_ids = m;
    q->place = ap_malloc(sizeof *q->place * (m + 1));
    q->id_at = ap_malloc(sizeof *q->id_at * (m + 1));
    q->after = ap_malloc(sizeof *q->after * (m + 1));
    uint64_t *key = ap_malloc(sizeof *key * (m + 1));
    if (!wbits_init(&q->ops, c->n_ops) || !wbits_init(&q->ids, m) || !q->place || !q->id_at || !q->after || !key) {
        ap_free(key);
        wq_free(q);
        return false;
    }
    /* identity ops by (producer + 1, index): the order a stable sort by
     * producer gives */
    for (k = 0; k < m; k++)
        key[k] = (uint64_t)(uint32_t)(c->val_op[p->vops[k].val] + 1) << 32 | k;
    qsort(key, m, sizeof *key, by_after);
    for (uint32_t at = 0; at < m; at++) {
        k = (uint32_t)key[at];
        q->place[k] = at;
        q->id_at[at] = c->n_ops + k;
        q->after[at] = (uint32_t)(key[at] >> 32);
    }
    ap_free(key);
    return true;
}

/* wq_push of an identity op (none past the state's). */
static void wq_push_id(workq *q, uint32_t op)
{
    if (op - q->n_ops >= q->n_ids)
        return;
    uint32_t r = q->place[op - q->n_ops];
    if (wbits_has(&q->ids, r))
        return;
    wbits_set(&q->ids, r);
    q->n++;
    q->n_queued_ids++;
}

static inline void wq_push(workq *q, uint32_t op)
{
    if (op >= q->n_ops) {
        wq_push_id(q, op);
        return;
    }
    uint32_t w = op / 64;
    uint64_t bit = 1ull << (op % 64);
    if (q->ops.bits[w] & bit)
        return;
    q->ops.bits[w] |= bit;
    q->ops.sum[w / 64] |= 1ull << (w % 64);
    if (w / 64 < q->ops.low)
        q->ops.low = w / 64;
    q->n++;
}

/* Is op queued? */
static inline bool wq_queued(const workq *q, uint32_t op)
{
    if (op < q->n_ops)
        return wbits_has(&q->ops, op);
    return op - q->n_ops < q->n_ids && wbits_has(&q->ids, q->place[op - q->n_ops]);
}

/* The queued op first in program order, taken out (the queue is not
 * empty). */
static uint32_t wq_pop(workq *q)
{
    uint32_t r = q->n > q->n_queued_ids ? wbits_first(&q->ops) : UINT32_MAX;
    q->n--;
    if (q->n_queued_ids) {
        /* an identity op goes before op r when its producer does */
        uint32_t at = wbits_first(&q->ids);
        if (r == UINT32_MAX || q->after[at] <= r) {
            wbits_clear(&q->ids, at);
            q->n_queued_ids--;
            return q->id_at[at];
        }
    }
    wbits_clear(&q->ops, r);
    return r;
}

/* Queues op for a look along axis.  A quiet state leaves out an op that
 * already loops over the axis: the pass would take it only to pass over
 * it (a recording state diagnoses it). */
static inline void queue_look(const ir_partition *p, workq *q, int axis, uint32_t op)
{
    if (!p->quiet || nest_find(p, op, axis) < 0)
        wq_push(q, op);
}

/* Marks what a change to `op` (its new last loop, over the pass's axis)
 * may affect: its producers (backward), its consumers (forward) and
 * itself, marked `mark` in dirty and queued (queue_look; op itself, which
 * now loops over the axis, only in a recording state).
 *
 * A quiet state leaves out the producer of an operand the new loop takes
 * whole or as a pending sum (spec < 0): what a producer's look reads of
 * its users, along any axis, is their loops that slice its result
 * (consumers_slice and backward pass over the others, and the axes a
 * slicing user's dim takes are those of its loops slicing that dim), and
 * its forward look reads its own operands only.  So the new loop changes
 * nothing that look reads: an op whose reads did not change is left
 * alone by the passes (ir_propagate), and the mark would only bring a look
 * that repeats the last answer.  A recording state looks at everything
 * again, as it did. */
static void touch_neighbours(const ir_partition *p, workq *q, int axis, uint8_t *dirty, uint8_t mark, uint32_t op)
{
    const ir_pctx *c = p->ctx;
    if (!p->quiet)
        wq_push(q, op);
    dirty[op] = mark;
    uint32_t no = op_n_operands(p, op);
    const ir_loop *added = &nest_of(p, op)[p->nlen[op] - 1];
    for (uint32_t i = 0; i < no; i++) {
        if (p->quiet && loop_spec(c, added, i) < 0)
            continue;
        uint32_t v = operand_val(p, op, i);
        uint32_t prod;
        if (!is_vop(p, op) && p->vop_of[v] >= 0)
            prod = vop_id(p, (uint32_t)p->vop_of[v]);
        else if (c->val_op[v] >= 0)
            prod = (uint32_t)c->val_op[v];
        else
            continue;
        queue_look(p, q, axis, prod);
        dirty[prod] = mark;
    }
    uint32_t nr = op_n_results(p, op);
    for (uint32_t j = 0; j < nr; j++) {
        uint32_t v = is_vop(p, op) ? p->vops[op - c->n_ops].val : c->op_val0[op] + j;
        if (!is_vop(p, op) && p->vop_of[v] >= 0) {
            uint32_t vo = vop_id(p, (uint32_t)p->vop_of[v]);
            queue_look(p, q, axis, vo);
            dirty[vo] = mark;
            continue;
        }
        for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++) {
            uint32_t user = c->use_op[u];
            if (user == USE_RETURN)
                continue;
            queue_look(p, q, axis, user);
            dirty[user] = mark;
        }
    }
}

/* Inference on an argument: tile it so the op's new need is met (its
 * users queued and marked `mark` in dirty). */
static void infer_operands(ir_partition *p, uint32_t op, int axis, uint32_t e, workq *q, uint8_t *dirty, uint8_t mark)
{
    const ir_pctx *c = p->ctx;
    const int8_t *s = tmr_spec(c, e);
    uint32_t no = op_n_operands(p, op);
    for (uint32_t i = 0; i < no; i++) {
        if (s[i] < 0)
            continue;
        uint32_t v = operand_val(p, op, i);
        if (c->val_op[v] >= 0 || p->vop_of[v] >= 0)
            continue; /* op results: backward propagation pushes the slicing */
        const ir_layout *al = &p->arg_layout[v];
        if (al->dim[axis] != IR_AX_NONE)
            continue;
        ir_layout need;
        ir__needed_layout(p, op, i, &need);
        int na[IR_MAX_AXES], aa[IR_MAX_AXES];
        int nn = layout_dim_axes(&need, s[i], na), np = layout_dim_axes(al, s[i], aa);
        bool same = nn == np + 1 && na[np] == axis;
        for (int k = 0; same && k < np; k++)
            same = na[k] == aa[k];
        if (!same)
            continue;
        ir__arg_layout_push(p, v, axis, s[i]);
        for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++)
            if (c->use_op[u] != USE_RETURN) {
                wq_push(q, c->use_op[u]);
                dirty[c->use_op[u]] = mark;
            }
    }
}

/* The per-op flags of a propagate are few among tens of thousands of ops:
 * read eight at a time. */
static inline uint64_t flags8(const uint8_t *f, uint32_t at, uint32_t n)
{
    uint64_t w = 0;
    if (n - at >= 8)
        memcpy(&w, f + at, 8); /* one load */
    else
        memcpy(&w, f + at, n - at);
    return w;
}

/* The flagged ops among the eight at `at`: the high bit of byte k set
 * for op at + k when its flag is not zero (found without a carry crossing
 * bytes), every other bit clear; flags8_byte reads the lowest. */
static inline uint64_t flags8_nonzero(const uint8_t *f, uint32_t at, uint32_t n)
{
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    uint64_t w = flags8(f, at, n);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w); /* byte k of memory as byte k of the number */
#endif
    return (((w & low7) + low7) | w) & ~low7;
}

static inline uint32_t flags8_byte(uint64_t m) { return (uint32_t)__builtin_ctzll(m) >> 3; }

static bool any_flag(const uint8_t *f, uint32_t n)
{
    for (uint32_t at = 0; at < n; at += 8)
        if (flags8(f, at, n))
            return true;
    return false;
}

/* The ops phase 1 of a pass found inferable, in the order it looked at
 * them.  An op queued again after its look is looked at again, and may be
 * listed again: the list can outgrow the ops, so it grows. */
typedef struct oplist {
    uint32_t *v;
    uint32_t n, cap;
} oplist;

static bool oplist_push(oplist *l, uint32_t op)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 64;
        uint32_t *v = ap_realloc(l->v, sizeof *v * cap);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = op;
    return true;
}

/* Propagates one axis to its fixpoint from the ops marked in `start`,
 * but those marked `own` (0: none left out) that no pass before has
 * marked in dirty and those inert along the axis (ir_propagate says why
 * neither can change), through the queue q (empty, and empty again
 * after), with room for every op in `inf_entry`; what may change is
 * marked `mark` in dirty.  False when out of memory. */
static bool propagate_axis(ir_partition *p, workq *q, oplist *inferable, uint32_t *inf_entry, int axis,
                           const uint8_t *start, uint8_t own, uint8_t *dirty, uint8_t mark)
{
    uint32_t n = n_all_ops(p);
    uint8_t bit = (uint8_t)(1u << axis);
    for (uint32_t at = 0; at < n; at += 8)
        for (uint64_t w = flags8_nonzero(start, at, n); w; w &= w - 1) {
            uint32_t op = at + flags8_byte(w);
            if ((start[op] != own || dirty[op]) && !(p->inert[op] & bit))
                queue_look(p, q, axis, op);
        }
    for (;;) {
        /* phase 1: entries every tiled operand (or consumer) agrees on */
        inferable->n = 0;
        while (q->n) {
            uint32_t op = wq_pop(q);
            if (nest_find(p, op, axis) >= 0) {
                if (!p->quiet)
                    diagnose_axis_used(p, op, axis);
                continue;
            }
            fwd_result fr;
            opinfo o;
            opinfo_init(p, op, &o);
            forward_analyze(p, &o, op, axis, &fr, !p->quiet);
            /* what phase 2 would find if nothing changes (see there) */
            inf_entry[op] = fr.n_full == 0 && fr.n_inf == 1 ? fr.inf : UINT32_MAX;
            uint32_t e;
            bool sliced = false;
            if (fr.n_full == 1) {
                e = fr.full;
            } else if (backward(p, &o, op, axis, !p->quiet && !fr.any_status, &e, &sliced)) {
                /* e set */
            } else {
                /* nothing along axis to look at (ir_propagate: inert) */
                if (fr.none_along && !sliced)
                    p->inert[op] |= bit;
                else
                    p->inert[op] &= (uint8_t)~bit;
                if (fr.n_full == 0 && fr.n_inf == 1 && !oplist_push(inferable, op))
                    return false;
                continue;
            }
            if (!ir__push_loop(p, op, axis, e))
                continue;
            p->inert[op] &= (uint8_t)~bit;
            touch_neighbours(p, q, axis, dirty, mark, op);
        }
        /* phase 2: inference, in program order, each checked again: an op
         * that nothing queued since phase 1 emptied the queue has its
         * operands, and nest, as phase 1 last looked at them (a change to
         * what forward_analyze reads queues an op without a loop over the
         * axis: touch_neighbours, infer_operands), so that look's answer
         * stands */
        bool any = false;
        for (uint32_t k = 0; k < inferable->n; k++) {
            uint32_t op = inferable->v[k], e;
            if (nest_find(p, op, axis) >= 0)
                continue;
            if (!wq_queued(q, op)) {
                e = inf_entry[op];
                if (e == UINT32_MAX)
                    continue;
            } else {
                fwd_result fr;
                opinfo o;
                opinfo_init(p, op, &o);
                forward_analyze(p, &o, op, axis, &fr, false);
                if (fr.n_full != 0 || fr.n_inf != 1)
                    continue;
                e = fr.inf;
            }
            if (!ir__push_loop(p, op, axis, e))
                continue;
            p->inert[op] &= (uint8_t)~bit;
            infer_operands(p, op, axis, e, q, dirty, mark);
            touch_neighbours(p, q, axis, dirty, mark, op);
            any = true;
        }
        if (!any)
            return true;
    }
}

/* The tiling both a and b start with: per dim, the longest common prefix
 * of their axes (pending sums dropped). */
static void common_prefix(const ir_layout *a, const ir_layout *b, int rank, ir_layout *out)
{
    ir_layout r;
    layout_init(&r);
    for (int d = 0; d < rank; d++) {
        int xa[IR_MAX_AXES], xb[IR_MAX_AXES];
        int na = layout_dim_axes(a, d, xa), nb = layout_dim_axes(b, d, xb);
        for (int k = 0; k < na && k < nb && xa[k] == xb[k]; k++)
            layout_push(&r, xa[k], d);
    }
    *out = r;
}

/* An argument arrives in the tiling every user's slicing starts with: the
 * paper's final lowering step turns arguments used only through slices into
 * device-local arrays, which is what puts, e.g., the optimizer state of
 * Megatron-sharded weights in shards.  Each user then slices its own piece
 * further, locally.  Taking the common start (rather than requiring equal
 * slicings) makes the result the same whether the users' loops came in one
 * propagate or in several.  Returns whether any argument changed; marks the
 * users of changed arguments in `dirty` (SHARD_MARK), and clears their
 * inert bits along the axes the argument is now tiled along (ir_propagate). */
static bool shard_args_by_uses(ir_partition *p, uint8_t *dirty)
{
    const ir_pctx *c = p->ctx;
    bool any = false;
    for (uint32_t v = 0; v < c->n_args; v++) {
        if (p->vop_of[v] >= 0 || c->use0[v] == c->use0[v + 1])
            continue;
        const ir_type *t = val_type(c, v);
        int rank = t && t->kind == IR_T_TENSOR && t->rank > 0 ? t->rank : 0;
        ir_layout common, need;
        bool first = true, returned = false;
        for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++) {
            uint32_t op = c->use_op[u];
            if (op == USE_RETURN) {
                returned = true; /* returned as is: keep it as it comes */
                break;
            }
            ir__needed_layout(p, op, c->use_idx[u], &need);
            common_prefix(first ? &need : &common, &need, rank, &common);
            first = false;
        }
        if (returned || first || layout_equal(&common, &p->arg_layout[v]))
            continue;
        /* only ever add tiling: what the argument has must stay */
        const ir_layout *al = &p->arg_layout[v];
        bool extends = true;
        for (int a = 0; a < c->mesh.n_axes && extends; a++)
            if (al->dim[a] != IR_AX_NONE)
                extends = common.dim[a] == al->dim[a] && common.pos[a] == al->pos[a];
        if (!extends)
            continue;
        ir__arg_layout_set(p, v, &common);
        /* a user stays inert along an axis the argument is still whole along */
        uint8_t along = 0;
        for (int a = 0; a < c->mesh.n_axes; a++)
            if (common.dim[a] != IR_AX_NONE)
                along |= (uint8_t)(1u << a);
        for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++) {
            dirty[c->use_op[u]] = SHARD_MARK;
            p->inert[c->use_op[u]] &= (uint8_t)~along;
        }
        any = true;
    }
    return any;
}

int ir_propagate(ir_partition *p, ap_error *err)
{
    uint32_t n = n_all_ops(p);
    uint8_t *pending = ap_malloc(n + 1), *next = ap_malloc(n + 1);
    uint32_t *inf_entry = ap_malloc(sizeof *inf_entry * (n + 1));
    oplist inferable = {ap_malloc(sizeof *inferable.v * (n + 1)), 0, n + 1};
    workq q;
    bool have_q = wq_init(p, &q);
    int rc = 0;
    if (!pending || !next || !inferable.v || !inf_entry || !have_q) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory in propagation");
        goto out;
    }
    /* start from what actions touched since the last call; changes re-queue
     * their neighbours, for every axis, until nothing changes */
    memcpy(pending, p->pending, n);
    memset(p->pending, 0, n);
    for (uint32_t at = 0; at < n; at += 8)
        for (uint64_t w = flags8_nonzero(pending, at, n); w; w &= w - 1)
            p->inert[at + flags8_byte(w)] = 0; /* what they read changed, along any axis */
    /* the axes the actions named, in their order, then the others */
    int order[IR_MAX_AXES], n_order = 0;
    bool listed[IR_MAX_AXES] = {0};
    for (int k = 0; k < p->n_axis_seq; k++) {
        order[n_order++] = p->axis_seq[k];
        listed[p->axis_seq[k]] = true;
    }
    for (int a = 0; a < p->ctx->mesh.n_axes; a++)
        if (!listed[a])
            order[n_order++] = a;
    p->n_axis_seq = 0;
    for (int round = 0; round < 64; round++) {
        memset(next, 0, n);
        /* an op's mark in next: the last pass of this round that may have
         * changed what it sees (k + 1 for the k-th axis, SHARD_MARK).  In
         * the next round an axis's pass leaves out the ops its own pass
         * marked last, unless a pass before it in this round marked them
         * again: that pass queued each as it marked it and took it again
         * after (to its fixpoint: no loop, nothing to infer), unless it
         * loops over the axis (nothing left to look at), and an op's
         * look along an axis reads only its nest, its producers', its
         * consumers' and its arguments' layouts, which nothing since
         * changed (a change marks the op, and the mark would be another's).
         * Taken again it would add nothing, and being queued or not changes
         * no other op's turn: the same loops come in the same order.  The
         * first round starts from the actions' ops for every axis; a state
         * that records what blocks propagation looks at everything again,
         * so that its record stays as it was.
         *
         * A pass also leaves out of its start the ops inert along its axis
         * (p->inert): those its look last found with every operand whole
         * along the axis (status_of's ST_NONE: their producers' loops over
         * the axis, an argument's tiling; not ST_MISMATCH, which the order
         * of the other axes on the dim decides) and no user that loops
         * over it taking a slice of a result (backward, before it asks
         * whether the slice follows the result's tiling).  Such a look adds no
         * loop, infers nothing and records nothing, whatever the op's own
         * nest and the other loops around it; what it reads changes only
         * when a producer or user gets a loop over the axis (that pass
         * queues the op and looks again), an argument gets its tiling
         * (inference: that pass queues its users; shard_args_by_uses
         * clears its users' bits along the axes it is tiled along: along
         * the others they still read that it is whole), or an action
         * changes a value (it marks
         * the ops around it pending, and a propagate first clears their
         * bits).  A pass of another axis adds loops over that
         * axis only, so the ops it marks keep their bits: an op the model
         * pass gave a loop that was inert along batch stays so.  A new
         * state is inert everywhere (nothing is tiled); a new identity op
         * is not (it is pending). */
        for (int k = 0; k < n_order; k++)
            if (!propagate_axis(p, &q, &inferable, inf_entry, order[k], pending,
                                round > 0 && p->quiet ? (uint8_t)(k + 1) : 0, next, (uint8_t)(k + 1))) {
                rc = ap_error_set(err, AP_ENOMEM, "out of memory in propagation");
                goto out;
            }
        if (!any_flag(next, n)) {
            /* next is clear: the arguments' users they change go there */
            if (!shard_args_by_uses(p, next))
                break;
        }
        memcpy(pending, next, n);
    }
    ir__log_action(p, 'p', 0, 0, 0);
out:
    if (have_q)
        wq_free(&q);
    ap_free(inferable.v);
    ap_free(inf_entry);
    ap_free(pending);
    ap_free(next);
    return rc;
}
