/*
 * context.c - the partition context of a function: its ops, values, uses
 * and TMR entries in flat arrays, built once and shared by every partition
 * state of the function (partition.c) and by propagation (propagate.c).
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

#include <stdio.h>
#include <stdlib.h>

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
    ap_free(c->vtype);
    ap_free(c->val_op);
    ap_free(c->op_val0);
    ap_free(c->printed_max);
    ap_free(c->opd0);
    ap_free(c->opd_val);
    ap_free(c->ret_val);
    ap_free(c->use0);
    ap_free(c->use_op);
    ap_free(c->use_idx);
    ap_free(c->val_captured);
    ap_free(c->cap0);
    ap_free(c->cap_val);
    ap_free(c->ret_alias_arg);
    ap_free(c->tmr0);
    ap_free(c->entries);
    ap_free(c->entry_div);
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

int ir_pctx_rename_axes(ir_pctx *c, const ir_mesh *names, ap_error *err)
{
    if (names->n_axes != c->mesh.n_axes)
        return ap_error_set(err, AP_EINVALID, "renaming the mesh's axes: %d names for %d axes", names->n_axes,
                            c->mesh.n_axes);
    for (int a = 0; a < names->n_axes; a++) {
        if (names->sizes[a] != c->mesh.sizes[a])
            return ap_error_set(err, AP_EINVALID, "renaming the mesh's axes: axis %d has size %lld, not %lld", a,
                                (long long)c->mesh.sizes[a], (long long)names->sizes[a]);
        for (int b = 0; b < a; b++)
            if (!strcmp(names->names[a], names->names[b]))
                return ap_error_set(err, AP_EINVALID, "renaming the mesh's axes: '%s' twice", names->names[a]);
    }
    for (int a = 0; a < names->n_axes; a++)
        memcpy(c->mesh.names[a], names->names[a], sizeof c->mesh.names[a]);
    return 0;
}
ir_op *ir_pctx_func(const ir_pctx *c) { return c->func; }
ir_module *ir_pctx_module(const ir_pctx *c) { return c->m; }
uint32_t ir_pctx_num_ops(const ir_pctx *c) { return c->n_ops; }
ir_op *ir_pctx_op(const ir_pctx *c, uint32_t i) { return i < c->n_ops ? c->ops[i] : NULL; }

uint32_t ir_pctx_barrier(const ir_pctx *c, uint32_t k, uint32_t *first)
{
    if (k >= c->n_ops || c->op_kind[k] != PK_BARRIER)
        return 0;
    const pgroup *g = &c->groups[c->op_group[k]];
    *first = g->carry0;
    return g->n;
}

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

/* Function-level values op k's regions read, in the order the lowering's
 * cloner meets them (an op's operands, then its regions), each once.  An
 * op holding regions here is run whole (its regions are not partitioned):
 * each such value is a use of its own in the lowering plan (plan.c), not
 * in use0. */
typedef struct capbuf {
    uint32_t *v;
    uint32_t n, cap;
    bool oom;
} capbuf;

static void cap_push(capbuf *b, uint32_t v)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (b->v[i] == v)
            return;
    if (b->n == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 16;
        uint32_t *nv = ap_realloc(b->v, sizeof *nv * cap);
        if (!nv) {
            b->oom = true;
            return;
        }
        b->v = nv;
        b->cap = cap;
    }
    b->v[b->n++] = v;
}

static void collect_captured(const ir_pctx *c, const ir_op *op, capbuf *b)
{
    for (uint32_t r = 0; r < op->n_regions; r++)
        for (const ir_block *bl = op->regions[r].first; bl; bl = bl->next)
            for (const ir_op *in = bl->first; in; in = in->next) {
                for (uint32_t i = 0; i < in->n_operands; i++) {
                    uint32_t id = ir__value_id(c, in->operands[i]);
                    if (id != VAL_NONE)
                        cap_push(b, id);
                }
                collect_captured(c, in, b);
            }
}

/* cap0/cap_val (CSR over the ops) and val_captured; false when out of
 * memory. */
