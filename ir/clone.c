/*
 * clone.c - copying ops (with their regions) into a module, possibly
 * another one: types, attributes and locations are re-made in the target
 * module; operands are looked up in a value map, and values the map does
 * not know (captured from an enclosing scope) are asked of a callback.
 */
#include "ir_int.h"

void ir__cloner_init(ir_cloner *c, ir_module *dst)
{
    memset(c, 0, sizeof *c);
    c->dst = dst;
}

void ir__cloner_free(ir_cloner *c)
{
    ir__map_free(&c->map);
    ap_free(c->tab);
    memset(c, 0, sizeof *c);
}

static bool cloner_map(ir_cloner *c, const ir_value *from, ir_value *to)
{
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 256;
        ir_value **t = ap_realloc(c->tab, sizeof *t * cap);
        if (!t)
            return !(c->oom = true);
        c->tab = t;
        c->cap = cap;
    }
    c->tab[c->n] = to;
    if (!ir__map_put(&c->map, from, c->n))
        return !(c->oom = true);
    c->n++;
    return true;
}

static ir_value *cloner_get(ir_cloner *c, const ir_value *v)
{
    uint32_t k;
    if (ir__map_get(&c->map, v, &k))
        return c->tab[k];
    if (c->resolve) {
        ir_value *r = c->resolve(c->resolve_ctx, v);
        if (r)
            cloner_map(c, v, r);
        return r;
    }
    return NULL;
}

static bool clone_region(ir_cloner *c, const ir_region *src, ir_region *dst)
{
    ir_module *m = c->dst;
    uint32_t nb = src->n_blocks ? src->n_blocks : 1;
    ir_block **blocks = ap_malloc(sizeof *blocks * nb);
    if (!blocks)
        return !(c->oom = true);
    uint32_t i = 0;
    bool ok = true;
    for (const ir_block *b = src->first; b && ok; b = b->next, i++) {
        const ir_type *small[16], **types = small;
        if (b->n_args > 16 && !(types = ap_malloc(sizeof *types * b->n_args))) {
            ok = false;
            break;
        }
        for (uint32_t k = 0; k < b->n_args; k++)
            types[k] = ir__type_clone(m, b->args[k].type);
        blocks[i] = ir_block_new(m, dst, b->n_args, types);
        if (types != small)
            ap_free(types);
        if (!blocks[i]) {
            ok = false;
            break;
        }
        for (uint32_t k = 0; k < b->n_args && ok; k++) {
            blocks[i]->args[k].loc = ir__loc_clone(m, b->args[k].loc);
            ok = cloner_map(c, &b->args[k], &blocks[i]->args[k]);
        }
    }
    i = 0;
    for (const ir_block *b = src->first; b && ok; b = b->next, i++) {
        for (const ir_op *op = b->first; op && ok; op = op->next) {
            ir_op *n = ir__clone_op(c, op, NULL, NULL);
            if (!n) {
                ok = false;
                break;
            }
            for (uint32_t s = 0; s < op->n_successors; s++) {
                uint32_t idx = 0;
                for (const ir_block *x = src->first; x && x != op->successors[s]; x = x->next)
                    idx++;
                n->successors[s] = blocks[idx < nb ? idx : 0];
            }
            ir_block_append(blocks[i], n);
        }
    }
    ap_free(blocks);
    if (!ok)
        c->oom = c->oom || true;
    return ok;
}

