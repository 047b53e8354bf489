/*
 * inline.c - flattens func.call of functions defined in the module into
 * the calling function, so the partitioner sees one flat `main`.
 *
 * One forward walk over the caller: each op's operands are first replaced
 * through the substitution map (call results -> the callee's returned
 * values); a call is replaced by a copy of the callee's body inserted before
 * it, and the walk continues into the copy, so calls inside it are inlined
 * too.  Callees are kept in the module (they still print).
 *
 * Before any of it, the size the caller will have is counted (per function,
 * memoized over the call graph): nested calls grow it exponentially (a
 * 4.5 KB module of 20 functions that each call the next twice makes 2^20
 * ops, 1.2 GB and 8-30 s), so past IR_INLINE_MAX_OPS ops, or twice the ops
 * written in the module when that is more, it is refused before a byte is
 * copied.
 */
#include <stdio.h>

#include "ir_int.h"

typedef struct inliner {
    ir_module *m;
    ap_error *err;
    ir_ptrmap subst; /* value -> index into vals */
    ir_value **vals;
    uint32_t n_vals, cap_vals;
    bool oom;
} inliner;

static bool subst_put(inliner *in, const ir_value *from, ir_value *to)
{
    if (in->n_vals == in->cap_vals) {
        uint32_t cap = in->cap_vals ? in->cap_vals * 2 : 256;
        ir_value **v = ap_realloc(in->vals, sizeof *v * cap);
        if (!v)
            return !(in->oom = true);
        in->vals = v;
        in->cap_vals = cap;
    }
    in->vals[in->n_vals] = to;
    if (!ir__map_put(&in->subst, from, in->n_vals))
        return !(in->oom = true);
    in->n_vals++;
    return true;
}

static ir_value *subst_get(const inliner *in, ir_value *v)
{
    uint32_t k;
    while (ir__map_get(&in->subst, v, &k))
        v = in->vals[k];
    return v;
}

static ir_op *clone_op(inliner *in, const ir_op *src, ir_ptrmap *map, ir_value ***tab, uint32_t *n_tab,
                       uint32_t *cap_tab);

static bool map_value(inliner *in, ir_ptrmap *map, ir_value ***tab, uint32_t *n, uint32_t *cap,
                      const ir_value *from, ir_value *to)
{
    if (*n == *cap) {
        uint32_t c = *cap ? *cap * 2 : 256;
        ir_value **v = ap_realloc(*tab, sizeof *v * c);
        if (!v)
            return !(in->oom = true);
        *tab = v;
        *cap = c;
    }
    (*tab)[*n] = to;
    if (!ir__map_put(map, from, *n))
        return !(in->oom = true);
    (*n)++;
    return true;
}

static ir_value *mapped(const ir_ptrmap *map, ir_value **tab, ir_value *v)
{
    uint32_t k;
    return ir__map_get(map, v, &k) ? tab[k] : v;
}

static bool clone_region(inliner *in, const ir_region *src, ir_region *dst, ir_ptrmap *map, ir_value ***tab,
                         uint32_t *n_tab, uint32_t *cap_tab)
{
    /* blocks first, so successors can refer to later blocks */
    ir_block **blocks = ap_malloc(sizeof *blocks * (src->n_blocks ? src->n_blocks : 1));
    if (!blocks)
        return !(in->oom = true);
    uint32_t i = 0;
    for (const ir_block *b = src->first; b; b = b->next, i++) {
        const ir_type *small[16], **types = small;
        if (b->n_args > 16 && !(types = ap_malloc(sizeof *types * b->n_args))) {
            ap_free(blocks);
            return !(in->oom = true);
        }
        for (uint32_t k = 0; k < b->n_args; k++)
            types[k] = b->args[k].type;
        blocks[i] = ir_block_new(in->m, dst, b->n_args, types);
        if (types != small)
            ap_free(types);
        if (!blocks[i]) {
            ap_free(blocks);
            return !(in->oom = true);
        }
        for (uint32_t k = 0; k < b->n_args; k++) {
            blocks[i]->args[k].loc = b->args[k].loc;
            if (!map_value(in, map, tab, n_tab, cap_tab, &b->args[k], &blocks[i]->args[k])) {
                ap_free(blocks);
                return false;
            }
        }
    }
    i = 0;
    for (const ir_block *b = src->first; b; b = b->next, i++) {
        for (const ir_op *op = b->first; op; op = op->next) {
            ir_op *c = clone_op(in, op, map, tab, n_tab, cap_tab);
            if (!c) {
                ap_free(blocks);
                return false;
            }
            for (uint32_t s = 0; s < op->n_successors; s++) {
                uint32_t idx = 0;
                for (const ir_block *x = src->first; x && x != op->successors[s]; x = x->next)
                    idx++;
                c->successors[s] = blocks[idx];
            }
            ir_block_append(blocks[i], c);
        }
    }
    ap_free(blocks);
    return true;
}

