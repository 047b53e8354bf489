/*
 * module.c - modules, the op registry, function accessors and builders.
 * Types are type.c, the intern tables intern.c.
 */
#include "ir_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================== registry */

static const ir_op_info op_infos[IR_OP__COUNT] = {
    [IR_OP_UNKNOWN] = {"", IR_K_OTHER, IR_FMT_GENERIC, false},
#define IR_EW(k) ((k) == IR_K_EW1 || (k) == IR_K_EW2 || (k) == IR_K_EW3 || (k) == IR_K_CMP || (k) == IR_K_CONV)
#define IR_OP_INFO(id, name, kind, fmt) [IR_OP_##id] = {name, IR_K_##kind, IR_FMT_##fmt, IR_EW(IR_K_##kind)},
    IR_OPS(IR_OP_INFO)
#undef IR_OP_INFO
};

static const ir_attr_rule attr_rules[] = {
#define IR_ATTR_RULE(op, name, kind, req) {IR_OP_##op, name, IR_A_##kind, req},
    IR_OP_ATTRS(IR_ATTR_RULE)
#undef IR_ATTR_RULE
};

const ir_op_info *ir_op_info_get(ir_opcode op)
{
    if ((unsigned)op >= IR_OP__COUNT)
        op = IR_OP_UNKNOWN;
    return &op_infos[op];
}

const ir_attr_rule *ir_attr_rules(ir_opcode op, int *n)
{
    /* Rules of one op are adjacent in the table. */
    int first = -1, count = 0;
    for (int i = 0; i < (int)AP_ARRAY_LEN(attr_rules); i++) {
        if (attr_rules[i].op == op) {
            if (first < 0)
                first = i;
            count++;
        }
    }
    *n = count;
    return first < 0 ? NULL : &attr_rules[first];
}

/* Sorted view of op names for binary search, built once. */
static uint16_t sorted_ops[IR_OP__COUNT];
static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static int cmp_opname(const void *a, const void *b)
{
    return strcmp(op_infos[*(const uint16_t *)a].name, op_infos[*(const uint16_t *)b].name);
}

static void build_sorted_ops(void)
{
    for (int i = 1; i < IR_OP__COUNT; i++)
        sorted_ops[i - 1] = (uint16_t)i;
    qsort(sorted_ops, IR_OP__COUNT - 1, sizeof sorted_ops[0], cmp_opname);
}

