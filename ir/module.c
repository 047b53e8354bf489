/*
 * module.c - modules, interning of strings and types, the op registry,
 * function accessors and builders.
 */
#include "ir_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================== registry */

static const ir_op_info op_infos[IR_OP__COUNT] = {
    [IR_OP_UNKNOWN] = {"", IR_K_OTHER, IR_FMT_GENERIC},
#define IR_OP_INFO(id, name, kind, fmt) [IR_OP_##id] = {name, IR_K_##kind, IR_FMT_##fmt},
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

/* ========================================================== elem types */

static const struct {
    const char *name;
    uint8_t bytes;
    char cls;
} elem_infos[IR_E__COUNT] = {
    [IR_E_NONE] = {"?", 0, 'X'},
#define IR_ELEM_INFO(e, text, bytes, cls) [IR_E_##e] = {text, bytes, #cls[0]},
    IR_ELEMS(IR_ELEM_INFO)
#undef IR_ELEM_INFO
    [IR_E_OPAQUE] = {"?", 0, 'X'},
};

const char *ir_elem_name(ir_elem e) { return (unsigned)e < IR_E__COUNT ? elem_infos[e].name : "?"; }
int ir_elem_bytes(ir_elem e) { return (unsigned)e < IR_E__COUNT ? elem_infos[e].bytes : 0; }
bool ir_elem_is_float(ir_elem e) { return (unsigned)e < IR_E__COUNT && elem_infos[e].cls == 'F'; }
bool ir_elem_is_complex(ir_elem e) { return (unsigned)e < IR_E__COUNT && elem_infos[e].cls == 'C'; }
bool ir_elem_is_unsigned(ir_elem e) { return (unsigned)e < IR_E__COUNT && elem_infos[e].cls == 'U'; }

bool ir_elem_is_int(ir_elem e)
{
    if ((unsigned)e >= IR_E__COUNT)
        return false;
    char c = elem_infos[e].cls;
    return c == 'I' || c == 'U' || c == 'S';
}

int ir_elem_bits(ir_elem e)
{
    switch (e) {
    case IR_E_I1: return 1;
    case IR_E_I2: case IR_E_UI2: return 2;
    case IR_E_I4: case IR_E_UI4: case IR_E_F4E2M1FN: return 4;
    case IR_E_F6E2M3FN: case IR_E_F6E3M2FN: return 6;
    case IR_E_TF32: return 19;
    default: return ir_elem_bytes(e) * 8;
    }
}

/* ============================================================ intern */

bool ir__table_grow(ir_module *m, ir_ptr_table *t, uint64_t (*hash)(const void *))
{
    uint32_t cap = t->cap ? t->cap * 2 : 1024;
    const void **slots = ap_calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (uint32_t i = 0; i < t->cap; i++) {
        const void *p = t->slots[i];
        if (!p)
            continue;
        uint32_t j = (uint32_t)hash(p) & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = p;
    }
    m->impl->table_bytes += (size_t)(cap - t->cap) * sizeof *slots;
    ap_free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return true;
}

/* Interned strings carry their length in the 8 bytes before the text. */
static uint64_t str_hash_of(const void *p)
{
    const char *s = p;
    return ap_hash_bytes(s, ir__intern_len(s), 0);
}

const char *ir_intern(ir_module *m, const char *s, size_t len)
{
    ir_ptr_table *t = &m->impl->strings;
    if (len > UINT32_MAX)
        return NULL;
    if ((t->n + 1) * 4 >= t->cap * 3 && !ir__table_grow(m, t, str_hash_of))
        return NULL;
    uint64_t h = ap_hash_bytes(s, len, 0);
    uint32_t j = (uint32_t)h & (t->cap - 1);
    for (;;) {
        const char *c = t->slots[j];
        if (!c)
            break;
        if (ir__intern_len(c) == len && memcmp(c, s, len) == 0)
            return c;
        j = (j + 1) & (t->cap - 1);
    }
    char *mem = ir__alloc(m, 8 + len + 1);
    if (!mem)
        return NULL;
    uint32_t n32 = (uint32_t)len;
    memcpy(mem + 8 - sizeof n32, &n32, sizeof n32);
    memcpy(mem + 8, s, len);
    mem[8 + len] = '\0';
    t->slots[j] = mem + 8;
    t->n++;
    return mem + 8;
}

/* ============================================================= types */

static uint64_t type_hash_fields(const ir_type *k)
{
    uint64_t h = ap_hash_mix(k->kind * 131u + k->elem, (uint64_t)(int64_t)k->rank);
    if (k->kind == IR_T_TENSOR && k->rank > 0)
        h = ap_hash_mix(h, ap_hash_bytes(k->dims, sizeof(int64_t) * (size_t)k->rank, 7));
    h = ap_hash_mix(h, (uint64_t)(uintptr_t)k->text);
    h = ap_hash_mix(h, (uint64_t)(uintptr_t)k->encoding);
    h = ap_hash_mix(h, (uint64_t)k->n_elems * 31u + (uint64_t)k->n_inputs);
    for (int i = 0; i < k->n_elems; i++)
        h = ap_hash_mix(h, (uint64_t)(uintptr_t)k->elems[i]);
    return h;
}

static uint64_t type_hash_of(const void *p) { return ((const ir_type *)p)->hash; }

static bool type_same_key(const ir_type *a, const ir_type *b)
{
    if (a->kind != b->kind || a->elem != b->elem || a->rank != b->rank || a->text != b->text ||
        a->encoding != b->encoding || a->n_elems != b->n_elems || a->n_inputs != b->n_inputs)
        return false;
    if (a->kind == IR_T_TENSOR && a->rank > 0 &&
        memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) != 0)
        return false;
    for (int i = 0; i < a->n_elems; i++)
        if (a->elems[i] != b->elems[i])
            return false;
    return true;
}