ir_op *ir__clone_op(ir_cloner *c, const ir_op *src, ir_value *const *operands, const ir_type *const *result_types)
{
    ir_module *m = c->dst;
    const ir_type *small[16], **types = small;
    ir_op *op = NULL;
    if (src->n_results > 16 && !(types = ap_malloc(sizeof *types * src->n_results)))
        goto oom;
    for (uint32_t j = 0; j < src->n_results; j++)
        types[j] = result_types ? result_types[j] : ir__type_clone(m, src->results[j].type);
    op = ir_op_new(m, (ir_opcode)src->opcode, src->opcode == IR_OP_UNKNOWN ? src->name : NULL, src->n_operands, NULL,
                   src->n_results, types, src->n_regions);
    if (types != small)
        ap_free(types);
    if (!op)
        goto oom;
    for (uint32_t i = 0; i < src->n_operands; i++) {
        op->operands[i] = operands ? operands[i] : cloner_get(c, src->operands[i]);
        if (!op->operands[i]) {
            c->failed_value = src->operands[i];
            return NULL;
        }
    }
    op->n_attrs = src->n_attrs;
    op->n_props = src->n_props;
    if (src->n_attrs) {
        op->attrs = ap_arena_alloc(&m->arena, sizeof *op->attrs * src->n_attrs);
        if (!op->attrs)
            goto oom;
        for (uint32_t i = 0; i < src->n_attrs; i++) {
            op->attrs[i].name = ir_intern(m, src->attrs[i].name, strlen(src->attrs[i].name));
            op->attrs[i].value = ir__attr_clone(m, src->attrs[i].value);
            if (!op->attrs[i].name || !op->attrs[i].value)
                goto oom;
        }
    }
    op->loc = ir__loc_clone(m, src->loc);
    op->src_line = src->src_line;
    op->src_col = src->src_col;
    if (src->tmpl) {
        ir_template *t = ap_arena_alloc(&m->arena, sizeof *t);
        if (!t)
            goto oom;
        t->n = src->tmpl->n;
        /* an op written as its name alone (`sdy.return`) has no pieces,
         * and the parser no array: copying one piece from it read NULL */
        t->pieces = t->n ? ap_arena_memdup(&m->arena, src->tmpl->pieces, sizeof *t->pieces * t->n)
                         : ap_arena_alloc(&m->arena, sizeof *t->pieces);
        if (!t->pieces)
            goto oom;
        for (uint32_t i = 0; i < t->n; i++) {
            ir_tmpl_piece *pc = &t->pieces[i];
            if (pc->kind == IR_TP_TEXT && !(pc->text = ap_arena_strndup(&m->arena, pc->text, pc->len)))
                goto oom;
            if (pc->kind == IR_TP_LOC)
                pc->loc = ir__loc_clone(m, pc->loc);
        }
        op->tmpl = t;
    }
    if (src->n_successors) {
        op->n_successors = src->n_successors;
        op->successors = ap_arena_alloc(&m->arena, sizeof *op->successors * src->n_successors);
        if (!op->successors)
            goto oom;
    }
    for (uint32_t r = 0; r < src->n_regions; r++)
        if (!clone_region(c, &src->regions[r], &op->regions[r]))
            return NULL;
    for (uint32_t j = 0; j < src->n_results; j++)
        if (!cloner_map(c, &src->results[j], &op->results[j]))
            goto oom;
    return op;
oom:
    c->oom = true;
    return NULL;
}

/* A module-level op (a function, a global) of another module cloned onto
 * the end of dst's body, with a cloner of its own: it refers to no value
 * outside itself.  NULL when out of memory. */
static ir_op *append_to_module(ir_module *dst, const ir_op *op)
{
    ir_cloner c;
    ir__cloner_init(&c, dst);
    ir_op *n = ir__clone_op(&c, op, NULL, NULL);
    ir__cloner_free(&c);
    if (n)
        ir_block_append(ir_module_body(dst), n);
    return n;
}

/* Copies function `name` of src into dst, unless dst has it or src does
 * not, and in turn what it calls. */
static bool clone_callee(ir_module *dst, const ir_module *src, const ir_attr *name)
{
    if (!name || name->kind != IR_A_SYMREF || ir_module_func(dst, name->u.str.s))
        return true;
    const ir_op *callee = ir_module_func(src, name->u.str.s);
    if (!callee)
        return true; /* the verifier names it */
    ir_op *f = append_to_module(dst, callee);
    return f && (!f->n_regions || ir__clone_callees(dst, src, &f->regions[0]));
}

bool ir__clone_callees(ir_module *dst, const ir_module *src, const ir_region *r)
{
    for (const ir_block *b = r->first; b; b = b->next)
        for (const ir_op *op = b->first; op; op = op->next) {
            for (uint32_t i = 0; i < op->n_regions; i++)
                if (!ir__clone_callees(dst, src, &op->regions[i]))
                    return false;
            if (op->opcode == IR_OP_FUNC_CALL || op->opcode == IR_OP_COMPOSITE) {
                if (!clone_callee(dst, src, ir_op_attr(op, op->opcode == IR_OP_COMPOSITE ? "decomposition" : "callee")))
                    return false;
                continue;
            }
            /* the StableHLO interpreter's run_parallel names the functions
             * its processes run: {programs = [[@f, ...], ...]} */
            ir_attr *pa = op->opcode == IR_OP_UNKNOWN && !strcmp(op->name, "interpreter.run_parallel")
                              ? ir_op_attr(op, "programs")
                              : NULL;
            for (int32_t i = 0; pa && pa->kind == IR_A_ARRAY && i < pa->u.arr.n; i++) {
                const ir_attr *row = pa->u.arr.items[i];
                for (int32_t j = 0; row->kind == IR_A_ARRAY && j < row->u.arr.n; j++)
                    if (!clone_callee(dst, src, row->u.arr.items[j]))
                        return false;
            }
        }
    return true;
}

bool ir__clone_module_decls(ir_module *dst, const ir_module *src)
{
    for (const ir_op *op = ir_module_body(src)->first; op; op = op->next) {
        if (op->opcode == IR_OP_FUNC)
            continue;
        if (!append_to_module(dst, op))
            return false;
    }
    return true;
}