static ir_op *clone_op(inliner *in, const ir_op *src, ir_ptrmap *map, ir_value ***tab, uint32_t *n_tab,
                       uint32_t *cap_tab)
{
    ir_module *m = in->m;
    ir_op *op = ap_arena_memdup(&m->arena, src, sizeof *src);
    if (!op)
        return (in->oom = true), NULL;
    op->parent = NULL;
    op->prev = op->next = NULL;
    if (src->n_operands) {
        op->operands = ap_arena_alloc(&m->arena, sizeof(ir_value *) * src->n_operands);
        if (!op->operands)
            return (in->oom = true), NULL;
        for (uint32_t i = 0; i < src->n_operands; i++)
            op->operands[i] = mapped(map, *tab, src->operands[i]);
    }
    if (src->n_results) {
        op->results = ap_arena_memdup(&m->arena, src->results, sizeof(ir_value) * src->n_results);
        if (!op->results)
            return (in->oom = true), NULL;
        for (uint32_t i = 0; i < src->n_results; i++) {
            op->results[i].def = op;
            if (!map_value(in, map, tab, n_tab, cap_tab, &src->results[i], &op->results[i]))
                return NULL;
        }
    }
    if (src->n_successors) {
        op->successors = ap_arena_alloc(&m->arena, sizeof(ir_block *) * src->n_successors);
        if (!op->successors)
            return (in->oom = true), NULL;
    }
    if (src->n_regions) {
        op->regions = ap_arena_zalloc(&m->arena, sizeof(ir_region) * src->n_regions);
        if (!op->regions)
            return (in->oom = true), NULL;
        for (uint32_t i = 0; i < src->n_regions; i++) {
            op->regions[i].parent = op;
            if (!clone_region(in, &src->regions[i], &op->regions[i], map, tab, n_tab, cap_tab))
                return NULL;
        }
    }
    return op;
}

/* Replaces `call` by the callee's body. */
static int inline_call(inliner *in, ir_op *call, const ir_op *callee)
{
    ir_block *entry = ir_func_entry(callee);
    ir_ptrmap map = {0};
    ir_value **tab = NULL;
    uint32_t n_tab = 0, cap_tab = 0;
    int rc = 0;
    for (uint32_t i = 0; i < entry->n_args; i++)
        if (!map_value(in, &map, &tab, &n_tab, &cap_tab, &entry->args[i], call->operands[i]))
            goto oom;
    ir_block *blk = call->parent;
    for (const ir_op *op = entry->first; op; op = op->next) {
        if (op->opcode == IR_OP_FUNC_RETURN) {
            for (uint32_t i = 0; i < op->n_operands; i++)
                if (!subst_put(in, &call->results[i], mapped(&map, tab, op->operands[i])))
                    goto oom;
            break;
        }
        ir_op *c = clone_op(in, op, &map, &tab, &n_tab, &cap_tab);
        if (!c)
            goto oom;
        if (!c->loc)
            c->loc = call->loc;
        ir_block_insert_before(blk, call, c);
    }
    goto out;
oom:
    rc = ap_error_set(in->err, AP_ENOMEM, "out of memory while inlining");
out:
    ir__map_free(&map);
    ap_free(tab);
    return rc;
}

