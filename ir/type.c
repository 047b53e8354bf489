/*
 * type.c - element types and types: the interned constructors (one object
 * per distinct type of a module), their queries and their MLIR spelling.
 */
#include "ir_int.h"

#include <stdio.h>
#include <string.h>

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
    uint32_t j = ir__table_slot(key->hash, t->cap);
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
