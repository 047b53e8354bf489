/*
 * partition.c - the PartIR:Core partition state and its actions: tile,
 * atomic and propagate (notes/partir-semantics.md).
 *
 * The state is data, not rewritten IR: each top-level op of the function
 * has a loop nest, an ordered list of (axis, TMR entry); each argument has
 * a value tiling; tiling and atomic actions on other values add identity
 * ops ("virtual ops") whose nests slice or replicate the value for its
 * users.  Propagation adds loops to ops, one axis at a time, to a fixpoint,
 * visiting ops in program order through a priority queue so long forward
 * and backward chains cost one visit per change.  The axes go in the order
 * the actions since the last propagate named them, and a value tiled
 * [a, b] on a dim counts as tiled along a, then (once a loop over a slices
 * it) along b: tiling a dim along several axes before one propagate gives
 * the state that propagating after each tiling gives.
 *
 * Control flow is partitioned, not fenced off.  The context lists the ops
 * of a while's condition and body, of a case's (or if's) branches, after
 * pseudo ops that tie the regions' values together, in pre-order:
 *  - a while: one carry op per carried value, operands (value entering,
 *    value the body yields), results (block argument in the body, in the
 *    condition, the loop's result); its TMR entries tile all five alike,
 *    so a carried value has one layout on entry, in the body and on exit
 *    (a fixed point: propagation reaches the carry from the entry, from
 *    the yield, from any user; a conflict blocks and says which carried
 *    value and why).  No pending sums are carried: the body reduces them
 *    before the next iteration.  The dims the body reads or writes one
 *    slice at a time (dynamic_slice / dynamic_update_slice by the layer
 *    counter: the layer dim of a stacked weight) have no entry, and
 *    tiling them is refused: that would pipeline the loop.  HLO's while
 *    over one tuple is the same loop (the tuple and its get_tuple_elements
 *    are seen through) and lowers as the variadic while it means;
 *  - a case / if: its index (needed whole), each branch's ops, then one
 *    merge op per result whose entries tile every branch's yield and the
 *    result alike (pending sums reduced before they leave a branch);
 *  - an optimization_barrier: one identity op per operand;
 *  - a value a region captures is an ordinary operand of the op inside:
 *    the lowering redistributes it there, to what that op needs.
 * Other ops holding regions (reduce bodies, unknown ops) stay one op, run
 * whole on their operands.
 */
#include "partir_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXS_OPD 64 /* operands an op may have to be partitioned */