static bool captured_lists(ir_pctx *c)
{
    capbuf cb = {0};
    uint32_t n_cap = 0, cap_cap = 0;
    c->cap0 = ap_malloc(sizeof *c->cap0 * (c->n_ops + 2));
    c->val_captured = ap_calloc(c->n_vals + 1, 1);
    if (!c->cap0 || !c->val_captured)
        return false;
    for (uint32_t k = 0; k < c->n_ops; k++) {
        c->cap0[k] = n_cap;
        if (!c->ops[k]->n_regions)
            continue;
        cb.n = 0;
        collect_captured(c, c->ops[k], &cb);
        if (cb.oom)
            goto oom;
        if (cb.n && n_cap + cb.n > cap_cap) {
            uint32_t nc = (n_cap + cb.n) * 2;
            uint32_t *nv = ap_realloc(c->cap_val, sizeof *nv * nc);
            if (!nv)
                goto oom;
            c->cap_val = nv;
            cap_cap = nc;
        }
        for (uint32_t i = 0; i < cb.n; i++) {
            c->cap_val[n_cap++] = cb.v[i];
            c->val_captured[cb.v[i]] = 1;
        }
    }
    c->cap0[c->n_ops] = c->cap0[c->n_ops + 1] = n_cap;
    ap_free(cb.v);
    return true;
oom:
    ap_free(cb.v);
    return false;
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

/* Bytes of a value of type t, in double (the cost model's unit): tuples
 * sum their members, dynamic dims count 1. */
static double value_bytes(const ir_type *t)
{
    if (!t)
        return 0;
    if (t->kind == IR_T_TUPLE) {
        double s = 0;
        for (int32_t i = 0; i < t->n_elems; i++)
            s += value_bytes(t->elems[i]);
        return s;
    }
    if (t->kind != IR_T_TENSOR || t->rank < 0)
        return 0;
    double n = ir_elem_bytes((ir_elem)t->elem);
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i] > 0 ? (double)t->dims[i] : t->dims[i] == 0 ? 0 : 1;
    return n;
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
    c->room = mesh->n_axes > 0 ? (size_t)mesh->n_axes : 1;
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
    c->vtype = ap_malloc(sizeof *c->vtype * (c->n_vals + 1));
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
    if (!c->ops || !c->op_kind || !c->op_scope || !c->op_group || !c->vals || !c->vtype || !c->val_op || !c->op_val0 ||
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
        c->vtype[v] = body->args[i].type;
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
            c->vtype[v] = op->results[j].type;
            c->val_op[v] = (int32_t)k;
            if (!ir__map_put(&c->val_index, &op->results[j], v))
                goto oom;
            v++;
        }
    }
    c->op_val0[c->n_ops] = v;
    /* values the cost model's int64 byte sums would overflow (a 2^64-byte
     * tensor was summed into a peak: signed overflow, UBSan) */
    for (uint32_t i = 0; i < c->n_vals; i++) {
        double bytes = value_bytes(c->vtype[i]);
        if (bytes > IR_MAX_VALUE_BYTES) {
            int32_t kv = c->val_op[i];
            char ty[160];
            ap_buf tb;
            ap_buf_init(&tb);
            ir_type_print(&tb, c->vtype[i]);
            snprintf(ty, sizeof ty, "%s", tb.data ? tb.data : "?");
            ap_buf_free(&tb);
            pbuild_free(&pb);
            int rc;
            if (kv < 0)
                rc = ap_error_set(err, AP_ELIMIT,
                                  "argument %%arg%u of @%s, %s, holds %.3g bytes: autopart models values of at most "
                                  "2^52 bytes (4 PiB), beyond what any mesh holds",
                                  i, ir_func_name(func), ty, bytes);
            else
                rc = ap_error_set(err, AP_ELIMIT,
                                  "'%s' at line %u gives %s, %.3g bytes: autopart models values of at most 2^52 "
                                  "bytes (4 PiB), beyond what any mesh holds",
                                  c->ops[kv]->name, c->ops[kv]->src_line, ty, bytes);
            ir_pctx_free(c);
            return rc;
        }
    }
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
    if (!captured_lists(c))
        goto oom;
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
