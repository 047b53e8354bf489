/*
 * attr.c - attributes and locations: constructors, equality, printing in
 * MLIR syntax, dense element storage and the float conversions it needs.
 */
#include "ir_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Float conversions (defined with dense storage, below), used by printing. */
static uint16_t f32_to_f16(float f);
static uint16_t f32_to_bf16(float f);
static uint32_t minifloat_encode(ir_elem e, double v);
static uint64_t float_bits(ir_elem e, const uint8_t *p);

/* ============================================================ uniquing */

/* Attributes are uniqued per module, as in MLIR: equal attributes are one
 * object, so JAX files that repeat `dims = [0, 1]` on every op store it
 * once.  Children are uniqued first, so comparisons here are shallow. */

static uint64_t attr_hash(const ir_attr *a)
{
    uint64_t h = ap_hash_mix((uint64_t)a->kind * 0x100000001b3ULL, (uint64_t)(uintptr_t)a->type);
    switch ((ir_attr_kind)a->kind) {
    case IR_A_BOOL:
        return ap_hash_mix(h, a->u.b);
    case IR_A_INT:
        return ap_hash_mix(h, (uint64_t)a->u.i);
    case IR_A_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &a->u.f, 8);
        return ap_hash_mix(h, bits);
    }
    case IR_A_STRING:
    case IR_A_SYMREF:
    case IR_A_OPAQUE:
    case IR_A_DENSE_RESOURCE:
        return ap_hash_mix(h, ap_hash_bytes(a->u.str.s, a->u.str.len, 1));
    case IR_A_ARRAY:
        h = ap_hash_mix(h, (uint64_t)a->u.arr.n);
        return a->u.arr.n ? ap_hash_mix(h, ap_hash_bytes(a->u.arr.items, sizeof(void *) * (size_t)a->u.arr.n, 2)) : h;
    case IR_A_DICT:
        h = ap_hash_mix(h, (uint64_t)a->u.dict.n);
        return a->u.dict.n ? ap_hash_mix(h, ap_hash_bytes(a->u.dict.items, sizeof(ir_named_attr) * (size_t)a->u.dict.n, 3)) : h;
    case IR_A_DENSE_ARRAY:
        h = ap_hash_mix(h, (uint64_t)a->u.darr.n * 2 + (a->u.darr.floats != NULL));
        if (a->u.darr.n && a->u.darr.ints)
            h = ap_hash_mix(h, ap_hash_bytes(a->u.darr.ints, 8 * (size_t)a->u.darr.n, 4));
        else if (a->u.darr.n && a->u.darr.floats)
            h = ap_hash_mix(h, ap_hash_bytes(a->u.darr.floats, 8 * (size_t)a->u.darr.n, 4));
        return h;
    case IR_A_DENSE:
        if (a->u.dense.text)
            return ap_hash_mix(h, ap_hash_bytes(a->u.dense.text, strlen(a->u.dense.text), 5));
        h = ap_hash_mix(h, a->u.dense.splat);
        return ap_hash_mix(h, ap_hash_bytes(a->u.dense.data, a->u.dense.nbytes, 6));
    case IR_A_DIALECT:
        h = ap_hash_mix(h, (uint64_t)(uintptr_t)a->u.dia.name);
        if (a->u.dia.n)
            return ap_hash_mix(h, ap_hash_bytes(a->u.dia.params, sizeof(ir_named_attr) * (size_t)a->u.dia.n, 7));
        return a->u.dia.body ? ap_hash_mix(h, ap_hash_bytes(a->u.dia.body, strlen(a->u.dia.body), 8)) : h;
    default:
        return h;
    }
}

static bool attr_same(const ir_attr *a, const ir_attr *b)
{
    if (a->kind != b->kind || a->type != b->type)
        return false;
    switch ((ir_attr_kind)a->kind) {
    case IR_A_BOOL:
        return a->u.b == b->u.b;
    case IR_A_INT:
        return a->u.i == b->u.i;
    case IR_A_FLOAT:
        return memcmp(&a->u.f, &b->u.f, sizeof a->u.f) == 0;
    case IR_A_STRING:
    case IR_A_SYMREF:
    case IR_A_OPAQUE:
    case IR_A_DENSE_RESOURCE:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case IR_A_ARRAY:
        return a->u.arr.n == b->u.arr.n &&
               (!a->u.arr.n || memcmp(a->u.arr.items, b->u.arr.items, sizeof(void *) * (size_t)a->u.arr.n) == 0);
    case IR_A_DICT:
        return a->u.dict.n == b->u.dict.n &&
               (!a->u.dict.n ||
                memcmp(a->u.dict.items, b->u.dict.items, sizeof(ir_named_attr) * (size_t)a->u.dict.n) == 0);
    case IR_A_DENSE_ARRAY:
        if (a->u.darr.n != b->u.darr.n || !a->u.darr.floats != !b->u.darr.floats)
            return false;
        if (!a->u.darr.n)
            return true;
        return a->u.darr.ints ? memcmp(a->u.darr.ints, b->u.darr.ints, 8 * (size_t)a->u.darr.n) == 0
                              : memcmp(a->u.darr.floats, b->u.darr.floats, 8 * (size_t)a->u.darr.n) == 0;
    case IR_A_DENSE:
        if (!a->u.dense.text != !b->u.dense.text)
            return false;
        if (a->u.dense.text)
            return strcmp(a->u.dense.text, b->u.dense.text) == 0;
        return a->u.dense.splat == b->u.dense.splat && a->u.dense.nbytes == b->u.dense.nbytes &&
               memcmp(a->u.dense.data, b->u.dense.data, a->u.dense.nbytes) == 0;
    case IR_A_DIALECT:
        if (a->u.dia.name != b->u.dia.name || a->u.dia.n != b->u.dia.n)
            return false;
        if (a->u.dia.n)
            return memcmp(a->u.dia.params, b->u.dia.params, sizeof(ir_named_attr) * (size_t)a->u.dia.n) == 0;
        return !a->u.dia.body == !b->u.dia.body && (!a->u.dia.body || strcmp(a->u.dia.body, b->u.dia.body) == 0);
    default:
        return true;
    }
}

static uint64_t attr_hash_of(const void *p) { return ((const ir_attr *)p)->hash; }