static const ir_type *type_intern(ir_module *m, ir_type *key)
{
    ir_ptr_table *t = &m->impl->types;
    key->hash = type_hash_fields(key);
    if ((t->n + 1) * 4 >= t->cap * 3 && !ir__table_grow(m, t, type_hash_of))
        return NULL;
    uint32_t j = (uint32_t)key->hash & (t->cap - 1);
    for (;;) {
        const ir_type *c = t->slots[j];
        if (!c)
            break;
        if (c->hash == key->hash && type_same_key(c, key))
            return c;
        j = (j + 1) & (t->cap - 1);
    }
    ir_type *n = ir__alloc(m, sizeof *n);
    if (!n)
        return NULL;
    *n = *key;
    if (key->kind == IR_T_TENSOR && key->rank > 0) {
        n->dims = ap_arena_memdup(&m->arena, key->dims, sizeof(int64_t) * (size_t)key->rank);
        if (!n->dims)
            return NULL;
    } else {
        n->dims = NULL;
    }
    if (key->n_elems > 0) {
        n->elems = ap_arena_memdup(&m->arena, key->elems, sizeof(ir_type *) * (size_t)key->n_elems);
        if (!n->elems)
            return NULL;
    }
    t->slots[j] = n;
    t->n++;
    return n;
}

/* complex<f32> -> f32, complex<f64> -> f64, on the same shape: the type of
 * the parts of a complex tensor (stablehlo.complex's operands, real, imag,
 * abs). */
const ir_type *ir__complex_part_type(ir_module *m, const ir_type *t)
{
    if (!t || t->kind != IR_T_TENSOR || !ir_elem_is_complex((ir_elem)t->elem))
        return NULL;
    return ir_type_tensor_ex(m, t->elem == IR_E_C64 ? IR_E_F32 : IR_E_F64, NULL, t->rank, t->dims, t->encoding);
}

const ir_type *ir_type_tensor_ex(ir_module *m, ir_elem e, const char *elem_text, int rank,
                                 const int64_t *dims, const char *encoding)
{
    ir_type k = {.kind = IR_T_TENSOR, .elem = (uint8_t)e, .rank = rank, .dims = dims};
    if (e == IR_E_OPAQUE && !(k.text = ir_intern(m, elem_text, strlen(elem_text))))
        return NULL;
    if (encoding && !(k.encoding = ir_intern(m, encoding, strlen(encoding))))
        return NULL;
    return type_intern(m, &k);
}

const ir_type *ir_type_tensor(ir_module *m, ir_elem e, int rank, const int64_t *dims)
{
    ir_type k = {.kind = IR_T_TENSOR, .elem = (uint8_t)e, .rank = rank, .dims = dims};
    return type_intern(m, &k);
}

const ir_type *ir_type_tuple(ir_module *m, int n, const ir_type *const *elems)
{
    ir_type k = {.kind = IR_T_TUPLE, .n_elems = n, .elems = elems};
    return type_intern(m, &k);
}

const ir_type *ir_type_function(ir_module *m, int n_in, const ir_type *const *in, int n_out,
                                const ir_type *const *out)
{
    const ir_type *small[16];
    const ir_type **all = small;
    if (n_in + n_out > 16 && !(all = ap_malloc(sizeof *all * (size_t)(n_in + n_out))))
        return NULL;
    for (int i = 0; i < n_in; i++)
        all[i] = in[i];
    for (int i = 0; i < n_out; i++)
        all[n_in + i] = out[i];
    ir_type k = {.kind = IR_T_FUNCTION, .n_elems = n_in + n_out, .n_inputs = n_in, .elems = all};
    const ir_type *t = type_intern(m, &k);
    if (all != small)
        ap_free(all);
    return t;
}