ir_opcode ir_opcode_lookup(const char *name, size_t len)
{
    pthread_once(&sorted_once, build_sorted_ops);
    int lo = 0, hi = IR_OP__COUNT - 2;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const char *cand = op_infos[sorted_ops[mid]].name;
        int c = strncmp(cand, name, len);
        if (c == 0)
            c = cand[len] == '\0' ? 0 : 1;
        if (c == 0)
            return (ir_opcode)sorted_ops[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return IR_OP_UNKNOWN;
}

/* ============================================================ module */

ir_module *ir_module_new(const char *filename)
{
    ir_module *m = ap_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    ap_arena_init(&m->arena, 64 * 1024);
    m->impl = ap_calloc(1, sizeof *m->impl);
    if (!m->impl)
        goto fail;
    m->filename = filename ? ap_arena_strndup(&m->arena, filename, strlen(filename)) : NULL;
    if (filename && !m->filename)
        goto fail;
    m->top = ir_op_new(m, IR_OP_MODULE, NULL, 0, NULL, 0, NULL, 1);
    if (!m->top || !ir_block_new(m, &m->top->regions[0], 0, NULL))
        goto fail;
    return m;
fail:
    ir_module_free(m);
    return NULL;
}

int ir_module_copy_text(ir_module *dst, const ir_module *src)
{
    const char *a = NULL, *f = NULL;
    if (src->alias_defs && !(a = ap_arena_strndup(&dst->arena, src->alias_defs, strlen(src->alias_defs))))
        return -1;
    if (src->file_metadata &&
        !(f = ap_arena_strndup(&dst->arena, src->file_metadata, strlen(src->file_metadata))))
        return -1;
    dst->alias_defs = a;
    dst->file_metadata = f;
    return 0;
}

void ir_module_free(ir_module *m)
{
    if (!m)
        return;
    if (m->impl) {
        ap_free(m->impl->strings.slots);
        ap_free(m->impl->types.slots);
        ap_free(m->impl->attrs.slots);
        ap_free(m->impl);
    }
    ap_arena_free(&m->arena);
    ap_free(m);
}

size_t ir_module_bytes(const ir_module *m)
{
    return m->arena.total + (m->impl ? m->impl->table_bytes : 0) + sizeof *m;
}

ir_block *ir_module_body(const ir_module *m) { return m->top->regions[0].first; }

ir_op *ir_module_func(const ir_module *m, const char *name)
{
    for (ir_op *op = ir_module_body(m)->first; op; op = op->next)
        if (op->opcode == IR_OP_FUNC && strcmp(ir_func_name(op), name) == 0)
            return op;
    return NULL;
}

ir_op *ir_module_entry(const ir_module *m)
{
    ir_op *main_fn = ir_module_func(m, "main");
    if (main_fn)
        return main_fn;
    ir_op *only = NULL;
    for (ir_op *op = ir_module_body(m)->first; op; op = op->next) {
        if (op->opcode != IR_OP_FUNC)
            continue;
        ir_attr *vis = ir_op_attr(op, "sym_visibility");
        if (vis && vis->kind == IR_A_STRING && strcmp(vis->u.str.s, "public") != 0)
            continue;
        if (only)
            return NULL;
        only = op;
    }
    return only;
}

ir_attr *ir_op_attr(const ir_op *op, const char *name)
{
    for (uint32_t i = 0; i < op->n_attrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return op->attrs[i].value;
    return NULL;
}

int ir_op_set_attr(ir_module *m, ir_op *op, const char *name, ir_attr *value)
{
    const char *iname = ir_intern(m, name, strlen(name));
    if (!iname)
        return AP_ENOMEM;
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        if (op->attrs[i].name == iname) {
            op->attrs[i].value = value;
            return 0;
        }
    }
    ir_named_attr *na = ir__alloc(m, sizeof *na * (op->n_attrs + 1));
    if (!na)
        return AP_ENOMEM;
    if (op->n_attrs)
        memcpy(na, op->attrs, sizeof *na * op->n_attrs);
    na[op->n_attrs].name = iname;
    na[op->n_attrs].value = value;
    op->attrs = na;
    op->n_attrs++;
    if (op->opcode != IR_OP_UNKNOWN)
        ir__sort_named(op->attrs, (int)op->n_attrs);
    return 0;
}

/* ========================================================== functions */

const char *ir_func_name(const ir_op *f)
{
    ir_attr *a = ir_op_attr(f, "sym_name");
    return a && a->kind == IR_A_STRING ? a->u.str.s : "";
}

const ir_type *ir_func_type(const ir_op *f)
{
    ir_attr *a = ir_op_attr(f, "function_type");
    return a && a->kind == IR_A_TYPE ? a->type : NULL;
}

ir_block *ir_func_entry(const ir_op *f) { return f->n_regions ? f->regions[0].first : NULL; }

uint32_t ir_func_num_args(const ir_op *f)
{
    const ir_type *t = ir_func_type(f);
    return t ? (uint32_t)t->n_inputs : 0;
}

uint32_t ir_func_num_results(const ir_op *f)
{
    const ir_type *t = ir_func_type(f);
    return t ? (uint32_t)(t->n_elems - t->n_inputs) : 0;
}

ir_value *ir_func_arg(const ir_op *f, uint32_t i)
{
    ir_block *b = ir_func_entry(f);
    return b && i < b->n_args ? &b->args[i] : NULL;
}

static ir_attr *indexed_dict_attr(const ir_op *f, const char *list, uint32_t i, const char *name)
{
    ir_attr *a = ir_op_attr(f, list);
    if (!a || a->kind != IR_A_ARRAY || i >= (uint32_t)a->u.arr.n)
        return NULL;
    return ir_dict_get(a->u.arr.items[i], name);
}

ir_attr *ir_func_arg_attr(const ir_op *f, uint32_t i, const char *name)
{
    return indexed_dict_attr(f, "arg_attrs", i, name);
}

ir_attr *ir_func_result_attr(const ir_op *f, uint32_t i, const char *name)
{
    return indexed_dict_attr(f, "res_attrs", i, name);
}

const char *ir_func_arg_name(const ir_op *f, uint32_t i)
{
    ir_value *v = ir_func_arg(f, i);
    return v && v->loc ? ir_loc_name(v->loc) : NULL;
}

ir_op *ir_func_return(const ir_op *f)
{
    ir_block *b = ir_func_entry(f);
    if (!b)
        return NULL;
    while (b->next)
        b = b->next;
    return b->last;
}

static void renumber_region(ir_region *r, uint32_t *nv, uint32_t *no)
{
    for (ir_block *b = r->first; b; b = b->next) {
        for (uint32_t i = 0; i < b->n_args; i++)
            b->args[i].id = (*nv)++;
        for (ir_op *op = b->first; op; op = op->next) {
            op->id = (*no)++;
            for (uint32_t i = 0; i < op->n_results; i++)
                op->results[i].id = (*nv)++;
            for (uint32_t i = 0; i < op->n_regions; i++)
                renumber_region(&op->regions[i], nv, no);
        }
    }
}

void ir_func_renumber(ir_op *f, uint32_t *n_values, uint32_t *n_ops)
{
    uint32_t nv = 0, no = 0;
    for (uint32_t i = 0; i < f->n_regions; i++)
        renumber_region(&f->regions[i], &nv, &no);
    if (n_values)
        *n_values = nv;
    if (n_ops)
        *n_ops = no;
}

/* ============================================================ building */

ir_op *ir_op_new(ir_module *m, ir_opcode opcode, const char *name, uint32_t n_operands,
                 ir_value *const *operands, uint32_t n_results, const ir_type *const *result_types,
                 uint32_t n_regions)
{
    ir_op *op = ir__zalloc(m, sizeof *op);
    if (!op)
        return NULL;
    op->opcode = (uint16_t)opcode;
    if (opcode != IR_OP_UNKNOWN)
        name = ir_op_info_get(opcode)->name;
    op->name = ir_intern(m, name, strlen(name));
    if (!op->name)
        return NULL;
    op->n_operands = n_operands;
    if (n_operands) {
        op->operands = ir__alloc(m, sizeof *op->operands * n_operands);
        if (!op->operands)
            return NULL;
        for (uint32_t i = 0; i < n_operands; i++)
            op->operands[i] = operands ? operands[i] : NULL;
    }
    op->n_results = n_results;
    if (n_results) {
        op->results = ir__zalloc(m, sizeof *op->results * n_results);
        if (!op->results)
            return NULL;
        for (uint32_t i = 0; i < n_results; i++) {
            op->results[i].type = result_types ? result_types[i] : NULL;
            op->results[i].def = op;
            op->results[i].index = i;
        }
    }
    op->n_regions = n_regions;
    if (n_regions) {
        op->regions = ir__zalloc(m, sizeof *op->regions * n_regions);
        if (!op->regions)
            return NULL;
        for (uint32_t i = 0; i < n_regions; i++)
            op->regions[i].parent = op;
    }
    return op;
}

ir_block *ir_block_new(ir_module *m, ir_region *parent, uint32_t n_args,
                       const ir_type *const *arg_types)
{
    ir_block *b = ir__zalloc(m, sizeof *b);
    if (!b)
        return NULL;
    b->n_args = n_args;
    if (n_args) {
        b->args = ir__zalloc(m, sizeof *b->args * n_args);
        if (!b->args)
            return NULL;
        for (uint32_t i = 0; i < n_args; i++) {
            b->args[i].type = arg_types ? arg_types[i] : NULL;
            b->args[i].block = b;
            b->args[i].index = i;
        }
    }
    if (parent)
        ir_region_append(parent, b);
    return b;
}

void ir_region_append(ir_region *r, ir_block *b)
{
    b->parent = r;
    b->next = NULL;
    if (r->last)
        r->last->next = b;
    else
        r->first = b;
    r->last = b;
    r->n_blocks++;
}

void ir_block_append(ir_block *b, ir_op *op)
{
    op->parent = b;
    op->next = NULL;
    op->prev = b->last;
    if (b->last)
        b->last->next = op;
    else
        b->first = op;
    b->last = op;
    b->n_ops++;
}

void ir_block_insert_before(ir_block *b, ir_op *before, ir_op *op)
{
    if (!before) {
        ir_block_append(b, op);
        return;
    }
    op->parent = b;
    op->next = before;
    op->prev = before->prev;
    if (before->prev)
        before->prev->next = op;
    else
        b->first = op;
    before->prev = op;
    b->n_ops++;
}

void ir_block_remove(ir_block *b, ir_op *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        b->first = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else
        b->last = op->prev;
    op->prev = op->next = NULL;
    op->parent = NULL;
    b->n_ops--;
}