/* Deep-copies the payload of a stack-built key into the arena. */
static ir_attr *attr_store(ir_module *m, const ir_attr *k)
{
    ir_attr *a = ap_arena_memdup(&m->arena, k, sizeof *k);
    if (!a)
        return NULL;
    switch ((ir_attr_kind)k->kind) {
    case IR_A_STRING:
    case IR_A_OPAQUE:
    case IR_A_DENSE_RESOURCE:
        if (!(a->u.str.s = ap_arena_strndup(&m->arena, k->u.str.s, k->u.str.len)))
            return NULL;
        break;
    case IR_A_ARRAY:
        if (k->u.arr.n && !(a->u.arr.items = ap_arena_memdup(&m->arena, k->u.arr.items, sizeof(void *) * (size_t)k->u.arr.n)))
            return NULL;
        break;
    case IR_A_DICT:
        if (k->u.dict.n &&
            !(a->u.dict.items = ap_arena_memdup(&m->arena, k->u.dict.items, sizeof(ir_named_attr) * (size_t)k->u.dict.n)))
            return NULL;
        break;
    case IR_A_DENSE_ARRAY:
        if (k->u.darr.n && k->u.darr.ints &&
            !(a->u.darr.ints = ap_arena_memdup(&m->arena, k->u.darr.ints, 8 * (size_t)k->u.darr.n)))
            return NULL;
        if (k->u.darr.floats &&
            !(a->u.darr.floats = ap_arena_memdup(&m->arena, k->u.darr.floats, 8 * (size_t)(k->u.darr.n ? k->u.darr.n : 1))))
            return NULL;
        break;
    case IR_A_DENSE:
        if (k->u.dense.text) {
            if (!(a->u.dense.text = ap_arena_strndup(&m->arena, k->u.dense.text, strlen(k->u.dense.text))))
                return NULL;
        } else if (!(a->u.dense.data = ap_arena_memdup(&m->arena, k->u.dense.data, k->u.dense.nbytes ? k->u.dense.nbytes : 1))) {
            return NULL;
        }
        break;
    case IR_A_DIALECT:
        if (k->u.dia.n &&
            !(a->u.dia.params = ap_arena_memdup(&m->arena, k->u.dia.params, sizeof(ir_named_attr) * (size_t)k->u.dia.n)))
            return NULL;
        if (k->u.dia.body && !(a->u.dia.body = ap_arena_strndup(&m->arena, k->u.dia.body, strlen(k->u.dia.body))))
            return NULL;
        break;
    default:
        break;
    }
    return a;
}

ir_attr *ir__attr_intern(ir_module *m, ir_attr *key, bool key_in_arena)
{
    ir_ptr_table *t = &m->impl->attrs;
    key->hash = attr_hash(key);
    if ((t->n + 1) * 4 >= t->cap * 3 && !ir__table_grow(m, t, attr_hash_of))
        return NULL;
    uint32_t j = ir__table_slot(key->hash, t->cap);
    for (;;) {
        const ir_attr *c = t->slots[j];
        if (!c)
            break;
        if (c->hash == key->hash && attr_same(c, key))
            return (ir_attr *)c;
        j = (j + 1) & (t->cap - 1);
    }
    ir_attr *a = key_in_arena ? key : attr_store(m, key);
    if (!a)
        return NULL;
    t->slots[j] = a;
    t->n++;
    return a;
}

/* ========================================================= constructors */