static const ir_op *inlinable_callee(inliner *in, const ir_op *op)
{
    /* a composite is a call of its decomposition */
    if (op->opcode != IR_OP_FUNC_CALL && op->opcode != IR_OP_COMPOSITE)
        return NULL;
    ir_attr *c = ir_op_attr(op, op->opcode == IR_OP_COMPOSITE ? "decomposition" : "callee");
    if (!c || c->kind != IR_A_SYMREF)
        return NULL;
    const ir_op *f = ir_module_func(in->m, c->u.str.s);
    if (!f || !ir_func_entry(f) || f->regions[0].n_blocks != 1)
        return NULL;
    return f;
}

/* Call graph cycle check from `f` (depth-first, colors in a map). */
static bool has_cycle(inliner *in, const ir_op *f, ir_ptrmap *color, int depth);

static bool region_calls_cycle(inliner *in, const ir_region *r, ir_ptrmap *color, int depth)
{
    for (const ir_block *b = r->first; b; b = b->next)
        for (const ir_op *op = b->first; op; op = op->next) {
            const ir_op *callee = inlinable_callee(in, op);
            if (callee && has_cycle(in, callee, color, depth + 1))
                return true;
            for (uint32_t i = 0; i < op->n_regions; i++)
                if (region_calls_cycle(in, &op->regions[i], color, depth))
                    return true;
        }
    return false;
}

static bool has_cycle(inliner *in, const ir_op *f, ir_ptrmap *color, int depth)
{
    uint32_t c;
    if (ir__map_get(color, f, &c))
        return c == 1; /* 1 = on the stack, 2 = done */
    if (depth > 10000)
        return true;
    ir__map_put(color, f, 1);
    bool cyc = f->n_regions && region_calls_cycle(in, &f->regions[0], color, depth);
    ir__map_put(color, f, 2);
    return cyc;
}

/* The op count of the inlined module grows past this (or twice the ops
 * written, when that is more): 2.5 times the ops of the largest request
 * autopartd takes (64 MiB of text at ~170 bytes an op), about 1.2 GB of IR. */
#define IR_INLINE_MAX_OPS 1000000u

typedef struct sizer {
    inliner *in;
    ir_ptrmap memo; /* function -> index into size */
    uint64_t *size;
    uint32_t n, cap;
    uint64_t limit;
    const ir_op *over; /* the first function found past the limit */
    uint64_t over_size;
} sizer;

static uint64_t func_size(sizer *z, const ir_op *f);

/* Ops `r` holds once its calls are inlined; stops adding past the limit. */
static uint64_t region_size(sizer *z, const ir_region *r, bool skip_return)
{
    uint64_t n = 0;
    for (const ir_block *b = r->first; b && !z->over; b = b->next)
        for (const ir_op *op = b->first; op && !z->over; op = op->next) {
            if (skip_return && op->opcode == IR_OP_FUNC_RETURN)
                continue;
            const ir_op *callee = inlinable_callee(z->in, op);
            if (callee) {
                n += func_size(z, callee);
                continue;
            }
            n++;
            for (uint32_t i = 0; i < op->n_regions; i++)
                n += region_size(z, &op->regions[i], false);
        }
    return n;
}

/* What a call of f is replaced by: its body but the return. */
static uint64_t func_size(sizer *z, const ir_op *f)
{
    uint32_t k;
    if (ir__map_get(&z->memo, f, &k))
        return z->size[k];
    uint64_t n = f->n_regions ? region_size(z, &f->regions[0], true) : 0;
    if (z->over)
        return n;
    if (n > z->limit) {
        z->over = f;
        z->over_size = n;
        return n;
    }
    if (z->n == z->cap) {
        uint32_t cap = z->cap ? z->cap * 2 : 64;
        uint64_t *s = ap_realloc(z->size, sizeof *s * cap);
        if (!s)
            return z->in->oom = true, n;
        z->size = s;
        z->cap = cap;
    }
    z->size[z->n] = n;
    if (!ir__map_put(&z->memo, f, z->n++))
        z->in->oom = true;
    return n;
}

static uint64_t ops_written(const ir_region *r)
{
    uint64_t n = 0;
    for (const ir_block *b = r->first; b; b = b->next)
        for (const ir_op *op = b->first; op; op = op->next) {
            n++;
            for (uint32_t i = 0; i < op->n_regions; i++)
                n += ops_written(&op->regions[i]);
        }
    return n;
}