const char *ir_red_name(ir_red r)
{
    static const char *names[] = {"none", "add", "mul", "max", "min", "and", "or"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

/* =============================================================== layouts */

void ir_layout_init(ir_layout *l)
{
    memset(l, 0, sizeof *l);
    for (int a = 0; a < IR_MAX_AXES; a++)
        l->dim[a] = IR_AX_NONE;
}

bool ir_layout_equal(const ir_layout *a, const ir_layout *b)
{
    for (int x = 0; x < IR_MAX_AXES; x++) {
        if (a->dim[x] != b->dim[x])
            return false;
        if (a->dim[x] >= 0 && a->pos[x] != b->pos[x])
            return false;
        if (a->dim[x] == IR_AX_PARTIAL && a->red[x] != b->red[x])
            return false;
    }
    return true;
}

int ir_layout_dim_axes(const ir_layout *l, int d, int *axes)
{
    int n = 0;
    for (int a = 0; a < IR_MAX_AXES; a++)
        if (l->dim[a] == d)
            n++;
    for (int a = 0; a < IR_MAX_AXES; a++)
        if (l->dim[a] == d && l->pos[a] < n)
            axes[l->pos[a]] = a;
    return n;
}

void ir_layout_push(ir_layout *l, int axis, int d)
{
    int n = 0;
    for (int a = 0; a < IR_MAX_AXES; a++)
        if (l->dim[a] == d)
            n++;
    l->dim[axis] = (int8_t)d;
    l->pos[axis] = (uint8_t)n;
}

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
        int n = ir_layout_dim_axes(l, d, axes);
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
        int n = ir_layout_dim_axes(l, d, axes);
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

/* ================================================================ context */

uint32_t ir__value_id(const ir_pctx *c, const ir_value *v)
{
    uint32_t id;
    return ir__map_get(&c->val_index, v, &id) ? id : VAL_NONE;
}

void ir_pctx_free(ir_pctx *c)
{
    if (!c)
        return;
    ap_free(c->ops);
    ap_free(c->vals);
    ap_free(c->val_op);
    ap_free(c->op_val0);
    ap_free(c->printed_max);
    ap_free(c->opd0);
    ap_free(c->opd_val);
    ap_free(c->ret_val);
    ap_free(c->use0);
    ap_free(c->use_op);
    ap_free(c->use_idx);
    ap_free(c->ret_alias_arg);
    ap_free(c->tmr0);
    ap_free(c->entries);
    ap_free(c->pool);
    ap_free(c->id0);
    ap_free(c->op_kind);
    ap_free(c->op_scope);
    ap_free(c->op_group);
    ap_free(c->carry_layer);
    ap_free(c->val_loopdims);
    ap_free(c->scope_parent);
    ap_free(c->groups);
    ap_free(c->branches);
    ir__map_free(&c->op_index);
    ir_module_free(c->scratch);
    ir__map_free(&c->val_index);
    ap_free(c);
}

const ir_mesh *ir_pctx_mesh(const ir_pctx *c) { return &c->mesh; }
ir_op *ir_pctx_func(const ir_pctx *c) { return c->func; }
ir_module *ir_pctx_module(const ir_pctx *c) { return c->m; }
uint32_t ir_pctx_num_ops(const ir_pctx *c) { return c->n_ops; }
ir_op *ir_pctx_op(const ir_pctx *c, uint32_t i) { return i < c->n_ops ? c->ops[i] : NULL; }
uint32_t ir_pctx_num_entries(const ir_pctx *c, uint32_t op) { return c->tmr0[op + 1] - c->tmr0[op]; }

/* Ops with results inside op's regions, at any depth: the printer numbers
 * those it shows between op's results and the next top-level op's. */
static uint32_t nested_results(const ir_op *op)
{
    uint32_t n = 0;
    for (uint32_t r = 0; r < op->n_regions; r++)
        for (const ir_block *b = op->regions[r].first; b; b = b->next)
            for (const ir_op *o = b->first; o; o = o->next)
                n += (o->n_results > 0) + nested_results(o);
    return n;
}

/* ----------------------------------------------------- flattening regions
 *
 * A while whose carried values are all static tensors (variadic, as JAX
 * prints scans, or HLO's while over one tuple built by `tuple` and read by
 * `get_tuple_element`) is partitioned with the function: its condition's
 * and body's ops become ops of the context, each carried value a PK_CARRY
 * op that ties the value entering, the block arguments, the value the body
 * yields and the result to one layout.  A get_tuple_element of a tuple the
 * context sees through is not an op: its result is another name (an
 * alias) of the element.  Ops holding other regions (case, reduce bodies,
 * unknown ops) stay one op each, run whole. */

typedef struct pent {
    ir_op *op;
    uint8_t kind;
    uint32_t scope;
    int32_t group;
    uint32_t printed;
} pent;

typedef struct pbuild {
    ir_pctx *c;
    ir_ptrmap tup_while; /* tuple op -> 1 + index in whiles of the while it feeds or yields */
    ir_ptrmap tup_bad;   /* tuple op -> 1: a use other than get_tuple_element and one while */
    ir_ptrmap w_bad;     /* while -> 1: its tuple arguments/result used otherwise */
    ir_ptrmap w_flat;    /* while -> 1 flattened, 2 not (memo) */
    ir_ptrmap carried;   /* tuple-typed block argument / result of a flattened tuple while -> group * 4 + role */
    const ir_op **whiles;
    uint32_t n_whiles, cap_whiles;
    /* the op list */
    pent *ents;
    uint32_t n, cap;
    uint32_t counter; /* printed results so far */
    /* aliases in definition order: [0] another name of [1] */
    const ir_value *(*al)[2];
    uint32_t n_al, cap_al;
    pgroup *groups;
    uint32_t n_groups, cap_groups;
    pbranch *branches;
    uint32_t n_branches, cap_branches;
    uint32_t *scope_parent;
    uint32_t n_scopes, cap_scopes;
    bool oom;
} pbuild;

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint32_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *q = ap_realloc(*p, elem * nc);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

static const ir_op *region_owner(const ir_block *b, uint32_t *region)
{
    if (!b || !b->parent || !b->parent->parent)
        return NULL;
    const ir_op *o = b->parent->parent;
    *region = (uint32_t)(b->parent - o->regions);
    return o;
}

static bool is_tuple_ty(const ir_type *t) { return t && t->kind == IR_T_TUPLE; }

static uint32_t while_slot(pbuild *b, const ir_op *w)
{
    for (uint32_t i = 0; i < b->n_whiles; i++)
        if (b->whiles[i] == w)
            return i;
    if (!grow((void **)&b->whiles, &b->cap_whiles, b->n_whiles + 1, sizeof *b->whiles)) {
        b->oom = true;
        return 0;
    }
    b->whiles[b->n_whiles] = w;
    return b->n_whiles++;
}

/* Pass 0: who uses tuples and the tuple values of whiles. */
static void scan_uses(pbuild *b, const ir_block *blk)
{
    for (const ir_op *x = blk->first; x && !b->oom; x = x->next) {
        for (uint32_t i = 0; i < x->n_operands; i++) {
            const ir_value *o = x->operands[i];
            if (o->def && o->def->opcode == IR_OP_TUPLE) {
                const ir_op *w = NULL, *owner = NULL;
                uint32_t region = 0;
                bool bad = false;
                if (x->opcode == IR_OP_GET_TUPLE_ELEMENT)
                    ;
                else if (x->opcode == IR_OP_WHILE && x->n_operands == 1)
                    w = x;
                else if (x->opcode == IR_OP_RETURN && (owner = region_owner(x->parent, &region)) &&
                         owner->opcode == IR_OP_WHILE && region == 1 && owner->n_operands == 1)
                    w = owner; /* the body's yield */
                else
                    bad = true;
                if (bad && !ir__map_put(&b->tup_bad, o->def, 1))
                    b->oom = true;
                if (w) {
                    uint32_t s = while_slot(b, w) + 1, old;
                    if (ir__map_get(&b->tup_while, o->def, &old) && old != s)
                        ir__map_put(&b->tup_bad, o->def, 1) || (b->oom = true);
                    else
                        ir__map_put(&b->tup_while, o->def, s) || (b->oom = true);
                }
            }
            if (is_tuple_ty(o->type) && x->opcode != IR_OP_GET_TUPLE_ELEMENT) {
                uint32_t region = 0;
                const ir_op *w = o->def ? o->def : region_owner(o->block, &region);
                if (w && w->opcode == IR_OP_WHILE) {
                    /* passing the whole tuple on is fine only into the
                     * loop itself (its operand, or the body's yield) */
                    bool ok = x == w && o->def != w;
                    if (!ok)
                        ir__map_put(&b->w_bad, w, 1) || (b->oom = true);
                }
            }
        }
        for (uint32_t r = 0; r < x->n_regions; r++)
            for (const ir_block *in = x->regions[r].first; in; in = in->next)
                scan_uses(b, in);
    }
}

static bool static_tensor(const ir_type *t)
{
    return t && t->kind == IR_T_TENSOR && t->rank >= 0 && ir_type_is_static(t);
}

static const ir_op *terminator(const ir_block *blk)
{
    return blk && blk->last && blk->last->opcode == IR_OP_RETURN ? blk->last : NULL;
}

static bool tuple_feeds_only(pbuild *b, const ir_op *t, const ir_op *w)
{
    uint32_t x, s;
    if (!t || t->opcode != IR_OP_TUPLE || ir__map_get(&b->tup_bad, t, &x))
        return false;
    return ir__map_get(&b->tup_while, t, &s) && b->whiles[s - 1] == w;
}

/* Is while w partitioned with the function?  (memoized) */
static bool flattenable(pbuild *b, const ir_op *w)
{
    uint32_t memo;
    if (ir__map_get(&b->w_flat, w, &memo))
        return memo == 1;
    bool ok = w->n_regions == 2 && w->regions[0].n_blocks == 1 && w->regions[1].n_blocks == 1 && w->n_operands >= 1 &&
              w->n_operands == w->n_results && w->n_operands < 4096;
    const ir_block *cb = ok ? w->regions[0].first : NULL, *bb = ok ? w->regions[1].first : NULL;
    const ir_op *ct = terminator(cb), *bt = terminator(bb);
    ok = ok && ct && bt && ct->n_operands == 1 && bt->n_operands == w->n_operands && cb->n_args == w->n_operands &&
         bb->n_args == w->n_operands;
    if (ok && w->n_operands == 1 && is_tuple_ty(w->operands[0]->type)) {
        const ir_type *tt = w->operands[0]->type;
        uint32_t x;
        ok = tt->n_elems >= 1 && !ir__map_get(&b->w_bad, w, &x) && tuple_feeds_only(b, w->operands[0]->def, w) &&
             tuple_feeds_only(b, bt->operands[0]->def, w) && bt->operands[0]->def->parent == bb;
        for (int i = 0; ok && i < tt->n_elems; i++)
            ok = static_tensor(tt->elems[i]);
    } else {
        for (uint32_t i = 0; ok && i < w->n_operands; i++)
            ok = static_tensor(w->operands[i]->type);
    }
    if (!ir__map_put(&b->w_flat, w, ok ? 1 : 2))
        b->oom = true;
    return ok;
}

/* A tuple op the context sees through (never an op of its own). */
static bool tuple_skipped(pbuild *b, const ir_op *t)
{
    uint32_t x, s;
    if (t->opcode != IR_OP_TUPLE || ir__map_get(&b->tup_bad, t, &x))
        return false;
    if (!ir__map_get(&b->tup_while, t, &s))
        return true; /* only read by get_tuple_element */
    return flattenable(b, b->whiles[s - 1]);
}

static void push_op(pbuild *b, ir_op *op, uint8_t kind, uint32_t scope, int32_t group, uint32_t printed)
{
    if (!grow((void **)&b->ents, &b->cap, b->n + 1, sizeof *b->ents)) {
        b->oom = true;
        return;
    }
    b->ents[b->n++] = (pent){op, kind, scope, group, printed};
}

static void add_alias(pbuild *b, const ir_value *from, const ir_value *to)
{
    if (!grow((void **)&b->al, &b->cap_al, b->n_al + 1, sizeof *b->al)) {
        b->oom = true;
        return;
    }
    b->al[b->n_al][0] = from;
    b->al[b->n_al][1] = to;
    b->n_al++;
}

static uint32_t new_scope(pbuild *b, uint32_t parent)
{
    if (!grow((void **)&b->scope_parent, &b->cap_scopes, b->n_scopes + 1, sizeof *b->scope_parent)) {
        b->oom = true;
        return 0;
    }
    b->scope_parent[b->n_scopes] = parent;
    return b->n_scopes++;
}

static void walk(pbuild *b, ir_block *blk, uint32_t scope, const ir_op *stop);

static void flatten_while(pbuild *b, ir_op *w, uint32_t scope)
{
    if (!grow((void **)&b->groups, &b->cap_groups, b->n_groups + 1, sizeof *b->groups)) {
        b->oom = true;
        return;
    }
    uint32_t gi = b->n_groups++;
    ir_block *cb = w->regions[0].first, *bb = w->regions[1].first;
    const ir_op *ct = terminator(cb), *bt = terminator(bb);
    bool tf = w->n_operands == 1 && is_tuple_ty(w->operands[0]->type);
    uint32_t n = tf ? (uint32_t)w->operands[0]->type->n_elems : w->n_operands;
    pgroup g = {.src = w, .carry0 = b->n, .n = n, .tuple_form = tf};
    uint32_t w_num = b->counter++;
    for (uint32_t i = 0; i < n && !b->oom; i++) {
        ir_value *io[2] = {tf ? w->operands[0]->def->operands[i] : w->operands[i],
                           tf ? bt->operands[0]->def->operands[i] : bt->operands[i]};
        const ir_type *t = io[0]->type, *ts[3] = {t, t, t};
        ir_op *carry = ir_op_new(b->c->scratch, IR_OP_WHILE, NULL, 2, io, 3, ts, 0);
        if (!carry) {
            b->oom = true;
            return;
        }
        carry->loc = w->loc;
        carry->src_line = w->src_line;
        carry->src_col = w->src_col;
        push_op(b, carry, PK_CARRY, scope, (int32_t)gi, w_num);
        if (!tf) {
            add_alias(b, &bb->args[i], &carry->results[0]);
            add_alias(b, &cb->args[i], &carry->results[1]);
            add_alias(b, &w->results[i], &carry->results[2]);
        }
    }
    b->groups[gi] = g; /* the body's get_tuple_elements read carry0 and n */
    if (tf && (!ir__map_put(&b->carried, &bb->args[0], gi * 4 + 0) ||
               !ir__map_put(&b->carried, &cb->args[0], gi * 4 + 1) ||
               !ir__map_put(&b->carried, &w->results[0], gi * 4 + 2)))
        b->oom = true;
    g.scope_cond = new_scope(b, scope);
    g.cond0 = b->n;
    walk(b, cb, g.scope_cond, ct);
    ir_op *cr = ir_op_new(b->c->scratch, IR_OP_RETURN, NULL, 1, &ct->operands[0], 0, NULL, 0);
    if (!cr) {
        b->oom = true;
        return;
    }
    cr->loc = ct->loc;
    cr->src_line = ct->src_line;
    cr->src_col = ct->src_col;
    push_op(b, cr, PK_CONDRET, g.scope_cond, (int32_t)gi, b->counter);
    g.cond_end = b->n;
    g.scope_body = new_scope(b, scope);
    g.body0 = b->n;
    walk(b, bb, g.scope_body, bt);
    g.body_end = b->n;
    if (!b->oom)
        b->groups[gi] = g;
}

/* A case (or if) whose results are static tensors and whose branches are
 * single blocks: partitioned with the function like a while. */
static bool case_flattenable(const ir_op *op)
{
    if ((op->opcode != IR_OP_CASE && op->opcode != IR_OP_IF) || op->n_operands != 1 || op->n_regions < 1 ||
        op->n_results < 1 || op->n_results > 4096)
        return false;
    for (uint32_t j = 0; j < op->n_results; j++)
        if (!static_tensor(op->results[j].type))
            return false;
    for (uint32_t r = 0; r < op->n_regions; r++) {
        const ir_block *bl = op->regions[r].first;
        const ir_op *t = op->regions[r].n_blocks == 1 ? terminator(bl) : NULL;
        if (!t || bl->n_args || t->n_operands != op->n_results)
            return false;
    }
    return true;
}

static void flatten_case(pbuild *b, ir_op *cs, uint32_t scope)
{
    if (!grow((void **)&b->groups, &b->cap_groups, b->n_groups + 1, sizeof *b->groups) ||
        !grow((void **)&b->branches, &b->cap_branches, b->n_branches + cs->n_regions, sizeof *b->branches)) {
        b->oom = true;
        return;
    }
    uint32_t gi = b->n_groups++;
    pgroup g = {.src = cs, .is_case = true, .carry0 = b->n, .n = cs->n_results, .br0 = b->n_branches,
                .n_br = cs->n_regions};
    b->n_branches += cs->n_regions;
    uint32_t c_num = b->counter++;
    ir_op *idx = ir_op_new(b->c->scratch, IR_OP_RETURN, NULL, 1, &cs->operands[0], 0, NULL, 0);
    if (!idx) {
        b->oom = true;
        return;
    }
    idx->loc = cs->loc;
    idx->src_line = cs->src_line;
    idx->src_col = cs->src_col;
    push_op(b, idx, PK_CASEIDX, scope, (int32_t)gi, c_num);
    b->groups[gi] = g;
    for (uint32_t r = 0; r < cs->n_regions && !b->oom; r++) {
        ir_block *bl = cs->regions[r].first;
        pbranch br = {.scope = new_scope(b, scope), .begin = b->n};
        walk(b, bl, br.scope, terminator(bl));
        br.end = b->n;
        b->branches[g.br0 + r] = br;
    }
    g.merge0 = b->n;
    ir_value **yields = ap_malloc(sizeof *yields * cs->n_regions);
    if (!yields) {
        b->oom = true;
        return;
    }
    for (uint32_t j = 0; j < cs->n_results && !b->oom; j++) {
        for (uint32_t r = 0; r < cs->n_regions; r++)
            yields[r] = terminator(cs->regions[r].first)->operands[j];
        const ir_type *t = cs->results[j].type;
        ir_op *mg = ir_op_new(b->c->scratch, IR_OP_CASE, NULL, cs->n_regions, yields, 1, &t, 0);
        if (!mg) {
            b->oom = true;
            break;
        }
        mg->loc = cs->loc;
        mg->src_line = cs->src_line;
        mg->src_col = cs->src_col;
        push_op(b, mg, PK_MERGE, scope, (int32_t)gi, c_num);
        add_alias(b, &cs->results[j], &mg->results[0]);
    }
    ap_free(yields);
    g.body_end = b->n;
    if (!b->oom)
        b->groups[gi] = g;
}

/* An optimization_barrier of static tensors: one identity op per operand,
 * so that each value keeps its own layout through it. */
static void flatten_barrier(pbuild *b, ir_op *op, uint32_t scope)
{
    if (!grow((void **)&b->groups, &b->cap_groups, b->n_groups + 1, sizeof *b->groups)) {
        b->oom = true;
        return;
    }
    uint32_t gi = b->n_groups++;
    pgroup g = {.src = op, .is_barrier = true, .carry0 = b->n, .n = op->n_operands};
    uint32_t num = b->counter++;
    for (uint32_t i = 0; i < op->n_operands && !b->oom; i++) {
        const ir_type *t = op->results[i].type;
        ir_op *id = ir_op_new(b->c->scratch, IR_OP_OPTIMIZATION_BARRIER, NULL, 1, &op->operands[i], 1, &t, 0);
        if (!id) {
            b->oom = true;
            return;
        }
        id->loc = op->loc;
        id->src_line = op->src_line;
        id->src_col = op->src_col;
        push_op(b, id, PK_BARRIER, scope, (int32_t)gi, num);
        add_alias(b, &op->results[i], &id->results[0]);
    }
    g.body_end = b->n;
    b->groups[gi] = g;
}

static void walk(pbuild *b, ir_block *blk, uint32_t scope, const ir_op *stop)
{
    for (ir_op *op = blk->first; op && op != stop && !b->oom; op = op->next) {
        if (!ir__map_put(&b->c->op_index, op, b->n)) {
            b->oom = true;
            return;
        }
        if (op->opcode == IR_OP_TUPLE && tuple_skipped(b, op)) {
            b->counter++;
            continue;
        }
        if (op->opcode == IR_OP_GET_TUPLE_ELEMENT && op->n_operands == 1 && op->n_results == 1) {
            const ir_value *o = op->operands[0];
            ir_attr *ix = ir_op_attr(op, "index");
            int64_t i = ix && ix->kind == IR_A_INT ? ix->u.i : -1;
            uint32_t cr;
            if (i >= 0 && o->def && o->def->opcode == IR_OP_TUPLE && (uint64_t)i < o->def->n_operands &&
                tuple_skipped(b, o->def)) {
                add_alias(b, &op->results[0], o->def->operands[i]);
                b->counter++;
                continue;
            }
            if (i >= 0 && ir__map_get(&b->carried, o, &cr) && (uint64_t)i < b->groups[cr / 4].n) {
                ir_op *carry = b->ents[b->groups[cr / 4].carry0 + (uint32_t)i].op;
                add_alias(b, &op->results[0], &carry->results[cr % 4]);
                b->counter++;
                continue;
            }
        }
        if (op->opcode == IR_OP_WHILE && flattenable(b, op)) {
            flatten_while(b, op, scope);
            continue;
        }
        if (op->opcode == IR_OP_OPTIMIZATION_BARRIER && op->n_operands == op->n_results && op->n_operands >= 1) {
            bool ok = true;
            for (uint32_t i = 0; ok && i < op->n_operands; i++)
                ok = static_tensor(op->operands[i]->type) && ir_type_equal(op->operands[i]->type, op->results[i].type);
            if (ok) {
                flatten_barrier(b, op, scope);
                continue;
            }
        }
        if (case_flattenable(op)) {
            flatten_case(b, op, scope);
            continue;
        }
        push_op(b, op, PK_OP, scope, -1, b->counter);
        b->counter += (op->n_results > 0) + nested_results(op);
    }
}

static void pbuild_free(pbuild *b)
{
    ir__map_free(&b->tup_while);
    ir__map_free(&b->tup_bad);
    ir__map_free(&b->w_bad);
    ir__map_free(&b->w_flat);
    ir__map_free(&b->carried);
    ap_free(b->whiles);
    ap_free(b->ents);
    ap_free(b->al);
    ap_free(b->groups);
    ap_free(b->branches);
    ap_free(b->scope_parent);
    ir_pctx *c = b->c;
    memset(b, 0, sizeof *b);
    b->c = c;
}

int ir_pctx_new(ir_module *m, ir_op *func, const ir_mesh *mesh, ir_pctx **out, ap_error *err)
{
    *out = NULL;
    ir_block *body = ir_func_entry(func);
    if (!body)
        return ap_error_set(err, AP_EINVALID, "@%s has no body to partition", ir_func_name(func));
    if (func->regions[0].n_blocks != 1)
        return ap_error_set(err, AP_EUNSUPPORTED, "@%s has several blocks; only single-block functions can be partitioned",
                            ir_func_name(func));
    if (!body->last || body->last->opcode != IR_OP_FUNC_RETURN)
        return ap_error_set(err, AP_EINVALID, "@%s does not end with func.return", ir_func_name(func));
    ir_pctx *c = ap_calloc(1, sizeof *c);
    if (!c)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    c->m = m;
    c->func = func;
    c->mesh = *mesh;
    c->n_args = body->n_args;
    c->ret = body->last;
    pbuild pb = {.c = c};
    c->scratch = ir_module_new(NULL);
    if (!c->scratch)
        goto oom;
    new_scope(&pb, 0);
    scan_uses(&pb, body);
    if (!pb.oom)
        walk(&pb, body, 0, c->ret);
    if (pb.oom)
        goto oom;
    c->n_ops = pb.n;
    uint32_t n_res = 0, n_opd = 0;
    for (uint32_t k = 0; k < pb.n; k++) {
        n_res += pb.ents[k].op->n_results;
        n_opd += pb.ents[k].op->n_operands;
    }
    c->n_vals = c->n_args + n_res;
    c->n_ret = c->ret->n_operands;
    c->ops = ap_malloc(sizeof *c->ops * (c->n_ops + 1));
    c->op_kind = ap_malloc(c->n_ops + 1);
    c->op_scope = ap_malloc(sizeof *c->op_scope * (c->n_ops + 1));
    c->op_group = ap_malloc(sizeof *c->op_group * (c->n_ops + 1));
    c->vals = ap_malloc(sizeof *c->vals * (c->n_vals + 1));
    c->val_op = ap_malloc(sizeof *c->val_op * (c->n_vals + 1));
    c->op_val0 = ap_malloc(sizeof *c->op_val0 * (c->n_ops + 1));
    c->printed_max = ap_malloc(sizeof *c->printed_max * (c->n_ops + 1));
    c->opd0 = ap_malloc(sizeof *c->opd0 * (c->n_ops + 1));
    c->opd_val = ap_malloc(sizeof *c->opd_val * (n_opd + 1));
    c->ret_val = ap_malloc(sizeof *c->ret_val * (c->n_ret + 1));
    c->ret_alias_arg = ap_malloc(sizeof *c->ret_alias_arg * (c->n_ret + 1));
    c->use0 = ap_calloc(c->n_vals + 1, sizeof *c->use0);
    c->use_op = ap_malloc(sizeof *c->use_op * (n_opd + c->n_ret + 1));
    c->use_idx = ap_malloc(sizeof *c->use_idx * (n_opd + c->n_ret + 1));
    if (!c->ops || !c->op_kind || !c->op_scope || !c->op_group || !c->vals || !c->val_op || !c->op_val0 ||
        !c->printed_max || !c->opd0 || !c->opd_val || !c->ret_val || !c->ret_alias_arg || !c->use0 || !c->use_op ||
        !c->use_idx)
        goto oom;
    /* the groups and scopes move into the context */
    c->groups = pb.groups;
    c->n_groups = pb.n_groups;
    pb.groups = NULL;
    c->branches = pb.branches;
    pb.branches = NULL;
    c->scope_parent = pb.scope_parent;
    c->n_scopes = pb.n_scopes;
    pb.scope_parent = NULL;
    uint32_t v = 0;
    for (uint32_t i = 0; i < c->n_args; i++) {
        c->vals[v] = &body->args[i];
        c->val_op[v] = -1;
        if (!ir__map_put(&c->val_index, &body->args[i], v))
            goto oom;
        v++;
    }
    uint32_t k = 0;
    for (k = 0; k < c->n_ops; k++) {
        ir_op *op = pb.ents[k].op;
        c->ops[k] = op;
        c->op_kind[k] = pb.ents[k].kind;
        c->op_scope[k] = pb.ents[k].scope;
        c->op_group[k] = pb.ents[k].group;
        c->op_val0[k] = v;
        c->printed_max[k] = pb.ents[k].printed;
        for (uint32_t j = 0; j < op->n_results; j++) {
            c->vals[v] = &op->results[j];
            c->val_op[v] = (int32_t)k;
            if (!ir__map_put(&c->val_index, &op->results[j], v))
                goto oom;
            v++;
        }
    }
    c->op_val0[c->n_ops] = v;
    for (uint32_t i = 0; i < pb.n_al; i++) {
        uint32_t id = ir__value_id(c, pb.al[i][1]);
        if (id == VAL_NONE) {
            pbuild_free(&pb);
            ir_pctx_free(c);
            return ap_error_set(err, AP_EINTERNAL, "partition context: an alias of a value it does not know");
        }
        if (!ir__map_put(&c->val_index, pb.al[i][0], id))
            goto oom;
    }
    pbuild_free(&pb);
    /* operands, and uses counted per value */
    uint32_t o = 0;
    for (k = 0; k < c->n_ops; k++) {
        ir_op *op = c->ops[k];
        c->opd0[k] = o;
        for (uint32_t i = 0; i < op->n_operands; i++) {
            uint32_t id = ir__value_id(c, op->operands[i]);
            if (id == VAL_NONE) {
                ir_pctx_free(c);
                return ap_error_set(err, AP_EINVALID, "operand #%u of '%s' (line %u) is not a value of @%s", i, op->name,
                                    op->src_line, ir_func_name(func));
            }
            c->opd_val[o++] = id;
            c->use0[id]++;
        }
    }
    c->opd0[c->n_ops] = o;
    for (uint32_t i = 0; i < c->n_ret; i++) {
        uint32_t id = ir__value_id(c, c->ret->operands[i]);
        if (id == VAL_NONE) {
            ir_pctx_free(c);
            return ap_error_set(err, AP_EINVALID, "returned value #%u is not a value of @%s", i, ir_func_name(func));
        }
        c->ret_val[i] = id;
        c->ret_alias_arg[i] = -1;
        c->use0[id]++;
    }
    /* counts -> CSR offsets, then fill */
    uint32_t sum = 0;
    for (v = 0; v < c->n_vals; v++) {
        uint32_t n = c->use0[v];
        c->use0[v] = sum;
        sum += n;
    }
    c->use0[c->n_vals] = sum;
    uint32_t *fill = ap_calloc(c->n_vals + 1, sizeof *fill);
    if (!fill)
        goto oom;
    for (k = 0; k < c->n_ops; k++)
        for (uint32_t i = 0; i < c->ops[k]->n_operands; i++) {
            uint32_t id = c->opd_val[c->opd0[k] + i];
            uint32_t at = c->use0[id] + fill[id]++;
            c->use_op[at] = k;
            c->use_idx[at] = i;
        }
    for (uint32_t i = 0; i < c->n_ret; i++) {
        uint32_t id = c->ret_val[i];
        uint32_t at = c->use0[id] + fill[id]++;
        c->use_op[at] = USE_RETURN;
        c->use_idx[at] = i;
    }
    ap_free(fill);
    /* donated arguments: the result they alias must come back like them */
    for (uint32_t a = 0; a < c->n_args; a++) {
        ir_attr *al = ir_func_arg_attr(func, a, "tf.aliasing_output");
        if (al && al->kind == IR_A_INT && al->u.i >= 0 && (uint64_t)al->u.i < c->n_ret)
            c->ret_alias_arg[al->u.i] = (int32_t)a;
    }
    int rc = ir__tmr_build(c, err);
    if (rc < 0) {
        ir_pctx_free(c);
        return rc;
    }
    *out = c;
    return 0;
oom:
    pbuild_free(&pb);
    ir_pctx_free(c);
    return ap_error_set(err, AP_ENOMEM, "out of memory");
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
    ir_loop *ne = ap_realloc(p->nest, sizeof *ne * IR_MAX_AXES * cap);
    if (!ne)
        return false;
    p->nest = ne;
    uint8_t *pd = ap_realloc(p->pending, cap);
    if (!pd)
        return false;
    p->pending = pd;
    memset(p->nlen + p->cap_ops, 0, cap - p->cap_ops);
    memset(p->pending + p->cap_ops, 0, cap - p->cap_ops);
    p->cap_ops = cap;
    return true;
}

int ir_partition_new(const ir_pctx *ctx, ir_partition **out, ap_error *err)
{
    ir_partition *p = ap_calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    p->ctx = ctx;
    p->arg_layout = ap_malloc(sizeof *p->arg_layout * (ctx->n_args + 1));
    p->vop_of = ap_malloc(sizeof *p->vop_of * (ctx->n_vals + 1));
    if (!p->arg_layout || !p->vop_of || !ensure_ops(p, ctx->n_ops + 16)) {
        ir_partition_free(p);
        return ap_error_set(err, AP_ENOMEM, "out of memory");
    }
    for (uint32_t a = 0; a < ctx->n_args; a++)
        ir_layout_init(&p->arg_layout[a]);
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
    ap_free(p->arg_layout);
    ap_free(p->vop_of);
    ap_free(p->vops);
    ap_free(p->blocked);
    ap_free(p->log);
    ap_free(p);
}

int ir_partition_clone(const ir_partition *src, ir_partition **out, ap_error *err)
{
    ir_partition *p;
    int rc = ir_partition_new(src->ctx, &p, err);
    if (rc < 0)
        return rc;
    uint32_t n = src->ctx->n_ops + src->n_vops;
    if (!ensure_ops(p, n))
        goto oom;
    memcpy(p->nlen, src->nlen, n);
    memcpy(p->pending, src->pending, n);
    memcpy(p->nest, src->nest, sizeof *p->nest * IR_MAX_AXES * n);
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
    memcpy(dst->nest, src->nest, sizeof *dst->nest * IR_MAX_AXES * n);
    if (had > n) {
        /* ops past src's: as a fresh state has them */
        memset(dst->nlen + n, 0, had - n);
        memset(dst->pending + n, 0, had - n);
    }
    memcpy(dst->arg_layout, src->arg_layout, sizeof *dst->arg_layout * c->n_args);
    memcpy(dst->vop_of, src->vop_of, sizeof *dst->vop_of * c->n_vals);
    if (src->n_vops)
        memcpy(dst->vops, src->vops, sizeof *dst->vops * src->n_vops);
    dst->n_vops = src->n_vops;
    memcpy(dst->axis_seq, src->axis_seq, sizeof dst->axis_seq);
    dst->n_axis_seq = src->n_axis_seq;
    dst->quiet = src->quiet;
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

/* ------------------------------------------------------- op addressing */

static uint32_t n_all_ops(const ir_partition *p) { return p->ctx->n_ops + p->n_vops; }

static bool is_vop(const ir_partition *p, uint32_t op) { return op >= p->ctx->n_ops; }

static uint32_t op_n_operands(const ir_partition *p, uint32_t op)
{
    /* from the context's operand table: no trip to the op itself */
    return is_vop(p, op) ? 1 : p->ctx->opd0[op + 1] - p->ctx->opd0[op];
}

static uint32_t op_n_results(const ir_partition *p, uint32_t op)
{
    return is_vop(p, op) ? 1 : p->ctx->op_val0[op + 1] - p->ctx->op_val0[op];
}

static uint32_t operand_val(const ir_partition *p, uint32_t op, uint32_t i)
{
    return is_vop(p, op) ? p->vops[op - p->ctx->n_ops].val : p->ctx->opd_val[p->ctx->opd0[op] + i];
}

/* Global type of result j of an op. */
static const ir_type *result_type(const ir_partition *p, uint32_t op, uint32_t j)
{
    if (is_vop(p, op))
        return val_type(p->ctx, p->vops[op - p->ctx->n_ops].val);
    return p->ctx->ops[op]->results[j].type;
}

static const ir_type *operand_type(const ir_partition *p, uint32_t op, uint32_t i)
{
    return val_type(p->ctx, operand_val(p, op, i));
}

/* Entries of an op: [*lo, *hi). */
static void op_entries(const ir_partition *p, uint32_t op, uint32_t *lo, uint32_t *hi)
{
    const ir_pctx *c = p->ctx;
    if (!is_vop(p, op)) {
        *lo = c->tmr0[op];
        *hi = c->tmr0[op + 1];
        return;
    }
    const ir_type *t = val_type(c, p->vops[op - c->n_ops].val);
    uint32_t r = t && t->kind == IR_T_TENSOR && t->rank >= 0 ? (uint32_t)t->rank : 0;
    if (r > c->id_rank_max)
        r = c->id_rank_max;
    *lo = c->id0[r];
    *hi = c->id0[r + 1];
}

static const ir_loop *nest_of(const ir_partition *p, uint32_t op) { return &p->nest[(size_t)op * IR_MAX_AXES]; }

static int nest_find(const ir_partition *p, uint32_t op, int axis)
{
    const ir_loop *n = nest_of(p, op);
    for (int k = 0; k < p->nlen[op]; k++)
        if (n[k].axis == axis)
            return k;
    return -1;
}

/* ---------------------------------------------------------- layouts */

void ir__needed_layout(const ir_partition *p, uint32_t op, uint32_t i, ir_layout *out)
{
    ir_layout_init(out);
    const ir_loop *n = nest_of(p, op);
    for (int k = 0; k < p->nlen[op]; k++) {
        int8_t s = tmr_spec(p->ctx, n[k].entry)[i];
        if (s >= 0)
            ir_layout_push(out, n[k].axis, s);
        else if (s == SP_PARTIAL) {
            out->dim[n[k].axis] = IR_AX_PARTIAL;
            out->red[n[k].axis] = p->ctx->entries[n[k].entry].red;
        }
    }
}

void ir__result_layout(const ir_partition *p, uint32_t op, uint32_t j, ir_layout *out)
{
    ir_layout_init(out);
    uint32_t no = op_n_operands(p, op);
    const ir_loop *n = nest_of(p, op);
    for (int k = 0; k < p->nlen[op]; k++) {
        int8_t s = tmr_spec(p->ctx, n[k].entry)[no + j];
        if (s >= 0)
            ir_layout_push(out, n[k].axis, s);
        else if (s == SP_SUM) {
            out->dim[n[k].axis] = IR_AX_PARTIAL;
            out->red[n[k].axis] = p->ctx->entries[n[k].entry].red;
        }
    }
}

void ir__produced_layout(const ir_partition *p, uint32_t v, ir_layout *out)
{
    const ir_pctx *c = p->ctx;
    if (c->val_op[v] < 0) {
        *out = p->arg_layout[v];
        return;
    }
    uint32_t op = (uint32_t)c->val_op[v];
    ir__result_layout(p, op, v - c->op_val0[op], out);
}

void ir__seen_layout(const ir_partition *p, uint32_t v, ir_layout *out)
{
    if (p->vop_of[v] >= 0)
        ir__result_layout(p, vop_id(p, (uint32_t)p->vop_of[v]), 0, out);
    else
        ir__produced_layout(p, v, out);
}

void ir_partition_value_layout(const ir_partition *p, const ir_value *v, ir_layout *out)
{
    uint32_t id = ir__value_id(p->ctx, v);
    if (id == VAL_NONE)
        ir_layout_init(out);
    else
        ir__seen_layout(p, id, out);
}

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

/* ------------------------------------------------------------- log */

static void log_action(ir_partition *p, char kind, uint32_t val, int dim, int axis)
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

/* ========================================================== propagation */

/* Local size of dim d of a global type under a layout, -1 when dynamic. */
static int64_t local_dim(const ir_pctx *c, const ir_type *t, const ir_layout *l, int d)
{
    if (!t || t->kind != IR_T_TENSOR || d >= t->rank || t->dims[d] < 0)
        return -1;
    int64_t n = t->dims[d];
    for (int a = 0; a < c->mesh.n_axes; a++)
        if (l->dim[a] == d)
            n /= c->mesh.sizes[a];
    return n;
}

/* Can entry e be added to op's nest as a loop over axis: every dim it
 * slices or tiles divides by the axis size after the axes already there? */
static bool entry_divisible(const ir_partition *p, uint32_t op, uint32_t e, int axis, ir_block_kind *why, int *bad)
{
    const ir_pctx *c = p->ctx;
    const int8_t *s = tmr_spec(c, e);
    uint32_t no = op_n_operands(p, op), nr = op_n_results(p, op);
    int64_t n = c->mesh.sizes[axis];
    ir_layout l;
    for (uint32_t i = 0; i < no + nr; i++) {
        if (s[i] < 0)
            continue;
        const ir_type *t;
        if (i < no) {
            ir__needed_layout(p, op, i, &l);
            t = operand_type(p, op, i);
        } else {
            ir__result_layout(p, op, i - no, &l);
            t = result_type(p, op, i - no);
        }
        int64_t local = local_dim(c, t, &l, s[i]);
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

/* Deep tiling, one step or several: does `longer` tile dim d with the axes
 * `shorter` tiles it with, then `axis`, then possibly more (minor) axes?
 * A value tiled [a, b] on a dim is "tiled along a" for an op that slices
 * nothing of it yet, and "along b" for one that slices it along a: the same
 * answers as when the value was tiled along a, propagated, then along b
 * (notes/partir-semantics.md).  The axes after `axis` only mean that the
 * op takes a larger piece until they propagate too. */
static bool axes_follow(const ir_layout *longer, const ir_layout *shorter, int d, int axis)
{
    int la[IR_MAX_AXES], sa[IR_MAX_AXES];
    int nl = ir_layout_dim_axes(longer, d, la), ns = ir_layout_dim_axes(shorter, d, sa);
    if (nl < ns + 1 || la[ns] != axis)
        return false;
    for (int k = 0; k < ns; k++)
        if (la[k] != sa[k])
            return false;
    return true;
}

enum { ST_NONE, ST_TILED, ST_PARTIAL, ST_MISMATCH };

typedef struct opd_status {
    uint8_t st;
    int8_t dim;
    uint8_t red;
} opd_status;

/* How operand i of op arrives along axis (op has no loop over it). */
static opd_status status_of(const ir_partition *p, uint32_t op, uint32_t i, int axis)
{
    opd_status r = {ST_NONE, -1, 0};
    ir_layout seen, need;
    operand_layout(p, op, i, &seen);
    int d = seen.dim[axis];
    if (d == IR_AX_NONE)
        return r;
    if (d == IR_AX_PARTIAL) {
        r.st = ST_PARTIAL;
        r.red = seen.red[axis];
        return r;
    }
    ir__needed_layout(p, op, i, &need);
    r.dim = (int8_t)d;
    r.st = axes_follow(&seen, &need, d, axis) ? ST_TILED : ST_MISMATCH;
    return r;
}

/* Does value v (partial) feed only op? Then its sum may flow through op
 * without another use needing a second reduction of it. */
static bool single_consumer(const ir_partition *p, uint32_t v, uint32_t op)
{
    const ir_pctx *c = p->ctx;
    if (is_vop(p, op))
        return true;
    for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++)
        if (c->use_op[u] != op)
            return false;
    return true;
}

typedef struct fwd_result {
    int n_full, n_inf;
    uint32_t full, inf; /* the entry when unique */
    bool any_status;
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

static void forward_analyze(ir_partition *p, uint32_t op, int axis, fwd_result *res, bool record)
{
    const ir_pctx *c = p->ctx;
    uint32_t no = op_n_operands(p, op), nr = op_n_results(p, op);
    opd_status st[MAXS_OPD];
    memset(res, 0, sizeof *res);
    if (no > MAXS_OPD)
        return;
    bool tiled = false, partial = false;
    for (uint32_t i = 0; i < no; i++) {
        st[i] = status_of(p, op, i, axis);
        tiled |= st[i].st == ST_TILED;
        partial |= st[i].st == ST_PARTIAL;
    }
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
                    ok = c->entries[e].red == st[i].red && single_consumer(p, operand_val(p, op, i), op);
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
        if (!entry_divisible(p, op, e, axis, &why, &bad)) {
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
    (void)nr;
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

static bool push_loop(ir_partition *p, uint32_t op, int axis, uint32_t e)
{
    if (p->nlen[op] >= IR_MAX_AXES)
        return false;
    ir_loop *n = &p->nest[(size_t)op * IR_MAX_AXES + p->nlen[op]];
    n->axis = (uint8_t)axis;
    n->entry = e;
    p->nlen[op]++;
    return true;
}

/* Which dim the consumers of value v slice it along axis, through the
 * value's identity op when there is one: -1 none, -2 they disagree. */
static int consumers_slice(const ir_partition *p, uint32_t v, int axis, ir_layout *produced)
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
        int8_t s = tmr_spec(c, nest_of(p, u)[at].entry)[i];
        if (s < 0)
            continue;
        /* the consumer must slice exactly what is produced, plus the axis */
        ir_layout need;
        ir__needed_layout(p, u, i, &need);
        if (!axes_follow(&need, produced, s, axis))
            continue;
        if (want >= 0 && want != s)
            return -2;
        want = s;
    }
    return want;
}

/* Backward: the op's result is sliced along axis by its consumers. */
static bool backward(ir_partition *p, uint32_t op, int axis, bool record, uint32_t *entry)
{
    const ir_pctx *c = p->ctx;
    uint32_t no = op_n_operands(p, op), nr = op_n_results(p, op);
    for (uint32_t j = 0; j < nr; j++) {
        uint32_t v = is_vop(p, op) ? VAL_NONE : c->op_val0[op] + j;
        ir_layout produced;
        ir__result_layout(p, op, j, &produced);
        if (produced.dim[axis] != IR_AX_NONE)
            continue;
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
                int8_t s = tmr_spec(c, nest_of(p, user)[at].entry)[i];
                if (s < 0)
                    continue;
                ir_layout need;
                ir__needed_layout(p, user, i, &need);
                if (!axes_follow(&need, &produced, s, axis))
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
            want = consumers_slice(p, v, axis, &produced);
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
            if (!entry_divisible(p, op, e, axis, &why, &bad))
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

typedef struct workq {
    uint32_t *heap; /* op ids ordered by program position */
    uint32_t n, cap;
    uint8_t *queued;
    uint64_t *key; /* per op: its position, computed once */
    uint32_t n_ops;
} workq;

/* Program position: an argument's identity op first, a value's identity op
 * right after its producer. */
static uint64_t position(const ir_partition *p, uint32_t op)
{
    if (!is_vop(p, op))
        return 2 * (uint64_t)op + 2;
    uint32_t v = p->vops[op - p->ctx->n_ops].val;
    int32_t prod = p->ctx->val_op[v];
    return prod < 0 ? 0 : 2 * (uint64_t)prod + 3;
}

static bool wq_push(const ir_partition *p, workq *q, uint32_t op)
{
    (void)p;
    if (op >= q->n_ops || q->queued[op])
        return true;
    if (q->n == q->cap) {
        uint32_t cap = q->cap ? q->cap * 2 : 256;
        uint32_t *h = ap_realloc(q->heap, sizeof *h * cap);
        if (!h)
            return false;
        q->heap = h;
        q->cap = cap;
    }
    q->queued[op] = 1;
    uint32_t i = q->n++;
    uint64_t key = q->key[op];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (q->key[q->heap[parent]] <= key)
            break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = op;
    return true;
}

static uint32_t wq_pop(workq *q)
{
    uint32_t top = q->heap[0];
    q->queued[top] = 0;
    uint32_t last = q->heap[--q->n];
    uint64_t key = q->key[last];
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t mk = key;
        if (l < q->n && q->key[q->heap[l]] < mk) {
            m = l;
            mk = q->key[q->heap[l]];
        }
        if (r < q->n && q->key[q->heap[r]] < mk)
            m = r;
        if (m == i)
            break;
        q->heap[i] = q->heap[m];
        i = m;
    }
    if (q->n)
        q->heap[i] = last;
    return top;
}

/* Marks what a change to `op` may affect: its producers (backward), its
 * consumers (forward) and itself. */
static bool touch_neighbours(const ir_partition *p, workq *q, uint8_t *dirty, uint32_t op)
{
    const ir_pctx *c = p->ctx;
    bool ok = wq_push(p, q, op);
    dirty[op] = 1;
    uint32_t no = op_n_operands(p, op);
    for (uint32_t i = 0; i < no; i++) {
        uint32_t v = operand_val(p, op, i);
        uint32_t prod;
        if (!is_vop(p, op) && p->vop_of[v] >= 0)
            prod = vop_id(p, (uint32_t)p->vop_of[v]);
        else if (c->val_op[v] >= 0)
            prod = (uint32_t)c->val_op[v];
        else
            continue;
        ok &= wq_push(p, q, prod);
        dirty[prod] = 1;
    }
    uint32_t nr = op_n_results(p, op);
    for (uint32_t j = 0; j < nr; j++) {
        uint32_t v = is_vop(p, op) ? p->vops[op - c->n_ops].val : c->op_val0[op] + j;
        if (!is_vop(p, op) && p->vop_of[v] >= 0) {
            uint32_t vo = vop_id(p, (uint32_t)p->vop_of[v]);
            ok &= wq_push(p, q, vo);
            dirty[vo] = 1;
            continue;
        }
        for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++) {
            uint32_t user = c->use_op[u];
            if (user == USE_RETURN)
                continue;
            ok &= wq_push(p, q, user);
            dirty[user] = 1;
        }
    }
    return ok;
}

/* Inference on an argument: tile it so the op's new need is met. */
static void infer_operands(ir_partition *p, uint32_t op, int axis, uint32_t e, workq *q, uint8_t *dirty)
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
        ir_layout *al = &p->arg_layout[v];
        if (al->dim[axis] != IR_AX_NONE)
            continue;
        ir_layout need;
        ir__needed_layout(p, op, i, &need);
        int na[IR_MAX_AXES], aa[IR_MAX_AXES];
        int nn = ir_layout_dim_axes(&need, s[i], na), np = ir_layout_dim_axes(al, s[i], aa);
        bool same = nn == np + 1 && na[np] == axis;
        for (int k = 0; same && k < np; k++)
            same = na[k] == aa[k];
        if (!same)
            continue;
        ir_layout_push(al, axis, s[i]);
        for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++)
            if (c->use_op[u] != USE_RETURN) {
                wq_push(p, q, c->use_op[u]);
                dirty[c->use_op[u]] = 1;
            }
    }
}

/* Propagates one axis to its fixpoint from the ops in `start`. */
static int propagate_axis(ir_partition *p, int axis, const uint8_t *start, uint8_t *dirty, ap_error *err)
{
    uint32_t n = n_all_ops(p);
    workq q = {0};
    uint32_t *inferable = NULL, n_inf = 0;
    int rc = 0;
    q.n_ops = n;
    q.queued = ap_calloc(n + 1, 1);
    q.key = ap_malloc(sizeof *q.key * (n + 1));
    inferable = ap_malloc(sizeof *inferable * (n + 1));
    if (!q.queued || !inferable || !q.key) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory in propagation");
        goto out;
    }
    for (uint32_t op = 0; op < n; op++)
        q.key[op] = position(p, op) * 2 + (op >= p->ctx->n_ops); /* ties: a real op first */
    for (uint32_t op = 0; op < n; op++)
        if (start[op] && !wq_push(p, &q, op))
            goto oom;
    for (;;) {
        /* phase 1: entries every tiled operand (or consumer) agrees on */
        n_inf = 0;
        while (q.n) {
            uint32_t op = wq_pop(&q);
            if (nest_find(p, op, axis) >= 0) {
                if (!p->quiet)
                    diagnose_axis_used(p, op, axis);
                continue;
            }
            fwd_result fr;
            forward_analyze(p, op, axis, &fr, !p->quiet);
            uint32_t e;
            if (fr.n_full == 1) {
                e = fr.full;
            } else if (backward(p, op, axis, !p->quiet && !fr.any_status, &e)) {
                /* e set */
            } else {
                if (fr.n_full == 0 && fr.n_inf == 1)
                    inferable[n_inf++] = op;
                continue;
            }
            if (!push_loop(p, op, axis, e))
                continue;
            if (!touch_neighbours(p, &q, dirty, op))
                goto oom;
        }
        /* phase 2: inference, in program order, each checked again */
        bool any = false;
        for (uint32_t k = 0; k < n_inf; k++) {
            uint32_t op = inferable[k];
            if (nest_find(p, op, axis) >= 0)
                continue;
            fwd_result fr;
            forward_analyze(p, op, axis, &fr, false);
            if (fr.n_full != 0 || fr.n_inf != 1)
                continue;
            if (!push_loop(p, op, axis, fr.inf))
                continue;
            infer_operands(p, op, axis, fr.inf, &q, dirty);
            if (!touch_neighbours(p, &q, dirty, op))
                goto oom;
            any = true;
        }
        if (!any)
            break;
    }
    goto out;
oom:
    rc = ap_error_set(err, AP_ENOMEM, "out of memory in propagation");
out:
    ap_free(q.heap);
    ap_free(q.queued);
    ap_free(q.key);
    ap_free(inferable);
    return rc;
}

/* The tiling both a and b start with: per dim, the longest common prefix
 * of their axes (pending sums dropped). */
static void common_prefix(const ir_layout *a, const ir_layout *b, int rank, ir_layout *out)
{
    ir_layout r;
    ir_layout_init(&r);
    for (int d = 0; d < rank; d++) {
        int xa[IR_MAX_AXES], xb[IR_MAX_AXES];
        int na = ir_layout_dim_axes(a, d, xa), nb = ir_layout_dim_axes(b, d, xb);
        for (int k = 0; k < na && k < nb && xa[k] == xb[k]; k++)
            ir_layout_push(&r, xa[k], d);
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
 * users of changed arguments in `dirty`. */
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
        if (returned || first || ir_layout_equal(&common, &p->arg_layout[v]))
            continue;
        /* only ever add tiling: what the argument has must stay */
        const ir_layout *al = &p->arg_layout[v];
        bool extends = true;
        for (int a = 0; a < c->mesh.n_axes && extends; a++)
            if (al->dim[a] != IR_AX_NONE)
                extends = common.dim[a] == al->dim[a] && common.pos[a] == al->pos[a];
        if (!extends)
            continue;
        p->arg_layout[v] = common;
        for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++)
            dirty[c->use_op[u]] = 1;
        any = true;
    }
    return any;
}