const ir_type *ir_type_token(ir_module *m)
{
    if (!m->impl->token) {
        ir_type k = {.kind = IR_T_TOKEN};
        m->impl->token = type_intern(m, &k);
    }
    return m->impl->token;
}

const ir_type *ir_type_scalar(ir_module *m, ir_elem e, const char *text)
{
    ir_type k = {.kind = IR_T_SCALAR, .elem = (uint8_t)e};
    if (e == IR_E_OPAQUE && !(k.text = ir_intern(m, text, strlen(text))))
        return NULL;
    return type_intern(m, &k);
}

const ir_type *ir_type_opaque(ir_module *m, const char *text)
{
    ir_type k = {.kind = IR_T_OPAQUE};
    if (!(k.text = ir_intern(m, text, strlen(text))))
        return NULL;
    return type_intern(m, &k);
}

bool ir_type_is_tensor(const ir_type *t) { return t && t->kind == IR_T_TENSOR; }

bool ir_type_is_static(const ir_type *t)
{
    if (!t || t->kind != IR_T_TENSOR || t->rank < 0)
        return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0)
            return false;
    return true;
}

int64_t ir_type_numel(const ir_type *t)
{
    if (!ir_type_is_static(t))
        return -1;
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (__builtin_mul_overflow(n, t->dims[i], &n))
            return INT64_MAX;
    return n;
}

int64_t ir_type_bytes(const ir_type *t)
{
    int64_t n = ir_type_numel(t), b;
    int eb = ir_elem_bytes((ir_elem)t->elem);
    if (n < 0 || eb == 0)
        return -1;
    if (__builtin_mul_overflow(n, (int64_t)eb, &b))
        return INT64_MAX;
    return b;
}

bool ir_type_equal(const ir_type *a, const ir_type *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind || a->elem != b->elem || a->rank != b->rank ||
        a->n_elems != b->n_elems || a->n_inputs != b->n_inputs)
        return false;
    if ((a->text || b->text) && (!a->text || !b->text || strcmp(a->text, b->text) != 0))
        return false;
    if ((a->encoding || b->encoding) &&
        (!a->encoding || !b->encoding || strcmp(a->encoding, b->encoding) != 0))
        return false;
    if (a->kind == IR_T_TENSOR && a->rank > 0 &&
        memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) != 0)
        return false;
    for (int i = 0; i < a->n_elems; i++)
        if (!ir_type_equal(a->elems[i], b->elems[i]))
            return false;
    return true;
}

static void print_elem(ap_buf *b, const ir_type *t)
{
    if (t->elem == IR_E_OPAQUE)
        ap_buf_puts(b, t->text);
    else
        ap_buf_puts(b, ir_elem_name((ir_elem)t->elem));
}

static void print_type_list(ap_buf *b, const ir_type *const *ts, int n)
{
    for (int i = 0; i < n; i++) {
        if (i)
            ap_buf_puts(b, ", ");
        ir_type_print(b, ts[i]);
    }
}

void ir_type_print(ap_buf *b, const ir_type *t)
{
    char num[24];
    switch ((ir_type_kind)t->kind) {
    case IR_T_TENSOR:
        ap_buf_puts(b, "tensor<");
        if (t->rank < 0)
            ap_buf_puts(b, "*x");
        for (int i = 0; i < t->rank; i++) {
            if (t->dims[i] == IR_DYN) {
                ap_buf_puts(b, "?x");
            } else {
                int n = snprintf(num, sizeof num, "%lldx", (long long)t->dims[i]);
                ap_buf_put(b, num, (size_t)n);
            }
        }
        print_elem(b, t);
        if (t->encoding) {
            ap_buf_puts(b, ", ");
            ap_buf_puts(b, t->encoding);
        }
        ap_buf_putc(b, '>');
        break;
    case IR_T_TUPLE:
        ap_buf_puts(b, "tuple<");
        print_type_list(b, t->elems, t->n_elems);
        ap_buf_putc(b, '>');
        break;
    case IR_T_TOKEN:
        ap_buf_puts(b, "!stablehlo.token");
        break;
    case IR_T_FUNCTION: {
        int n_out = t->n_elems - t->n_inputs;
        ap_buf_putc(b, '(');
        print_type_list(b, t->elems, t->n_inputs);
        ap_buf_puts(b, ") -> ");
        bool paren = n_out != 1 || t->elems[t->n_inputs]->kind == IR_T_FUNCTION;
        if (paren)
            ap_buf_putc(b, '(');
        print_type_list(b, t->elems + t->n_inputs, n_out);
        if (paren)
            ap_buf_putc(b, ')');
        break;
    }
    case IR_T_SCALAR:
        print_elem(b, t);
        break;
    case IR_T_OPAQUE:
        ap_buf_puts(b, t->text);
        break;
    }
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

size_t ir__interned_count(const ir_module *m) { return (size_t)m->impl->strings.n + m->impl->types.n; }

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