/* Refuses (AP_ELIMIT, at the function that grows past the limit) an
 * inlining that would make too many ops.  Runs after the cycle check: the
 * call graph is a DAG no deeper than it allows. */
static int check_size(inliner *in, const ir_op *func)
{
    uint64_t written = 0;
    const ir_op *top = in->m->top;
    for (uint32_t i = 0; top && i < top->n_regions; i++)
        written += ops_written(&top->regions[i]);
    sizer z = {.in = in, .limit = written > IR_INLINE_MAX_OPS / 2 ? 2 * written : IR_INLINE_MAX_OPS};
    uint64_t total = func->n_regions ? region_size(&z, &func->regions[0], false) : 0;
    if (!z.over && total > z.limit) {
        z.over = func;
        z.over_size = total;
    }
    ir__map_free(&z.memo);
    ap_free(z.size);
    if (in->oom)
        return ap_error_set(in->err, AP_ENOMEM, "out of memory while inlining");
    if (!z.over)
        return 0;
    const char *file = in->m->filename ? in->m->filename : "<input>";
    char msg[400];
    snprintf(msg, sizeof msg,
             "cannot inline the calls of @%s: @%s alone would expand to %llu ops, past the limit of %llu "
             "(the larger of %u and twice the %llu ops written)",
             ir_func_name(func), ir_func_name(z.over), (unsigned long long)z.over_size, (unsigned long long)z.limit,
             IR_INLINE_MAX_OPS, (unsigned long long)written);
    if (z.over->src_line)
        return ap_error_at(in->err, AP_ELIMIT, file, (int)z.over->src_line, (int)z.over->src_col, "%s", msg);
    return ap_error_set(in->err, AP_ELIMIT, "%s", msg);
}

static int walk_region(inliner *in, ir_region *r)
{
    for (ir_block *b = r->first; b; b = b->next) {
        ir_op *op = b->first;
        while (op) {
            for (uint32_t i = 0; i < op->n_operands; i++)
                op->operands[i] = subst_get(in, op->operands[i]);
            const ir_op *callee = inlinable_callee(in, op);
            if (callee) {
                ir_op *first_new = op->prev;
                int rc = inline_call(in, op, callee);
                if (rc < 0)
                    return rc;
                /* the first op of the copy, or (a callee that only returns,
                 * such as an identity) the op after the call: taken before
                 * the removal clears op->next */
                ir_op *next = first_new ? first_new->next : b->first;
                if (next == op)
                    next = op->next;
                ir_block_remove(b, op);
                op = next;
                continue;
            }
            for (uint32_t i = 0; i < op->n_regions; i++) {
                int rc = walk_region(in, &op->regions[i]);
                if (rc < 0)
                    return rc;
            }
            op = op->next;
        }
    }
    return in->oom ? ap_error_set(in->err, AP_ENOMEM, "out of memory while inlining") : 0;
}

int ir_inline_calls(ir_module *m, ir_op *func, ap_error *err)
{
    inliner in = {.m = m, .err = err};
    ir_ptrmap color = {0};
    bool cyc = has_cycle(&in, func, &color, 0);
    ir__map_free(&color);
    if (cyc)
        return ap_error_set(err, AP_EUNSUPPORTED, "cannot inline into @%s: its calls are recursive", ir_func_name(func));
    int rc = check_size(&in, func);
    if (rc == 0 && func->n_regions)
        rc = walk_region(&in, &func->regions[0]);
    ir__map_free(&in.subst);
    ap_free(in.vals);
    if (rc == 0)
        ir_func_renumber(func, NULL, NULL);
    return rc;
}

static uint32_t count_calls(const ir_module *m, const ir_region *r)
{
    uint32_t n = 0;
    inliner in = {.m = (ir_module *)m};
    for (const ir_block *b = r->first; b; b = b->next)
        for (const ir_op *op = b->first; op; op = op->next) {
            n += inlinable_callee(&in, op) != NULL;
            for (uint32_t i = 0; i < op->n_regions; i++)
                n += count_calls(m, &op->regions[i]);
        }
    return n;
}

uint32_t ir_inline_count(const ir_module *m, const ir_op *func)
{
    return func && func->n_regions ? count_calls(m, &func->regions[0]) : 0;
}