int ir_propagate(ir_partition *p, ap_error *err)
{
    uint32_t n = n_all_ops(p);
    uint8_t *pending = ap_malloc(n + 1), *next = ap_malloc(n + 1);
    int rc = 0;
    if (!pending || !next) {
        rc = ap_error_set(err, AP_ENOMEM, "out of memory in propagation");
        goto out;
    }
    /* start from what actions touched since the last call; changes re-queue
     * their neighbours, for every axis, until nothing changes */
    memcpy(pending, p->pending, n);
    memset(p->pending, 0, n);
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
        bool any = false;
        for (int k = 0; k < n_order; k++) {
            if ((rc = propagate_axis(p, order[k], pending, next, err)) < 0)
                goto out;
        }
        for (uint32_t i = 0; i < n; i++)
            any |= next[i] != 0;
        if (!any) {
            memset(next, 0, n);
            if (!shard_args_by_uses(p, next))
                break;
        }
        memcpy(pending, next, n);
    }
    log_action(p, 'p', 0, 0, 0);
out:
    ap_free(pending);
    ap_free(next);
    return rc;
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
    p->vop_of[v] = (int32_t)k;
    if (c->val_op[v] >= 0) {
        ir_layout l;
        ir__produced_layout(p, v, &l);
        uint32_t lo, hi;
        op_entries(p, op, &lo, &hi);
        int axes[IR_MAX_AXES];
        for (int d = 0; d < (int)p->vops[k].rank; d++) {
            int na = ir_layout_dim_axes(&l, d, axes);
            for (int q = 0; q < na; q++)
                push_loop(p, op, axes[q], lo + (uint32_t)d);
        }
        uint32_t r = p->vops[k].rank > c->id_rank_max ? c->id_rank_max : p->vops[k].rank;
        for (int a = 0; a < c->mesh.n_axes; a++)
            if (l.dim[a] == IR_AX_PARTIAL)
                push_loop(p, op, a, ir__id_partial_entry(c, r, (ir_red)l.red[a]));
    } else {
        /* an argument's identity op passes its tiling through */
        uint32_t lo, hi;
        op_entries(p, op, &lo, &hi);
        int axes[IR_MAX_AXES];
        for (int d = 0; d < (int)p->vops[k].rank; d++) {
            int na = ir_layout_dim_axes(&p->arg_layout[v], d, axes);
            for (int q = 0; q < na; q++)
                push_loop(p, op, axes[q], lo + (uint32_t)d);
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

int32_t ir__loop_dim_op(const ir_pctx *c, uint32_t v, int dim)
{
    if (dim < 0 || dim >= 32)
        return -1;
    int32_t k = c->val_op[v];
    if (k >= 0 && c->op_kind[k] == PK_CARRY && (c->carry_layer[k] >> dim & 1))
        return k;
    for (uint32_t u = c->use0[v]; u < c->use0[v + 1]; u++) {
        uint32_t op = c->use_op[u];
        if (op != USE_RETURN && c->op_kind[op] == PK_CARRY && (c->carry_layer[op] >> dim & 1))
            return (int32_t)op;
    }
    return -1;
}

bool ir_pctx_loop_dim(const ir_pctx *c, uint32_t v, int dim)
{
    return v < c->n_vals && ir__loop_dim_op(c, v, dim) >= 0;
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
        ir_layout_push(&p->arg_layout[v], axis, dim);
    } else {
        int k = get_vop(p, v, err);
        if (k < 0)
            return k;
        uint32_t op = vop_id(p, (uint32_t)k);
        uint32_t lo, hi;
        op_entries(p, op, &lo, &hi);
        if (c->val_op[v] < 0) /* an atomic argument: tile the argument itself */
            ir_layout_push(&p->arg_layout[v], axis, dim);
        if (!push_loop(p, op, axis, lo + (uint32_t)dim))
            return refuse(p, "tile", v, err, "too many axes");
    }
    touch_value(p, v, axis);
    log_action(p, 't', v, dim, axis);
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
    if (!push_loop(p, op, axis, c->any_entry))
        return refuse(p, "atomic", v, err, "too many axes");
    touch_value(p, v, axis);
    log_action(p, 'a', v, -1, axis);
    return 0;
}

/* The schedule as applied: tile/atomic actions and propagates. */
void ir_partition_schedule(const ir_partition *p, ap_buf *b)
{
    const ir_pctx *c = p->ctx;
    for (uint32_t i = 0; i < p->n_log; i++) {
        const action_rec *r = &p->log[i];
        char name[160];
        if (r->kind == 'p') {
            ap_buf_puts(b, "propagate\n");
            continue;
        }
        const char *loc = c->val_op[r->val] < 0 ? ir_func_arg_name(c->func, r->val) : NULL;
        if (loc && strpbrk(loc, " \t;#"))
            snprintf(name, sizeof name, "\"%s\"", loc);
        else
            value_name(p, r->val, name, sizeof name);
        if (r->kind == 't')
            ap_buf_printf(b, "tile %s %d %s\n", name, r->dim, c->mesh.names[r->axis]);
        else
            ap_buf_printf(b, "atomic %s %s\n", name, c->mesh.names[r->axis]);
    }
}
