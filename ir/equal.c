/*
 * equal.c - structural equality of modules, the judge of round trips:
 * parse(print(m)) must equal m.  Values are compared by their position in
 * the structure (which def they are), never by name.
 */
#include "ir_int.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct cmp {
    ir_ptrmap vmap; /* value of a -> index into bvals */
    const ir_value **bvals;
    uint32_t n_bvals, cap_bvals;
    char *why;
    size_t why_size;
    bool oom;
} cmp;

static bool differ(cmp *c, const ir_op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool differ(cmp *c, const ir_op *op, const char *fmt, ...)
{
    if (!c->why || !c->why_size)
        return false;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (op && op->src_line)
        snprintf(c->why, c->why_size, "%s (op '%s' at %u:%u)", msg, op->name, op->src_line, op->src_col);
    else if (op)
        snprintf(c->why, c->why_size, "%s (op '%s')", msg, op->name);
    else
        snprintf(c->why, c->why_size, "%s", msg);
    return false;
}

static bool pair(cmp *c, const ir_value *a, const ir_value *b)
{
    if (c->n_bvals == c->cap_bvals) {
        uint32_t cap = c->cap_bvals ? c->cap_bvals * 2 : 1024;
        const ir_value **v = ap_realloc(c->bvals, sizeof *v * cap);
        if (!v) {
            c->oom = true;
            return false;
        }
        c->bvals = v;
        c->cap_bvals = cap;
    }
    c->bvals[c->n_bvals] = b;
    if (!ir__map_put(&c->vmap, a, c->n_bvals)) {
        c->oom = true;
        return false;
    }
    c->n_bvals++;
    return true;
}

static const ir_loc *loc_norm(const ir_loc *l)
{
    return l && l->kind != IR_L_UNKNOWN ? l : NULL;
}

/* First pass: pair every definition, checking the shape of the structure. */
static bool pair_region(cmp *c, const ir_region *a, const ir_region *b, const ir_op *owner);

static bool pair_op(cmp *c, const ir_op *a, const ir_op *b)
{
    if (strcmp(a->name, b->name) != 0)
        return differ(c, a, "op names differ: '%s' vs '%s'", a->name, b->name);
    if (a->n_results != b->n_results || a->n_regions != b->n_regions)
        return differ(c, a, "result or region counts differ");
    for (uint32_t i = 0; i < a->n_results; i++)
        if (!pair(c, &a->results[i], &b->results[i]))
            return false;
    for (uint32_t i = 0; i < a->n_regions; i++)
        if (!pair_region(c, &a->regions[i], &b->regions[i], a))
            return false;
    return true;
}

static bool pair_region(cmp *c, const ir_region *a, const ir_region *b, const ir_op *owner)
{
    if (a->n_blocks != b->n_blocks)
        return differ(c, owner, "block counts differ: %u vs %u", a->n_blocks, b->n_blocks);
    for (const ir_block *x = a->first, *y = b->first; x; x = x->next, y = y->next) {
        if (x->n_args != y->n_args || x->n_ops != y->n_ops)
            return differ(c, x->first ? x->first : owner, "blocks differ in argument or op count (%u/%u vs %u/%u)",
                          x->n_args, x->n_ops, y->n_args, y->n_ops);
        for (uint32_t i = 0; i < x->n_args; i++)
            if (!pair(c, &x->args[i], &y->args[i]))
                return false;
        for (const ir_op *p = x->first, *q = y->first; p; p = p->next, q = q->next)
            if (!pair_op(c, p, q))
                return false;
    }
    return true;
}

static bool same_value(cmp *c, const ir_value *a, const ir_value *b)
{
    uint32_t k;
    if (!ir__map_get(&c->vmap, a, &k))
        return false;
    return c->bvals[k] == b;
}

static uint32_t block_index(const ir_block *b)
{
    uint32_t k = 0;
    for (const ir_block *x = b->parent ? b->parent->first : NULL; x && x != b; x = x->next)
        k++;
    return k;
}

static bool cmp_region(cmp *c, const ir_region *a, const ir_region *b, const ir_op *owner);

static bool cmp_op(cmp *c, const ir_op *a, const ir_op *b)
{
    if (a->opcode != b->opcode || a->n_operands != b->n_operands || a->n_successors != b->n_successors)
        return differ(c, a, "operand or successor counts differ");
    for (uint32_t i = 0; i < a->n_operands; i++)
        if (!same_value(c, a->operands[i], b->operands[i]))
            return differ(c, a, "operand #%u refers to a different value", i);
    for (uint32_t i = 0; i < a->n_successors; i++)
        if (block_index(a->successors[i]) != block_index(b->successors[i]))
            return differ(c, a, "successor #%u differs", i);
    for (uint32_t i = 0; i < a->n_results; i++)
        if (!ir_type_equal(a->results[i].type, b->results[i].type))
            return differ(c, a, "type of result #%u differs", i);
    if (a->n_attrs != b->n_attrs || a->n_props != b->n_props)
        return differ(c, a, "attribute counts differ: %u vs %u", a->n_attrs, b->n_attrs);
    for (uint32_t i = 0; i < a->n_attrs; i++) {
        if (strcmp(a->attrs[i].name, b->attrs[i].name) != 0)
            return differ(c, a, "attribute '%s' vs '%s'", a->attrs[i].name, b->attrs[i].name);
        if (!ir_attr_equal(a->attrs[i].value, b->attrs[i].value))
            return differ(c, a, "attribute '%s' differs", a->attrs[i].name);
    }
    if (!ir_loc_equal(loc_norm(a->loc), loc_norm(b->loc)))
        return differ(c, a, "locations differ");
    if (!a->tmpl != !b->tmpl)
        return differ(c, a, "one op is kept as text, the other is not");
    if (a->tmpl) {
        if (a->tmpl->n != b->tmpl->n)
            return differ(c, a, "custom syntax differs");
        for (uint32_t i = 0; i < a->tmpl->n; i++) {
            const ir_tmpl_piece *x = &a->tmpl->pieces[i], *y = &b->tmpl->pieces[i];
            if (x->kind != y->kind || x->index != y->index || x->region != y->region ||
                (x->kind == IR_TP_TEXT && (x->len != y->len || memcmp(x->text, y->text, x->len) != 0)) ||
                (x->kind == IR_TP_LOC && !ir_loc_equal(x->loc, y->loc)))
                return differ(c, a, "custom syntax differs in piece %u", i);
        }
    }
    for (uint32_t i = 0; i < a->n_regions; i++)
        if (!cmp_region(c, &a->regions[i], &b->regions[i], a))
            return false;
    return true;
}

static bool cmp_region(cmp *c, const ir_region *a, const ir_region *b, const ir_op *owner)
{
    for (const ir_block *x = a->first, *y = b->first; x; x = x->next, y = y->next) {
        for (uint32_t i = 0; i < x->n_args; i++) {
            if (!ir_type_equal(x->args[i].type, y->args[i].type))
                return differ(c, owner, "type of block argument #%u differs", i);
            if (!ir_loc_equal(loc_norm(x->args[i].loc), loc_norm(y->args[i].loc)))
                return differ(c, owner, "location of block argument #%u differs", i);
        }
        for (const ir_op *p = x->first, *q = y->first; p; p = p->next, q = q->next)
            if (!cmp_op(c, p, q))
                return false;
    }
    return true;
}

bool ir_module_equal(const ir_module *a, const ir_module *b, char *why, size_t why_size)
{
    cmp c;
    memset(&c, 0, sizeof c);
    c.why = why;
    c.why_size = why_size;
    if (why && why_size)
        why[0] = '\0';
    bool eq = pair_op(&c, a->top, b->top) && cmp_op(&c, a->top, b->top);
    if (eq && ((a->file_metadata == NULL) != (b->file_metadata == NULL) ||
               (a->file_metadata && strcmp(a->file_metadata, b->file_metadata) != 0)))
        eq = differ(&c, NULL, "file metadata sections differ");
    if (eq && ((a->alias_defs == NULL) != (b->alias_defs == NULL) ||
               (a->alias_defs && strcmp(a->alias_defs, b->alias_defs) != 0)))
        eq = differ(&c, NULL, "the alias definitions kept for ops of unknown syntax differ");
    if (c.oom) {
        eq = false;
        if (why && why_size)
            snprintf(why, why_size, "out of memory while comparing");
    }
    ir__map_free(&c.vmap);
    ap_free(c.bvals);
    return eq;
}
