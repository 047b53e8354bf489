/*
 * ptrmap.c - a small open-addressing map from pointers to 32-bit values,
 * used by the printer (value names, location aliases), the equality check
 * and the inliner (value correspondences).
 */
#include "ir_int.h"

static uint64_t ptr_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static bool map_grow(ir_ptrmap *m)
{
    uint32_t cap = m->cap ? m->cap * 2 : 256;
    const void **keys = ap_calloc(cap, sizeof *keys);
    uint32_t *vals = ap_malloc(sizeof *vals * cap);
    if (!keys || !vals) {
        ap_free(keys);
        ap_free(vals);
        return false;
    }
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        uint32_t j = (uint32_t)ptr_hash(m->keys[i]) & (cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    ap_free(m->keys);
    ap_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

bool ir__map_get(const ir_ptrmap *m, const void *k, uint32_t *v)
{
    if (!m->cap)
        return false;
    uint32_t j = (uint32_t)ptr_hash(k) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->keys[j] == k) {
            *v = m->vals[j];
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

bool ir__map_put(ir_ptrmap *m, const void *k, uint32_t v)
{
    if ((m->n + 1) * 4 >= m->cap * 3 && !map_grow(m))
        return false;
    uint32_t j = (uint32_t)ptr_hash(k) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != k)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j])
        m->n++;
    m->keys[j] = k;
    m->vals[j] = v;
    return true;
}

void ir__map_clear(ir_ptrmap *m)
{
    if (m->cap)
        memset(m->keys, 0, sizeof *m->keys * m->cap);
    m->n = 0;
}

void ir__map_free(ir_ptrmap *m)
{
    ap_free(m->keys);
    ap_free(m->vals);
    memset(m, 0, sizeof *m);
}

