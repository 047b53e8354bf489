/*
 * intern.c - a module's intern tables: the open-addressing tables that
 * unique its strings, types and attributes, and the strings themselves.
 */
#include "ir_int.h"

#include <string.h>

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
        uint32_t j = ir__table_slot(hash(p), cap);
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
    uint32_t j = ir__table_slot(h, t->cap);
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
size_t ir__interned_count(const ir_module *m) { return (size_t)m->impl->strings.n + m->impl->types.n; }