ir_attr *ir_attr_unit(ir_module *m)
{
    ir_attr k = {.kind = IR_A_UNIT};
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_bool(ir_module *m, bool v)
{
    ir_attr k = {.kind = IR_A_BOOL};
    k.u.b = v;
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_int(ir_module *m, int64_t v, const ir_type *type)
{
    ir_attr k = {.kind = IR_A_INT, .type = type};
    k.u.i = v;
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_float(ir_module *m, double v, const ir_type *type)
{
    ir_attr k = {.kind = IR_A_FLOAT, .type = type};
    k.u.f = v;
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_string(ir_module *m, const char *s, size_t len)
{
    ir_attr k = {.kind = IR_A_STRING};
    k.u.str.s = s;
    k.u.str.len = len;
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_symref(ir_module *m, const char *name)
{
    ir_attr k = {.kind = IR_A_SYMREF};
    k.u.str.len = strlen(name);
    if (!(k.u.str.s = ir_intern(m, name, k.u.str.len)))
        return NULL;
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_type(ir_module *m, const ir_type *t)
{
    ir_attr k = {.kind = IR_A_TYPE, .type = t};
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_array(ir_module *m, int n, ir_attr *const *items)
{
    ir_attr k = {.kind = IR_A_ARRAY};
    k.u.arr.n = n;
    k.u.arr.items = (ir_attr **)items;
    return ir__attr_intern(m, &k, false);
}

void ir__sort_named(ir_named_attr *items, int n)
{
    /* Insertion sort: attribute lists are short and often already sorted. */
    for (int i = 1; i < n; i++) {
        ir_named_attr x = items[i];
        int j = i - 1;
        while (j >= 0 && strcmp(items[j].name, x.name) > 0) {
            items[j + 1] = items[j];
            j--;
        }
        items[j + 1] = x;
    }
}

ir_attr *ir_attr_dict(ir_module *m, int n, const ir_named_attr *items)
{
    ir_named_attr small[16], *copy = small;
    if (n > 16 && !(copy = ap_malloc(sizeof *copy * (size_t)n)))
        return NULL;
    if (n > 0)
        memcpy(copy, items, sizeof *copy * (size_t)n);
    ir__sort_named(copy, n);
    /* duplicates: keep the last written */
    int w = 0;
    for (int i = 0; i < n; i++) {
        if (w > 0 && strcmp(copy[w - 1].name, copy[i].name) == 0)
            copy[w - 1] = copy[i];
        else
            copy[w++] = copy[i];
    }
    ir_attr k = {.kind = IR_A_DICT};
    k.u.dict.n = w;
    k.u.dict.items = copy;
    ir_attr *a = ir__attr_intern(m, &k, false);
    if (copy != small)
        ap_free(copy);
    return a;
}

ir_attr *ir_attr_i64_array(ir_module *m, int n, const int64_t *v)
{
    ir_attr k = {.kind = IR_A_DENSE_ARRAY};
    if (!(k.type = ir_type_scalar(m, IR_E_I64, NULL)))
        return NULL;
    k.u.darr.n = n;
    k.u.darr.ints = (int64_t *)v;
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_bool_array(ir_module *m, int n, const bool *v)
{
    int64_t small[32], *ints = small;
    if (n > 32 && !(ints = ap_malloc(sizeof *ints * (size_t)n)))
        return NULL;
    for (int i = 0; i < n; i++)
        ints[i] = v[i];
    ir_attr k = {.kind = IR_A_DENSE_ARRAY};
    ir_attr *a = NULL;
    if ((k.type = ir_type_scalar(m, IR_E_I1, NULL))) {
        k.u.darr.n = n;
        k.u.darr.ints = ints;
        a = ir__attr_intern(m, &k, false);
    }
    if (ints != small)
        ap_free(ints);
    return a;
}

ir_attr *ir_attr_dense_ints(ir_module *m, const ir_type *tt, size_t n, const int64_t *v)
{
    int eb = ir_elem_bytes((ir_elem)tt->elem);
    if (eb == 0)
        return NULL;
    uint8_t *data = ap_malloc(n * (size_t)eb + 1);
    if (!data)
        return NULL;
    for (size_t i = 0; i < n; i++)
        ir__int_store((ir_elem)tt->elem, data + i * (size_t)eb, v[i]);
    ir_attr k = {.kind = IR_A_DENSE, .type = tt};
    k.u.dense.splat = n == 1 && ir_type_numel(tt) != 1;
    k.u.dense.nbytes = n * (size_t)eb;
    k.u.dense.data = data;
    ir_attr *a = ir__attr_intern(m, &k, false);
    ap_free(data);
    return a;
}

ir_attr *ir_attr_dialect_kv(ir_module *m, const char *name, int n, const ir_named_attr *params)
{
    ir_attr k = {.kind = IR_A_DIALECT};
    if (!(k.u.dia.name = ir_intern(m, name, strlen(name))))
        return NULL;
    k.u.dia.n = n;
    k.u.dia.params = (ir_named_attr *)params;
    return ir__attr_intern(m, &k, false);
}

ir_attr *ir_attr_dialect_raw(ir_module *m, const char *name, const char *body)
{
    ir_attr k = {.kind = IR_A_DIALECT};
    if (!(k.u.dia.name = ir_intern(m, name, strlen(name))))
        return NULL;
    k.u.dia.body = body;
    return ir__attr_intern(m, &k, false);
}

/* =============================================================== lookup */

ir_attr *ir_dict_get(const ir_attr *dict, const char *name)
{
    if (!dict || dict->kind != IR_A_DICT)
        return NULL;
    for (int i = 0; i < dict->u.dict.n; i++)
        if (strcmp(dict->u.dict.items[i].name, name) == 0)
            return dict->u.dict.items[i].value;
    return NULL;
}

ir_attr *ir_dialect_param(const ir_attr *a, const char *name)
{
    if (!a || a->kind != IR_A_DIALECT)
        return NULL;
    for (int i = 0; i < a->u.dia.n; i++)
        if (strcmp(a->u.dia.params[i].name, name) == 0)
            return a->u.dia.params[i].value;
    return NULL;
}

int64_t ir_dense_int_at(const ir_attr *a, size_t i)
{
    int eb = ir_elem_bytes((ir_elem)a->type->elem);
    if (a->u.dense.splat)
        i = 0;
    return ir__int_load((ir_elem)a->type->elem, a->u.dense.data + i * (size_t)eb);
}

double ir_dense_float_at(const ir_attr *a, size_t i)
{
    int eb = ir_elem_bytes((ir_elem)a->type->elem);
    if (a->u.dense.splat)
        i = 0;
    return ir__float_load((ir_elem)a->type->elem, a->u.dense.data + i * (size_t)eb);
}

int ir_attr_int_list(const ir_attr *a, int64_t *out, int cap)
{
    if (!a)
        return -1;
    switch (a->kind) {
    case IR_A_DENSE_ARRAY:
        if (!a->u.darr.ints && a->u.darr.n > 0)
            return -1;
        for (int i = 0; i < a->u.darr.n && i < cap; i++)
            out[i] = a->u.darr.ints[i];
        return a->u.darr.n;
    case IR_A_ARRAY:
        for (int i = 0; i < a->u.arr.n; i++) {
            const ir_attr *x = a->u.arr.items[i];
            if (x->kind != IR_A_INT)
                return -1;
            if (i < cap)
                out[i] = x->u.i;
        }
        return a->u.arr.n;
    case IR_A_DENSE: {
        if (a->u.dense.text || !ir_elem_is_int((ir_elem)a->type->elem))
            return -1;
        int64_t n = ir_type_numel(a->type);
        if (n < 0 || n > INT32_MAX)
            return -1;
        for (int64_t i = 0; i < n && i < cap; i++)
            out[i] = ir_dense_int_at(a, (size_t)i);
        return (int)n;
    }
    default:
        return -1;
    }
}

/* ============================================================== equality */

bool ir_attr_equal(const ir_attr *a, const ir_attr *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind)
        return false;
    if ((a->type || b->type) && !ir_type_equal(a->type, b->type))
        return false;
    switch ((ir_attr_kind)a->kind) {
    case IR_A_UNIT:
    case IR_A_ANY:
        return true;
    case IR_A_BOOL:
        return a->u.b == b->u.b;
    case IR_A_INT:
        return a->u.i == b->u.i;
    case IR_A_FLOAT:
        /* bitwise: NaN payloads and signed zeros matter */
        return memcmp(&a->u.f, &b->u.f, sizeof a->u.f) == 0;
    case IR_A_STRING:
    case IR_A_SYMREF:
    case IR_A_OPAQUE:
    case IR_A_DENSE_RESOURCE:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case IR_A_TYPE:
        return true; /* compared above */
    case IR_A_ARRAY:
        if (a->u.arr.n != b->u.arr.n)
            return false;
        for (int i = 0; i < a->u.arr.n; i++)
            if (!ir_attr_equal(a->u.arr.items[i], b->u.arr.items[i]))
                return false;
        return true;
    case IR_A_DICT:
        if (a->u.dict.n != b->u.dict.n)
            return false;
        for (int i = 0; i < a->u.dict.n; i++)
            if (strcmp(a->u.dict.items[i].name, b->u.dict.items[i].name) != 0 ||
                !ir_attr_equal(a->u.dict.items[i].value, b->u.dict.items[i].value))
                return false;
        return true;
    case IR_A_DENSE_ARRAY:
        if (a->u.darr.n != b->u.darr.n || !a->u.darr.ints != !b->u.darr.ints)
            return false;
        if (a->u.darr.n == 0)
            return true;
        if (a->u.darr.ints)
            return memcmp(a->u.darr.ints, b->u.darr.ints, sizeof(int64_t) * (size_t)a->u.darr.n) == 0;
        return memcmp(a->u.darr.floats, b->u.darr.floats, sizeof(double) * (size_t)a->u.darr.n) == 0;
    case IR_A_DENSE:
        if (!a->u.dense.text != !b->u.dense.text)
            return false;
        if (a->u.dense.text)
            return strcmp(a->u.dense.text, b->u.dense.text) == 0;
        if (a->u.dense.splat == b->u.dense.splat)
            return a->u.dense.nbytes == b->u.dense.nbytes &&
                   memcmp(a->u.dense.data, b->u.dense.data, a->u.dense.nbytes) == 0;
        {
            /* a splat equals a full tensor of one repeated value */
            const ir_attr *s = a->u.dense.splat ? a : b, *f = a->u.dense.splat ? b : a;
            size_t eb = s->u.dense.nbytes;
            if (eb == 0 || f->u.dense.nbytes % eb)
                return false;
            for (size_t off = 0; off < f->u.dense.nbytes; off += eb)
                if (memcmp(f->u.dense.data + off, s->u.dense.data, eb) != 0)
                    return false;
            return true;
        }
    case IR_A_DIALECT:
        if (strcmp(a->u.dia.name, b->u.dia.name) != 0 || a->u.dia.n != b->u.dia.n)
            return false;
        if (a->u.dia.n == 0)
            return a->u.dia.body && b->u.dia.body ? strcmp(a->u.dia.body, b->u.dia.body) == 0
                                                  : a->u.dia.body == b->u.dia.body;
        for (int i = 0; i < a->u.dia.n; i++)
            if (strcmp(a->u.dia.params[i].name, b->u.dia.params[i].name) != 0 ||
                !ir_attr_equal(a->u.dia.params[i].value, b->u.dia.params[i].value))
                return false;
        return true;
    }
    return false;
}

/* ============================================================== printing */

bool ir__is_bare_ident(const char *s, size_t len)
{
    if (len == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return false;
    for (size_t i = 1; i < len; i++) {
        char c = s[i];
        if (!(c == '_' || c == '$' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

void ir__print_string(ap_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!ap_buf_reserve(b, len + 2))
        return;
    ap_buf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            continue;
        ap_buf_put(b, s + run, i - run);
        char esc[3] = {'\\', hex[c >> 4], hex[c & 15]};
        ap_buf_put(b, esc, 3);
        run = i + 1;
    }
    ap_buf_put(b, s + run, len - run);
    ap_buf_putc(b, '"');
}

static void print_key(ap_buf *b, const char *name)
{
    size_t len = strlen(name);
    if (ir__is_bare_ident(name, len))
        ap_buf_put(b, name, len);
    else
        ir__print_string(b, name, len);
}

/* Appends a float in the shortest form that reads back to the same value of
 * element type e (finite values; callers print non-finite ones as hex). */
static void print_float(ap_buf *b, double v, ir_elem e)
{
    char num[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, v);
        double back = strtod(num, NULL);
        bool same;
        switch (e) {
        case IR_E_F32:
            same = (float)back == (float)v;
            break;
        case IR_E_F16:
            same = f32_to_f16((float)back) == f32_to_f16((float)v);
            break;
        case IR_E_BF16:
            same = f32_to_bf16((float)back) == f32_to_bf16((float)v);
            break;
        case IR_E_F64:
        default:
            same = back == v;
            if (!same && ir_elem_is_float(e) && ir_elem_bytes(e) <= 1)
                same = minifloat_encode(e, back) == minifloat_encode(e, v);
            break;
        }
        if (same)
            break;
    }
    /* MLIR float literals need a '.' before any exponent: 1e-05 -> 1.0e-05 */
    if (!strchr(num, '.') && !strchr(num, 'n') && !strchr(num, 'i')) {
        char *ex = strpbrk(num, "eE");
        char tail[24] = "";
        if (ex) {
            snprintf(tail, sizeof tail, "%s", ex);
            *ex = '\0';
        }
        size_t l = strlen(num);
        snprintf(num + l, sizeof num - l, ".0%s", tail);
    }
    ap_buf_puts(b, num);
}

static void print_dense_elem(ap_buf *b, ir_elem e, const uint8_t *p)
{
    char num[32];
    if (ir_elem_is_float(e)) {
        double v = ir__float_load(e, p);
        if (isfinite(v)) {
            print_float(b, v, e);
        } else {
            int n = snprintf(num, sizeof num, "0x%0*" PRIX64, ir_elem_bytes(e) * 2,
                             float_bits(e, p));
            ap_buf_put(b, num, (size_t)n);
        }
    } else if (ir_elem_is_complex(e)) {
        ir_elem part = e == IR_E_C64 ? IR_E_F32 : IR_E_F64;
        int half = ir_elem_bytes(part);
        ap_buf_putc(b, '(');
        print_dense_elem(b, part, p);
        ap_buf_puts(b, ", ");
        print_dense_elem(b, part, p + half);
        ap_buf_putc(b, ')');
    } else if (e == IR_E_I1) {
        ap_buf_puts(b, *p ? "true" : "false");
    } else if (ir_elem_is_unsigned(e)) {
        int n = snprintf(num, sizeof num, "%" PRIu64, (uint64_t)ir__int_load(e, p));
        ap_buf_put(b, num, (size_t)n);
    } else {
        int n = snprintf(num, sizeof num, "%" PRId64, ir__int_load(e, p));
        ap_buf_put(b, num, (size_t)n);
    }
}

/* Nested [..] lists over the shape, innermost dimension last. */
static void print_dense_nested(ap_buf *b, const ir_type *t, int dim, const uint8_t **p, int eb)
{
    if (dim == t->rank) {
        print_dense_elem(b, (ir_elem)t->elem, *p);
        *p += eb;
        return;
    }
    ap_buf_putc(b, '[');
    for (int64_t i = 0; i < t->dims[dim]; i++) {
        if (i)
            ap_buf_puts(b, ", ");
        print_dense_nested(b, t, dim + 1, p, eb);
    }
    ap_buf_putc(b, ']');
}

/* Large constants print as a hex blob of their bytes, like MLIR does, which
 * is compact and exact. */
#define IR_DENSE_HEX_ABOVE 100

static void print_dense(ap_buf *b, const ir_attr *a)
{
    const ir_dense *d = &a->u.dense;
    const ir_type *t = a->type;
    ap_buf_puts(b, "dense<");
    if (d->text) {
        ap_buf_puts(b, d->text);
    } else if (d->splat || ir_type_numel(t) == 1) {
        if (d->nbytes)
            print_dense_elem(b, (ir_elem)t->elem, d->data);
    } else if (ir_type_numel(t) > IR_DENSE_HEX_ABOVE) {
        static const char hex[] = "0123456789ABCDEF";
        ap_buf_puts(b, "\"0x");
        if (ap_buf_reserve(b, d->nbytes * 2)) {
            for (size_t i = 0; i < d->nbytes; i++) {
                b->data[b->len++] = hex[d->data[i] >> 4];
                b->data[b->len++] = hex[d->data[i] & 15];
            }
            b->data[b->len] = '\0';
        }
        ap_buf_putc(b, '"');
    } else if (ir_type_numel(t) > 0) {
        const uint8_t *p = d->data;
        print_dense_nested(b, t, 0, &p, ir_elem_bytes((ir_elem)t->elem));
    }
    ap_buf_puts(b, "> : ");
    ir_type_print(b, t);
}

static void print_typed_suffix(ap_buf *b, const ir_type *t)
{
    if (t) {
        ap_buf_puts(b, " : ");
        ir_type_print(b, t);
    }
}

void ir_attr_print(ap_buf *b, const ir_attr *a)
{
    char num[32];
    switch ((ir_attr_kind)a->kind) {
    case IR_A_UNIT:
    case IR_A_ANY:
        ap_buf_puts(b, "unit");
        break;
    case IR_A_BOOL:
        ap_buf_puts(b, a->u.b ? "true" : "false");
        break;
    case IR_A_INT: {
        int n;
        if (a->type && ir_elem_is_unsigned((ir_elem)a->type->elem))
            n = snprintf(num, sizeof num, "%" PRIu64, (uint64_t)a->u.i);
        else if (a->type && a->type->elem == IR_E_I1)
            n = snprintf(num, sizeof num, "%s", a->u.i ? "true" : "false");
        else
            n = snprintf(num, sizeof num, "%" PRId64, a->u.i);
        ap_buf_put(b, num, (size_t)n);
        print_typed_suffix(b, a->type);
        break;
    }
    case IR_A_FLOAT: {
        ir_elem e = a->type ? (ir_elem)a->type->elem : IR_E_F64;
        if (isfinite(a->u.f)) {
            print_float(b, a->u.f, e);
        } else {
            uint8_t raw[8];
            if (!ir__float_store(e, raw, a->u.f))
                ir__float_store(e = IR_E_F64, raw, a->u.f);
            int n = snprintf(num, sizeof num, "0x%0*" PRIX64, ir_elem_bytes(e) * 2,
                             float_bits(e, raw));
            ap_buf_put(b, num, (size_t)n);
        }
        print_typed_suffix(b, a->type);
        break;
    }
    case IR_A_STRING:
        ir__print_string(b, a->u.str.s, a->u.str.len);
        break;
    case IR_A_TYPE:
        ir_type_print(b, a->type);
        break;
    case IR_A_SYMREF:
        ap_buf_putc(b, '@');
        if (ir__is_bare_ident(a->u.str.s, a->u.str.len))
            ap_buf_put(b, a->u.str.s, a->u.str.len);
        else
            ir__print_string(b, a->u.str.s, a->u.str.len);
        break;
    case IR_A_OPAQUE:
        ap_buf_put(b, a->u.str.s, a->u.str.len);
        break;
    case IR_A_ARRAY:
        ap_buf_putc(b, '[');
        for (int i = 0; i < a->u.arr.n; i++) {
            if (i)
                ap_buf_puts(b, ", ");
            ir_attr_print(b, a->u.arr.items[i]);
        }
        ap_buf_putc(b, ']');
        break;
    case IR_A_DICT:
        ap_buf_putc(b, '{');
        for (int i = 0; i < a->u.dict.n; i++) {
            if (i)
                ap_buf_puts(b, ", ");
            print_key(b, a->u.dict.items[i].name);
            if (a->u.dict.items[i].value->kind != IR_A_UNIT) {
                ap_buf_puts(b, " = ");
                ir_attr_print(b, a->u.dict.items[i].value);
            }
        }
        ap_buf_putc(b, '}');
        break;
    case IR_A_DENSE_ARRAY: {
        ir_elem e = (ir_elem)a->type->elem;
        ap_buf_puts(b, "array<");
        ir_type_print(b, a->type);
        for (int i = 0; i < a->u.darr.n; i++) {
            ap_buf_puts(b, i ? ", " : ": ");
            if (a->u.darr.ints) {
                if (e == IR_E_I1)
                    ap_buf_puts(b, a->u.darr.ints[i] ? "true" : "false");
                else {
                    int n = snprintf(num, sizeof num, "%" PRId64, a->u.darr.ints[i]);
                    ap_buf_put(b, num, (size_t)n);
                }
            } else {
                print_float(b, a->u.darr.floats[i], e);
            }
        }
        ap_buf_putc(b, '>');
        break;
    }
    case IR_A_DENSE:
        print_dense(b, a);
        break;
    case IR_A_DENSE_RESOURCE:
        ap_buf_puts(b, "dense_resource<");
        ap_buf_put(b, a->u.str.s, a->u.str.len);
        ap_buf_puts(b, "> : ");
        ir_type_print(b, a->type);
        break;
    case IR_A_DIALECT:
        ap_buf_putc(b, '#');
        ap_buf_puts(b, a->u.dia.name);
        ap_buf_putc(b, '<');
        if (a->u.dia.n > 0) {
            for (int i = 0; i < a->u.dia.n; i++) {
                if (i)
                    ap_buf_puts(b, ", ");
                ap_buf_puts(b, a->u.dia.params[i].name);
                ap_buf_puts(b, " = ");
                ir_attr_print(b, a->u.dia.params[i].value);
            }
        } else if (a->u.dia.body) {
            ap_buf_puts(b, a->u.dia.body);
        }
        ap_buf_putc(b, '>');
        break;
    }
}

/* ============================================================ locations */

bool ir_loc_equal(const ir_loc *a, const ir_loc *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind)
        return false;
    if ((a->str || b->str) && (!a->str || !b->str || strcmp(a->str, b->str) != 0))
        return false;
    if (a->line != b->line || a->col != b->col || a->end_line != b->end_line ||
        a->end_col != b->end_col || a->n != b->n)
        return false;
    if (!ir_loc_equal(a->a, b->a) || !ir_loc_equal(a->b, b->b))
        return false;
    for (int i = 0; i < a->n; i++)
        if (!ir_loc_equal(a->locs[i], b->locs[i]))
            return false;
    return true;
}

const char *ir_loc_name(const ir_loc *l)
{
    while (l) {
        switch ((ir_loc_kind)l->kind) {
        case IR_L_NAME:
            return l->str;
        case IR_L_CALLSITE:
            l = l->a;
            break;
        case IR_L_FUSED:
            for (int i = 0; i < l->n; i++) {
                const char *s = ir_loc_name(l->locs[i]);
                if (s)
                    return s;
            }
            return NULL;
        default:
            return NULL;
        }
    }
    return NULL;
}

void ir__print_loc_inline(ap_buf *b, const ir_loc *l)
{
    char num[64];
    switch ((ir_loc_kind)l->kind) {
    case IR_L_UNKNOWN:
    case IR_L_PENDING:
        ap_buf_puts(b, "unknown");
        break;
    case IR_L_NAME:
        ir__print_string(b, l->str, strlen(l->str));
        if (l->a) {
            ap_buf_putc(b, '(');
            ir__print_loc_inline(b, l->a);
            ap_buf_putc(b, ')');
        }
        break;
    case IR_L_FILE: {
        ir__print_string(b, l->str, strlen(l->str));
        int n = snprintf(num, sizeof num, ":%d:%d", l->line, l->col);
        ap_buf_put(b, num, (size_t)n);
        /* every end the parser can make prints back as it read it
         * (`to :C` is end_line -1; `to 0:0` is no end) */
        if (l->end_line == -1 || l->end_line || l->end_col) {
            if (l->end_line == -1)
                n = snprintf(num, sizeof num, " to :%d", l->end_col);
            else
                n = snprintf(num, sizeof num, " to %d:%d", l->end_line, l->end_col);
            ap_buf_put(b, num, (size_t)n);
        }
        break;
    }
    case IR_L_CALLSITE:
        ap_buf_puts(b, "callsite(");
        ir__print_loc_inline(b, l->a);
        ap_buf_puts(b, " at ");
        ir__print_loc_inline(b, l->b);
        ap_buf_putc(b, ')');
        break;
    case IR_L_FUSED:
        ap_buf_puts(b, "fused");
        if (l->str) {
            ap_buf_putc(b, '<');
            ap_buf_puts(b, l->str);
            ap_buf_putc(b, '>');
        }
        ap_buf_putc(b, '[');
        for (int i = 0; i < l->n; i++) {
            if (i)
                ap_buf_puts(b, ", ");
            ir__print_loc_inline(b, l->locs[i]);
        }
        ap_buf_putc(b, ']');
        break;
    case IR_L_OPAQUE:
        ap_buf_puts(b, l->str);
        break;
    }
}

/* ================================================================ clones */

const ir_type *ir__type_clone(ir_module *m, const ir_type *t)
{
    if (!t)
        return NULL;
    switch ((ir_type_kind)t->kind) {
    case IR_T_TENSOR:
        return ir_type_tensor_ex(m, (ir_elem)t->elem, t->text, t->rank, t->dims, t->encoding);
    case IR_T_TOKEN:
        return ir_type_token(m);
    case IR_T_SCALAR:
        return ir_type_scalar(m, (ir_elem)t->elem, t->text);
    case IR_T_OPAQUE:
        return ir_type_opaque(m, t->text);
    case IR_T_TUPLE:
    case IR_T_FUNCTION: {
        const ir_type *small[16], **e = small;
        const ir_type *r = NULL;
        if (t->n_elems > 16 && !(e = ap_malloc(sizeof *e * (size_t)t->n_elems)))
            return NULL;
        for (int i = 0; i < t->n_elems; i++)
            if (!(e[i] = ir__type_clone(m, t->elems[i])))
                goto out;
        if (t->kind == IR_T_TUPLE)
            r = ir_type_tuple(m, t->n_elems, e);
        else
            r = ir_type_function(m, t->n_inputs, e, t->n_elems - t->n_inputs, e + t->n_inputs);
    out:
        if (e != small)
            ap_free(e);
        return r;
    }
    }
    return NULL;
}

ir_attr *ir__attr_clone(ir_module *m, const ir_attr *a)
{
    if (!a)
        return NULL;
    ir_attr *c = ir__alloc(m, sizeof *c);
    if (!c)
        return NULL;
    *c = *a;
    if (a->type && !(c->type = ir__type_clone(m, a->type)))
        return NULL;
    switch ((ir_attr_kind)a->kind) {
    case IR_A_STRING:
    case IR_A_OPAQUE:
    case IR_A_DENSE_RESOURCE:
        if (!(c->u.str.s = ap_arena_strndup(&m->arena, a->u.str.s, a->u.str.len)))
            return NULL;
        break;
    case IR_A_SYMREF:
        if (!(c->u.str.s = ir_intern(m, a->u.str.s, a->u.str.len)))
            return NULL;
        break;
    case IR_A_ARRAY:
        if (a->u.arr.n) {
            c->u.arr.items = ir__alloc(m, sizeof(ir_attr *) * (size_t)a->u.arr.n);
            if (!c->u.arr.items)
                return NULL;
            for (int i = 0; i < a->u.arr.n; i++)
                if (!(c->u.arr.items[i] = ir__attr_clone(m, a->u.arr.items[i])))
                    return NULL;
        }
        break;
    case IR_A_DICT:
    case IR_A_DIALECT: {
        int n = a->kind == IR_A_DICT ? a->u.dict.n : a->u.dia.n;
        const ir_named_attr *src = a->kind == IR_A_DICT ? a->u.dict.items : a->u.dia.params;
        ir_named_attr *dst = NULL;
        if (n) {
            dst = ir__alloc(m, sizeof *dst * (size_t)n);
            if (!dst)
                return NULL;
            for (int i = 0; i < n; i++) {
                dst[i].name = ir_intern(m, src[i].name, strlen(src[i].name));
                dst[i].value = ir__attr_clone(m, src[i].value);
                if (!dst[i].name || !dst[i].value)
                    return NULL;
            }
        }
        if (a->kind == IR_A_DICT) {
            c->u.dict.items = dst;
        } else {
            c->u.dia.params = dst;
            if (!(c->u.dia.name = ir_intern(m, a->u.dia.name, strlen(a->u.dia.name))))
                return NULL;
            if (a->u.dia.body &&
                !(c->u.dia.body = ap_arena_strndup(&m->arena, a->u.dia.body, strlen(a->u.dia.body))))
                return NULL;
        }
        break;
    }
    case IR_A_DENSE_ARRAY:
        if (a->u.darr.n) {
            if (a->u.darr.ints &&
                !(c->u.darr.ints = ap_arena_memdup(&m->arena, a->u.darr.ints,
                                                   sizeof(int64_t) * (size_t)a->u.darr.n)))
                return NULL;
            if (a->u.darr.floats &&
                !(c->u.darr.floats = ap_arena_memdup(&m->arena, a->u.darr.floats,
                                                     sizeof(double) * (size_t)a->u.darr.n)))
                return NULL;
        }
        break;
    case IR_A_DENSE:
        if (a->u.dense.text) {
            if (!(c->u.dense.text = ap_arena_strndup(&m->arena, a->u.dense.text, strlen(a->u.dense.text))))
                return NULL;
        } else if (!(c->u.dense.data = ap_arena_memdup(&m->arena, a->u.dense.data,
                                                       a->u.dense.nbytes ? a->u.dense.nbytes : 1))) {
            return NULL;
        }
        break;
    default:
        break;
    }
    return ir__attr_intern(m, c, true);
}

const ir_loc *ir__loc_clone(ir_module *m, const ir_loc *l)
{
    if (!l)
        return NULL;
    ir_loc *c = ir__alloc(m, sizeof *c);
    if (!c)
        return NULL;
    *c = *l;
    if (l->str && !(c->str = ir_intern(m, l->str, strlen(l->str))))
        return NULL;
    if ((l->a && !(c->a = ir__loc_clone(m, l->a))) || (l->b && !(c->b = ir__loc_clone(m, l->b))))
        return NULL;
    if (l->n) {
        const ir_loc **locs = ir__alloc(m, sizeof *locs * (size_t)l->n);
        if (!locs)
            return NULL;
        for (int i = 0; i < l->n; i++)
            if (!(locs[i] = ir__loc_clone(m, l->locs[i])))
                return NULL;
        c->locs = locs;
    }
    return c;
}

/* ====================================================== float conversion */

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint16_t f32_to_bf16(float f) { return ir__f32_to_bf16(f); }

static float bf16_to_f32(uint16_t h) { return ir__bf16_to_f32(h); }

static uint16_t f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (absu >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (absu < 0x38800000u) { /* subnormal or zero in half */
        float a = f32_from_bits(absu);
        /* scale so the half subnormal unit (2^-24) becomes 1, round even */
        float scaled = a * 16777216.0f;
        uint32_t q = (uint32_t)scaled;
        float rem = scaled - (float)q;
        if (rem > 0.5f || (rem == 0.5f && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t exp = ((absu >> 23) - 127 + 15) << 10;
    uint32_t mant = absu & 0x7fffffu;
    uint32_t h = exp | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        float v = (float)mant / 16777216.0f;
        return sign ? -v : v;
    }
    if (exp == 31)
        return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    return f32_from_bits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

/* Parameters of the small float formats. */
typedef struct minifmt {
    int ebits, mbits, bias;
    bool has_inf, has_neg_zero_nan; /* FNUZ: 0x80 is the only NaN */
    bool fn;                          /* all-ones exponent+mantissa is NaN, no inf */
    bool unsigned_exp_only;           /* E8M0: exponent only, no sign */
} minifmt;

static bool minifmt_of(ir_elem e, minifmt *f)
{
    switch (e) {
    case IR_E_F8E4M3FN: *f = (minifmt){4, 3, 7, false, false, true, false}; return true;
    case IR_E_F8E5M2: *f = (minifmt){5, 2, 15, true, false, false, false}; return true;
    case IR_E_F8E4M3FNUZ: *f = (minifmt){4, 3, 8, false, true, false, false}; return true;
    case IR_E_F8E5M2FNUZ: *f = (minifmt){5, 2, 16, false, true, false, false}; return true;
    case IR_E_F8E4M3B11FNUZ: *f = (minifmt){4, 3, 11, false, true, false, false}; return true;
    case IR_E_F8E4M3: *f = (minifmt){4, 3, 7, true, false, false, false}; return true;
    case IR_E_F8E3M4: *f = (minifmt){3, 4, 3, true, false, false, false}; return true;
    case IR_E_F8E8M0FNU: *f = (minifmt){8, 0, 127, false, false, false, true}; return true;
    case IR_E_F6E2M3FN: *f = (minifmt){2, 3, 1, false, false, false, false}; return true;
    case IR_E_F6E3M2FN: *f = (minifmt){3, 2, 3, false, false, false, false}; return true;
    case IR_E_F4E2M1FN: *f = (minifmt){2, 1, 1, false, false, false, false}; return true;
    case IR_E_TF32: *f = (minifmt){8, 10, 127, true, false, false, false}; return true;
    default: return false;
    }
}

/* Small float formats (8 bits and below, tf32): decode raw bits, and encode
 * the nearest representable value (ties to even). */
static double minifloat_decode(ir_elem e, uint32_t bits)
{
    minifmt f;
    if (!minifmt_of(e, &f))
        return 0;
    if (f.unsigned_exp_only)
        return bits == 0xff ? NAN : ldexp(1.0, (int)bits - f.bias);
    int total = 1 + f.ebits + f.mbits;
    uint32_t sign = (bits >> (total - 1)) & 1;
    uint32_t exp = (bits >> f.mbits) & ((1u << f.ebits) - 1);
    uint32_t mant = bits & ((1u << f.mbits) - 1);
    uint32_t exp_max = (1u << f.ebits) - 1;
    if (f.has_neg_zero_nan && sign && exp == 0 && mant == 0)
        return NAN;
    if (f.fn && exp == exp_max && mant == (1u << f.mbits) - 1)
        return NAN;
    if (f.has_inf && exp == exp_max)
        return mant ? NAN : (sign ? -INFINITY : INFINITY);
    double v = exp == 0 ? ldexp((double)mant, 1 - f.bias - f.mbits)
                        : ldexp((double)(mant | (1u << f.mbits)), (int)exp - f.bias - f.mbits);
    return sign ? -v : v;
}

static uint32_t minifloat_encode(ir_elem e, double v)
{
    minifmt f;
    if (!minifmt_of(e, &f))
        return 0;
    int total = f.unsigned_exp_only ? 8 : 1 + f.ebits + f.mbits;
    uint32_t n_codes = 1u << total;
    if (e == IR_E_TF32) {
        /* 19-bit: round the f32 bits to 10 mantissa bits */
        uint32_t u = f32_bits((float)v);
        if (isnan(v))
            return 0x3fe00u; /* exponent all ones, quiet bit set */
        u += 0xfffu + ((u >> 13) & 1);
        return (u >> 13) & 0x7ffffu;
    }
    /* Exhaustive nearest search: at most 256 codes, used only when parsing
     * constants of these rare types. */
    uint32_t best = 0;
    double best_err = INFINITY;
    bool found = false;
    for (uint32_t c = 0; c < n_codes; c++) {
        double d = minifloat_decode(e, c);
        if (isnan(v)) {
            if (isnan(d))
                return c;
            continue;
        }
        if (isnan(d))
            continue;
        if (isinf(v) && d == v)
            return c;
        double err = fabs(d - v);
        if (!found || err < best_err || (err == best_err && (c & 1) == 0 && (best & 1))) {
            if (signbit(d) != signbit(v) && d == 0 && v == 0 && found)
                continue;
            best = c;
            best_err = err;
            found = true;
        }
    }
    return best;
}

double ir__float_load(ir_elem e, const uint8_t *p)
{
    switch (e) {
    case IR_E_F64: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    case IR_E_F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case IR_E_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return f16_to_f32(h);
    }
    case IR_E_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return bf16_to_f32(h);
    }
    case IR_E_TF32: {
        uint32_t u;
        memcpy(&u, p, 4);
        return f32_from_bits(u << 13);
    }
    default:
        return minifloat_decode(e, p[0]);
    }
}

bool ir__float_store(ir_elem e, uint8_t *p, double v)
{
    switch (e) {
    case IR_E_F64:
        memcpy(p, &v, 8);
        return true;
    case IR_E_F32: {
        float f = (float)v;
        memcpy(p, &f, 4);
        return true;
    }
    case IR_E_F16: {
        uint16_t h = f32_to_f16((float)v);
        memcpy(p, &h, 2);
        return true;
    }
    case IR_E_BF16: {
        uint16_t h = f32_to_bf16((float)v);
        memcpy(p, &h, 2);
        return true;
    }
    case IR_E_TF32: {
        uint32_t u = minifloat_encode(e, v);
        memcpy(p, &u, 4);
        return true;
    }
    default:
        if (!ir_elem_is_float(e))
            return false;
        p[0] = (uint8_t)minifloat_encode(e, v);
        return true;
    }
}

/* Raw bits of a float element (for hex printing of NaN/inf). */
static uint64_t float_bits(ir_elem e, const uint8_t *p)
{
    uint64_t u = 0;
    int n = ir_elem_bytes(e);
    memcpy(&u, p, (size_t)n); /* little endian host assumed, as in MLIR blobs */
    return u;
}

int64_t ir__int_load(ir_elem e, const uint8_t *p)
{
    switch (ir_elem_bytes(e)) {
    case 1: {
        if (ir_elem_is_unsigned(e) || e == IR_E_I1)
            return p[0];
        int8_t v;
        memcpy(&v, p, 1);
        if (e == IR_E_I4 && (v & 0x8))
            return (int8_t)(v | 0xf0);
        if (e == IR_E_I2 && (v & 0x2))
            return (int8_t)(v | 0xfc);
        return v;
    }
    case 2:
        if (ir_elem_is_unsigned(e)) {
            uint16_t v;
            memcpy(&v, p, 2);
            return v;
        } else {
            int16_t v;
            memcpy(&v, p, 2);
            return v;
        }
    case 4:
        if (ir_elem_is_unsigned(e)) {
            uint32_t v;
            memcpy(&v, p, 4);
            return v;
        } else {
            int32_t v;
            memcpy(&v, p, 4);
            return v;
        }
    case 8: {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    default:
        return 0;
    }
}

void ir__int_store(ir_elem e, uint8_t *p, int64_t v)
{
    switch (ir_elem_bytes(e)) {
    case 1: {
        uint8_t x = (uint8_t)v;
        if (e == IR_E_I1)
            x = v != 0;
        else if (e == IR_E_I4 || e == IR_E_UI4)
            x &= 0xf;
        else if (e == IR_E_I2 || e == IR_E_UI2)
            x &= 0x3;
        p[0] = x;
        break;
    }
    case 2: {
        uint16_t x = (uint16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case 4: {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    case 8:
        memcpy(p, &v, 8);
        break;
    default:
        break;
    }
}

const char *ir__utf8_invalid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned char c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        int len;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return (const char *)p;
        }
        if (end - p < len)
            return (const char *)p;
        for (int i = 1; i < len; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return (const char *)p;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return (const char *)p;
        p += len;
    }
    return NULL;
}
